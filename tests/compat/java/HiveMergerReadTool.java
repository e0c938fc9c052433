// hive_merged_read: the rows Hive 2.3 itself reads from an ACID partition, with their ROW__IDs.
//
// Same path as Hive 2.3's compactor and ACID readers: AcidUtils.getAcidState(dir, conf,
// ValidTxnList) picks the base and deltas; OrcInputFormat.getRawReader(conf, collapseEvents=true,
// bucket, txns, base, deltas) builds an OrcRawRecordMerger per bucket, which merges events by
// (originalTransaction, bucket, rowId, currentTransaction desc), drops events of invalid txns,
// reads each delta file only up to its _flush_length, and keeps the newest event per row;
// rows whose newest event is a delete are left out (RawReader.isDelete), as CompactorMR does.
//
// "reader": "input_format" takes the path of Hive 2.3's (non-vectorized) queries instead:
// OrcInputFormat.getSplits (which calls getAcidState itself and makes one split per bucket),
// then OrcInputFormat.getReader(split, options) per split, a RowReader over the same merger
// that leaves deleted rows out and keys each row by its ROW__ID.
//
// Request: {"columns": "id,value", "columns_types": "bigint:string",
//           "reader": "raw_merger" (default) | "input_format",
//           "transactional_properties": "default" (split-update) | "legacy",
//           "queries": [{"partition_dir": str, "valid_txns": str}]}
// valid_txns: the Hive 2.x ValidReadTxnList string (see HiveAcidStateTool).
// Response: {"results": [{"partition_dir", "valid_txns", "base", "deltas", "buckets",
//            "rows": [{"originalTransaction", "bucket", "rowId", "currentTransaction",
//                      "operation_is_update": bool, "row": {col: value}}]}
//            | {"partition_dir", "valid_txns", "error", "error_class", "traceback"}]}
// "bucket" is the value stored in the file (Hive 3's encoded bucket property for our files).
// Values: primitive Java objects of the column's ObjectInspector (bigint -> long, string -> str).

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.common.ValidReadTxnList;
import org.apache.hadoop.hive.common.ValidTxnList;
import org.apache.hadoop.hive.ql.io.AcidInputFormat;
import org.apache.hadoop.hive.ql.io.AcidUtils;
import org.apache.hadoop.hive.ql.io.RecordIdentifier;
import org.apache.hadoop.hive.ql.io.orc.OrcInputFormat;
import org.apache.hadoop.hive.ql.io.orc.OrcStruct;
import org.apache.hadoop.hive.serde2.ColumnProjectionUtils;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.PrimitiveObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.StructField;
import org.apache.hadoop.hive.serde2.objectinspector.StructObjectInspector;
import org.apache.hadoop.mapred.FileInputFormat;
import org.apache.hadoop.mapred.InputSplit;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.Reporter;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

final class HiveMergerReadTool {
  private HiveMergerReadTool() {}

  private static final Pattern BUCKET_FILE = Pattern.compile("bucket_(\\d{5})");

  static JsonElement run(JsonObject request) throws Exception {
    String columns = request.get("columns").getAsString();
    String types = request.get("columns_types").getAsString();
    String readerKind = ToolSupport.str(request, "reader", "raw_merger");
    String txnProps = ToolSupport.str(request, "transactional_properties", "default");
    if (!readerKind.equals("raw_merger") && !readerKind.equals("input_format")) {
      throw new IllegalArgumentException("unknown reader " + readerKind);
    }
    JsonArray out = new JsonArray();
    for (JsonElement e : request.getAsJsonArray("queries")) {
      JsonObject q = e.getAsJsonObject();
      String dir = q.get("partition_dir").getAsString();
      String valid = ToolSupport.str(q, "valid_txns", "");
      try {
        out.add(readerKind.equals("raw_merger") ? one(dir, valid, columns, types)
            : viaInputFormat(dir, valid, columns, types, txnProps));
      } catch (Exception ex) {
        JsonObject err = new JsonObject();
        err.addProperty("partition_dir", dir);
        err.addProperty("valid_txns", valid);
        err.addProperty("error", String.valueOf(ex));
        err.addProperty("error_class", ex.getClass().getName());
        err.addProperty("traceback", ToolSupport.stackTrace(ex));
        out.add(err);
      }
    }
    JsonObject result = new JsonObject();
    result.add("results", out);
    return result;
  }

  /** Job conf of an ACID table scan: the table's columns (the readers' object inspectors and
   * schema evolution are built from them) and the snapshot. */
  static Configuration scanConf(String columns, String types, ValidTxnList txns) {
    Configuration conf = ToolSupport.conf();
    conf.set("columns", columns);
    conf.set("columns.types", types);
    conf.set("schema.evolution.columns", columns);
    conf.set("schema.evolution.columns.types", types);
    conf.set(ValidTxnList.VALID_TXNS_KEY, txns.writeToString());
    return conf;
  }

  static JsonObject viaInputFormat(String dir, String validTxns, String columns, String types,
      String txnProps) throws Exception {
    ValidTxnList txns = new ValidReadTxnList(validTxns);
    JobConf job = new JobConf(scanConf(columns, types, txns));
    FileInputFormat.setInputPaths(job, ToolSupport.path(dir));
    AcidUtils.setTransactionalTableScan(job, true);
    // The table's properties, as Hive's planner copies them into the job (getSplits looks for
    // "transactional" before it honours split-update).
    job.set("transactional", "true");
    job.set("transactional_properties", txnProps);
    AcidUtils.setAcidOperationalProperties(job,
        AcidUtils.AcidOperationalProperties.parseString(txnProps));
    ColumnProjectionUtils.setReadAllColumns(job);
    // Hive 2 ACID tables are bucketed; a split is made for each bucket not covered by a base.
    TreeSet<Integer> buckets = new TreeSet<>();
    FileSystem fs = ToolSupport.localFs(job);
    for (FileStatus d : fs.listStatus(ToolSupport.path(dir))) {
      if (d.isDirectory()) {
        bucketsIn(fs, d.getPath(), buckets);
      }
    }
    job.setInt("bucket_count", buckets.isEmpty() ? 1 : buckets.last() + 1);
    OrcInputFormat format = new OrcInputFormat();
    InputSplit[] splits = format.getSplits(job, 1);
    JsonArray rows = new JsonArray();
    JsonArray splitInfo = new JsonArray();
    for (InputSplit split : splits) {
      splitInfo.add(split.toString());
      AcidInputFormat.RowReader<OrcStruct> reader =
          format.getReader(split, new AcidInputFormat.Options(job).reporter(Reporter.NULL));
      try {
        StructObjectInspector rowOi = (StructObjectInspector) reader.getObjectInspector();
        RecordIdentifier key = reader.createKey();
        OrcStruct value = reader.createValue();
        while (reader.next(key, value)) {
          JsonObject r = new JsonObject();
          r.addProperty("originalTransaction", key.getTransactionId());
          r.addProperty("bucket", key.getBucketId());
          r.addProperty("rowId", key.getRowId());
          JsonObject cols = new JsonObject();
          for (StructField f : rowOi.getAllStructFieldRefs()) {
            cols.add(f.getFieldName(), primitive(rowOi, f, value));
          }
          r.add("row", cols);
          rows.add(r);
        }
      } finally {
        reader.close();
      }
    }
    JsonObject o = new JsonObject();
    o.addProperty("partition_dir", dir);
    o.addProperty("valid_txns", validTxns);
    o.add("splits", splitInfo);
    o.add("rows", rows);
    return o;
  }

  static JsonObject one(String dir, String validTxns, String columns, String types)
      throws Exception {
    ValidTxnList txns = new ValidReadTxnList(validTxns);
    Configuration conf = scanConf(columns, types, txns);
    FileSystem fs = ToolSupport.localFs(conf);
    Path partition = ToolSupport.path(dir);
    AcidUtils.Directory state = AcidUtils.getAcidState(partition, conf, txns);
    Path base = state.getBaseDirectory();
    List<Path> deltaList = new ArrayList<>();
    for (AcidUtils.ParsedDelta pd : state.getCurrentDirectories()) {
      deltaList.add(pd.getPath());
    }
    Path[] deltas = deltaList.toArray(new Path[0]);

    TreeSet<Integer> buckets = new TreeSet<>();
    if (base != null) {
      bucketsIn(fs, base, buckets);
    }
    for (Path d : deltas) {
      bucketsIn(fs, d, buckets);
    }
    if (!state.getOriginalFiles().isEmpty()) {
      throw new IllegalArgumentException("original (pre-ACID) files are not supported here");
    }

    OrcInputFormat format = new OrcInputFormat();
    JsonArray rows = new JsonArray();
    for (int bucket : buckets) {
      // A base without this bucket's file holds no rows of it (createReader would fail).
      Path baseForBucket = base != null && fs.exists(AcidUtils.createBucketFile(base, bucket))
          ? base : null;
      AcidInputFormat.RawReader<OrcStruct> reader =
          format.getRawReader(conf, true, bucket, txns, baseForBucket, deltas);
      try {
        StructObjectInspector eventOi = (StructObjectInspector) reader.getObjectInspector();
        List<? extends StructField> eventFields = eventOi.getAllStructFieldRefs();
        StructField rowField = eventFields.get(5);
        StructObjectInspector rowOi = (StructObjectInspector) rowField.getFieldObjectInspector();
        RecordIdentifier key = reader.createKey();
        OrcStruct value = reader.createValue();
        while (reader.next(key, value)) {
          if (reader.isDelete(value)) {
            continue;
          }
          JsonObject r = new JsonObject();
          r.addProperty("originalTransaction", key.getTransactionId());
          r.addProperty("bucket", key.getBucketId());
          r.addProperty("rowId", key.getRowId());
          r.add("currentTransaction", primitive(eventOi, eventFields.get(4), value));
          JsonElement op = primitive(eventOi, eventFields.get(0), value);
          r.addProperty("operation_is_update", op.getAsInt() == 1);
          Object row = eventOi.getStructFieldData(value, rowField);
          JsonObject cols = new JsonObject();
          for (StructField f : rowOi.getAllStructFieldRefs()) {
            cols.add(f.getFieldName(), primitive(rowOi, f, row));
          }
          r.add("row", cols);
          rows.add(r);
        }
      } finally {
        reader.close();
      }
    }

    JsonObject o = new JsonObject();
    o.addProperty("partition_dir", dir);
    o.addProperty("valid_txns", validTxns);
    o.addProperty("base", base == null ? null : ToolSupport.local(base));
    JsonArray deltaNames = new JsonArray();
    for (Path d : deltas) {
      deltaNames.add(ToolSupport.local(d));
    }
    o.add("deltas", deltaNames);
    JsonArray bucketIds = new JsonArray();
    buckets.forEach(bucketIds::add);
    o.add("buckets", bucketIds);
    o.add("rows", rows);
    return o;
  }

  static void bucketsIn(FileSystem fs, Path dir, TreeSet<Integer> into) throws Exception {
    for (FileStatus f : fs.listStatus(dir)) {
      Matcher m = BUCKET_FILE.matcher(f.getPath().getName());
      if (m.matches()) {
        into.add(Integer.parseInt(m.group(1)));
      }
    }
  }

  static JsonElement primitive(StructObjectInspector oi, StructField field, Object struct) {
    Object data = oi.getStructFieldData(struct, field);
    if (data == null) {
      return JsonNull.INSTANCE;
    }
    ObjectInspector foi = field.getFieldObjectInspector();
    if (!(foi instanceof PrimitiveObjectInspector)) {
      throw new IllegalArgumentException("only primitive columns are supported: "
          + field.getFieldName() + " is " + foi.getTypeName());
    }
    Object v = ((PrimitiveObjectInspector) foi).getPrimitiveJavaObject(data);
    if (v instanceof Number) {
      return new JsonPrimitive((Number) v);
    }
    if (v instanceof Boolean) {
      return new JsonPrimitive((Boolean) v);
    }
    return new JsonPrimitive(String.valueOf(v));
  }
}
