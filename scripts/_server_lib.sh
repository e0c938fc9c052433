# Shared by scripts/hms.sh and scripts/trino.sh (sourced, not run): a throwaway server runs in
# its own process group from a directory holding its pid file; the caller sets `name` (how
# messages call the server), `last_file` (the directory of the last start without --dir),
# `made_marker` (the file a start that made its own directory leaves in it) and `stop_grace_s`.

die() { echo "$name: $*" >&2; exit 1; }

# alive PID: the process runs. Not `kill -0` alone: a server killed with SIGKILL stays a zombie
# until its parent (or an init that reaps) collects it, and `kill -0` succeeds on a zombie, so
# a restart right after a kill would find the dead server "still running".
alive() {
  local state
  state="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# free_ports N: N distinct free ports on one line. Bound together while chosen: ports picked
# one by one are each free, but the kernel may hand out one of them twice.
free_ports() {
  python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# stop [--dir DIR]: TERM the server's process group, KILL it after stop_grace_s, and remove the
# directory when a start made it.
stop() {
  local dir=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --dir) dir="$2"; shift 2 ;;
      *) die "unknown option '$1' for stop" ;;
    esac
  done
  if [ -z "$dir" ]; then
    [ -f "$last_file" ] || die "no --dir given and no server started without one ($last_file)"
    dir="$(cat "$last_file")"
  fi
  [ -f "$dir/pid" ] || die "no pid file in $dir"
  local pid
  pid="$(cat "$dir/pid")"
  if alive "$pid"; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    local deadline=$((SECONDS + stop_grace_s))
    while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pid"
  if [ -f "$dir/$made_marker" ]; then
    rm -rf "$dir"
    [ "$(cat "$last_file" 2>/dev/null)" = "$dir" ] && rm -f "$last_file"
  fi
  echo "$name: stopped the server of $dir" >&2
}
