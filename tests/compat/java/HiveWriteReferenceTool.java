// hive_write_reference_table: a small unpartitioned ACID table written by Hive 2.3's own
// OrcRecordUpdater (OrcOutputFormat.getRecordUpdater(path, AcidOutputFormat.Options)), bucket 0,
// row type struct<id:bigint, value:string>.
//
// Request: {"table_dir": str, "scenario": "basic" | "streaming_open",
//           "transactional_properties": "default" (split-update) | "legacy"}
//  txn 1      delta_0000001_0000001: insert ids 1,2,3           (one updater, closed)
// SQL-style txns use statementId(0) (Hive 2.3 writes delta_x_x_0000); the streaming batch uses
// statementId(-1) like Hive 2.x hcatalog streaming (delta_x_y, no suffix).
//  txns 2..4  delta_0000002_0000004: ONE updater, insert 4,5 (txn 2), 6,7 (txn 3), 8 (txn 4),
//             flush() after each txn. "basic": then close(false). "streaming_open": never closed
//             (the JVM halts with the writer open, like a live or crashed streaming writer).
//  txn 5      update id 2 (ROW__ID 1/0/1) -> value "a2-updated"
//  txn 6      delete id 4 (ROW__ID 2/0/0)
// The manifest lists what was asked of Hive and the ROW__IDs Hive is expected to assign; tests
// compare it with what orc_read finds in the files.

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.ql.io.AcidOutputFormat;
import org.apache.hadoop.hive.ql.io.AcidUtils;
import org.apache.hadoop.hive.ql.io.RecordIdentifier;
import org.apache.hadoop.hive.ql.io.RecordUpdater;
import org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspectorFactory;
import org.apache.hadoop.io.Text;
import org.apache.orc.impl.OrcAcidUtils;

import java.io.File;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.TreeMap;
import java.util.stream.Stream;

final class HiveWriteReferenceTool {
  private HiveWriteReferenceTool() {}

  /** Row handed to OrcRecordUpdater; ROW__ID (field index 2) is the record-id column. */
  public static final class Row {
    public long id;
    public Text value;
    public RecordIdentifier ROW__ID;

    Row(long id, String value, RecordIdentifier rowId) {
      this.id = id;
      this.value = value == null ? null : new Text(value);
      this.ROW__ID = rowId;
    }
  }

  static final int BUCKET = 0;

  static JsonElement run(JsonObject request) throws Exception {
    String tableDir = request.get("table_dir").getAsString();
    String scenario = ToolSupport.str(request, "scenario", "basic");
    if (!scenario.equals("basic") && !scenario.equals("streaming_open")) {
      throw new IllegalArgumentException("unknown scenario " + scenario);
    }
    String txnProps = ToolSupport.str(request, "transactional_properties", "default");

    Configuration conf = ToolSupport.conf();
    FileSystem fs = ToolSupport.localFs(conf);
    Path table = ToolSupport.path(tableDir);
    tablePath = table;
    fs.mkdirs(table);

    ObjectInspector oi = ObjectInspectorFactory.getReflectionObjectInspector(
        Row.class, ObjectInspectorFactory.ObjectInspectorOptions.JAVA);
    Properties props = new Properties();
    props.setProperty("transactional", "true");
    props.setProperty("transactional_properties", txnProps);
    props.setProperty("columns", "id,value");
    props.setProperty("columns.types", "bigint:string");
    OrcOutputFormat format = new OrcOutputFormat();

    JsonObject manifest = new JsonObject();
    manifest.addProperty("table_dir", tableDir);
    manifest.addProperty("scenario", scenario);
    manifest.addProperty("transactional_properties", txnProps);
    manifest.addProperty("bucket", BUCKET);
    JsonArray txns = new JsonArray();
    JsonArray updaters = new JsonArray();

    // txn 1
    {
      RecordUpdater u = format.getRecordUpdater(table, options(conf, fs, oi, props, 1, 1));
      JsonObject t = txn(1);
      for (int k = 0; k < 3; k++) {
        long id = k + 1;
        u.insert(1, new Row(id, "a" + id, null));
        inserted(t, id, "a" + id, 1, k);
      }
      u.close(false);
      txns.add(t);
      updaters.add(updaterInfo(u, 1, 1, "closed"));
    }

    // txns 2..4: one streaming-style updater
    // like Hive 2.x hcatalog streaming (AbstractRecordWriter): statementId(-1) -> no _NNNN suffix
    AcidOutputFormat.Options streamOptions = options(conf, fs, oi, props, 2, 4).statementId(-1);
    RecordUpdater stream = format.getRecordUpdater(table, streamOptions);
    JsonObject streamInfo = updaterInfo(stream, 2, 4, scenario.equals("basic") ? "closed" : "open");
    Path bucketFile = AcidUtils.createFilename(table, streamOptions);
    streamInfo.addProperty("bucket_file", ToolSupport.local(bucketFile));
    Path side = OrcAcidUtils.getSideFile(bucketFile);
    streamInfo.add("after_construction", fileState(fs, bucketFile, side));
    JsonArray flushes = new JsonArray();
    long nextId = 4;
    int[][] plan = {{2, 2}, {3, 2}, {4, 1}};
    for (int[] p : plan) {
      int txn = p[0];
      JsonObject t = txn(txn);
      for (int k = 0; k < p[1]; k++) {
        long id = nextId++;
        String v = "s" + txn + "-" + id;
        stream.insert(txn, new Row(id, v, null));
        inserted(t, id, v, txn, k);
      }
      stream.flush();
      JsonObject f = fileState(fs, bucketFile, side);
      f.addProperty("after_txn", txn);
      flushes.add(f);
      txns.add(t);
    }
    streamInfo.add("flushes", flushes);
    if (scenario.equals("basic")) {
      stream.close(false);
      streamInfo.add("after_close", fileState(fs, bucketFile, side));
    }
    updaters.add(streamInfo);

    // txn 5: update id 2 (inserted by txn 1 as rowId 1)
    {
      RecordUpdater u = format.getRecordUpdater(table, options(conf, fs, oi, props, 5, 5));
      JsonObject t = txn(5);
      u.update(5, new Row(2, "a2-updated", new RecordIdentifier(1, BUCKET, 1)));
      JsonObject up = new JsonObject();
      up.add("row", row(2, "a2-updated"));
      up.add("old_row_id", rid(1, BUCKET, 1));
      // split-update: delete event for the old ROW__ID + insert event with a fresh ROW__ID
      up.add("new_row_id", rid(5, BUCKET, 0));
      t.getAsJsonArray("updated").add(up);
      u.close(false);
      txns.add(t);
      updaters.add(updaterInfo(u, 5, 5, "closed"));
    }

    // txn 6: delete id 4 (inserted by txn 2 as rowId 0)
    {
      RecordUpdater u = format.getRecordUpdater(table, options(conf, fs, oi, props, 6, 6));
      JsonObject t = txn(6);
      u.delete(6, new Row(4, null, new RecordIdentifier(2, BUCKET, 0)));
      JsonObject del = new JsonObject();
      del.add("row", row(4, "s2-4"));
      del.add("row_id", rid(2, BUCKET, 0));
      t.getAsJsonArray("deleted").add(del);
      u.close(false);
      txns.add(t);
      updaters.add(updaterInfo(u, 6, 6, "closed"));
    }

    manifest.add("txns", txns);
    manifest.add("updaters", updaters);

    // expected visible rows (by id)
    TreeMap<Long, String> all = new TreeMap<>();
    all.put(1L, "a1"); all.put(2L, "a2-updated"); all.put(3L, "a3");
    all.put(5L, "s2-5"); all.put(6L, "s3-6"); all.put(7L, "s3-7"); all.put(8L, "s4-8");
    TreeMap<Long, String> abort3 = new TreeMap<>(all);
    abort3.remove(6L); abort3.remove(7L);
    JsonObject expected = new JsonObject();
    expected.add("all_committed", rows(all));
    expected.add("txn3_aborted", rows(abort3));
    manifest.add("expected_rows", expected);
    JsonObject snaps = new JsonObject();
    snaps.addProperty("all_committed", "6:" + Long.MAX_VALUE);
    snaps.addProperty("txn3_aborted", "6:" + Long.MAX_VALUE + ":3");
    manifest.add("valid_txns", snaps);

    // everything on disk (relative paths, sizes, hex of small side/version files)
    JsonArray files = new JsonArray();
    File root = new File(tableDir).getAbsoluteFile();
    List<File> all_files = new ArrayList<>();
    try (Stream<java.nio.file.Path> w = Files.walk(root.toPath())) {
      w.sorted().forEach(p -> all_files.add(p.toFile()));
    }
    for (File f : all_files) {
      if (f.equals(root)) continue;
      JsonObject o = new JsonObject();
      String rel = root.toPath().relativize(f.toPath()).toString();
      o.addProperty("path", rel);
      o.addProperty("is_dir", f.isDirectory());
      if (f.isFile()) {
        o.addProperty("size", f.length());
        if (f.length() <= 256 && !rel.endsWith("bucket_00000")) {
          o.addProperty("hex", hex(Files.readAllBytes(f.toPath())));
        }
      }
      files.add(o);
    }
    manifest.add("files", files);
    return manifest;
  }

  static Path tablePath;

  static Path table(Configuration conf) {
    return tablePath;
  }

  static AcidOutputFormat.Options options(Configuration conf, FileSystem fs, ObjectInspector oi,
      Properties props, long min, long max) {
    return new AcidOutputFormat.Options(conf)
        .filesystem(fs)
        .inspector(oi)
        .bucket(BUCKET)
        .minimumTransactionId(min)
        .maximumTransactionId(max)
        .tableProperties(props)
        .recordIdColumn(2)
        .statementId(0)
        .finalDestination(table(conf));
  }

  static JsonObject updaterInfo(RecordUpdater u, long min, long max, String state) {
    JsonObject o = new JsonObject();
    o.addProperty("min_txn", min);
    o.addProperty("max_txn", max);
    o.addProperty("state", state);
    o.addProperty("to_string", u.toString());
    return o;
  }

  static JsonObject fileState(FileSystem fs, Path data, Path side) throws Exception {
    JsonObject o = new JsonObject();
    o.addProperty("data_file_exists", fs.exists(data));
    o.addProperty("data_file_length", fs.exists(data) ? fs.getFileStatus(data).getLen() : -1);
    boolean se = fs.exists(side);
    o.addProperty("side_file_exists", se);
    if (se) {
      byte[] b = Files.readAllBytes(new File(ToolSupport.local(side)).toPath());
      o.addProperty("side_file_hex", hex(b));
      o.addProperty("last_flush_length", OrcAcidUtils.getLastFlushLength(fs, data));
    }
    return o;
  }

  static JsonObject txn(long txn) {
    JsonObject t = new JsonObject();
    t.addProperty("txn", txn);
    t.add("inserted", new JsonArray());
    t.add("updated", new JsonArray());
    t.add("deleted", new JsonArray());
    return t;
  }

  static void inserted(JsonObject t, long id, String value, long txn, long rowId) {
    JsonObject o = new JsonObject();
    o.add("row", row(id, value));
    o.add("row_id", rid(txn, BUCKET, rowId));
    t.getAsJsonArray("inserted").add(o);
  }

  static JsonObject row(long id, String value) {
    JsonObject o = new JsonObject();
    o.addProperty("id", id);
    o.addProperty("value", value);
    return o;
  }

  static JsonArray rows(TreeMap<Long, String> m) {
    JsonArray a = new JsonArray();
    m.forEach((k, v) -> a.add(row(k, v)));
    return a;
  }

  static JsonObject rid(long origTxn, int bucket, long rowId) {
    JsonObject o = new JsonObject();
    o.addProperty("originalTransaction", origTxn);
    o.addProperty("bucket", bucket);
    o.addProperty("rowId", rowId);
    return o;
  }

  static String hex(byte[] b) {
    StringBuilder sb = new StringBuilder();
    for (byte x : b) sb.append(String.format("%02x", x));
    return sb.toString();
  }
}
