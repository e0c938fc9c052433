// orc_write_timestamps: ORC Java writes one TIMESTAMP column, to check how other readers decode
// what ORC Java (and so Hive) stores for any instant, before 1970 and outside 1677-2262 included.
//
// Request: {"path": "/abs/file.orc", "values": [[epochSecond, nanosOfSecond] | null, ...],
//           "compression": "NONE" | "ZLIB" (default ZLIB)}
// The column is struct<ts:timestamp>, written in UTC with the proleptic Gregorian calendar.
// Answer: {"path", "rows"}.

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.ql.exec.vector.TimestampColumnVector;
import org.apache.hadoop.hive.ql.exec.vector.VectorizedRowBatch;
import org.apache.orc.CompressionKind;
import org.apache.orc.OrcFile;
import org.apache.orc.TypeDescription;
import org.apache.orc.Writer;

final class OrcTimestampWriteTool {
  private OrcTimestampWriteTool() {}

  static JsonObject run(JsonObject req) throws Exception {
    String local = req.get("path").getAsString();
    JsonArray values = req.getAsJsonArray("values");
    Configuration conf = ToolSupport.conf();
    TypeDescription schema = TypeDescription.fromString("struct<ts:timestamp>");
    OrcFile.WriterOptions opts = OrcFile.writerOptions(conf)
        .fileSystem(ToolSupport.localFs(conf))
        .setSchema(schema)
        .useUTCTimestamp(true)
        .setProlepticGregorian(true)
        .compress(CompressionKind.valueOf(ToolSupport.str(req, "compression", "ZLIB")));
    try (Writer writer = OrcFile.createWriter(ToolSupport.path(local), opts)) {
      VectorizedRowBatch batch = schema.createRowBatch(values.size());
      TimestampColumnVector ts = (TimestampColumnVector) batch.cols[0];
      ts.setIsUTC(true);
      ts.changeCalendar(true, false);
      for (int i = 0; i < values.size(); i++) {
        JsonElement v = values.get(i);
        if (v.isJsonNull()) {
          ts.noNulls = false;
          ts.isNull[i] = true;
          continue;
        }
        long second = v.getAsJsonArray().get(0).getAsLong();
        int nanos = v.getAsJsonArray().get(1).getAsInt();
        // TimestampColumnVector keeps epoch millis (floored) and the nanos of the second.
        ts.time[i] = second * 1000L + nanos / 1_000_000;
        ts.nanos[i] = nanos;
      }
      batch.size = values.size();
      writer.addRowBatch(batch);
    }
    JsonObject res = new JsonObject();
    res.addProperty("path", local);
    res.addProperty("rows", values.size());
    return res;
  }
}
