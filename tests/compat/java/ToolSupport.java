// Shared plumbing for the ingest compat tools (tests/compat/javatools.py runs them).
//
// Protocol: `java ... IngestTools <command>` reads one JSON request from stdin and prints one
// JSON document on stdout. Everything else (log4j, Hadoop warnings, library System.out noise)
// goes to stderr: main() saves the real stdout and points System.out at System.err before any
// library code runs. On failure: stack trace on stderr and exit code 1.

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

final class ToolSupport {
  private ToolSupport() {}

  static final Gson GSON = new GsonBuilder()
      .serializeNulls()
      .serializeSpecialFloatingPointValues()
      .disableHtmlEscaping()
      .create();

  /** Local Hadoop conf: raw local FS (no .crc files, hflush reaches the OS), no FS cache. */
  static Configuration conf() {
    Configuration conf = new Configuration();
    conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem");
    conf.setBoolean("fs.file.impl.disable.cache", true);
    return conf;
  }

  static FileSystem localFs(Configuration conf) throws IOException {
    return FileSystem.get(new Path("file:///").toUri(), conf);
  }

  /** Absolute local path string -> file: URI Path. */
  static Path path(String local) {
    return new Path(new File(local).getAbsoluteFile().toURI());
  }

  /** Hadoop Path -> local path string (no scheme). */
  static String local(Path p) {
    return p.toUri().getPath();
  }

  static JsonObject readRequest(InputStream in) throws IOException {
    String text = new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
    if (text.isEmpty()) {
      return new JsonObject();
    }
    JsonElement e = JsonParser.parseString(text);
    return e.getAsJsonObject();
  }

  static String str(JsonObject o, String key, String dflt) {
    return o.has(key) && !o.get(key).isJsonNull() ? o.get(key).getAsString() : dflt;
  }

  static boolean bool(JsonObject o, String key, boolean dflt) {
    return o.has(key) && !o.get(key).isJsonNull() ? o.get(key).getAsBoolean() : dflt;
  }

  static Long lng(JsonObject o, String key) {
    return o.has(key) && !o.get(key).isJsonNull() ? o.get(key).getAsLong() : null;
  }

  static String stackTrace(Throwable t) {
    java.io.StringWriter sw = new java.io.StringWriter();
    t.printStackTrace(new java.io.PrintWriter(sw));
    return sw.toString();
  }

  interface Command {
    JsonElement run(JsonObject request) throws Exception;
  }

  static void main(String name, Command command) {
    PrintStream realOut = System.out;
    System.setOut(System.err);
    int rc = 0;
    try {
      JsonObject request = readRequest(System.in);
      JsonElement result = command.run(request);
      byte[] bytes = GSON.toJson(result).getBytes(StandardCharsets.UTF_8);
      realOut.write(bytes);
      realOut.write('\n');
      realOut.flush();
    } catch (Throwable t) {
      System.err.println("ingest-javatools " + name + " failed:");
      t.printStackTrace(System.err);
      rc = 1;
    }
    System.err.flush();
    // halt: do not run Hadoop's FileSystem shutdown hooks, which would close streams that a
    // scenario deliberately leaves open (simulated live streaming writer).
    Runtime.getRuntime().halt(rc);
  }
}
