"""The options of a thrift:// URI's query: parsed into ThriftOptions, refused by name with the
allowed values, kept in the connection's URI, and printed as they are (a principal is no
secret)."""

from __future__ import annotations

import pytest

from ingest.errors import ConfigError
from ingest.txn.hms.thrift import ThriftOptions, parse_thrift_options
from ingest.txn.registry import redact_url


def test_no_query_is_a_plain_connection() -> None:
    options = parse_thrift_options("thrift://h:9083")
    assert options == ThriftOptions() and not options.kerberos and options.query() == ""


def test_kerberos_options_are_parsed_and_written_back_canonically() -> None:
    options = parse_thrift_options(
        "thrift://h:9083?client_keytab=/k/c.keytab&qop=privacy&auth=KERBEROS"
        "&principal=hive/_HOST@EXAMPLE.COM&client_principal=etl@EXAMPLE.COM")
    assert options == ThriftOptions("kerberos", "hive/_HOST@EXAMPLE.COM", "auth-conf",
                                    "etl@EXAMPLE.COM", "/k/c.keytab")
    assert options.query() == ("auth=kerberos&principal=hive/_HOST@EXAMPLE.COM&qop=auth-conf"
                                "&client_principal=etl@EXAMPLE.COM&client_keytab=/k/c.keytab")
    assert parse_thrift_options("thrift://h:9083?auth=kerberos").principal == "hive/_HOST"


@pytest.mark.parametrize(("query", "words"), [
    ("auth=kerberos&retries=3", r"unknown option 'retries'.*auth, principal, qop"),
    ("auth=sasl", r"auth=sasl is not one of none, kerberos"),
    ("auth=kerberos&qop=secret", r"qop=secret is not one of auth, auth-int, auth-conf"),
    ("principal=hive/_HOST@R", r"principal needs auth=kerberos"),
    ("auth=kerberos&qop=auth&qop=auth-conf", r"the option qop is given twice"),
    ("auth=kerberos&principal=", r"the option principal is empty"),
    ("auth=kerberos&principal=hive/a/b@R", r"principal=hive/a/b@R is not a Kerberos principal"),
])
def test_bad_options_are_config_errors_naming_the_option(query: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_thrift_options(f"thrift://h:9083?{query}")


def test_a_uri_with_principals_prints_as_it_is_but_never_with_user_information() -> None:
    uri = ("thrift://h:9083?auth=kerberos&client_principal=etl@R&principal=hive/_HOST@R"
           "&client_keytab=/k/c.keytab")
    assert redact_url(uri) == uri
    assert redact_url("thrift://u:pw@h:9083?auth=kerberos") == "thrift://h:9083?auth=kerberos"
