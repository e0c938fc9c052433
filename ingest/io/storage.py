"""fsspec storage options: the one place a URL and its options become (filesystem, path).

There is no process-wide state: a table carries its own options (`ingest.open_table(...,
storage_options=...)`, the CLI's `--storage-option`) and every caller passes them with the
URL; a Spark task receives its table's options as a value. fsspec's own config
(`FSSPEC_S3_*`) still applies underneath (docs/architecture.md §4).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import fsspec
from fsspec.registry import known_implementations

from ingest.errors import ConfigError, IngestError, StorageError

# fsspec protocols of object stores: keys, not directories; no append, no atomic rename.
# Their filesystems cache listings, which is turned off: another process (an executor, a
# second job) writes files the cache does not know, and a compaction or clean that plans from
# a stale listing could miss a committed delta (docs/invariants.md §10).
OBJECT_STORE_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl",
                                    "oss"})

# Keys whose values never appear in messages or logs.
_SECRET_WORDS = ("secret", "key", "token", "password", "credential", "sas", "session",
                 "connection")


def _normalize(location: str) -> str:
    location = str(location).rstrip("/")
    if "://" not in location:
        return "file://" + location
    protocol, rest = location.split("://", 1)
    return f"{protocol.lower()}://{rest}"


def root_of(location: str) -> str:
    """The bucket (or container) holding `location`, as `protocol://bucket`; a local path's
    root is `file://`. A table's options also reach files in its bucket (`same_root`)."""
    normalized = _normalize(location)
    protocol, rest = normalized.split("://", 1)
    if protocol in ("file", "local"):
        return "file://"
    return f"{protocol}://{rest.lstrip('/').split('/', 1)[0]}"


def options_for(url: str, storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The options that apply to `url`: `storage_options` (a copy), except that a local path
    takes none (a bucket's options given for a whole command must not reach a local file, such
    as a local checkpoint or input file)."""
    if not storage_options or _normalize(url).split("://", 1)[0] in ("file", "local"):
        return {}
    return dict(storage_options)


def same_root(a: str, b: str) -> bool:
    """Whether two locations lie in one bucket (or are both local): a table's storage
    options apply to a file beside it (an input file, a backup directory), not elsewhere."""
    return root_of(a) == root_of(b)


def url_to_fs(url: str,
              storage_options: Mapping[str, Any] | None = None,
              ) -> tuple[fsspec.AbstractFileSystem, str]:
    """(filesystem, path within it) for a URL or plain path.

    Args:
        url: a path or fsspec URL.
        storage_options: the options of the table (or file) `url` belongs to; they win over
            fsspec's config and environment (`FSSPEC_S3_*`). None: those alone. A local path
            ignores them.

    Raises:
        ConfigError: fsspec does not know the URL's scheme, the package of its filesystem is
            not installed, or an object-store URL names no bucket.
    """
    check_url(url)
    options = options_for(url, storage_options)
    protocol = _normalize(url).split("://", 1)[0]
    if protocol in OBJECT_STORE_PROTOCOLS:
        options.setdefault("use_listings_cache", False)
    fs, path = fsspec.core.url_to_fs(str(url), **options)
    return fs, str(path)


def path_of(url: str) -> str:
    """The path of `url` within its filesystem (as `url_to_fs` would give it, without a
    trailing slash), without making a filesystem: no options are needed to name a path.

    Raises:
        ConfigError: see `check_url`.
    """
    check_url(url)
    protocol = _normalize(url).split("://", 1)[0] if "://" in str(url) else "file"
    cls = fsspec.get_filesystem_class(protocol)
    return str(cls._strip_protocol(str(url))).rstrip("/") or "/"


def check_url(url: str) -> None:
    """Refuse a URL no filesystem can serve, before anything uses it.

    Raises:
        ConfigError: an unknown scheme (`foo://`), a scheme whose fsspec package is not
            installed (naming the package), or an object-store URL without a bucket
            (`s3://`, `s3:///t`).
    """
    text = str(url)
    if "://" not in text or "::" in text:  # a local path; chained URLs are fsspec's to check
        return
    scheme, rest = text.split("://", 1)
    protocol = scheme.lower()
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError as e:
        raise ConfigError(
            f"Cannot use {text}: unknown URL scheme {scheme}://",
            hint="give a local path, or a URL fsspec knows (file://, s3://, gs://, abfs://, "
                 "hdfs://, memory://)") from e
    except ImportError as e:
        package = _backend_package(protocol)
        raise ConfigError(
            f"Cannot use {text}: the {protocol}:// filesystem needs the Python package "
            f"{package}, which is not installed ({e})",
            hint=f"pip install {package}") from e
    if protocol in OBJECT_STORE_PROTOCOLS and (not rest or rest.startswith("/")):
        raise ConfigError(
            f"Cannot use {text}: the bucket is missing (nothing between {protocol}:// and the "
            "path)", hint=f"name the bucket first, e.g. {protocol}://BUCKET/warehouse/events")


def _backend_package(protocol: str) -> str:
    """The package holding `protocol`'s filesystem class, from fsspec's registry."""
    known = known_implementations.get(protocol, {})
    return str(known.get("class", protocol)).split(".", 1)[0]


def redacted(options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` with the values of secret-looking keys replaced, for messages and logs."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if isinstance(value, Mapping):
            out[key] = redacted(value)
        elif any(word in key.lower() for word in _SECRET_WORDS) and key != "key_prefix":
            out[key] = "***"
        else:
            out[key] = value
    return out


def parse_storage_options(items: Iterable[str], *, flag: str = "--storage-option",
                          ) -> dict[str, Any]:
    """`("KEY=VALUE", ...)` as fsspec options; a value is JSON when it parses as JSON
    (`anon=false`, `client_kwargs={"region_name": "us-east-1"}`), else the string itself.

    Raises:
        ConfigError: an item has no `=` or an empty key (the message never shows the value).
    """
    out: dict[str, Any] = {}
    for number, item in enumerate(items, 1):
        key, eq, text = str(item).partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"Cannot use {flag} number {number}: expected KEY=VALUE, got "
                              f"{'no =' if not eq else 'an empty KEY'}",
                              hint=f'for example {flag} endpoint_url=http://127.0.0.1:9000 '
                                   f'or {flag} client_kwargs={{"region_name":"us-east-1"}}')
        try:
            out[key] = json.loads(text)
        except ValueError:
            out[key] = text
    return out


# Exception class names (botocore, aiohttp, google-auth, azure) by what they mean; matched by
# name so this layer imports none of those packages.
_UNREACHABLE = frozenset({"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                          "ClientConnectorError", "ServerDisconnectedError",
                          "ClientOSError", "ConnectionClosedError", "ResponseStreamingError"})
_NO_CREDENTIALS = frozenset({"NoCredentialsError", "PartialCredentialsError"})
_REFUSED_CODES = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
                  "InvalidToken", "ExpiredToken", "Forbidden", "(403)")
# A missing file in a reachable bucket is the caller's to report (its name may hold "403").
_NOT_A_SERVICE_FAILURE = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


def describe_failure(error: BaseException, location: str,
                     storage_options: Mapping[str, Any] | None = None,
                     ) -> StorageError | None:
    """A `StorageError` naming the bucket and endpoint when `error` (or its cause) is a
    failure of the storage service itself; None for anything else (a missing file in an
    existing bucket stays a FileNotFoundError).

    Args:
        error: what an operation on `location` raised.
        location: the table location the caller named.
        storage_options: the options the operation used (for the endpoint it names).
    """
    if isinstance(error, (IngestError, StorageError)) or "://" not in str(location):
        return None
    endpoint = _endpoint(location, storage_options)
    bucket = root_of(location)
    where = f"{bucket} at {endpoint or 'the default endpoint'}"
    for cause in _chain(error):
        names = {c.__name__ for c in type(cause).__mro__}
        text = str(cause)
        if "NoSuchBucket" in text or "bucket does not exist" in text.lower():
            return StorageError(
                f"Cannot access {where}: bucket {bucket.split('://', 1)[1]} does not exist",
                location=location, endpoint=endpoint,
                hint="create the bucket first, or fix the table location")
        if isinstance(cause, _NOT_A_SERVICE_FAILURE):
            return None
        if names & _NO_CREDENTIALS:
            return StorageError(
                f"Cannot access {where}: no credentials found", location=location,
                endpoint=endpoint, hint="give --storage-option key=... --storage-option "
                "secret=... (or storage_options= in Python), or set FSSPEC_S3_KEY / "
                "AWS_ACCESS_KEY_ID")
        if names & _UNREACHABLE or isinstance(cause, (ConnectionError, TimeoutError)):
            return StorageError(
                f"Cannot reach {where}: {type(cause).__name__}: {_short(text)}",
                location=location, endpoint=endpoint,
                hint="check endpoint_url, that the server is up and the network path to it; "
                     "nothing was committed by the failed operation")
        if isinstance(cause, PermissionError) or any(c in text for c in _REFUSED_CODES):
            return StorageError(
                f"Cannot access {where}: the server refused the credentials or denied "
                f"access ({_short(text)})", location=location, endpoint=endpoint,
                hint="check the key and secret storage options (or FSSPEC_S3_* / AWS_* "
                     "environment) and the bucket's policy")
    return None


# Client libraries of fsspec's object stores: a TypeError, ValueError or AttributeError
# raised inside them while storage options are given comes from an option they refused.
_CLIENT_PACKAGES = frozenset({"botocore", "aiobotocore", "boto3", "google", "azure", "aiohttp"})
_UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '([^']+)'")


def describe_option_error(error: BaseException, location: str,
                          storage_options: Mapping[str, Any] | None,
                          ) -> ConfigError | None:
    """A `ConfigError` naming the storage option when `error` (or its cause) is the
    filesystem refusing an option given for `location` (an unknown key, a value of the wrong
    kind); None for anything else. Secret values are never shown.

    Args:
        error: what an operation on `location` raised.
        location: the table location the caller named.
        storage_options: the options the operation was given for `location`.
    """
    options = options_for(location, storage_options)
    if not options or isinstance(error, IngestError):
        return None
    protocol = _normalize(location).split("://", 1)[0]
    backend = {_backend_package(protocol)} | _CLIENT_PACKAGES
    for cause in _chain(error):
        if not isinstance(cause, (TypeError, ValueError, AttributeError)):
            continue
        found = _UNEXPECTED_KEYWORD.search(str(cause))
        if isinstance(cause, TypeError) and found and found.group(1) in _keys(options):
            return ConfigError(
                f"Cannot use {location}: storage option {found.group(1)!r} is not an option "
                f"of the {protocol}:// filesystem", hint="check the --storage-option keys "
                "(storage_options= in Python) against the filesystem's documentation")
        if _raised_in(cause, backend):
            return ConfigError(
                f"Cannot use {location}: the {protocol}:// filesystem refused its storage "
                f"options ({', '.join(sorted(options))}): {type(cause).__name__}: "
                f"{_short(_scrub(str(cause), options))}",
                hint="check the --storage-option values (storage_options= in Python), e.g. "
                     "endpoint_url=http://host:9000 and client_kwargs as a JSON object")
    return None


def _keys(options: Mapping[str, Any]) -> set[str]:
    """Every key of `options` and of the mappings inside it (client_kwargs, config_kwargs)."""
    keys = set(options)
    for value in options.values():
        if isinstance(value, Mapping):
            keys |= _keys(value)
    return keys


def _raised_in(error: BaseException, packages: set[str]) -> bool:
    """Whether the innermost frame of `error`'s traceback is in one of `packages`."""
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = str(tb.tb_frame.f_globals.get("__name__", ""))
    return module.split(".", 1)[0] in packages


def _scrub(text: str, options: Mapping[str, Any]) -> str:
    """`text` without the value of any secret-looking option."""
    for key, value in options.items():
        if isinstance(value, Mapping):
            text = _scrub(text, value)
        elif redacted({key: value})[key] == "***" and str(value):
            text = text.replace(str(value), "***")
    return text


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen and len(seen) < 10:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."


def _endpoint(location: str, storage_options: Mapping[str, Any] | None) -> str | None:
    options = options_for(location, storage_options)
    protocol = _normalize(location).split("://", 1)[0]
    try:
        config = fsspec.config.conf.get(protocol, {})
    except AttributeError:
        config = {}
    found = (options.get("endpoint_url")
             or (options.get("client_kwargs") or {}).get("endpoint_url")
             or config.get("endpoint_url")
             or (config.get("client_kwargs") or {}).get("endpoint_url"))
    return str(found) if found else None


def check_bucket(fs: fsspec.AbstractFileSystem, location: str,
                 storage_options: Mapping[str, Any] | None = None) -> None:
    """Fail clearly when the bucket of `location` does not exist. fsspec object stores
    create a missing bucket on `makedirs`; a table must never create one by accident.
    `storage_options` (those `fs` was made with) only name the endpoint in the message.

    Raises:
        StorageError: the bucket does not exist.
        OSError: the storage failed otherwise (credentials, network).
    """
    bucket = root_of(location).split("://", 1)[1]
    if not bucket:
        return
    try:
        fs.info(bucket)
    except FileNotFoundError as e:
        raise StorageError(
            f"Cannot use {location}: bucket {bucket} does not exist at "
            f"{_endpoint(location, storage_options) or 'the default endpoint'}",
            location=location, endpoint=_endpoint(location, storage_options),
            hint="create the bucket first, or fix the table location") from e
