"""The README's first command, `make demo`, runs end to end: broker, sample events, the
streaming job, and the table read back (scripts/demo.sh, in a temporary directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow]
ROOT = Path(__file__).resolve().parent.parent


def test_demo_streams_every_sample_event_into_the_table(tmp_path: Path) -> None:
    env = {**os.environ, "DEMO_DIR": str(tmp_path / "demo"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "scripts/demo.sh"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=480, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "== rows visible: 3000 (3,000 produced)" in done.stdout
    dumped = [json.loads(line) for line in done.stdout.splitlines()[-2:]]
    assert [(e["operation"], e["rowId"]) for e in dumped] == [(0, 0), (0, 1)]
