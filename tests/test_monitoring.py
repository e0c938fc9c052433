"""docker/prometheus and docker/grafana: every metric the dashboard and the alert rules query is
one the job exports (asked of `StreamMetrics`' own registry, not a list kept here, and of
that registry served over HTTP; tests/spark/test_stream_metrics.py checks them against a
running job's endpoint too), and promtool (Debian's `prometheus` package; .ci/run installs
it) accepts the config and the rules and passes the rules' unit tests
(docker/prometheus/alerts.test.yml)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import require
from monitoring_queries import (
    BUILT_IN,
    DASHBOARD,
    GRAFANA,
    PROMETHEUS,
    ROOT,
    dashboard_exprs,
    dashboard_names,
    metric_names,
    rules,
    served_names,
)

from ingest.spark.metrics import METRIC_NAMES, StreamMetrics


@pytest.fixture(scope="module")
def exported() -> set[str]:
    """The sample names the job's registry holds (every family, with or without samples)."""
    metrics = StreamMetrics("default.events")
    try:
        return metrics.sample_names()
    finally:
        metrics.close()


def test_metric_names_finds_names_and_skips_functions_labels_and_keywords() -> None:
    expr = ('histogram_quantile(0.99, sum by (le, table) (rate(ingest_commit_latency_seconds_'
            'bucket{table=~"$table"}[5m]))) and on (table) ingest_kafka_lag_records offset 15m'
            ' > bool 0')
    assert metric_names(expr) == {"ingest_commit_latency_seconds_bucket",
                                  "ingest_kafka_lag_records"}
    assert metric_names("label_values(ingest_rows_committed_total, table)") == {
        "ingest_rows_committed_total", "table"}


def test_every_dashboard_query_uses_exported_metrics(exported: set[str]) -> None:
    exprs = dashboard_exprs()
    assert exprs
    for title, expr in exprs:
        names = dashboard_names(title, expr)  # of label_values(metric, label): the metric
        assert names, (title, expr)
        assert names <= exported | BUILT_IN, (title, sorted(names - exported))


def test_the_http_endpoint_announces_every_name_of_the_registry(
        exported: set[str]) -> None:
    """What `serve` puts on the wire is what `sample_names` says (a family without samples
    yet is announced by its TYPE line), so the registry checks above hold for a scrape."""
    metrics = StreamMetrics("default.events")
    try:
        port = metrics.serve(0, host="127.0.0.1")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
            sampled, announced = served_names(reply.read().decode())
    finally:
        metrics.close()
    assert exported <= announced
    # prometheus_client adds a counter's creation time; nothing else is on the wire only.
    assert {n for n in announced - exported if not n.endswith("_created")} == set()
    assert "ingest_rows_committed_total" in sampled  # at 0 from the first scrape
    assert "ingest_batches_total" not in sampled  # announced, no micro-batch yet


def test_a_misspelt_metric_would_be_caught(exported: set[str]) -> None:
    """The check is live: a name the job does not export is found."""
    names = metric_names("sum by (table) (rate(ingest_rows_commited_total[5m]))")
    assert names == {"ingest_rows_commited_total"} and not names <= exported


def test_the_dashboard_shows_what_operators_need(exported: set[str]) -> None:
    used = set().union(*(metric_names(e) for _, e in dashboard_exprs()))
    needed = {
        "ingest_rows_committed_total",  # throughput
        "ingest_kafka_lag_records",  # lag
        "ingest_commit_latency_seconds_bucket",  # commit latency
        "ingest_last_commit_timestamp_seconds",  # last commit age
        "ingest_dead_letters_total",  # dead letters
        "ingest_compaction_backlog_deltas",  # backlog
    }
    assert needed <= used
    board = json.loads(DASHBOARD.read_text())
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    datasource = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    uid = datasource["datasources"][0]["uid"]
    assert {p["datasource"]["uid"] for p in board["panels"]} == {uid}


def test_every_alert_rule_uses_exported_metrics(exported: set[str]) -> None:
    found = {r["alert"]: metric_names(r["expr"]) for r in rules()}
    assert {"IngestJobDown", "IngestNoCommit", "IngestLagGrowing",
            "IngestDeadLetters"} <= set(found)
    for alert, names in found.items():
        assert names and names <= exported | BUILT_IN, (alert, sorted(names - exported))


def test_compose_mounts_what_prometheus_and_grafana_read() -> None:
    """Prometheus scrapes the port the job serves; the provisioning and dashboard folders are
    mounted where Grafana and the dashboard provider look."""
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    command = [str(c) for c in services["job"]["command"]]
    port = command[command.index("--metrics-port") + 1]
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    targets = [t for job in config["scrape_configs"] for c in job["static_configs"]
               for t in c["targets"]]
    assert targets == [f"job:{port}"]
    assert "./prometheus:/etc/prometheus:ro" in services["prometheus"]["volumes"]
    provider = yaml.safe_load(
        (GRAFANA / "provisioning" / "dashboards" / "ingest.yml").read_text())["providers"][0]
    mounts = services["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in mounts
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in mounts


def test_the_readme_lists_every_metric_and_alert() -> None:
    """README "Operating the stream" has a row for every metric family the job exports and
    every alert rule."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Operating the stream"):]
    section = section[:section.index("\n## ", 1)]
    listed = set(re.findall(r"`(ingest_[a-z_]+)`", section))
    assert set(METRIC_NAMES) <= listed, sorted(set(METRIC_NAMES) - listed)
    assert listed <= set(METRIC_NAMES), sorted(listed - set(METRIC_NAMES))
    alerts = {r["alert"] for r in rules()}
    assert alerts <= set(re.findall(r"^\| `(Ingest[A-Za-z]+)`", section, re.M)), alerts


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    require(tool is not None, "promtool (Debian's prometheus package; .ci/run installs it)")
    assert tool is not None
    return subprocess.run([tool, *args], cwd=PROMETHEUS, capture_output=True, text=True,
                          timeout=120)


def test_promtool_accepts_the_config_and_the_rules() -> None:
    config = _promtool("check", "config", "prometheus.yml")
    assert config.returncode == 0, config.stdout + config.stderr
    checked = _promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout


def test_the_alerts_fire_on_their_unit_tests() -> None:
    done = _promtool("test", "rules", "alerts.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_promtool_rejects_a_broken_rule(tmp_path: Path) -> None:
    """promtool's check is live: a rule whose expression does not parse is refused."""
    bad = tmp_path / "bad.yml"
    bad.write_text("groups:\n  - name: x\n    rules:\n      - alert: X\n"
                   "        expr: sum by (table (ingest_kafka_lag_records)\n")
    done = _promtool("check", "rules", str(bad))
    assert done.returncode != 0
    assert "parse error" in (done.stdout + done.stderr)
