"""The Kerberos side of a connection to a Kerberized Hive Metastore: the client's credentials,
the metastore's service principal, and failures said in words that name what to check.

Credentials come from a keytab when one is named (the `client_keytab=` option, else MIT's
`KRB5_CLIENT_KTNAME`): MIT krb5 gets tickets from the keytab itself into a memory cache of
this process, with no `kinit` and no cron job. An acquired credential object keeps using the
tickets it got, past their end, and acquiring again always asks the KDC for new ones (both
seen with MIT krb5 1.20), so one object per keytab and principal serves every connection
until half its tickets' lifetime has passed, and is then acquired again: a stream outlives
any number of ticket lifetimes (tests/kerberos, with 20-second tickets). Without a keytab
they come from the ticket cache (`KRB5CCNAME` or the default one) that `kinit` filled.

`gssapi` (python-gssapi, the `kerberos` extra) is imported only when a connection asks for
Kerberos.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ingest.errors import ConfigError, MetastoreError

_T = TypeVar("_T")

_EXTRA_HINT = "pip install 'ingest[kerberos]' (python-gssapi; it needs MIT krb5's libraries)"

# Per (keytab, principal): the memory cache's name, and the credentials last acquired with
# the lifetime they had then.
_CACHES: dict[tuple[str, str], str] = {}
_HELD: dict[tuple[str, str], tuple[Any, float]] = {}
_CACHES_LOCK = threading.Lock()


def require_gssapi() -> Any:
    """The `gssapi` module.

    Raises:
        ConfigError: python-gssapi is not installed.
    """
    try:
        import gssapi
    except ImportError as e:
        raise ConfigError("Kerberos to the Hive Metastore (auth=kerberos) needs the python "
                          "package gssapi, which is not installed", hint=_EXTRA_HINT) from e
    return gssapi


def within(timeout_s: float, call: Callable[[], _T]) -> _T:
    """`call()` on a helper thread, waited for at most `timeout_s`: MIT krb5 waits far
    longer for a KDC that accepts a connection and never answers (50 s was seen) than a
    connect timeout allows. A call that runs over is left to finish on its own.

    Raises:
        TimeoutError: it did not finish in time.
        Whatever `call` raised.
    """
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            outcome.append((False, e))

    worker = threading.Thread(target=run, daemon=True, name="ingest-kerberos")
    worker.start()
    worker.join(timeout_s)
    if not outcome:
        raise TimeoutError(f"no answer within {timeout_s:g} s")
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


CLOCK_SKEW_HINT = ("the clocks of this machine and the KDC (or the metastore host) differ by "
                   "more than Kerberos allows (5 minutes by default, krb5.conf's clockskew); "
                   "synchronize them (NTP: timedatectl, chronyc tracking)")

KDC_SILENT_HINT = ("the KDC did not answer: check the kdc entries of the realm in krb5.conf "
                   "(KRB5_CONFIG), that the KDC runs, and that its port is reachable from here")


def service_principal(pattern: str, host: str) -> str:
    """The metastore's principal: `pattern` with an instance of `_HOST` replaced by `host`,
    lower-cased, as Hadoop's SecurityUtil does (`hive/_HOST@REALM` -> `hive/h1@REALM`)."""
    name, at, realm = pattern.partition("@")
    service, slash, instance = name.partition("/")
    if slash and instance == "_HOST":
        instance = host.lower()
    return f"{service}{slash}{instance}{at}{realm}"


def keytab_principals(path: str) -> list[str]:
    """The principals of a keytab file, in file order, each once (MIT's format, version 2;
    the keys themselves are skipped, never kept).

    Raises:
        ConfigError: the file cannot be read or is not a keytab.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ConfigError(f"Cannot read the Kerberos keytab {path}: {e.strerror or e}",
                          hint="check the path in client_keytab= or KRB5_CLIENT_KTNAME and "
                               "that this user may read it") from e
    if len(data) < 2 or data[0] != 5 or data[1] != 2:
        raise ConfigError(f"{path} is not a Kerberos keytab (version 0x0502)",
                          hint="export one with kadmin's ktadd or ktutil")
    found: list[str] = []
    at = 2
    try:
        while at + 4 <= len(data):
            (size,) = struct.unpack_from(">i", data, at)
            at += 4
            if size <= 0:  # a hole left by a removed entry
                at += -size
                continue
            found_name = _entry_principal(data, at)
            if found_name not in found:
                found.append(found_name)
            at += size
    except struct.error as e:
        raise ConfigError(f"The Kerberos keytab {path} is truncated or damaged",
                          hint="export it again") from e
    return found


def _entry_principal(data: bytes, at: int) -> str:
    (count,) = struct.unpack_from(">H", data, at)
    at += 2
    realm, at = _counted(data, at)
    parts = []
    for _ in range(count):
        part, at = _counted(data, at)
        parts.append(part)
    return "/".join(parts) + "@" + realm


def _counted(data: bytes, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">H", data, at)
    end = at + 2 + length
    if end > len(data):
        raise struct.error("string past the end")
    return data[at + 2:end].decode("utf-8", "replace"), end


def client_keytab(option: str | None) -> str | None:
    """The keytab to use: the `client_keytab=` option, else `KRB5_CLIENT_KTNAME`, else None
    (then the ticket cache). A `FILE:` prefix is dropped."""
    keytab = option or os.environ.get("KRB5_CLIENT_KTNAME") or None
    if keytab is None:
        return None
    return keytab[len("FILE:"):] if keytab.startswith("FILE:") else keytab


def client_credentials(*, keytab: str | None, principal: str | None, location: str,
                       timeout_s: float) -> tuple[Any, str]:
    """Acquire the client's credentials (a `gssapi.Credentials`) and say where they came from.

    Args:
        keytab: the keytab (see `client_keytab`), or None for the ticket cache.
        principal: the client principal; None takes the keytab's first entry, or the ticket
            cache's principal.
        location: the metastore URI, for errors.
        timeout_s: how long getting tickets from the KDC may take.

    Returns:
        (credentials, what: "keytab PATH as PRINCIPAL" or "the ticket cache ..."), the second
        for messages.

    Raises:
        ConfigError: gssapi is missing, the keytab is unreadable or lacks the principal or
            its current keys, or there is neither a keytab nor a ticket (or it expired).
        MetastoreError: the KDC does not answer.
    """
    gssapi = require_gssapi()
    if keytab is not None:
        principals = keytab_principals(keytab)
        if not principals:
            raise ConfigError(f"The Kerberos keytab {keytab} holds no keys",
                              hint="export the client principal's keys into it (kadmin ktadd)")
        chosen = principal or principals[0]
        if chosen not in principals and "@" not in chosen:
            # A principal given without its realm: the keytab's entry in any realm.
            chosen = next((p for p in principals if p.split("@")[0] == chosen), chosen)
        if chosen not in principals:
            raise ConfigError(f"The Kerberos keytab {keytab} holds no key for {chosen} (it "
                              f"holds {', '.join(principals)})",
                              hint="set client_principal= to one of them, or use the keytab "
                                   "of that principal")
        key = (keytab, chosen)
        with _CACHES_LOCK:
            cache = _CACHES.setdefault(key, f"MEMORY:ingest-{os.getpid()}-{len(_CACHES)}")
            held = _HELD.get(key)
        what = f"keytab {keytab} as {chosen}"
        if held is not None and _seconds_left(held[0]) > held[1] / 2:
            return held[0], what
        name = gssapi.Name(chosen, gssapi.NameType.kerberos_principal)
        try:
            # With an empty or old cache this asks the KDC for a ticket from the keytab.
            creds = within(timeout_s, lambda: gssapi.Credentials(
                name=name, usage="initiate", store={"client_keytab": keytab, "ccache": cache}))
        except TimeoutError as e:
            raise MetastoreError(f"Cannot get a Kerberos ticket from the {what} for the Hive "
                                 f"Metastore at {location}: the KDC did not answer within "
                                 f"{timeout_s:g} s", location=location,
                                 hint=KDC_SILENT_HINT) from e
        except gssapi.exceptions.GSSError as e:
            message = f"Cannot use the Kerberos {what}: {gss_reason(e)}"
            if kdc_unreachable(e):
                raise MetastoreError(message, location=location, hint=KDC_SILENT_HINT) from e
            raise ConfigError(message, hint=credential_hint(e)) from e
        with _CACHES_LOCK:
            _HELD[key] = (creds, _seconds_left(creds))
        return creds, what
    cache_name = os.environ.get("KRB5CCNAME") or "the default ticket cache"
    what = f"the ticket cache ({cache_name})"
    try:
        name = (gssapi.Name(principal, gssapi.NameType.kerberos_principal)
                if principal else None)
        creds = gssapi.Credentials(name=name, usage="initiate")
        creds.lifetime  # noqa: B018 - raises when the cached ticket has expired
    except gssapi.exceptions.GSSError as e:
        reason = gss_reason(e)
        if "expired" in reason.lower() or type(e).__name__ == "ExpiredCredentialsError":
            raise ConfigError(f"The Kerberos ticket in {what} has expired",
                              hint="run kinit again, or name a keytab (client_keytab= in the "
                                   "metastore URI, or KRB5_CLIENT_KTNAME) so that tickets "
                                   "are renewed by themselves") from e
        raise ConfigError(f"No Kerberos ticket and no keytab for the Hive Metastore: {reason}",
                          hint="name a keytab (client_keytab= in the metastore URI, or "
                               "KRB5_CLIENT_KTNAME, with client_principal= if it holds several "
                               "principals) or run kinit first") from e
    return creds, what


def _seconds_left(creds: Any) -> float:
    try:
        return float(creds.lifetime or 0)
    except Exception:  # noqa: BLE001 - expired or unreadable: acquire again
        return 0.0


def gss_reason(e: BaseException) -> str:
    """The words of a GSSError: the mechanism's (minor) message when there is one, which
    names the Kerberos failure; the generic major message otherwise."""
    minor = _messages(e, "min")
    if minor.strip().lower() in ("", "success", "unknown error"):
        minor = ""
    major = _messages(e, "maj")
    return (minor or major or str(e)).strip().rstrip(".")


def _messages(e: BaseException, kind: str) -> str:
    getter = getattr(e, "get_all_statuses", None)
    code = getattr(e, f"{kind}_code", 0)
    if getter is None or not code:
        return ""
    try:
        return "; ".join(str(m) for m in getter(code, kind == "maj") if m)
    except Exception:  # noqa: BLE001 - only the wording of an error already being raised
        return ""


def kdc_unreachable(e: BaseException) -> bool:
    """Whether a GSSError says that no KDC answered."""
    reason = gss_reason(e).lower()
    return "cannot contact any kdc" in reason or "cannot find kdc" in reason


# MIT's codes (krb5/krb5_err.h): KRB5KRB_AP_ERR_SKEW, which the KDC (or a service) answers
# when a request's time is off from its clock by more than the allowed skew, and
# KRB5_KDCREP_SKEW, the client's own check of a KDC reply with kdc_timesync off.
_SKEW_CODES = frozenset({-1765328347, -1765328236})


def clock_skew(e: BaseException) -> bool:
    """Whether a GSSError is Kerberos's "Clock skew too great"."""
    code = getattr(e, "min_code", 0)
    signed = code - (1 << 32) if code >= 1 << 31 else code
    return signed in _SKEW_CODES or "clock skew" in gss_reason(e).lower()


def credential_hint(e: BaseException) -> str:
    """What to check for a failure of getting or using the client's tickets."""
    reason = gss_reason(e).lower()
    if kdc_unreachable(e):
        return KDC_SILENT_HINT
    if clock_skew(e):
        return CLOCK_SKEW_HINT
    if "preauthentication failed" in reason or "integrity check" in reason or "password" in reason:
        return ("the keytab's keys are not the principal's current ones (a keytab exported "
                "before the keys changed, or another realm's): export it again")
    if "client not found" in reason or "client" in reason and "not found" in reason:
        return "the client principal does not exist in the realm: check client_principal="
    if "key table entry not found" in reason or "keytab" in reason:
        return "check that the keytab holds the client principal's keys (klist -kt KEYTAB)"
    if "expired" in reason:
        # Tickets just obtained from a keytab that are already past their end: this
        # machine's clock runs ahead of the KDC's by more than their lifetime.
        return ("the tickets expired: run kinit again, or use a keytab (client_keytab=); "
                "with a keytab, check that this machine's clock agrees with the KDC's (NTP)")
    return "check krb5.conf (KRB5_CONFIG), the keytab or ticket cache, and the KDC"
