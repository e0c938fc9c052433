// Hive 4's own ACID reader on one table, for tests/hms/hive4.py: the rows a Hive 4 query
// returns for a snapshot, or the directories it picks, as JSON lines on stdout.
//
//   java -cp <hive-exec 4.0.1 and Hadoop>:<classes> Hive4AcidRead rows|vrows|state LOCATION
//       COLUMNS TYPES PARTITION_KEYS VALID_TXNS VALID_WRITE_IDS
//
// LOCATION   the table's directory (a URL, or a local path); partitions are its k=v subdirectories
// COLUMNS    "id,v"; TYPES "bigint:string" (Hive's columns / columns.types; primitive types
//            only); PARTITION_KEYS "dt" or "" for an unpartitioned table
// VALID_TXNS the metastore's valid-transaction list (hive.txn.valid.txns:
//            "hwm:minOpen:open,ids:aborted,ids")
// VALID_WRITE_IDS the table's list from get_valid_write_ids (hive.txn.valid.writeids:
//            "db.table:hwm:minOpen:open,ids:aborted,ids")
//
// rows:  OrcInputFormat.getSplits (AcidUtils.getAcidState inside)
//        and OrcInputFormat.getReader per split: the RowReader over OrcRawRecordMerger that
//        Hive's non-vectorized ACID scans use, which applies the delete deltas and leaves out
//        rows of write ids the list does not make valid. One line per row: its columns, its
//        partition values and "row__id" {writeid, bucketid, rowid}.
// vrows: the same splits read by VectorizedOrcAcidRowBatchReader (Hive4VectorizedRows), the
//        reader of Hive 4's (default) vectorized queries: the same lines without "row__id".
// state: AcidUtils.getAcidState per partition: one line {partition, base, deltas
//        [{path, min, max, statement_id, delete_delta}], obsolete, aborted}.
//
// Exit 0 with the lines; on an error, the stack trace on stderr and exit 1.

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.common.FileUtils;
import org.apache.hadoop.hive.common.ValidReaderWriteIdList;
import org.apache.hadoop.hive.common.ValidTxnList;
import org.apache.hadoop.hive.common.ValidWriteIdList;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.ql.io.AcidDirectory;
import org.apache.hadoop.hive.ql.io.AcidInputFormat;
import org.apache.hadoop.hive.ql.io.AcidUtils;
import org.apache.hadoop.hive.ql.io.orc.Hive4VectorizedRows;
import org.apache.hadoop.hive.ql.io.orc.OrcInputFormat;
import org.apache.hadoop.hive.ql.io.orc.OrcRawRecordMerger;
import org.apache.hadoop.hive.ql.io.orc.OrcStruct;
import org.apache.hadoop.hive.serde2.ColumnProjectionUtils;
import org.apache.hadoop.hive.serde2.objectinspector.PrimitiveObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.StructField;
import org.apache.hadoop.hive.serde2.objectinspector.StructObjectInspector;
import org.apache.hadoop.mapred.FileInputFormat;
import org.apache.hadoop.mapred.InputSplit;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.Reporter;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class Hive4AcidRead {
  private Hive4AcidRead() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 7 || !List.of("rows", "vrows", "state").contains(args[0])) {
      System.err.println("usage: Hive4AcidRead rows|vrows|state LOCATION COLUMNS TYPES "
          + "PARTITION_KEYS VALID_TXNS VALID_WRITE_IDS");
      System.exit(2);
    }
    PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    String location = args[1].startsWith("/") ? "file://" + args[1] : args[1];
    JobConf job = scanConf(args[2], args[3], args[5], args[6]);
    Path table = new Path(location);
    FileSystem fs = table.getFileSystem(job);
    int depth = args[4].isEmpty() ? 0 : args[4].split(",").length;
    List<Path> partitions = new ArrayList<>();
    partitionsOf(fs, table, depth, partitions);
    for (Path partition : partitions) {
      Map<String, String> values = partitionValues(table, partition);
      if (args[0].equals("rows")) {
        rows(job, partition, values, out);
      } else if (args[0].equals("vrows")) {
        vectorizedRows(job, partition, values, args[2], args[3], out);
      } else {
        state(fs, job, partition, values, out);
      }
    }
    out.flush();
  }

  /** The job conf of a Hive 4 full-ACID table scan: the table's columns (the readers' object
   * inspectors and schema evolution are built from them) and the snapshot. */
  static JobConf scanConf(String columns, String types, String validTxns, String writeIds) {
    JobConf job = new JobConf(new Configuration());
    job.set("fs.defaultFS", "file:///");
    job.set("columns", columns);
    job.set("columns.types", types);
    job.set("schema.evolution.columns", columns);
    job.set("schema.evolution.columns.types", types);
    job.set(ValidTxnList.VALID_TXNS_KEY, validTxns);
    job.set(ValidWriteIdList.VALID_WRITEIDS_KEY, writeIds);
    // What Hive's planner copies from the table into a scan of it.
    job.set("transactional", "true");
    job.set("transactional_properties", "default");
    HiveConf.setBoolVar(job, HiveConf.ConfVars.HIVE_TRANSACTIONAL_TABLE_SCAN, true);
    AcidUtils.setAcidOperationalProperties(job, true,
        AcidUtils.AcidOperationalProperties.getDefault());
    ColumnProjectionUtils.setReadAllColumns(job);
    return job;
  }

  static void rows(JobConf base, Path partition, Map<String, String> values, PrintStream out)
      throws Exception {
    JobConf job = new JobConf(base);
    FileInputFormat.setInputPaths(job, partition);
    OrcInputFormat format = new OrcInputFormat();
    for (InputSplit split : format.getSplits(job, 1)) {
      AcidInputFormat.RowReader<OrcStruct> reader =
          format.getReader(split, new AcidInputFormat.Options(job).reporter(Reporter.NULL));
      try {
        StructObjectInspector oi = (StructObjectInspector) reader.getObjectInspector();
        OrcRawRecordMerger.ReaderKey key = reader.createKey();
        OrcStruct value = reader.createValue();
        while (reader.next(key, value)) {
          StringBuilder line = new StringBuilder("{\"row__id\":{\"writeid\":")
              .append(key.getWriteId()).append(",\"bucketid\":").append(key.getBucketProperty())
              .append(",\"rowid\":").append(key.getRowId()).append('}');
          for (StructField f : oi.getAllStructFieldRefs()) {
            Object data = oi.getStructFieldData(value, f);
            Object java = data == null ? null
                : ((PrimitiveObjectInspector) f.getFieldObjectInspector())
                    .getPrimitiveJavaObject(data);
            line.append(',').append(quote(f.getFieldName())).append(':').append(json(java));
          }
          for (Map.Entry<String, String> e : values.entrySet()) {
            line.append(',').append(quote(e.getKey())).append(':').append(quote(e.getValue()));
          }
          out.println(line.append('}'));
        }
      } finally {
        reader.close();
      }
    }
  }

  static void vectorizedRows(JobConf base, Path partition, Map<String, String> values,
      String columns, String types, PrintStream out) throws Exception {
    JobConf job = new JobConf(base);
    FileInputFormat.setInputPaths(job, partition);
    String[] names = columns.split(",");
    for (InputSplit split : new OrcInputFormat().getSplits(job, 1)) {
      for (Object[] row : Hive4VectorizedRows.read(split, job, columns, types)) {
        StringBuilder line = new StringBuilder("{");
        for (int c = 0; c < names.length; c++) {
          line.append(c == 0 ? "" : ",").append(quote(names[c])).append(':').append(json(row[c]));
        }
        for (Map.Entry<String, String> e : values.entrySet()) {
          line.append(',').append(quote(e.getKey())).append(':').append(quote(e.getValue()));
        }
        out.println(line.append('}'));
      }
    }
  }

  static void state(FileSystem fs, JobConf job, Path partition, Map<String, String> values,
      PrintStream out) throws Exception {
    ValidWriteIdList ids = new ValidReaderWriteIdList(job.get(ValidWriteIdList.VALID_WRITEIDS_KEY));
    AcidDirectory dir = AcidUtils.getAcidState(fs, partition, job, ids, null, false);
    StringBuilder line = new StringBuilder("{\"partition\":")
        .append(quote(String.join("/", partitionNames(values))))
        .append(",\"base\":").append(dir.getBaseDirectory() == null ? "null"
            : quote(dir.getBaseDirectory().getName()))
        .append(",\"deltas\":[");
    String sep = "";
    for (AcidUtils.ParsedDelta d : dir.getCurrentDirectories()) {
      line.append(sep).append("{\"path\":").append(quote(d.getPath().getName()))
          .append(",\"min\":").append(d.getMinWriteId()).append(",\"max\":")
          .append(d.getMaxWriteId()).append(",\"statement_id\":").append(d.getStatementId())
          .append(",\"delete_delta\":").append(d.isDeleteDelta()).append('}');
      sep = ",";
    }
    line.append("],\"obsolete\":").append(names(dir.getObsolete()))
        .append(",\"aborted\":").append(names(dir.getAbortedDirectories())).append('}');
    out.println(line);
  }

  static List<String> partitionNames(Map<String, String> values) {
    List<String> names = new ArrayList<>();
    values.forEach((k, v) -> names.add(k + "=" + v));
    return names;
  }

  static String names(List<Path> paths) {
    List<String> quoted = new ArrayList<>();
    for (Path p : paths) {
      quoted.add(quote(p.getName()));
    }
    quoted.sort(null);
    return "[" + String.join(",", quoted) + "]";
  }

  /** The partition directories `depth` k=v levels below `dir` (hidden ones left out, as Hive
   * does). */
  static void partitionsOf(FileSystem fs, Path dir, int depth, List<Path> into) throws Exception {
    if (depth == 0) {
      into.add(dir);
      return;
    }
    for (FileStatus s : fs.listStatus(dir)) {
      String name = s.getPath().getName();
      if (s.isDirectory() && name.contains("=") && !name.startsWith("_")
          && !name.startsWith(".")) {
        partitionsOf(fs, s.getPath(), depth - 1, into);
      }
    }
    into.sort(null);
  }

  static Map<String, String> partitionValues(Path table, Path partition) {
    Map<String, String> values = new LinkedHashMap<>();
    String rel = table.toUri().relativize(partition.toUri()).getPath();
    for (String part : rel.split("/")) {
      if (part.isEmpty()) {
        continue;
      }
      int eq = part.indexOf('=');
      values.put(FileUtils.unescapePathName(part.substring(0, eq)),
          FileUtils.unescapePathName(part.substring(eq + 1)));
    }
    return values;
  }

  static String json(Object v) {
    if (v == null) {
      return "null";
    }
    if (v instanceof Boolean || v instanceof Long || v instanceof Integer
        || v instanceof Short || v instanceof Byte) {
      return v.toString();
    }
    if (v instanceof Double || v instanceof Float) {
      double d = ((Number) v).doubleValue();
      return Double.isFinite(d) ? v.toString() : quote(v.toString());
    }
    // Strings, decimals, dates and timestamps: their Hive text form.
    return quote(v.toString());
  }

  static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      switch (c) {
        case '"': b.append("\\\""); break;
        case '\\': b.append("\\\\"); break;
        case '\n': b.append("\\n"); break;
        case '\r': b.append("\\r"); break;
        case '\t': b.append("\\t"); break;
        default:
          if (c < 0x20) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
      }
    }
    return b.append('"').toString();
  }
}
