"""Fixtures of the cluster tests: a standalone Spark cluster and the `ingest` package as a zip.

One cluster serves the module; before each test a worker killed by the one before is replaced.
The zip is what `spark-submit --py-files` ships to the driver and every executor.
"""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster.spark_cluster import SPARK_CLASS, SparkCluster, start_cluster
from conftest import free_port, require

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def _cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    require(shutil.which("java") is not None, "java on PATH")
    require(SPARK_CLASS.exists(), f"{SPARK_CLASS} from the pyspark package")
    cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"), free_port,
                            workers=2, cores=1, memory="1g", timeout_s=180)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def spark_cluster(_cluster: SparkCluster) -> SparkCluster:
    """A master and two ALIVE workers (1 core, 1 GiB each) on 127.0.0.1."""
    _cluster.replace_dead_workers(timeout_s=180)
    return _cluster


@pytest.fixture
def ingest_zip(tmp_path: Path) -> Path:
    """The worktree's `ingest/` package as a zip for --py-files (sources only)."""
    path = tmp_path / "ingest.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for source in sorted((ROOT / "ingest").rglob("*")):
            if source.is_file() and "__pycache__" not in source.parts:
                archive.write(source, source.relative_to(ROOT).as_posix())
    return path
