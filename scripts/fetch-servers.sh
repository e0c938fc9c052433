#!/usr/bin/env bash
# Fetch the real servers the Hive Metastore tests run against from Maven Central (through
# tests/servers/pom.xml, cached in ~/.m2) and lay each out once under $INGEST_SERVERS
# (default ~/.cache/ingest/servers). Idempotent: a server already laid out is left alone.
#
#   scripts/fetch-servers.sh [hms4] [hms3] [hms4pg] [hms3pg] [trino] [hive4reader]
#                            [sparkkafka] [apicurio] [kafka]                   (none: all)
#
# hms4pg, hms3pg: what a metastore on a PostgreSQL backing database needs beside hms4, hms3
# (scripts/hms.sh start --backing-db): PostgreSQL's JDBC driver, as a class path file, and
# the schema tool's postgres scripts.
# hive4reader is not a server: hive-exec 4.0.1 and the Hadoop jars that Hive 4's own ACID
# reader needs (tests/hms/java/Hive4AcidRead.java), as a class path file; also the jars of
# Spark SQL's Hive 4.0.1 metastore client.
# sparkkafka is not a server either: Spark's own JVM Kafka source (spark-sql-kafka-0-10 and
# the jars it needs beside pyspark's), as a class path file, for `--kafka-source jvm` in
# tests/spark/test_kafka_source_jvm.py and `python -m ingest.bench stream --kafka-source jvm`.
# apicurio is Apicurio Registry, the schema registry of the Avro value tests
# (tests/schema_registry.py starts it): its Quarkus application, quarkus-run.jar and lib/.
# kafka is Apache Kafka, a real broker (KRaft, one node) for the tests (scripts/kafka.sh,
# tests/kafka_server.py): its jars and a log4j2 binding, as a class path file.
# Prints the directory of each. Needs mvn and tar; nothing else.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pom="$here/../tests/servers/pom.xml"
root="${INGEST_SERVERS:-$HOME/.cache/ingest/servers}"

# The schema tool's scripts for one database (derby, postgres) from the metastore's binary
# distribution, under DEST/home.
schema_scripts_into() {  # profile dest db
  local profile=$1 dest=$2 db=$3
  mvn_quiet -P "$profile" dependency:copy-dependencies -DincludeTypes=tar.gz \
    -DoutputDirectory="$dest"
  local tarball
  tarball="$(find "$dest" -maxdepth 1 -name '*-bin.tar.gz' | head -1)"
  [ -n "$tarball" ] || { echo "fetch-servers: no -bin.tar.gz copied into $dest" >&2; return 1; }
  mkdir -p "$dest/home"
  tar xzf "$tarball" -C "$dest/home" --strip-components=1 --wildcards "*/scripts/metastore/upgrade/$db/*"
  rm -f "$tarball"
  [ -d "$dest/home/scripts/metastore/upgrade/$db" ] || {
    echo "fetch-servers: no $db schema scripts in $tarball" >&2; return 1; }
}

# Versions, as the pom names them (the pom is the one place that chooses them).
HMS4_VERSION=4.0.1
HMS3_VERSION=3.1.3
TRINO_VERSION=476
SPARK_KAFKA_VERSION=4.2.0
APICURIO_VERSION=3.3.3
KAFKA_VERSION=4.1.1
PGJDBC_VERSION=42.7.4

mvn_quiet() {
  # -q hides Maven's progress; on failure its log is printed, so the reason is never lost.
  local log
  log="$(mktemp)"
  if ! mvn -B -q -f "$pom" "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "fetch-servers: mvn $* failed (see above)" >&2
    return 1
  fi
  rm -f "$log"
}

lay_out() {  # dest version step...: runs the step into an empty dest once, then marks it done
  local dest=$1 version=$2
  shift 2
  if [ -f "$dest/.complete" ]; then echo "$dest"; return; fi
  rm -rf "$dest"
  mkdir -p "$dest"
  "$@" "$dest"
  echo "$version" >"$dest/version"
  touch "$dest/.complete"
  echo "$dest"
}

hms_into() {  # profile dest
  local profile=$1 dest=$2
  # The class path points into ~/.m2: the jars are not copied.
  mvn_quiet -P "$profile" dependency:build-classpath -DexcludeTypes=tar.gz \
    -Dmdep.outputFile="$dest/classpath"
  # The binary distribution, for the schema tool's scripts (its lib/ lacks Hadoop, so the
  # class path above is the one the server runs with).
  schema_scripts_into "$profile" "$dest" derby
}

# A metastore on PostgreSQL: the JDBC driver (a class path file) and the schema tool's
# postgres scripts from the same binary distribution as hms_into's derby ones.
hms_pg_into() {  # profile dest
  local profile=$1 dest=$2
  mvn_quiet -P pgjdbc dependency:build-classpath -Dmdep.outputFile="$dest/classpath"
  grep -q "postgresql-$PGJDBC_VERSION.jar" "$dest/classpath" || {
    echo "fetch-servers: no postgresql-$PGJDBC_VERSION.jar in $dest/classpath" >&2; return 1; }
  schema_scripts_into "$profile" "$dest" postgres
}

hive4reader_into() {  # dest
  mvn_quiet -P hive4reader dependency:build-classpath -Dmdep.outputFile="$1/classpath"
}

sparkkafka_into() {  # dest
  mvn_quiet -P sparkkafka dependency:build-classpath -Dmdep.outputFile="$1/classpath"
  grep -q "spark-sql-kafka-0-10_2.13-$SPARK_KAFKA_VERSION.jar" "$1/classpath" || {
    echo "fetch-servers: no spark-sql-kafka jar in $1/classpath" >&2; return 1; }
}

apicurio_into() {  # dest
  local dest=$1
  mvn_quiet -P apicurio dependency:copy-dependencies -DincludeTypes=tar.gz -DoutputDirectory="$dest"
  local tarball="$dest/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz"
  [ -f "$tarball" ] || { echo "fetch-servers: $tarball missing after mvn" >&2; return 1; }
  tar xzf "$tarball" -C "$dest"
  rm -f "$tarball"
  [ -f "$dest/quarkus-run.jar" ] || { echo "fetch-servers: no quarkus-run.jar in $dest" >&2; return 1; }
}

kafka_into() {  # dest
  mvn_quiet -P kafka dependency:build-classpath -Dmdep.outputFile="$1/classpath"
  local jar
  for jar in "kafka_2.13-$KAFKA_VERSION.jar" "kafka-clients-$KAFKA_VERSION.jar" log4j-slf4j2-impl-; do
    grep -q "$jar" "$1/classpath" || {
      echo "fetch-servers: no $jar in $1/classpath" >&2; return 1; }
  done
}

trino_into() {  # dest
  local dest=$1
  mvn_quiet -P trino dependency:resolve
  local tarball="$HOME/.m2/repository/io/trino/trino-server/$TRINO_VERSION/trino-server-$TRINO_VERSION.tar.gz"
  [ -f "$tarball" ] || { echo "fetch-servers: $tarball missing after mvn" >&2; return 1; }
  # The tarball hard-links shared jars across plugins, so unpack it whole, then keep only the
  # hive plugin: every plugin left in plugin/ is loaded at start (55 of them: +20 s, +500 MB).
  mkdir "$dest/unpack"
  tar xzf "$tarball" -C "$dest/unpack"
  local server="$dest/unpack/trino-server-$TRINO_VERSION"
  find "$server/plugin" -mindepth 1 -maxdepth 1 ! -name hive -exec rm -rf {} +
  mv "$server"/* "$dest"/
  rm -rf "$dest/unpack"
}

command -v mvn >/dev/null || { echo "fetch-servers: mvn not found (apt-get install maven)" >&2; exit 1; }
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(hms4 hms3 hms4pg hms3pg trino hive4reader sparkkafka apicurio kafka)
for target in "${targets[@]}"; do
  case "$target" in
    hms4) lay_out "$root/hms-$HMS4_VERSION" "$HMS4_VERSION" hms_into hms4 ;;
    hms3) lay_out "$root/hms-$HMS3_VERSION" "$HMS3_VERSION" hms_into hms3 ;;
    hms4pg) lay_out "$root/hms-pg-$HMS4_VERSION" "$HMS4_VERSION" hms_pg_into hms4 ;;
    hms3pg) lay_out "$root/hms-pg-$HMS3_VERSION" "$HMS3_VERSION" hms_pg_into hms3 ;;
    trino) lay_out "$root/trino-$TRINO_VERSION" "$TRINO_VERSION" trino_into ;;
    hive4reader) lay_out "$root/hive4reader-$HMS4_VERSION" "$HMS4_VERSION" hive4reader_into ;;
    sparkkafka) lay_out "$root/spark-kafka-$SPARK_KAFKA_VERSION" "$SPARK_KAFKA_VERSION" sparkkafka_into ;;
    apicurio) lay_out "$root/apicurio-$APICURIO_VERSION" "$APICURIO_VERSION" apicurio_into ;;
    kafka) lay_out "$root/kafka-$KAFKA_VERSION" "$KAFKA_VERSION" kafka_into ;;
    *) echo "fetch-servers: unknown server '$target' (expected hms4, hms3, hms4pg, hms3pg, trino, hive4reader, sparkkafka, apicurio or kafka)" >&2
       exit 2 ;;
  esac
done
