"""One Kafka connection: the bootstrap servers and every client setting, built once.

`--kafka-config FILE` (Kafka's `client.properties` format) and `--kafka-option KEY=VALUE`
(repeatable; later ones win) become a `KafkaConnection`, and every Kafka client of the
package is made from it (`ingest.kafka.clients`), so a secured cluster is reached by the
pre-flight check, the source on the driver and the executors, the lag probe, the group
commit and the producer alike.

Settings are librdkafka's names (https://github.com/confluentinc/librdkafka, CONFIGURATION.md).
The SASL and TLS settings a Java `client.properties` holds are taken too and turned into
librdkafka's (a PLAIN or SCRAM `sasl.jaas.config` into `sasl.username`/`sasl.password`, a PEM
truststore into `ssl.ca.location`), so a file written for Java clients (Confluent Cloud's, say)
works as it is; a setting only Java clients can use (a JKS truststore) is refused with the
librdkafka equivalent named. Spark's own Kafka source gets the same settings in Java's names
(`jvm_properties`).

Kerberos (`sasl.mechanism=GSSAPI`) is taken for Spark's source only: a keytab and principal
(librdkafka's `sasl.kerberos.keytab`/`sasl.kerberos.principal`) become a `Krb5LoginModule`
JAAS line, or a `Krb5LoginModule` `sasl.jaas.config` is passed on as it is. The PyPI wheel of
confluent-kafka has no Kerberos, so a Python client of such a connection is refused
(`check_python_client`) and the stream's driver does without them (`kerberos`).

Secrets (passwords, keys, tokens, JAAS texts) never leave through `repr`, `redacted()` or an
error message of this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ingest.errors import ConfigError

REDACTED = "*****"
# A setting whose value is a secret, by its name (librdkafka's, Java's and the registry's).
_SECRET_NAME = re.compile(
    r"password|secret|token|jaas|key\.pem|keystore\.key|user\.info|oauthbearer\.config|"
    r"credentials", re.IGNORECASE)
# What Kafka's `client.properties` files carry that configures the JVM, not the connection.
_IGNORED_JAVA = {"key.deserializer", "value.deserializer", "key.serializer",
                 "value.serializer", "client.dns.lookup"}
_JAAS = re.compile(
    r"^\s*org\.apache\.kafka\.common\.security\.(?P<module>plain\.PlainLoginModule|"
    r"scram\.ScramLoginModule)\s+required\s+(?P<options>.*?);?\s*$", re.DOTALL)
_KRB5_JAAS = re.compile(r"^\s*com\.sun\.security\.auth\.module\.Krb5LoginModule\s+required\b")
_KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
_JAAS_OPTION = re.compile(r"""(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')""")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def is_secret(name: str) -> bool:
    """Whether a setting's value must never be shown (by the setting's name)."""
    return bool(_SECRET_NAME.search(name))


def redact_settings(settings: Mapping[str, object]) -> dict[str, str]:
    """The settings as they may be shown: secret values replaced by REDACTED."""
    return {k: REDACTED if is_secret(k) else str(v) for k, v in settings.items()}


@dataclass(frozen=True)
class KafkaConnection:
    """Where Kafka is and how to talk to it; picklable, and safe to print.

    Attributes:
        bootstrap_servers: "host:port[,host:port]".
        settings: librdkafka client settings (sorted pairs), without `bootstrap.servers`.
    """

    bootstrap_servers: str
    settings: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", tuple(sorted(dict(self.settings).items())))

    def __repr__(self) -> str:
        return (f"KafkaConnection(bootstrap_servers={self.bootstrap_servers!r}, "
                f"settings={redact_settings(dict(self.settings))!r})")

    @classmethod
    def of(cls, bootstrap_servers: str, *, options: Iterable[str] = (),
           config_files: Iterable[str | Path] = ()) -> KafkaConnection:
        """Build from `--kafka-config FILE` (each file in turn) and then `--kafka-option
        KEY=VALUE` items; a later setting of the same name wins.

        Raises:
            ConfigError: an unreadable file, an item that is not KEY=VALUE, a setting only
                Java clients know, or a Kerberos keytab without its principal or file.
        """
        merged: dict[str, str] = {}
        for path in config_files:
            merged.update(_translated(read_properties(path)))
        for item in options:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                # Not echoed: a mistyped item may be a secret.
                raise ConfigError("A --kafka-option is not KEY=VALUE (its text is not shown: it "
                                  "may hold a secret)",
                                  hint="e.g. --kafka-option security.protocol=SASL_SSL")
            merged.update(_translated({key.strip(): value.strip()}))
        servers = merged.pop("bootstrap.servers", None)
        return cls(bootstrap_servers or servers or "", tuple(normalize(merged).items()))

    @property
    def kerberos(self) -> bool:
        """Whether this connection authenticates with Kerberos (`sasl.mechanism=GSSAPI`),
        which only Java clients (Spark's Kafka source) can."""
        return dict(self.settings).get("sasl.mechanism", "").upper() == "GSSAPI"

    def check_python_client(self) -> None:
        """Refuse a Python (librdkafka) client for a connection it cannot make.

        Raises:
            ConfigError: the connection uses GSSAPI, which the PyPI wheel lacks.
        """
        if self.kerberos:
            raise ConfigError(
                "sasl.mechanism=GSSAPI (Kerberos) is not available to the Python Kafka "
                "clients: the PyPI wheel of confluent-kafka is built without Kerberos",
                hint="a stream reads a Kerberized Kafka with --kafka-source jvm (Spark's "
                     "source); the Python clients (the python source, `ingest produce`, the "
                     "lag of `ingest status`) need a SCRAM, PLAIN or OAUTHBEARER listener")

    @property
    def protocol(self) -> str:
        """`security.protocol` (PLAINTEXT unless set)."""
        return dict(self.settings).get("security.protocol", "PLAINTEXT").upper()

    def client_config(self) -> dict[str, str]:
        """librdkafka's settings for a client of this connection (secrets included: hand it
        to a client, never to a log).

        Raises:
            ConfigError: a Kerberos connection (`check_python_client`).
        """
        self.check_python_client()
        return {"bootstrap.servers": self.bootstrap_servers, **dict(self.settings)}

    def redacted(self) -> dict[str, str]:
        """The settings with their secrets masked, for output and errors."""
        return redact_settings({"bootstrap.servers": self.bootstrap_servers,
                                **dict(self.settings)})

    def jvm_properties(self) -> dict[str, str]:
        """The settings in the Java client's names, for Spark's Kafka source (`kafka.` is not
        prefixed here). librdkafka-only settings with no Java meaning are left out.

        Raises:
            ConfigError: a setting the Java client cannot be given (an `oauth_cb`).
        """
        s = dict(self.settings)
        out: dict[str, str] = {"bootstrap.servers": self.bootstrap_servers}
        for name in ("security.protocol", "sasl.mechanism", "isolation.level",
                     "client.id", "request.timeout.ms", "metadata.max.age.ms",
                     "sasl.kerberos.service.name", "sasl.kerberos.min.time.before.relogin"):
            if name in s:
                out[name] = s[name]
        if "ssl.endpoint.identification.algorithm" in s:
            algorithm = s["ssl.endpoint.identification.algorithm"]
            out["ssl.endpoint.identification.algorithm"] = "" if algorithm == "none" \
                else algorithm
        mechanism = s.get("sasl.mechanism", "").upper()
        if "sasl.username" in s:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
                      if mechanism == "PLAIN" else
                      "org.apache.kafka.common.security.scram.ScramLoginModule")
            out["sasl.jaas.config"] = (
                f'{module} required username="{_jaas_quote(s["sasl.username"])}" '
                f'password="{_jaas_quote(s.get("sasl.password", ""))}";')
        if mechanism == "GSSAPI":
            out["sasl.jaas.config"] = _krb5_jaas(s)
        if "ssl.ca.location" in s:
            out["ssl.truststore.type"] = "PEM"
            out["ssl.truststore.location"] = s["ssl.ca.location"]
        if "ssl.certificate.location" in s or "ssl.key.location" in s:
            if "ssl.key.password" in s:
                raise ConfigError(
                    "Spark's Kafka source cannot read an encrypted PEM key "
                    "(ssl.key.password) as a client certificate",
                    hint="give an unencrypted key file, or use --kafka-source python")
            cert = Path(s.get("ssl.certificate.location", "")).read_text()
            key = Path(s.get("ssl.key.location", "")).read_text()
            out["ssl.keystore.type"] = "PEM"
            out["ssl.keystore.certificate.chain"] = cert
            out["ssl.keystore.key"] = key
        if "oauth_cb" in s or mechanism == "OAUTHBEARER":
            raise ConfigError(
                "Spark's Kafka source (--kafka-source jvm) takes OAUTHBEARER from a Java "
                "login callback handler, not from these settings",
                hint="use --kafka-source python with oauth_cb=module:function")
        return out


def _krb5_jaas(s: Mapping[str, str]) -> str:
    """The Java client's JAAS line for Kerberos: the one given, else a login from
    `sasl.kerberos.keytab` as `sasl.kerberos.principal`, else the ticket cache (KRB5CCNAME)."""
    if "sasl.jaas.config" in s:
        return s["sasl.jaas.config"]
    keytab, principal = s.get("sasl.kerberos.keytab"), s.get("sasl.kerberos.principal")
    if keytab is None:
        who = f' principal="{_jaas_quote(principal)}"' if principal else ""
        return f"{_KRB5_MODULE} required useTicketCache=true{who};"
    return (f'{_KRB5_MODULE} required useKeyTab=true storeKey=true '
            f'keyTab="{_jaas_quote(keytab)}" principal="{_jaas_quote(principal or "")}";')


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _with_credentials(settings: dict[str, str]) -> dict[str, str]:
    """A PLAIN or SCRAM `sasl.jaas.config` as `sasl.username`/`sasl.password`, in its place
    among the settings (so a later setting still wins over it)."""
    jaas = settings.get("sasl.jaas.config")
    if jaas is None or _JAAS.match(jaas) is None:
        return settings  # another login module: `normalize` refuses it, naming why
    out = {k: v for k, v in settings.items() if k != "sasl.jaas.config"}
    out.update(_jaas_credentials(jaas))
    return out


def _translated(settings: dict[str, str]) -> dict[str, str]:
    """One source's settings with its JAAS credentials and its whole PEM trust and key stores
    (location and type given together) in librdkafka's names, so that a later source wins
    whichever names each uses: a file's ssl.truststore.location must not override
    --kafka-option ssl.ca.location, nor its ssl.keystore.location ssl.certificate.location.

    Raises:
        ConfigError: a truststore only Java clients can read.
    """
    out = dict(_with_credentials(settings))
    if "ssl.truststore.location" in out and "ssl.truststore.type" in out:
        _translate_truststore(out)
    if "ssl.keystore.type" in out and any(k in out for k in (
            "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain")):
        _translate_keystore(out)
    return out


def read_properties(path: str | Path) -> dict[str, str]:
    """The settings of a Kafka `client.properties` file: `key=value` or `key: value` lines,
    `#`/`!` comments, a trailing backslash continuing a line (as the JAAS text often is).

    Raises:
        ConfigError: the file cannot be read, or a line is not a setting.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"Cannot read --kafka-config {path}: {e.__class__.__name__}: "
                          f"{getattr(e, 'strerror', None) or e}") from None
    out: dict[str, str] = {}
    pending = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = (pending + raw.lstrip()) if pending else raw.strip()
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if m is None:
            raise ConfigError(f"--kafka-config {path}, line {number}: not a key=value setting",
                              hint="Kafka's client.properties format: one key=value a line")
        out[m.group(1)] = m.group(2).strip()
    return out


def normalize(settings: Mapping[str, str]) -> dict[str, str]:
    """Settings in librdkafka's names: Java's SASL/TLS names translated, Java-only ones and
    GSSAPI refused (the PyPI wheel of confluent-kafka has no Kerberos).

    Raises:
        ConfigError: naming the setting and what to use instead.
    """
    out: dict[str, str] = {}
    for name, value in settings.items():
        key = name.strip()
        if key in _IGNORED_JAVA:
            continue
        if key == "sasl.mechanisms":
            key = "sasl.mechanism"
        out[key] = value
    jaas = out.pop("sasl.jaas.config", None)
    if jaas is not None and _KRB5_JAAS.match(jaas):
        out["sasl.jaas.config"] = jaas  # Kerberos: for Java clients, passed on as it is
    elif jaas is not None:
        out.update(_jaas_credentials(jaas))
    _translate_truststore(out)
    _translate_keystore(out)
    if "ssl.endpoint.identification.algorithm" in out and \
            out["ssl.endpoint.identification.algorithm"] == "":
        out["ssl.endpoint.identification.algorithm"] = "none"
    for java_only, instead in _JAVA_ONLY.items():
        if java_only in out:
            raise ConfigError(f"Kafka setting {java_only!r} is known only to Java clients",
                              hint=instead)
    protocol = out.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"Kafka setting security.protocol={protocol!r} is not one of "
                          f"{', '.join(PROTOCOLS)}")
    if "security.protocol" in out:
        out["security.protocol"] = protocol
    mechanism = out.get("sasl.mechanism", "").upper()
    if mechanism == "GSSAPI":
        _check_kerberos(out)
    elif "sasl.jaas.config" in out:
        raise ConfigError("Kafka setting sasl.jaas.config names a login module for Kerberos "
                          "(Krb5LoginModule), but sasl.mechanism is not GSSAPI",
                          hint="add --kafka-option sasl.mechanism=GSSAPI, with --kafka-source "
                               "jvm (the Python clients have no Kerberos)")
    if mechanism:
        out["sasl.mechanism"] = mechanism
    if mechanism and not protocol.startswith("SASL_"):
        raise ConfigError(f"sasl.mechanism={mechanism} needs security.protocol SASL_SSL or "
                          f"SASL_PLAINTEXT, not {protocol}",
                          hint="add --kafka-option security.protocol=SASL_SSL")
    return out


def _check_kerberos(out: Mapping[str, str]) -> None:
    """A GSSAPI connection's settings: a keytab with its principal, or neither.

    Raises:
        ConfigError: a keytab without a principal, or one that cannot be read here.
    """
    keytab = out.get("sasl.kerberos.keytab")
    if "sasl.jaas.config" in out or keytab is None:
        return
    if not out.get("sasl.kerberos.principal"):
        raise ConfigError("Kafka setting sasl.kerberos.keytab needs sasl.kerberos.principal "
                          "(the principal to log in as from it)",
                          hint="e.g. --kafka-option sasl.kerberos.principal=ingest@EXAMPLE.COM")
    if not Path(keytab).is_file():
        raise ConfigError(f"Kafka setting sasl.kerberos.keytab={keytab}: no such file here",
                          hint="the keytab must be readable at this path on the driver and "
                               "every executor")


_JAVA_ONLY = {
    "ssl.truststore.password": "librdkafka reads the CA as PEM: give ssl.ca.location=ca.pem "
                               "(keytool -exportcert -rfc -alias ... -keystore truststore.jks)",
    "ssl.keystore.type": "give the client certificate as PEM (ssl.certificate.location and "
                         "ssl.key.location) or a PKCS#12 file (ssl.keystore.location with "
                         "ssl.keystore.password)",
    "sasl.login.callback.handler.class": "for OAUTHBEARER give oauth_cb=module:function (a "
                                         "Python function returning (token, expiry seconds)) "
                                         "or sasl.oauthbearer.method=oidc with its settings",
    "sasl.client.callback.handler.class": "librdkafka has no Java callback handlers; for "
                                          "OAUTHBEARER give oauth_cb=module:function",
    "ssl.truststore.certificates": "give the CA as ssl.ca.pem (PEM text) or ssl.ca.location",
    "ssl.keystore.certificate.chain": "give ssl.certificate.pem, or ssl.certificate.location",
}


def _jaas_credentials(jaas: str) -> dict[str, str]:
    m = _JAAS.match(jaas)
    if m is None:
        raise ConfigError(
            "Kafka setting sasl.jaas.config names a login module the Python clients cannot "
            "use (only PlainLoginModule and ScramLoginModule with username and password are "
            "understood)",
            hint="give sasl.username and sasl.password, or for Kerberos (Krb5LoginModule) "
                 "use --kafka-source jvm")
    options = {k: (a if a is not None and a != "" or b is None else b).encode().decode(
        "unicode_escape") for k, a, b in _JAAS_OPTION.findall(m.group("options"))}
    if "username" not in options or "password" not in options:
        raise ConfigError("Kafka setting sasl.jaas.config lacks username or password",
                          hint='e.g. ...ScramLoginModule required username="u" password="p";')
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def _translate_truststore(out: dict[str, str]) -> None:
    location = out.pop("ssl.truststore.location", None)
    kind = out.pop("ssl.truststore.type", "JKS" if location else None)
    if location is None:
        if kind is not None and kind.upper() != "PEM":
            raise ConfigError(f"Kafka setting ssl.truststore.type={kind} without a truststore",
                              hint="give ssl.ca.location=ca.pem")
        return
    if (kind or "").upper() != "PEM":
        raise ConfigError(
            f"Kafka setting ssl.truststore.location names a {kind or 'JKS'} truststore, which "
            "only Java clients can read",
            hint=f"give ssl.ca.location with the CA as PEM instead (keytool -exportcert -rfc "
                 f"-keystore {location} -alias <ca>) ")
    out["ssl.ca.location"] = location
    out.pop("ssl.truststore.password", None)  # a PEM truststore has none


def _translate_keystore(out: dict[str, str]) -> None:
    kind = out.get("ssl.keystore.type")
    if kind is None:
        return
    if kind.upper() == "PKCS12":  # librdkafka reads PKCS#12 keystores itself
        out.pop("ssl.keystore.type")
        return
    if kind.upper() == "JKS" or "ssl.keystore.location" in out and kind.upper() != "PEM":
        return  # refused below, with the equivalent named
    out.pop("ssl.keystore.type")
    if "ssl.keystore.key" in out:
        out["ssl.key.pem"] = out.pop("ssl.keystore.key")
    if "ssl.keystore.certificate.chain" in out:
        out["ssl.certificate.pem"] = out.pop("ssl.keystore.certificate.chain")
    if "ssl.keystore.location" in out:  # a PEM file with the key and the chain
        pem = out.pop("ssl.keystore.location")
        out["ssl.certificate.location"] = pem
        out["ssl.key.location"] = pem


__all__ = ["REDACTED", "KafkaConnection", "is_secret", "normalize", "read_properties",
           "redact_settings"]
