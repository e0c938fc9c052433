// Entry point: `java -cp <jars>:<classes> IngestTools <command>` with a JSON request on stdin.
// Commands: orc_read, orc_write_timestamps, hive_acid_state, hive_merged_read, hive_write_reference_table.

public final class IngestTools {
  private IngestTools() {}

  public static void main(String[] args) {
    String command = args.length > 0 ? args[0] : "";
    switch (command) {
      case "orc_read":
        ToolSupport.main(command, OrcReadTool::run);
        break;
      case "hive_acid_state":
        ToolSupport.main(command, HiveAcidStateTool::run);
        break;
      case "hive_merged_read":
        ToolSupport.main(command, HiveMergerReadTool::run);
        break;
      case "hive_write_reference_table":
        ToolSupport.main(command, HiveWriteReferenceTool::run);
        break;
      case "orc_write_timestamps":
        ToolSupport.main(command, OrcTimestampWriteTool::run);
        break;
      case "ping":
        ToolSupport.main(command, req -> req);
        break;
      default:
        System.err.println("usage: IngestTools orc_read|orc_write_timestamps|hive_acid_state|hive_merged_read|hive_write_reference_table|ping < request.json");
        Runtime.getRuntime().halt(2);
    }
  }
}
