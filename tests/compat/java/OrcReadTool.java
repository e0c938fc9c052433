// orc_read: open ORC files with orc-core (Apache ORC Java) the way Hive does for ACID deltas.
//
// Request: {"files": [{"path": str, "use_flush_length": bool (default true),
//                      "max_length": long|null, "rows": bool (default true)}]}
// Response: {"files": [result | {"path", "error", "error_class", ...}]}
//
// Length rule (mirrors Hive 3 AcidUtils.getLogicalLength / OrcInputFormat):
//  - "max_length" given: read with readerOptions.maxLength(max_length).
//  - else, use_flush_length and a side file <path>_flush_length exists:
//      len = OrcAcidUtils.getLastFlushLength(fs, path); read with maxLength(len)
//      (len == -1 means "side file present but unreadable": reported as an error).
//  - else: the whole file (no maxLength).
//
// Value encoding in "rows" and statistics (JVM runs with -Duser.timezone=UTC):
//  boolean -> true/false; tinyint..bigint -> JSON integer; float/double -> JSON number (a float
//  column gives the exact double value of the float32; NaN/Infinity appear as NaN/Infinity,
//  which Python's json accepts); string/varchar/char -> string (char keeps its padding);
//  binary -> base64 string; date -> "YYYY-MM-DD" (proleptic days since epoch, LocalDate);
//  timestamp -> "YYYY-MM-DDTHH:MM:SS.fffffffff" (always 9 fraction digits, UTC wall clock, no
//  zone); timestamp with local time zone -> same + "Z"; decimal -> string with the column's
//  scale ("1.50" for decimal(5,2)); struct -> object by field name; list -> array;
//  map -> array of [key, value] pairs (file order); union -> {"tag": n, "value": v}.

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.ql.exec.vector.BytesColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.ColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.DecimalColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.DoubleColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.ListColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.LongColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.MapColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.StructColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.TimestampColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.UnionColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.VectorizedRowBatch;
import org.apache.orc.BinaryColumnStatistics;
import org.apache.orc.BooleanColumnStatistics;
import org.apache.orc.ColumnStatistics;
import org.apache.orc.DateColumnStatistics;
import org.apache.orc.DecimalColumnStatistics;
import org.apache.orc.DoubleColumnStatistics;
import org.apache.orc.IntegerColumnStatistics;
import org.apache.orc.OrcFile;
import org.apache.orc.Reader;
import org.apache.orc.RecordReader;
import org.apache.orc.StringColumnStatistics;
import org.apache.orc.StripeInformation;
import org.apache.orc.StripeStatistics;
import org.apache.orc.TimestampColumnStatistics;
import org.apache.orc.TypeDescription;
import org.apache.orc.impl.OrcAcidUtils;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.sql.Timestamp;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.List;

final class OrcReadTool {
  private OrcReadTool() {}

  static final DateTimeFormatter TS = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.nnnnnnnnn");

  static JsonElement run(JsonObject request) throws Exception {
    Configuration conf = ToolSupport.conf();
    FileSystem fs = ToolSupport.localFs(conf);
    JsonArray out = new JsonArray();
    for (JsonElement e : request.getAsJsonArray("files")) {
      JsonObject spec = e.getAsJsonObject();
      String local = spec.get("path").getAsString();
      try {
        out.add(readOne(conf, fs, spec));
      } catch (Throwable t) {
        JsonObject err = new JsonObject();
        err.addProperty("path", local);
        err.addProperty("error", String.valueOf(t));
        err.addProperty("error_class", t.getClass().getName());
        err.addProperty("traceback", ToolSupport.stackTrace(t));
        out.add(err);
      }
    }
    JsonObject result = new JsonObject();
    result.add("files", out);
    return result;
  }

  static JsonObject readOne(Configuration conf, FileSystem fs, JsonObject spec) throws Exception {
    String local = spec.get("path").getAsString();
    Path path = ToolSupport.path(local);
    boolean useFlush = ToolSupport.bool(spec, "use_flush_length", true);
    Long explicit = ToolSupport.lng(spec, "max_length");
    boolean withRows = ToolSupport.bool(spec, "rows", true);

    JsonObject res = new JsonObject();
    res.addProperty("path", local);
    long fileLength = fs.getFileStatus(path).getLen();
    res.addProperty("file_length", fileLength);
    Path side = OrcAcidUtils.getSideFile(path);
    boolean sideExists = fs.exists(side);
    res.addProperty("side_file_exists", sideExists);
    // orc-core's own answer: Long.MAX_VALUE when missing, -1 when unreadable.
    long lastFlush = OrcAcidUtils.getLastFlushLength(fs, path);
    res.addProperty("last_flush_length", sideExists ? (Long) lastFlush : null);

    OrcFile.ReaderOptions opts = OrcFile.readerOptions(conf).filesystem(fs);
    long maxLength;
    String lengthSource;
    if (explicit != null) {
      maxLength = explicit;
      lengthSource = "explicit";
      opts.maxLength(maxLength);
    } else if (useFlush && sideExists) {
      if (lastFlush < 0) {
        throw new java.io.IOException(side + " found but is not readable (getLastFlushLength=" + lastFlush + ")");
      }
      maxLength = lastFlush;
      lengthSource = "side_file";
      opts.maxLength(maxLength);
    } else {
      maxLength = fileLength;
      lengthSource = "file";
    }
    res.addProperty("max_length", maxLength);
    res.addProperty("length_source", lengthSource);

    try (Reader reader = OrcFile.createReader(path, opts)) {
      TypeDescription schema = reader.getSchema();
      res.addProperty("num_rows", reader.getNumberOfRows());
      res.addProperty("schema", schema.toString());
      res.addProperty("compression", reader.getCompressionKind().name());
      res.addProperty("compression_size", reader.getCompressionSize());
      res.addProperty("row_index_stride", reader.getRowIndexStride());
      res.addProperty("file_version", reader.getFileVersion().getName());
      res.addProperty("writer_version", reader.getWriterVersion().name());
      res.addProperty("software_version", reader.getSoftwareVersion());
      res.addProperty("content_length", reader.getContentLength());

      JsonArray stripes = new JsonArray();
      for (StripeInformation s : reader.getStripes()) {
        JsonObject so = new JsonObject();
        so.addProperty("offset", s.getOffset());
        so.addProperty("length", s.getLength());
        so.addProperty("rows", s.getNumberOfRows());
        so.addProperty("index_length", s.getIndexLength());
        so.addProperty("data_length", s.getDataLength());
        so.addProperty("footer_length", s.getFooterLength());
        stripes.add(so);
      }
      res.add("stripes", stripes);

      JsonObject meta = new JsonObject();
      JsonObject metaB64 = new JsonObject();
      for (String key : reader.getMetadataKeys()) {
        ByteBuffer buf = reader.getMetadataValue(key).duplicate();
        byte[] bytes = new byte[buf.remaining()];
        buf.get(bytes);
        meta.addProperty(key, new String(bytes, StandardCharsets.UTF_8));
        metaB64.addProperty(key, Base64.getEncoder().encodeToString(bytes));
      }
      res.add("user_metadata", meta);
      res.add("user_metadata_b64", metaB64);

      res.add("file_statistics", stats(schema, reader.getStatistics()));
      JsonArray stripeStats = new JsonArray();
      try {
        List<StripeStatistics> ss = reader.getStripeStatistics();
        for (StripeStatistics s : ss) {
          stripeStats.add(stats(schema, s.getColumnStatistics()));
        }
        res.add("stripe_statistics", stripeStats);
      } catch (Exception ex) {
        res.add("stripe_statistics", JsonNull.INSTANCE);
        res.addProperty("stripe_statistics_error", String.valueOf(ex));
      }

      if (withRows) {
        JsonArray rows = new JsonArray();
        try (RecordReader rr = reader.rows()) {
          VectorizedRowBatch batch = schema.createRowBatch();
          while (rr.nextBatch(batch)) {
            for (int r = 0; r < batch.size; r++) {
              rows.add(rowToJson(schema, batch, r));
            }
          }
        }
        res.add("rows", rows);
      }
    }
    return res;
  }

  static JsonElement rowToJson(TypeDescription schema, VectorizedRowBatch batch, int r) {
    if (schema.getCategory() == TypeDescription.Category.STRUCT) {
      JsonObject o = new JsonObject();
      List<String> names = schema.getFieldNames();
      List<TypeDescription> kids = schema.getChildren();
      for (int c = 0; c < kids.size(); c++) {
        o.add(names.get(c), value(kids.get(c), batch.cols[c], r));
      }
      return o;
    }
    return value(schema, batch.cols[0], r);
  }

  static JsonElement value(TypeDescription type, ColumnVector vec, int row) {
    int i = vec.isRepeating ? 0 : row;
    if (!vec.noNulls && vec.isNull[i]) {
      return JsonNull.INSTANCE;
    }
    switch (type.getCategory()) {
      case BOOLEAN:
        return new JsonPrimitive(((LongColumnVector) vec).vector[i] != 0);
      case BYTE:
      case SHORT:
      case INT:
      case LONG:
        return new JsonPrimitive(((LongColumnVector) vec).vector[i]);
      case DATE:
        return new JsonPrimitive(LocalDate.ofEpochDay(((LongColumnVector) vec).vector[i]).toString());
      case FLOAT:
        return new JsonPrimitive((double) (float) ((DoubleColumnVector) vec).vector[i]);
      case DOUBLE:
        return new JsonPrimitive(((DoubleColumnVector) vec).vector[i]);
      case STRING:
      case VARCHAR:
      case CHAR: {
        BytesColumnVector b = (BytesColumnVector) vec;
        return new JsonPrimitive(new String(b.vector[i], b.start[i], b.length[i], StandardCharsets.UTF_8));
      }
      case BINARY: {
        BytesColumnVector b = (BytesColumnVector) vec;
        byte[] bytes = java.util.Arrays.copyOfRange(b.vector[i], b.start[i], b.start[i] + b.length[i]);
        return new JsonPrimitive(Base64.getEncoder().encodeToString(bytes));
      }
      case DECIMAL: {
        DecimalColumnVector d = (DecimalColumnVector) vec;
        return new JsonPrimitive(d.vector[i].getHiveDecimal().toFormatString(type.getScale()));
      }
      case TIMESTAMP:
      case TIMESTAMP_INSTANT: {
        TimestampColumnVector t = (TimestampColumnVector) vec;
        String s = formatTimestamp(t.time[i], t.nanos[i]);
        return new JsonPrimitive(type.getCategory() == TypeDescription.Category.TIMESTAMP_INSTANT ? s + "Z" : s);
      }
      case STRUCT: {
        StructColumnVector s = (StructColumnVector) vec;
        JsonObject o = new JsonObject();
        List<String> names = type.getFieldNames();
        List<TypeDescription> kids = type.getChildren();
        for (int c = 0; c < kids.size(); c++) {
          o.add(names.get(c), value(kids.get(c), s.fields[c], i));
        }
        return o;
      }
      case LIST: {
        ListColumnVector l = (ListColumnVector) vec;
        JsonArray a = new JsonArray();
        TypeDescription child = type.getChildren().get(0);
        long off = l.offsets[i];
        for (long k = 0; k < l.lengths[i]; k++) {
          a.add(value(child, l.child, (int) (off + k)));
        }
        return a;
      }
      case MAP: {
        MapColumnVector m = (MapColumnVector) vec;
        JsonArray a = new JsonArray();
        TypeDescription kt = type.getChildren().get(0);
        TypeDescription vt = type.getChildren().get(1);
        long off = m.offsets[i];
        for (long k = 0; k < m.lengths[i]; k++) {
          JsonArray pair = new JsonArray();
          pair.add(value(kt, m.keys, (int) (off + k)));
          pair.add(value(vt, m.values, (int) (off + k)));
          a.add(pair);
        }
        return a;
      }
      case UNION: {
        UnionColumnVector u = (UnionColumnVector) vec;
        JsonObject o = new JsonObject();
        int tag = u.tags[i];
        o.addProperty("tag", tag);
        o.add("value", value(type.getChildren().get(tag), u.fields[tag], i));
        return o;
      }
      default:
        throw new IllegalArgumentException("unsupported ORC type " + type);
    }
  }

  /**
   * millis since epoch (TimestampColumnVector.time / Timestamp.getTime, includes the millis) +
   * nanos-of-second. The instant is taken from the millis and only the sub-millisecond part from
   * nanos: orc-core 2.3 reading a pre-1970 fractional timestamp written by ORC C++ (pyarrow)
   * returns e.g. time=-500, nanos=-500000000 for 1969-12-31T23:59:59.5 (negative nanos).
   */
  static String formatTimestamp(long millis, int nanos) {
    // millis also holds the whole milliseconds of nanos; orc-core can hand back a negative
    // nanos for pre-1970 values written by ORC C++, so derive the seconds from both.
    // Seconds and nanos apart: years 1-9999 overflow a long of nanoseconds.
    long seconds = (millis - nanos / 1_000_000) / 1000L;
    long epochSecond = seconds + Math.floorDiv((long) nanos, 1_000_000_000L);
    int nanosOfSecond = (int) Math.floorMod((long) nanos, 1_000_000_000L);
    return LocalDateTime.ofEpochSecond(epochSecond, nanosOfSecond, ZoneOffset.UTC).format(TS);
  }

  static String formatTimestamp(Timestamp ts) {
    return ts == null ? null : formatTimestamp(ts.getTime(), ts.getNanos());
  }

  static JsonArray stats(TypeDescription schema, ColumnStatistics[] all) {
    JsonArray out = new JsonArray();
    for (int id = 0; id < all.length; id++) {
      ColumnStatistics cs = all[id];
      JsonObject o = new JsonObject();
      o.addProperty("column_id", id);
      TypeDescription t = id <= schema.getMaximumId() ? schema.findSubtype(id) : null;
      o.addProperty("type", t == null ? null : t.getCategory().getName());
      o.addProperty("count", cs.getNumberOfValues());
      o.addProperty("has_null", cs.hasNull());
      o.addProperty("bytes_on_disk", cs.getBytesOnDisk());
      if (cs instanceof BooleanColumnStatistics) {
        BooleanColumnStatistics b = (BooleanColumnStatistics) cs;
        o.addProperty("true_count", b.getTrueCount());
        o.addProperty("false_count", b.getFalseCount());
      } else if (cs instanceof IntegerColumnStatistics) {
        IntegerColumnStatistics s = (IntegerColumnStatistics) cs;
        if (cs.getNumberOfValues() > 0) {
          o.addProperty("min", s.getMinimum());
          o.addProperty("max", s.getMaximum());
        }
        if (s.isSumDefined()) {
          o.addProperty("sum", s.getSum());
        } else {
          o.add("sum", JsonNull.INSTANCE);
        }
      } else if (cs instanceof DoubleColumnStatistics) {
        DoubleColumnStatistics s = (DoubleColumnStatistics) cs;
        if (cs.getNumberOfValues() > 0) {
          o.addProperty("min", s.getMinimum());
          o.addProperty("max", s.getMaximum());
        }
        o.addProperty("sum", s.getSum());
      } else if (cs instanceof StringColumnStatistics) {
        StringColumnStatistics s = (StringColumnStatistics) cs;
        o.addProperty("min", s.getMinimum());
        o.addProperty("max", s.getMaximum());
        o.addProperty("lower_bound", s.getLowerBound());
        o.addProperty("upper_bound", s.getUpperBound());
        o.addProperty("sum_length", s.getSum());
      } else if (cs instanceof BinaryColumnStatistics) {
        o.addProperty("sum_length", ((BinaryColumnStatistics) cs).getSum());
      } else if (cs instanceof DateColumnStatistics) {
        DateColumnStatistics s = (DateColumnStatistics) cs;
        if (cs.getNumberOfValues() > 0) {
          o.addProperty("min", LocalDate.ofEpochDay(s.getMinimumDayOfEpoch()).toString());
          o.addProperty("max", LocalDate.ofEpochDay(s.getMaximumDayOfEpoch()).toString());
          o.addProperty("min_days", s.getMinimumDayOfEpoch());
          o.addProperty("max_days", s.getMaximumDayOfEpoch());
        }
      } else if (cs instanceof DecimalColumnStatistics) {
        DecimalColumnStatistics s = (DecimalColumnStatistics) cs;
        o.addProperty("min", s.getMinimum() == null ? null : s.getMinimum().toString());
        o.addProperty("max", s.getMaximum() == null ? null : s.getMaximum().toString());
        o.addProperty("sum", s.getSum() == null ? null : s.getSum().toString());
      } else if (cs instanceof TimestampColumnStatistics) {
        TimestampColumnStatistics s = (TimestampColumnStatistics) cs;
        if (cs.getNumberOfValues() > 0) {
          o.addProperty("min", formatTimestamp(s.getMinimum()));
          o.addProperty("max", formatTimestamp(s.getMaximum()));
          o.addProperty("min_utc", formatTimestamp(s.getMinimumUTC()));
          o.addProperty("max_utc", formatTimestamp(s.getMaximumUTC()));
        }
      }
      out.add(o);
    }
    return out;
  }
}
