"""Spark's JVMs get the realm KRB5_CONFIG names (Java ignores that variable): the settings
`ingest stream` and the jobs' local session add, and a real local JVM that sees the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.spark import krb5_java_options

ROOT = Path(__file__).resolve().parents[2]


def test_krb5_config_becomes_the_jvms_default_option_unless_the_user_named_one() -> None:
    option = "-Djava.security.krb5.conf=/r/krb5.conf"
    assert krb5_java_options({"KRB5_CONFIG": "/r/krb5.conf"}) == {
        "spark.driver.defaultJavaOptions": option, "spark.executor.defaultJavaOptions": option}
    assert krb5_java_options({"KRB5_CONFIG": "/r/krb5.conf:/etc/krb5.conf"})[
        "spark.driver.defaultJavaOptions"] == option  # Java takes one file
    assert krb5_java_options({}) == {}
    assert krb5_java_options({"KRB5_CONFIG": " "}) == {}
    assert krb5_java_options({
        "KRB5_CONFIG": "/r/krb5.conf",
        "PYSPARK_SUBMIT_ARGS": "--conf spark.driver.extraJavaOptions="
                               "-Djava.security.krb5.conf=/mine pyspark-shell"}) == {}


@pytest.mark.spark
def test_a_local_sessions_jvm_reads_the_krb5_config_file(tmp_path: Path) -> None:
    """The jobs' session (as `ingest stream` builds its own, with the same settings) in a
    process of its own: its JVM's java.security.krb5.conf is KRB5_CONFIG's file, and the
    user's extraJavaOptions are still there."""
    conf = tmp_path / "krb5.conf"
    conf.write_text("[libdefaults]\n  default_realm = SPARK.TEST\n")
    code = ("from ingest.spark import job_session\n"
            "s = job_session('krb5', 'local[1]')\n"
            "p = s.sparkContext._jvm.java.lang.System.getProperty\n"
            "print(p('java.security.krb5.conf'), p('ingest.test.mine'))\n"
            "s.stop()\n")
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    env.update(KRB5_CONFIG=str(conf), PYTHONPATH=str(ROOT),
               PYSPARK_SUBMIT_ARGS="--conf spark.driver.extraJavaOptions=-Dingest.test.mine=1 "
                                   "pyspark-shell")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == [str(conf), "1"]
