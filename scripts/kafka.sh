#!/usr/bin/env bash
# A throwaway Apache Kafka 4.1 broker on 127.0.0.1, for the tests: KRaft, one node that is both
# broker and controller, its own process group and its own directory; TLS, mutual TLS, SASL
# (PLAIN and SCRAM-SHA-512), Kerberos (GSSAPI, with --kerberos) and ACLs, with a throwaway CA
# and random passwords per directory.
#
#   scripts/kafka.sh start [--dir DIR] [--kerberos KDC_DIR]
#       prints NAME=VALUE lines once the broker answers a metadata request, BOOTSTRAP last:
#         PLAINTEXT= SSL= MTLS= SASL_SSL= SASL_PLAINTEXT=   host:port of each listener
#         SASL_GSSAPI= KAFKA_PRINCIPAL=                     with --kerberos: SASL_PLAINTEXT
#                                                           with GSSAPI (Kerberos), as
#                                                           localhost:port; the broker's
#                                                           principal kafka/localhost@REALM
#         CA= CLIENT_CERT= CLIENT_KEY=                      PEM files (the client's: mutual TLS)
#         TRUSTSTORE= TRUSTSTORE_PASSWORD=                  the CA as a PKCS12 truststore (Java)
#         SASL_USER= SASL_PASSWORD=                         alice: PLAIN and SCRAM-SHA-512
#         ADMIN_USER= ADMIN_PASSWORD=                       admin, a super user
#         DIR= BOOTSTRAP=                                   the directory; the PLAINTEXT listener
#       A DIR that holds a stopped (or killed) broker is started again on the same ports, with
#       the same data, certificates and passwords, and the same lines are printed.
#       --kerberos KDC_DIR: a realm of scripts/kdc.sh (its KDC_DIR/kdc.env); the broker logs in
#       as kdc.env's KAFKA_PRINCIPAL (kafka/localhost@REALM; keytab copied to DIR/kafka.keytab),
#       sasl.kerberos.service.name=kafka, and its JVM reads
#       KDC_DIR/krb5.conf. Given when the directory is made; a restart keeps it.
#   scripts/kafka.sh stop [--dir DIR]
#       stops the broker of DIR (default: the last one started without --dir); removes the
#       directory only when start made it (no --dir).
#
# Listeners: PLAINTEXT (also inter-broker), SSL (server certificate only), MTLS (SSL with
# ssl.client.auth=required; principal User:CN=ingest-test-client), SASL_SSL (SCRAM-SHA-512),
# SASL_PLAINTEXT (PLAIN), SASL_GSSAPI (SASL_PLAINTEXT with GSSAPI, --kerberos; principal
# User:<the client principal's first component>), CONTROLLER (KRaft). Authorizer: StandardAuthorizer, everyone allowed
# where no ACL matches, super users User:ANONYMOUS (PLAINTEXT, SSL, the controller) and
# User:admin, so a test can DENY User:alice on a topic.
# Kafka 4.1.1 from Maven Central through scripts/fetch-servers.sh kafka (its class path).
# Files in DIR: server.properties, server.log (the broker's log4j2 log), kafka.out (the JVM's
# stdout/stderr), format.log, data/, the PEM files, endpoints (the lines printed), pid.
# Environment: KAFKA_START_TIMEOUT_S (default 180), KAFKA_HEAP (default 512m), KAFKA_JAVA
# (default Java 17, else `java` on PATH), PYTHON (a python3 that can import confluent_kafka
# makes the wait a real metadata request; without it: the port answers and the log says the
# server started).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
last_file="${TMPDIR:-/tmp}/ingest-kafka.last"

name=kafka.sh
made_marker=.made-by-kafka-sh
stop_grace_s=30
# shellcheck source=scripts/_server_lib.sh
source "$here/_server_lib.sh"

running() {  # pid: lives, and is no zombie (killed, not reaped yet)
  local state
  state="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

find_java() {
  if [ -n "${KAFKA_JAVA:-}" ]; then echo "$KAFKA_JAVA"; return; fi
  local j
  for j in /usr/lib/jvm/java-17-openjdk-amd64/bin/java /usr/lib/jvm/java-17-openjdk-*/bin/java; do
    [ -x "$j" ] && { echo "$j"; return; }
  done
  command -v java || die "no Java found (apt-get install openjdk-17-jdk-headless, or set KAFKA_JAVA)"
}

log4j2() {  # log file
  cat <<EOF
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = $1
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
# As in Kafka's own config: the per-request loggers are noise at info; authorizer denials show.
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.network.name = kafka.network.RequestChannel\$
logger.network.level = warn
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = info
EOF
}

# A throwaway CA, a server certificate for 127.0.0.1/localhost and a client certificate, as
# PEM; the server's key and chain in one PEM file (Kafka's PEM key store), the CA also as a
# PKCS12 truststore for Java clients.
make_certs() {  # dir java
  local dir=$1 java=$2 tmp
  tmp="$(mktemp -d "$dir/.certs.XXXXXX")"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$dir/ca.key" -subj "/CN=ingest-test-ca" \
    -out "$tmp/ca.csr" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:TRUE" "keyUsage=critical,keyCertSign,cRLSign" \
    "subjectKeyIdentifier=hash" >"$tmp/ca.ext"
  openssl x509 -req -in "$tmp/ca.csr" -signkey "$dir/ca.key" -days 3650 -extfile "$tmp/ca.ext" \
    -out "$dir/ca.pem" 2>/dev/null
  local who
  for who in server client; do
    openssl req -new -newkey rsa:2048 -nodes -keyout "$tmp/$who.key" \
      -subj "/CN=ingest-test-$who" -out "$tmp/$who.csr" 2>/dev/null
    {
      echo "basicConstraints=CA:FALSE"
      echo "keyUsage=critical,digitalSignature,keyEncipherment"
      echo "authorityKeyIdentifier=keyid"
      if [ "$who" = server ]; then
        echo "extendedKeyUsage=serverAuth"
        echo "subjectAltName=IP:127.0.0.1,DNS:localhost"
      else
        echo "extendedKeyUsage=clientAuth"
      fi
    } >"$tmp/$who.ext"
    openssl x509 -req -in "$tmp/$who.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
      -CAcreateserial -CAserial "$tmp/ca.srl" -days 3650 -extfile "$tmp/$who.ext" \
      -out "$dir/$who.pem" 2>/dev/null
  done
  # Kafka's PEM key store: a PKCS#8 key (what openssl req writes; unencrypted, so no
  # ssl.key.password) and the certificate chain, in one file.
  cat "$tmp/server.key" "$dir/server.pem" "$dir/ca.pem" >"$dir/server-keystore.pem"
  mv "$tmp/client.key" "$dir/client.key"
  "$(dirname "$(readlink -f "$java")")/keytool" -importcert -noprompt -alias ingest-test-ca \
    -file "$dir/ca.pem" -storetype PKCS12 -keystore "$dir/truststore.p12" \
    -storepass "$(cat "$dir/.truststore-password")" >/dev/null 2>&1 \
    || die "keytool could not write $dir/truststore.p12"
  rm -rf "$tmp"
  chmod 600 "$dir"/*.key "$dir/server-keystore.pem"
}

server_properties() {  # dir plaintext ssl mtls sasl_ssl sasl_plaintext controller alice admin
  local dir=$1 pt=$2 ssl=$3 mtls=$4 sasl_ssl=$5 sasl_pt=$6 ctl=$7 alice=$8 admin=$9
  cat <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$ctl
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$pt,SSL://127.0.0.1:$ssl,MTLS://127.0.0.1:$mtls,SASL_SSL://127.0.0.1:$sasl_ssl,SASL_PLAINTEXT://127.0.0.1:$sasl_pt,CONTROLLER://127.0.0.1:$ctl
advertised.listeners=PLAINTEXT://127.0.0.1:$pt,SSL://127.0.0.1:$ssl,MTLS://127.0.0.1:$mtls,SASL_SSL://127.0.0.1:$sasl_ssl,SASL_PLAINTEXT://127.0.0.1:$sasl_pt
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data

# TLS: one server certificate for every TLS listener; only MTLS asks for the client's.
ssl.keystore.type=PEM
ssl.keystore.location=$dir/server-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$dir/ca.pem
ssl.client.auth=none
listener.name.mtls.ssl.client.auth=required

# SASL: PLAIN users in the listener's JAAS config; SCRAM credentials are in the metadata log
# (StorageTool format --add-scram), the login module only turns SCRAM on.
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="$alice" user_admin="$admin";
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;

# ACLs: allowed where no ACL matches, so a test can DENY User:alice on a topic. PLAINTEXT, SSL
# and the controller listener are User:ANONYMOUS (inter-broker and controller traffic too).
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=true
super.users=User:ANONYMOUS;User:admin

# One node: internal topics of replication factor 1, and few partitions (50 each by default:
# seconds of the first consumer group's or transaction's start on a busy machine).
offsets.topic.replication.factor=1
offsets.topic.num.partitions=5
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=5
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
default.replication.factor=1
num.partitions=1
# Off: tests create their topics (and wait for their leaders) explicitly; a topic name that is
# wrong or missing shows as an error instead of an empty topic created behind the test's back,
# as on the production clusters the stream reads.
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
# Retention, deletion, compaction and timed-out transactions within seconds, not minutes.
log.initial.task.delay.ms=0
log.retention.check.interval.ms=1000
log.segment.delete.delay.ms=100
log.cleaner.backoff.ms=500
file.delete.delay.ms=100
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
transaction.remove.expired.transaction.cleanup.interval.ms=5000
# Few threads: several brokers may run beside Spark on two cores.
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
EOF
}

# The broker's Kerberos identity: kdc.env's KAFKA_PRINCIPAL (kafka/localhost@REALM) and its
# keytab, copied to DIR/kafka.keytab so that the broker's directory holds what it runs with.
kerberos_identity() {  # kdc_dir dir -> prints the principal
  local kdc=$1 dir=$2 principal keytab
  principal="$(sed -n 's/^KAFKA_PRINCIPAL=//p' "$kdc/kdc.env")"
  keytab="$(sed -n 's/^KAFKA_KEYTAB=//p' "$kdc/kdc.env")"
  [ -n "$principal" ] && [ -s "$keytab" ] || die "$kdc/kdc.env names no KAFKA_PRINCIPAL and KAFKA_KEYTAB"
  install -m 600 "$keytab" "$dir/kafka.keytab"
  echo "$principal"
}

# The GSSAPI listener's settings, added to server.properties with --kerberos: the broker's
# keytab and principal in the listener's JAAS config.
kerberos_properties() {  # principal keytab
  local principal=$1 keytab=$2
  printf '%s\n' "" "# Kerberos (--kerberos): SASL_PLAINTEXT with GSSAPI on its own listener." \
    "listener.name.sasl_gssapi.sasl.enabled.mechanisms=GSSAPI" \
    "listener.name.sasl_gssapi.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab=\"$keytab\" principal=\"$principal\";" \
    "sasl.kerberos.service.name=kafka"
}

# Adds the GSSAPI listener (port) to server.properties' listener lines.
add_gssapi_listener() {  # properties port
  sed -i -e "s|^listeners=\(.*\)|listeners=\1,SASL_GSSAPI://127.0.0.1:$2|" \
    -e "s|^advertised.listeners=\(.*\)|advertised.listeners=\1,SASL_GSSAPI://localhost:$2|" \
    -e "s|^listener.security.protocol.map=\(.*\)|listener.security.protocol.map=\1,SASL_GSSAPI:SASL_PLAINTEXT|" "$1"
}

# Waits until the broker answers: a metadata request through confluent_kafka when $PYTHON can
# import it, else its PLAINTEXT port accepts and this start's part of the log says it started.
wait_ready() {  # dir port pid log_offset
  local dir=$1 port=$2 pid=$3 offset=$4
  "${PYTHON:-python3}" - "$port" "$pid" "$dir/server.log" "$offset" \
    "${KAFKA_START_TIMEOUT_S:-180}" <<'EOF'
import os, socket, sys, time
port, pid, log, offset, timeout = sys.argv[1:]
deadline = time.monotonic() + float(timeout)
try:
    from confluent_kafka.admin import AdminClient
except ImportError:
    AdminClient = None

def alive():  # a zombie (exited, not reaped yet) is not
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

def answers():
    if AdminClient is not None:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0,
                             "logger": lambda *a: None})
        try:
            return bool(admin.list_topics(timeout=2).brokers)
        except Exception:
            return False
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()
    except OSError:
        return False
    try:
        with open(log, "rb") as f:
            f.seek(int(offset))
            return b"Kafka Server started" in f.read()
    except OSError:
        return False

while True:
    if answers():
        sys.exit(0)
    if not alive():
        sys.exit(3)
    if time.monotonic() > deadline:
        sys.exit(4)
    time.sleep(0.25)
EOF
}

start() {
  local dir="" kdc_dir=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      --kerberos) kdc_dir="$2"; shift 2 ;;
      *) die "unknown option '$1' for start" ;;
    esac
  done
  command -v openssl >/dev/null || die "openssl not found"
  if [ -n "$kdc_dir" ]; then
    kdc_dir="$(cd "$kdc_dir" 2>/dev/null && pwd)" || die "--kerberos: no directory $kdc_dir"
    [ -f "$kdc_dir/kdc.env" ] \
      || die "--kerberos: $kdc_dir/kdc.env not found (scripts/kdc.sh start --dir $kdc_dir)"
  fi
  local java home cp
  java="$(find_java)"
  home="$(bash "$here/fetch-servers.sh" kafka | tail -1)"
  cp="$(cat "$home/classpath")"
  if [ -z "$dir" ]; then
    dir="$(mktemp -d "${TMPDIR:-/tmp}/ingest-kafka.XXXXXX")"
    touch "$dir/$made_marker"
    echo "$dir" >"$last_file"
  fi
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  [ -f "$dir/pid" ] && running "$(cat "$dir/pid")" \
    && die "a broker already runs in $dir (pid $(cat "$dir/pid"))"
  local started=$SECONDS
  log4j2 "$dir/server.log" >"$dir/log4j2.properties"
  if [ -f "$dir/endpoints" ] && [ -n "$kdc_dir" ] && [ ! -f "$dir/kerberos" ]; then
    die "$dir holds a broker made without --kerberos; use a new --dir"
  fi
  if [ ! -f "$dir/endpoints" ]; then
    # A new broker: ports, certificates, passwords, a formatted log directory.
    local pt ssl mtls sasl_ssl sasl_pt ctl gssapi_port alice admin
    read -r pt ssl mtls sasl_ssl sasl_pt ctl gssapi_port < <(free_ports 7)
    alice="$(openssl rand -hex 16)"; admin="$(openssl rand -hex 16)"
    ( umask 077
      openssl rand -hex 16 >"$dir/.truststore-password" )
    make_certs "$dir" "$java"
    server_properties "$dir" "$pt" "$ssl" "$mtls" "$sasl_ssl" "$sasl_pt" "$ctl" "$alice" "$admin" \
      >"$dir/server.properties"
    local gssapi=""
    if [ -n "$kdc_dir" ]; then
      gssapi="$gssapi_port"
      add_gssapi_listener "$dir/server.properties" "$gssapi"
      local principal
      principal="$(kerberos_identity "$kdc_dir" "$dir")"
      kerberos_properties "$principal" "$dir/kafka.keytab" >>"$dir/server.properties"
      echo "$kdc_dir" >"$dir/kerberos"
    fi
    chmod 600 "$dir/server.properties"
    rm -rf "$dir/data"  # what a failed format may have left
    local cluster_id
    cluster_id="$(python3 -c 'import base64, uuid; ids = (base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=") for _ in iter(int, 1)); print(next(i for i in ids if not i.startswith("-")))')"
    if ! "$java" -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
        -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$cp" kafka.tools.StorageTool \
        format --cluster-id "$cluster_id" --config "$dir/server.properties" \
        --add-scram "SCRAM-SHA-512=[name=alice,password=$alice]" \
        --add-scram "SCRAM-SHA-512=[name=admin,password=$admin]" >"$dir/format.log" 2>&1; then
      tail -30 "$dir/format.log" >&2
      die "kafka-storage format failed (log: $dir/format.log)"
    fi
    ( umask 077
      cat >"$dir/endpoints.tmp" <<EOF
PLAINTEXT=127.0.0.1:$pt
SSL=127.0.0.1:$ssl
MTLS=127.0.0.1:$mtls
SASL_SSL=127.0.0.1:$sasl_ssl
SASL_PLAINTEXT=127.0.0.1:$sasl_pt
${gssapi:+SASL_GSSAPI=localhost:$gssapi
KAFKA_PRINCIPAL=$principal
}CA=$dir/ca.pem
CLIENT_CERT=$dir/client.pem
CLIENT_KEY=$dir/client.key
TRUSTSTORE=$dir/truststore.p12
TRUSTSTORE_PASSWORD=$(cat "$dir/.truststore-password")
SASL_USER=alice
SASL_PASSWORD=$alice
ADMIN_USER=admin
ADMIN_PASSWORD=$admin
DIR=$dir
BOOTSTRAP=127.0.0.1:$pt
EOF
      mv "$dir/endpoints.tmp" "$dir/endpoints" )
  fi
  local port
  port="$(sed -n 's/^PLAINTEXT=127.0.0.1://p' "$dir/endpoints")"
  # The realm's krb5.conf for the JVM (a restart finds it through DIR/kerberos).
  local krb5=()
  if [ -f "$dir/kerberos" ]; then
    krb5=("-Djava.security.krb5.conf=$(cat "$dir/kerberos")/krb5.conf")
  fi
  local offset=0
  [ -f "$dir/server.log" ] && offset="$(stat -c %s "$dir/server.log")"
  # setsid: its own session and process group, so stop signals exactly this broker.
  setsid "$java" "-Xmx${KAFKA_HEAP:-512m}" -Xms128m -XX:+UseSerialGC -Djava.awt.headless=true \
    -Djava.net.preferIPv4Stack=true "${krb5[@]}" -Dlog4j2.configurationFile="$dir/log4j2.properties" \
    -cp "$cp" kafka.Kafka "$dir/server.properties" >>"$dir/kafka.out" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  local rc=0
  wait_ready "$dir" "$port" "$pid" "$offset" || rc=$?
  if [ $rc -ne 0 ]; then
    tail -c +$((offset + 1)) "$dir/server.log" 2>/dev/null | tail -40 >&2 || true
    tail -10 "$dir/kafka.out" >&2 || true
    if [ $rc = 3 ]; then
      rm -f "$dir/pid"
      die "Kafka exited before its port $port answered (log: $dir/server.log)"
    fi
    stop --dir "$dir" >/dev/null 2>&1 || true
    die "Kafka did not answer on port $port within ${KAFKA_START_TIMEOUT_S:-180} s (log: $dir/server.log)"
  fi
  echo "kafka.sh: Kafka $(cat "$home/version") up in $((SECONDS - started)) s; dir $dir, log $dir/server.log, pid $pid" >&2
  cat "$dir/endpoints"
}


case "${1:-}" in
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: scripts/kafka.sh start [--dir DIR] [--kerberos KDC_DIR] | stop [--dir DIR]" >&2; exit 2 ;;
esac
