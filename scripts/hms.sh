#!/usr/bin/env bash
# A throwaway Hive Metastore on 127.0.0.1, for the tests and for trying `--metastore thrift://`:
# embedded Derby initialised by Hive's own schema tool, transactions on (DbTxnManager), its own
# process group and its own directory.
#
#   scripts/hms.sh start [--version 4|3|2] [--dir DIR] [--port PORT]
#                        [--kerberos KDC_DIR [--qop auth|integrity|privacy]] [--tls]
#                        [--backing-db postgresql://USER[:PASSWORD]@HOST:PORT/DB]
#       prints thrift://127.0.0.1:PORT as its last line once the Thrift port answers
#       (with --kerberos: the URI with ?auth=kerberos&principal=...&qop=... that our client
#       takes; with --tls: TLS_CA=PATH on the line before, and the URI with
#       ?tls=true&tls_ca=PATH)
#   scripts/hms.sh stop [--dir DIR]
#       stops the server started in DIR (default: the last one started without --dir)
#
# Versions: 4 = Hive 4.0.1 (default), 3 = Hive 3.1.3, both from Maven Central through
# scripts/fetch-servers.sh; 2 = Hive 2.3 from pyspark's own jars (no schema scripts ship with
# them, so DataNucleus creates the tables): only good for checking that Hive 2 is refused.
# --kerberos KDC_DIR: SASL GSSAPI on the Thrift port with the service principal and keytab of
# the realm scripts/kdc.sh started in KDC_DIR (read from KDC_DIR/kdc.env); --qop is Hadoop's
# hadoop.rpc.protection (auth = authentication, the default; privacy = SASL auth-conf).
# --tls: TLS on the Thrift port (hive.metastore.use.SSL) with a certificate for IP 127.0.0.1
# and DNS localhost, signed by a throwaway CA made for this server (DIR/tls/ca.pem); the
# server's key is in a PKCS12 keystore whose random password is written only to DIR/tls and
# the server's own conf/ (mode 600), never printed. Combines with --kerberos (SASL inside TLS,
# as Hive layers them) and --backing-db.
# --backing-db: the metastore's database in PostgreSQL instead of its own Derby (Hive 4 and 3),
# so that several metastores started on the same URL serve one metastore, as HA metastores do
# (hive.metastore.uris listing them all). The first start initialises the schema with Hive's
# schema tool; a start that finds it there (schematool -info) leaves it (start them one after
# the other). The password: the URL's, else $PGPASSWORD; it is written only to the server's
# own conf/ (mode 600), never printed. The JDBC driver: scripts/fetch-servers.sh hms4pg/hms3pg.
# Environment: HMS_TXN_TIMEOUT_S (hive.txn.timeout, default 300), HMS_REAPER_INTERVAL_S (how
# often timed-out transactions are aborted, default Hive's: 60 s on 4, 180 s on 3),
# HMS_START_TIMEOUT_S (default 180), HMS_HEAP (default 384m), HMS_JAVA (default Java 17).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
last_file="${TMPDIR:-/tmp}/ingest-hms.last"

name=hms.sh
made_marker=.made-by-hms-sh
stop_grace_s=20
# shellcheck source=scripts/_server_lib.sh
source "$here/_server_lib.sh"

find_java() {
  if [ -n "${HMS_JAVA:-}" ]; then echo "$HMS_JAVA"; return; fi
  local j
  for j in /usr/lib/jvm/java-17-openjdk-amd64/bin/java /usr/lib/jvm/java-17-openjdk-*/bin/java; do
    [ -x "$j" ] && { echo "$j"; return; }
  done
  command -v java || die "no Java found (apt-get install openjdk-17-jdk-headless, or set HMS_JAVA)"
}

port_answers() {  # port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

site_xml() {  # dir port version
  local dir=$1 port=$2 version=$3
  local timeout="${HMS_TXN_TIMEOUT_S:-300}"
  # One file for every version: each reads the key names it knows and ignores the others.
  # Checked in MetastoreConf (hive-standalone-metastore-common 4.0.1, -metastore 3.1.3).
  cat <<EOF
<?xml version="1.0"?>
<configuration>
EOF
  if [ -n "${pg_jdbc:-}" ]; then
    cat <<EOF
  <property><name>javax.jdo.option.ConnectionURL</name><value>$pg_jdbc</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name>
    <value>org.postgresql.Driver</value></property>
  <property><name>javax.jdo.option.ConnectionUserName</name><value>$(xml_text "$pg_user")</value></property>
  <property><name>javax.jdo.option.ConnectionPassword</name><value>$(xml_text "$pg_password")</value></property>
EOF
  else
    cat <<EOF
  <property><name>javax.jdo.option.ConnectionURL</name>
    <value>jdbc:derby:;databaseName=$dir/metastore_db;create=true</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name>
    <value>org.apache.derby.jdbc.EmbeddedDriver</value></property>
EOF
  fi
  cat <<EOF
  <property><name>metastore.thrift.port</name><value>$port</value></property>
  <property><name>metastore.thrift.bind.host</name><value>127.0.0.1</value></property>
  <property><name>metastore.warehouse.dir</name><value>file://$dir/warehouse</value></property>
  <property><name>hive.metastore.warehouse.dir</name><value>file://$dir/warehouse</value></property>
  <property><name>metastore.warehouse.external.dir</name><value>file://$dir/external</value></property>
  <!-- Transactions: what Hive's docs list for turning them on. The metastore itself only needs
       the timeout; the other two are read by clients that ask for them. -->
  <property><name>hive.support.concurrency</name><value>true</value></property>
  <property><name>hive.txn.manager</name><value>org.apache.hadoop.hive.ql.lockmgr.DbTxnManager</value></property>
  <property><name>metastore.txn.timeout</name><value>${timeout}s</value></property>
  <property><name>hive.txn.timeout</name><value>${timeout}s</value></property>
  <!-- Hive 4 aborts timed-out transactions in AcidHouseKeeperService, a "remote only" task
       that runs only with housekeeping threads on; Hive 3.1 starts its remote-only tasks only
       when the compaction initiator is on (HiveMetaStore.startRemoteOnlyTasks), so 3 gets the
       initiator (it queues compactions that no worker runs: metastore.compactor.worker.threads
       stays 0, our compactor does the work). -->
  <property><name>metastore.housekeeping.threads.on</name><value>true</value></property>
  <property><name>metastore.compactor.initiator.on</name><value>$([ "$version" = 3 ] && echo true || echo false)</value></property>
  <property><name>metastore.compactor.cleaner.on</name><value>false</value></property>
  <property><name>metastore.compactor.worker.threads</name><value>0</value></property>
EOF
  if [ -n "${HMS_REAPER_INTERVAL_S:-}" ]; then
    cat <<EOF
  <property><name>metastore.acid.housekeeper.interval</name><value>${HMS_REAPER_INTERVAL_S}s</value></property>
  <property><name>metastore.timedout.txn.reaper.interval</name><value>${HMS_REAPER_INTERVAL_S}s</value></property>
  <property><name>metastore.timedout.txn.reaper.start</name><value>${HMS_REAPER_INTERVAL_S}s</value></property>
EOF
  fi
  cat <<EOF
  <!-- As the binary distribution's own conf/metastore-site.xml: the default partition
       expression proxy and always-on tasks live in hive-exec, which a standalone metastore
       does not have (3.1.3 fails to start without these). -->
  <property><name>metastore.expression.proxy</name>
    <value>org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy</value></property>
  <property><name>metastore.task.threads.always</name>
    <value>org.apache.hadoop.hive.metastore.events.EventCleanerTask</value></property>
EOF
  if [ "$version" = 2 ]; then
    cat <<EOF
  <!-- Hive 2.3 from pyspark: no schema scripts, so DataNucleus creates the tables. -->
  <property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
  <property><name>hive.metastore.schema.verification</name><value>false</value></property>
  <property><name>hive.async.log.enabled</name><value>false</value></property>
EOF
  fi
  if [ -n "${kdc_env:-}" ]; then
    # Hive 4 reads the metastore.* names, 3.1 both; hive.* as Hive's docs list them.
    cat <<EOF
  <property><name>metastore.sasl.enabled</name><value>true</value></property>
  <property><name>hive.metastore.sasl.enabled</name><value>true</value></property>
  <property><name>metastore.kerberos.keytab.file</name><value>$HIVE_KEYTAB</value></property>
  <property><name>hive.metastore.kerberos.keytab.file</name><value>$HIVE_KEYTAB</value></property>
  <property><name>metastore.kerberos.principal</name><value>$HIVE_PRINCIPAL</value></property>
  <property><name>hive.metastore.kerberos.principal</name><value>$HIVE_PRINCIPAL</value></property>
EOF
  fi
  if [ -n "${tls_dir:-}" ]; then
    # MetastoreConf's USE_SSL, SSL_KEYSTORE_PATH, _PASSWORD (4.0.1 and 3.1.3) and _TYPE (4.0.1;
    # 3.1.3 opens it as JKS, which Java 17 reads from a PKCS12 file too).
    cat <<EOF
  <property><name>metastore.use.SSL</name><value>true</value></property>
  <property><name>hive.metastore.use.SSL</name><value>true</value></property>
  <property><name>metastore.keystore.path</name><value>$tls_dir/keystore.p12</value></property>
  <property><name>hive.metastore.keystore.path</name><value>$tls_dir/keystore.p12</value></property>
  <property><name>metastore.keystore.password</name><value>$(cat "$tls_dir/keystore.pass")</value></property>
  <property><name>hive.metastore.keystore.password</name><value>$(cat "$tls_dir/keystore.pass")</value></property>
  <property><name>metastore.keystore.type</name><value>PKCS12</value></property>
EOF
  fi
  echo "</configuration>"
}

# A throwaway CA (ca.pem) and the server's certificate, for IP 127.0.0.1 and DNS localhost
# (the hosts a client may name: the server binds 127.0.0.1), with its key in a PKCS12
# keystore under a random password (keystore.pass); all in DIR, mode 700.
make_tls() {  # dir
  local d=$1
  command -v openssl >/dev/null || die "--tls needs openssl (apt-get install openssl)"
  (
    umask 077
    mkdir -p "$d"
    cd "$d"
    local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 7 \
      -subj "/CN=ingest hms.sh throwaway CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req "${ec[@]}" -keyout server.key -out server.csr -subj "/CN=localhost"
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
      "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
      "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 7 \
      -extfile server.ext -out server.pem
    openssl rand -hex 24 >keystore.pass
    openssl pkcs12 -export -in server.pem -inkey server.key -certfile ca.pem -name hms \
      -out keystore.p12 -passout file:keystore.pass
    rm -f ca.key server.csr  # nothing else is ever signed by this CA
  ) >"$d.log" 2>&1 || { cat "$d.log" >&2; die "making the TLS certificate in $d failed"; }
  chmod 644 "$d/ca.pem"
}

# Hadoop's side of Kerberos: UserGroupInformation logs in from the keytab only with
# kerberos authentication, and the metastore's SASL qop is hadoop.rpc.protection.
core_site_xml() {  # protection
  cat <<EOF
<?xml version="1.0"?>
<configuration>
  <property><name>hadoop.security.authentication</name><value>kerberos</value></property>
  <property><name>hadoop.security.authorization</name><value>false</value></property>
  <property><name>hadoop.rpc.protection</name><value>$1</value></property>
</configuration>
EOF
}

log4j2() {
  cat <<'EOF'
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %-5p [%t] %c{2}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
logger.txn.name = org.apache.hadoop.hive.metastore.txn
logger.txn.level = info
logger.hms.name = org.apache.hadoop.hive.metastore.HiveMetaStore
logger.hms.level = info
EOF
}

# The class path and the Hive home (schema scripts) of a version.
server_layout() {  # version -> sets cp, home, main, schematool, label
  case "$1" in
    4|3)
      local which dest
      which=$([ "$1" = 4 ] && echo hms4 || echo hms3)
      dest="$(bash "$here/fetch-servers.sh" "$which" | tail -1)"
      cp="$(cat "$dest/classpath")"
      home="$dest/home"
      label="Hive Metastore $(cat "$dest/version")"
      main=org.apache.hadoop.hive.metastore.HiveMetaStore
      if [ "$1" = 4 ]; then
        schematool=org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool
      else
        schematool=org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool
      fi
      ;;
    2)
      local jars
      jars="$("${PYTHON:-python3}" -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")')" \
        || die "--version 2 needs pyspark (its jars hold Hive 2.3): run with PYTHON=<the venv's python>"
      local hive
      hive="$(ls "$jars"/hive-metastore-2.*.jar 2>/dev/null | head -1)"
      [ -n "$hive" ] || die "no hive-metastore-2.*.jar in $jars"
      cp="$jars/*"
      home=""
      label="Hive Metastore $(basename "$hive" .jar | sed 's/^hive-metastore-//') (pyspark's jars)"
      main=org.apache.hadoop.hive.metastore.HiveMetaStore
      schematool=""
      ;;
    *) die "unknown --version '$1' (expected 4, 3 or 2)" ;;
  esac
}

# The schema tool runs once per version into a template database that each start copies
# (10 s saved per start on a 2-core machine).
schema_template() {  # java version -> path of an initialised metastore_db
  local java=$1 version=$2
  local template="${INGEST_SERVERS:-$HOME/.cache/ingest/servers}/derby-schema-$version"
  if [ -d "$template/metastore_db" ]; then echo "$template/metastore_db"; return; fi
  local work
  work="$(mktemp -d "${template}.XXXXXX")"
  mkdir -p "$work/conf"
  site_xml "$work" 0 "$version" >"$work/conf/metastore-site.xml"
  log4j2 >"$work/conf/log4j2.properties"
  if ! METASTORE_HOME="$home" "$java" -Xmx256m -Dderby.stream.error.file="$work/derby.log" \
      -Dlog4j.configurationFile="$work/conf/log4j2.properties" -cp "$work/conf:$cp" \
      "$schematool" -dbType derby -initSchema >"$work/schematool.log" 2>&1; then
    tail -30 "$work/schematool.log" >&2
    rm -rf "$work"
    die "schema tool failed for Hive $version (log above)"
  fi
  # Another start may have built it meanwhile: keep the first.
  mv -T "$work" "$template" 2>/dev/null || rm -rf "$work"
  echo "$template/metastore_db"
}

# The schema in the PostgreSQL database, initialised once: a later start finds it there.
pg_schema() {  # java version work_dir
  local java=$1 version=$2 work=$3
  local -a run=(env METASTORE_HOME="$home" "$java" -Xmx256m
                -Dlog4j.configurationFile="$work/conf/log4j2.properties" -cp "$work/conf:$cp"
                "$schematool" -dbType postgres)
  if "${run[@]}" -info >"$work/schematool-info.log" 2>&1; then
    echo "hms.sh: the schema is already in $pg_shown" >&2
    return
  fi
  if ! "${run[@]}" -initSchema >"$work/schematool.log" 2>&1; then
    tail -30 "$work/schematool.log" >&2
    die "schema tool failed for Hive $version on $pg_shown (log: $work/schematool.log)"
  fi
  echo "hms.sh: initialised the schema in $pg_shown" >&2
}

xml_text() {  # text -> the same with &, < and > escaped for an XML value
  printf '%s' "$1" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'
}

parse_backing_db() {  # url -> sets pg_jdbc, pg_user, pg_password, pg_shown
  local re='^postgresql://([^:@/]+)(:([^@]*))?@([^:/?]+)(:([0-9]+))?/([^/?]+)$'
  [[ "$1" =~ $re ]] || die "--backing-db expects postgresql://USER[:PASSWORD]@HOST[:PORT]/DB"
  pg_user="${BASH_REMATCH[1]}"
  pg_password="${BASH_REMATCH[3]:-${PGPASSWORD:-}}"
  local host="${BASH_REMATCH[4]}" port="${BASH_REMATCH[6]:-5432}" db="${BASH_REMATCH[7]}"
  pg_jdbc="jdbc:postgresql://$host:$port/$db"
  pg_shown="postgresql://$pg_user@$host:$port/$db"
}

start() {
  local version=4 dir="" port="" kdc_dir="" qop="" backing_db="" tls=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --version) version="$2"; shift 2 ;;
      --dir) dir="$2"; shift 2 ;;
      --port) port="$2"; shift 2 ;;
      --kerberos) kdc_dir="$2"; shift 2 ;;
      --qop) qop="$2"; shift 2 ;;
      --backing-db) backing_db="$2"; shift 2 ;;
      --tls) tls=1; shift ;;
      *) die "unknown option '$1' for start" ;;
    esac
  done
  local protection="" sasl_qop="" krb_opts=()
  kdc_env=""
  if [ -n "$kdc_dir" ]; then
    [ "$version" != 2 ] || die "--kerberos needs --version 4 or 3"
    kdc_env="$kdc_dir/kdc.env"
    [ -f "$kdc_env" ] || die "no $kdc_env: start the realm with scripts/kdc.sh start --dir $kdc_dir"
    local line
    while IFS= read -r line; do
      case "$line" in
        KRB5_CONFIG=*|REALM=*|HIVE_PRINCIPAL=*|HIVE_KEYTAB=*) declare -g "${line%%=*}=${line#*=}" ;;
      esac
    done <"$kdc_env"
    [ -n "${HIVE_PRINCIPAL:-}" ] && [ -f "${HIVE_KEYTAB:-}" ] || die "$kdc_env names no service keytab"
    case "${qop:-auth}" in
      auth|authentication) protection=authentication; sasl_qop=auth ;;
      integrity|auth-int) protection=integrity; sasl_qop=auth-int ;;
      privacy|auth-conf) protection=privacy; sasl_qop=auth-conf ;;
      *) die "unknown --qop '$qop' (expected auth, integrity or privacy)" ;;
    esac
    # Hadoop 3.1 (Hive 3.1's) reads the default realm through sun.security.krb5, which
    # Java 17 no longer opens to it.
    krb_opts=("-Djava.security.krb5.conf=$KRB5_CONFIG"
              "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED")
  elif [ -n "$qop" ]; then
    die "--qop needs --kerberos KDC_DIR"
  fi
  [ -z "$tls" ] || [ "$version" != 2 ] || die "--tls needs --version 4 or 3"
  pg_jdbc=""
  if [ -n "$backing_db" ]; then
    [ "$version" != 2 ] || die "--backing-db needs --version 4 or 3"
    parse_backing_db "$backing_db"
  fi
  local java
  java="$(find_java)"
  server_layout "$version"
  if [ -n "$pg_jdbc" ]; then
    local pg_dest
    pg_dest="$(bash "$here/fetch-servers.sh" "hms${version}pg" | tail -1)"
    cp="$cp:$(cat "$pg_dest/classpath")"
    home="$pg_dest/home"
  fi
  if [ -z "$dir" ]; then
    dir="$(mktemp -d "${TMPDIR:-/tmp}/ingest-hms.XXXXXX")"
    touch "$dir/$made_marker"
    echo "$dir" >"$last_file"
  fi
  mkdir -p "$dir/conf" "$dir/warehouse" "$dir/external"
  [ -f "$dir/pid" ] && alive "$(cat "$dir/pid")" && die "a metastore already runs in $dir (pid $(cat "$dir/pid"))"
  [ -n "$port" ] || port="$(free_port)"
  local started=$SECONDS
  tls_dir=""
  if [ -n "$tls" ]; then
    tls_dir="$dir/tls"
    [ -f "$tls_dir/keystore.p12" ] || make_tls "$tls_dir"
  fi
  (umask 077; site_xml "$dir" "$port" "$version" >"$dir/conf/metastore-site.xml")
  log4j2 >"$dir/conf/log4j2.properties"
  if [ -n "$pg_jdbc" ]; then
    pg_schema "$java" "$version" "$dir"
  elif [ -n "$schematool" ] && [ ! -d "$dir/metastore_db" ]; then
    cp -r "$(schema_template "$java" "$version")" "$dir/metastore_db"
  fi
  cp -p "$dir/conf/metastore-site.xml" "$dir/conf/hive-site.xml"  # Hive 2 reads hive-site.xml
  rm -f "$dir/conf/core-site.xml"
  [ -z "$kdc_env" ] || core_site_xml "$protection" >"$dir/conf/core-site.xml"
  # setsid: its own session and process group, so stop signals exactly this server.
  METASTORE_HOME="$home" setsid "$java" "-Xmx${HMS_HEAP:-384m}" -XX:+UseSerialGC \
    -Djava.net.preferIPv4Stack=true -Dderby.stream.error.file="$dir/derby.log" \
    -Dlog4j.configurationFile="$dir/conf/log4j2.properties" ${krb_opts[@]+"${krb_opts[@]}"} \
    -cp "$dir/conf:$cp" "$main" -p "$port" >"$dir/hms.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  echo "$port" >"$dir/port"
  local deadline=$((SECONDS + ${HMS_START_TIMEOUT_S:-180}))
  until port_answers "$port"; do
    if ! alive "$pid"; then
      tail -40 "$dir/hms.log" >&2
      die "$label exited before its port $port answered (log: $dir/hms.log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -40 "$dir/hms.log" >&2
      stop --dir "$dir" >/dev/null 2>&1 || true
      die "$label did not answer on port $port within ${HMS_START_TIMEOUT_S:-180} s (log: $dir/hms.log)"
    fi
    sleep 0.2
  done
  echo "hms.sh: $label up in $((SECONDS - started)) s; dir $dir, log $dir/hms.log, pid $pid" >&2
  [ -z "$pg_jdbc" ] || echo "hms.sh: backing database $pg_shown" >&2
  local query=""
  if [ -n "$kdc_env" ]; then
    echo "hms.sh: Kerberos as $HIVE_PRINCIPAL, hadoop.rpc.protection=$protection" >&2
    query="auth=kerberos&principal=hive/_HOST@$REALM&qop=$sasl_qop"
  fi
  if [ -n "$tls_dir" ]; then
    echo "hms.sh: TLS with a certificate for 127.0.0.1 and localhost, signed by $tls_dir/ca.pem" >&2
    echo "TLS_CA=$tls_dir/ca.pem"
    query="${query:+$query&}tls=true&tls_ca=$tls_dir/ca.pem"
  fi
  echo "thrift://127.0.0.1:$port${query:+?$query}"
}


case "${1:-}" in
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: scripts/hms.sh start [--version 4|3|2] [--dir DIR] [--port PORT] [--kerberos KDC_DIR [--qop auth|integrity|privacy]] [--tls] [--backing-db postgresql://USER@HOST:PORT/DB] | stop [--dir DIR]" >&2; exit 2 ;;
esac
