#!/usr/bin/env bash
# The README's first command: a local broker, sample events, the streaming job, the result.
set -euo pipefail
out="${DEMO_DIR:-demo-output}"
rm -rf "$out"; mkdir -p "$out"
table="$out/warehouse/events"
python - "$table" <<'PY'
import sys
import pyarrow as pa
from ingest.acid import BucketWriter
table = sys.argv[1]
schema = pa.schema([("id", pa.int64()), ("value", pa.string())])
w = BucketWriter(f"{table}/delta_0000001_0000002/bucket_00000", schema, write_id=1)
w.write(pa.table({"id": [1, 2, 3], "value": ["a", "b", "c"]}, schema=schema))
w.flush()
w.close()
PY
ingest dump --meta "$table/delta_0000001_0000002/bucket_00000"
ingest dump "$table/delta_0000001_0000002/bucket_00000"
