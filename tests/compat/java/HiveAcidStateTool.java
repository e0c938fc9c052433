// hive_acid_state: Hive 2.3's own directory selection, AcidUtils.getAcidState(Path, Configuration,
// ValidTxnList) from hive-exec-2.3.10-core.jar.
//
// Request: {"queries": [{"partition_dir": str, "valid_txns": str}]}
// Response: {"results": [state | {"partition_dir", "valid_txns", "error", "error_class",
//            "traceback"}], "valid_txn_list_class_source": jar the ValidReadTxnList came from}
// valid_txns is the Hive 2.x ValidReadTxnList string (hive-common 2.3.10):
//   "<highWatermark>:<minOpenTxn>[:<exception txn id>]*"
// exceptions = open and aborted txns together (2.3 does not tell them apart), sorted ascending,
// each <= highWatermark; minOpenTxn = Long.MAX_VALUE (9223372036854775807) when none is open.
// "" means "every txn is valid". In Hive 2.x, write id == txn id.
// NOTE: hive-storage-api-2.8.1 also ships a (newer, incompatible) ValidReadTxnList/ValidTxnList;
// javatools.py puts hive-common-2.3.10.jar first on the classpath so Hive 2.3's copy is used.

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hive.common.ValidReadTxnList;
import org.apache.hadoop.hive.common.ValidTxnList;
import org.apache.hadoop.hive.ql.io.AcidUtils;
import org.apache.hadoop.hive.shims.HadoopShims;

final class HiveAcidStateTool {
  private HiveAcidStateTool() {}

  static JsonElement run(JsonObject request) throws Exception {
    JsonArray out = new JsonArray();
    for (JsonElement e : request.getAsJsonArray("queries")) {
      JsonObject q = e.getAsJsonObject();
      String dir = q.get("partition_dir").getAsString();
      String valid = ToolSupport.str(q, "valid_txns", "");
      try {
        out.add(one(dir, valid));
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
    result.addProperty("valid_txn_list_class_source",
        ValidReadTxnList.class.getProtectionDomain().getCodeSource().getLocation().toString());
    return result;
  }

  static JsonObject one(String dir, String validTxns) throws Exception {
    Configuration conf = ToolSupport.conf();
    ValidTxnList txns = new ValidReadTxnList(validTxns);
    conf.set(ValidTxnList.VALID_TXNS_KEY, txns.writeToString());
    AcidUtils.Directory d = AcidUtils.getAcidState(ToolSupport.path(dir), conf, txns);
    JsonObject o = new JsonObject();
    o.addProperty("partition_dir", dir);
    o.addProperty("valid_txns", validTxns);
    o.addProperty("valid_txns_normalized", txns.writeToString());
    Path base = d.getBaseDirectory();
    o.addProperty("base", base == null ? null : ToolSupport.local(base));
    JsonArray deltas = new JsonArray();
    JsonArray details = new JsonArray();
    for (AcidUtils.ParsedDelta pd : d.getCurrentDirectories()) {
      deltas.add(ToolSupport.local(pd.getPath()));
      JsonObject x = new JsonObject();
      x.addProperty("path", ToolSupport.local(pd.getPath()));
      x.addProperty("min", pd.getMinTransaction());
      x.addProperty("max", pd.getMaxTransaction());
      x.addProperty("statement_id", pd.getStatementId());
      x.addProperty("delete_delta", pd.isDeleteDelta());
      details.add(x);
    }
    o.add("deltas", deltas);
    o.add("delta_details", details);
    JsonArray obsolete = new JsonArray();
    for (FileStatus fs : d.getObsolete()) {
      obsolete.add(ToolSupport.local(fs.getPath()));
    }
    o.add("obsolete", obsolete);
    JsonArray originals = new JsonArray();
    for (HadoopShims.HdfsFileStatusWithId f : d.getOriginalFiles()) {
      originals.add(ToolSupport.local(f.getFileStatus().getPath()));
    }
    o.add("original_files", originals);
    return o;
  }
}
