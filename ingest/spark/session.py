"""The SparkSession a spark-submit entry point (`jobs/*.py`) runs in."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

from ingest.spark.options import LogFormat
from ingest.spark.progress import JsonLogFormatter

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Spark masks option and configuration values whose names match this in its UI, event log
# and plan strings. Its default names passwords, secrets, tokens and access keys; Kafka's
# secrets also hide in `kafka.sasl.jaas.config`, `kafka.ssl.keystore.key` (a PEM key),
# `kafka.ssl.key.pem`, the registry's `basic.auth.user.info` and OAUTHBEARER settings.
REDACTION_REGEX = (r"(?i)secret|password|token|access[.]?key|jaas|ssl[.]key|keystore[.]key|"
                   r"key[.]pem|user[.]info|oauthbearer|credentials")


def job_session(app_name: str, master: str | None, *,
                log_format: LogFormat = "text") -> SparkSession:
    """Under spark-submit, the session spark-submit configured (unless `master` is given);
    run as a plain script, a local one (`master`, default local[2]) without the UI.

    Python workers use this interpreter unless PYSPARK_PYTHON says otherwise, and the job's
    log lines go to stderr with their time ("text"), or as one JSON object each ("json").
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter() if log_format == "json"
                         else logging.Formatter("%(asctime)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).config("spark.redaction.regex",
                                                            REDACTION_REGEX)
    if master or "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
        builder = builder.master(master or "local[2]").config("spark.ui.enabled", "false")
    return builder.getOrCreate()
