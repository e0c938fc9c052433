#!/usr/bin/env bash
# A throwaway MIT Kerberos realm on 127.0.0.1, for the tests and for trying Kerberos to the
# metastore and Kafka: its own directory (database, stash, krb5.conf, kdc.conf, keytabs), a KDC
# on a free TCP port in its own process group, no system service and nothing under /etc.
#
#   scripts/kdc.sh start --dir DIR [--ticket-lifetime SECONDS] [--realm NAME]
#       prints KRB5_CONFIG=, REALM=, CLIENT_PRINCIPAL=, CLIENT_KEYTAB=, HIVE_PRINCIPAL=,
#       HIVE_KEYTAB=, KAFKA_PRINCIPAL=, KAFKA_KEYTAB= (also written to DIR/kdc.env) once the
#       KDC answers
#   scripts/kdc.sh stop --dir DIR
#
# --ticket-lifetime (default 36000) caps every ticket: the realm's and each principal's
# max_life and max_renewable_life and krb5.conf's ticket_lifetime, so short tickets really
# expire. Clients reach the KDC by TCP only (udp_preference_limit = 1), with no DNS look-ups.
# Needs the Debian packages krb5-kdc, krb5-admin-server and krb5-user.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
last_file="${TMPDIR:-/tmp}/ingest-kdc.last"

name=kdc.sh
made_marker=.made-by-kdc-sh
stop_grace_s=10
# shellcheck source=scripts/_server_lib.sh
source "$here/_server_lib.sh"

find_tool() {  # name: Debian puts the KDC's tools in /usr/sbin, often not on PATH
  local t
  for t in "$(command -v "$1" 2>/dev/null || true)" "/usr/sbin/$1" "/usr/bin/$1"; do
    [ -n "$t" ] && [ -x "$t" ] && { echo "$t"; return; }
  done
  die "no $1 found (apt-get install krb5-kdc krb5-admin-server krb5-user)"
}

port_answers() {  # port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

krb5_conf() {  # realm port lifetime
  # Plain seconds: MIT and Java both read a bare number as seconds.
  cat <<EOF
[libdefaults]
  default_realm = $1
  dns_lookup_kdc = false
  dns_lookup_realm = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
  ticket_lifetime = $3
  renew_lifetime = $3
  forwardable = true
  permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96

[realms]
  $1 = {
    kdc = 127.0.0.1:$2
  }

[domain_realm]
  127.0.0.1 = $1
  localhost = $1
EOF
}

kdc_conf() {  # dir realm port lifetime
  # AES with SHA-1 only: what Java 8 to 21 and MIT all accept without extra settings.
  cat <<EOF
[kdcdefaults]
  kdc_ports = $3
  kdc_tcp_ports = $3

[realms]
  $2 = {
    database_name = $1/principal
    key_stash_file = $1/stash
    acl_file = $1/kadm5.acl
    kdc_listen = 127.0.0.1:$3
    kdc_tcp_listen = 127.0.0.1:$3
    max_life = $4
    max_renewable_life = $4
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }

[logging]
  kdc = FILE:$1/kdc.log
  admin_server = FILE:$1/kadmin.log
  default = FILE:$1/krb5lib.log
EOF
}

start() {
  local dir="" lifetime=36000 realm=INGEST.TEST
  while [ $# -gt 0 ]; do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      --ticket-lifetime) lifetime="$2"; shift 2 ;;
      --realm) realm="$2"; shift 2 ;;
      *) die "unknown option '$1' for start" ;;
    esac
  done
  [[ "$lifetime" =~ ^[0-9]+$ ]] && [ "$lifetime" -ge 10 ] \
    || die "--ticket-lifetime must be a number of seconds, 10 or more (got '$lifetime')"
  local krb5kdc kdb5_util kadmin_local
  krb5kdc="$(find_tool krb5kdc)"
  kdb5_util="$(find_tool kdb5_util)"
  kadmin_local="$(find_tool kadmin.local)"
  if [ -z "$dir" ]; then
    dir="$(mktemp -d "${TMPDIR:-/tmp}/ingest-kdc.XXXXXX")"
    touch "$dir/$made_marker"
    echo "$dir" >"$last_file"
  fi
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  [ -f "$dir/pid" ] && alive "$(cat "$dir/pid")" \
    && die "a KDC already runs in $dir (pid $(cat "$dir/pid"))"
  # A realm left by an earlier start in this directory is made anew (its port is gone).
  rm -f "$dir"/principal* "$dir/stash" "$dir"/*.keytab "$dir/kdc.env"
  local port
  port="$(free_port)"
  krb5_conf "$realm" "$port" "$lifetime" >"$dir/krb5.conf"
  kdc_conf "$dir" "$realm" "$port" "$lifetime" >"$dir/kdc.conf"
  echo "*/admin@$realm *" >"$dir/kadm5.acl"
  export KRB5_CONFIG="$dir/krb5.conf" KRB5_KDC_PROFILE="$dir/kdc.conf"
  # The master password only protects the stash of a throwaway realm; it is never printed.
  local master
  master="$(head -c 24 /dev/urandom | base64)"
  "$kdb5_util" -r "$realm" create -s -P "$master" >"$dir/kdb5_util.log" 2>&1 \
    || { cat "$dir/kdb5_util.log" >&2; die "kdb5_util create failed for $realm"; }
  local life="$lifetime seconds"
  kadmin() {
    "$kadmin_local" -r "$realm" -q "$1" >>"$dir/kadmin.local.log" 2>&1 \
      || { tail -5 "$dir/kadmin.local.log" >&2; die "kadmin.local failed: $1"; }
    # kadmin.local exits 0 on most failures: its log says so.
    if tail -3 "$dir/kadmin.local.log" | grep -qiE "error|while |cannot|unable"; then
      tail -5 "$dir/kadmin.local.log" >&2
      die "kadmin.local failed: $1"
    fi
  }
  kadmin "modprinc -maxlife \"$life\" -maxrenewlife \"$life\" krbtgt/$realm@$realm"
  # kafka/localhost: a Java client asks for a ticket to kafka/<the broker's host name>, and
  # Java names 127.0.0.1 "localhost" (its reverse look-up); the metastore's principal is the
  # host our client connects to, as written.
  local client="ingest@$realm" hive="hive/127.0.0.1@$realm" kafka="kafka/localhost@$realm"
  local p file
  for p in "$client:client" "$hive:hive" "$kafka:kafka"; do
    file="$dir/${p##*:}.keytab"
    kadmin "addprinc -randkey -maxlife \"$life\" -maxrenewlife \"$life\" ${p%:*}"
    kadmin "ktadd -k $file ${p%:*}"
    chmod 600 "$file"
  done
  # setsid: its own session and process group, so stop signals exactly this KDC.
  KRB5_CONFIG="$dir/krb5.conf" KRB5_KDC_PROFILE="$dir/kdc.conf" \
    setsid "$krb5kdc" -n -r "$realm" >"$dir/krb5kdc.out" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/pid"
  echo "$port" >"$dir/port"
  local deadline=$((SECONDS + 30))
  until port_answers "$port"; do
    if ! alive "$pid"; then
      cat "$dir/krb5kdc.out" "$dir/kdc.log" 2>/dev/null | tail -20 >&2
      die "krb5kdc exited before its port $port answered (log: $dir/kdc.log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      stop --dir "$dir" >/dev/null 2>&1 || true
      die "krb5kdc did not answer on port $port within 30 s (log: $dir/kdc.log)"
    fi
    sleep 0.1
  done
  cat >"$dir/kdc.env" <<EOF
KRB5_CONFIG=$dir/krb5.conf
REALM=$realm
CLIENT_PRINCIPAL=$client
CLIENT_KEYTAB=$dir/client.keytab
HIVE_PRINCIPAL=$hive
HIVE_KEYTAB=$dir/hive.keytab
KAFKA_PRINCIPAL=$kafka
KAFKA_KEYTAB=$dir/kafka.keytab
EOF
  echo "kdc.sh: realm $realm up on 127.0.0.1:$port (TCP), tickets last $lifetime s; dir $dir, pid $pid" >&2
  cat "$dir/kdc.env"
}


case "${1:-}" in
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: scripts/kdc.sh start --dir DIR [--ticket-lifetime SECONDS] [--realm NAME] | stop --dir DIR" >&2; exit 2 ;;
esac
