"""The metric names docker/grafana's dashboard and docker/prometheus' alert rules query, and
the names a `/metrics` scrape serves: shared by tests/test_monitoring.py (against the job's
registry) and tests/spark/test_stream_metrics.py (against a running job's HTTP endpoint)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS = ROOT / "docker" / "prometheus"
GRAFANA = ROOT / "docker" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "ingest.json"
BUILT_IN = {"up"}  # what Prometheus itself records for every scrape target

_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
             "group_right", "offset", "bool", "inf", "nan"}
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
             "summary": ("_count", "_sum")}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions,
    keywords, label names (in matchers and grouping lists), durations or numbers."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    text = re.sub(r"\boffset\s+\w+", "", text)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        following = text[m.end():].lstrip()
        if following.startswith("(") or m.group().lower() in _KEYWORDS:
            continue
        names.add(m.group())
    return names


def dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title or `variable NAME`, PromQL) of every query of the dashboard."""
    board = json.loads(DASHBOARD.read_text())
    out = [(p["title"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]
    out += [(f"variable {v['name']}", v["query"]["query"])
            for v in board["templating"]["list"] if v["type"] == "query"]
    return out


def dashboard_names(title: str, expr: str) -> set[str]:
    """The metric names of one dashboard query (of `label_values(metric, label)`: the metric)."""
    names = metric_names(expr)
    if title.startswith("variable "):
        names = {n for n in names if n.startswith("ingest_")}
    return names


def rules() -> list[dict[str, Any]]:
    """Every alert rule of docker/prometheus/alerts.yml."""
    groups = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def served_names(text: str) -> tuple[set[str], set[str]]:
    """(sample names with samples, sample names of every family announced) of a scrape in
    Prometheus' text format; a family without samples yet is announced by its TYPE line."""
    sampled: set[str] = set()
    announced: set[str] = set()
    for family in text_string_to_metric_families(text):
        sampled.update(s.name for s in family.samples)
        announced.update(family.name + suffix
                         for suffix in _SUFFIXES.get(family.type, ("",)))
    return sampled, announced | sampled
