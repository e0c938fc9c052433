"""The SparkSession a spark-submit entry point (`jobs/*.py`) runs in."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
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


KRB5_CONF_PROPERTY = "java.security.krb5.conf"


def krb5_java_options(env: Mapping[str, str]) -> dict[str, str]:
    """The Spark settings that give the JVMs a local launch starts (the driver, and the
    executors of a cluster master) the realm that KRB5_CONFIG names to MIT krb5, or {} when
    KRB5_CONFIG is unset or PYSPARK_SUBMIT_ARGS names a krb5.conf (the user's choice stands).

    Java ignores KRB5_CONFIG and reads `-Djava.security.krb5.conf`, else /etc/krb5.conf, so
    without this Spark's Kafka source logging in with GSSAPI would ask another realm's KDC
    than ingest's own metastore client. The option goes in `defaultJavaOptions`, which Spark
    puts before `extraJavaOptions`: a user's extraJavaOptions are kept whole, and a
    `-Djava.security.krb5.conf` among them comes later on the command line and wins.
    """
    value = env.get("KRB5_CONFIG", "").strip()
    if not value or KRB5_CONF_PROPERTY in env.get("PYSPARK_SUBMIT_ARGS", ""):
        return {}
    # MIT reads a colon-separated list; Java takes one file: the first, the realm's.
    option = f"-D{KRB5_CONF_PROPERTY}={value.split(':')[0]}"
    return {"spark.driver.defaultJavaOptions": option,
            "spark.executor.defaultJavaOptions": option}


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
        if "PYSPARK_GATEWAY_PORT" not in os.environ:  # this process starts the JVM
            for key, value in krb5_java_options(os.environ).items():
                builder = builder.config(key, value)
    return builder.getOrCreate()
