"""Metastore backends by URL scheme: which `Metastore` implementation opens a URL.

`Metastore.open(url)` asks `backend_for(url)`, as pyiceberg's `load_catalog` picks a catalog
class by its URI. A backend is registered as a class or as "module:Class", imported on first
use, so an optional dependency is needed only by the URLs that use it, and its absence is an
error naming the extra to install. Knows URL schemes, never a database.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from ingest.errors import ConfigError

if TYPE_CHECKING:
    from ingest.txn.metastore import Metastore

MEMORY_URL = "sqlite://:memory:"
"""A metastore private to the object that opens it (SQLite in memory)."""


@dataclass(frozen=True)
class _Backend:
    target: str | type[Metastore]
    examples: tuple[str, ...]
    extra: str | None


_BACKENDS: dict[str, _Backend] = {}


def register_metastore(scheme: str, backend: str | type[Metastore], *,
                       examples: tuple[str, ...] = (), extra: str | None = None) -> None:
    """Make `Metastore.open` open URLs of `scheme` with `backend`; a later call for the same
    scheme replaces the earlier one.

    Args:
        scheme: the URL scheme as URLs spell it, without "://" (e.g. "thrift").
        backend: a `Metastore` subclass, or "package.module:ClassName" imported on first use.
        examples: URLs of this scheme, shown in the hint for a URL no backend opens.
        extra: the optional dependency group (`pip install 'ingest[EXTRA]'`) the backend's
            module needs, named when importing it fails for a missing package.

    Raises:
        ConfigError: the scheme is empty or contains ":", or `backend` is a string without
            one ":" between a module and a class name.
    """
    if not scheme or "://" in scheme or ":" in scheme:
        raise ConfigError(f"Cannot register metastore scheme {scheme!r}: give the scheme "
                          "alone, e.g. 'thrift'")
    if isinstance(backend, str) and (backend.count(":") != 1 or not all(backend.split(":"))):
        raise ConfigError(f"Cannot register metastore backend {backend!r} for {scheme}://: "
                          "expected 'package.module:ClassName'")
    _BACKENDS[scheme] = _Backend(backend, tuple(examples), extra)


def supported_schemes() -> list[str]:
    """The registered schemes, sorted."""
    return sorted(_BACKENDS)


def url_scheme(url: str) -> str | None:
    """The scheme of `url`, or None when it has no "scheme://"."""
    scheme, sep, _ = url.partition("://")
    return scheme if sep and scheme else None


def backend_for(url: str) -> type[Metastore]:
    """The `Metastore` implementation registered for the scheme of `url`, imported if needed.

    Raises:
        ConfigError: the URL has no scheme or one no backend is registered for, or the
            backend's module cannot be imported (a missing optional dependency names the
            extra to install).
    """
    scheme = url_scheme(url)
    if scheme is None or scheme not in _BACKENDS:
        raise _unsupported(url, scheme)
    found = _BACKENDS[scheme]
    if isinstance(found.target, str):
        return _import(scheme, found)
    return found.target


def _unsupported(url: str, scheme: str | None) -> ConfigError:
    what = f"scheme {scheme + '://'!r} is not supported" if scheme else "it is not a URL"
    examples = [repr(e) for b in _BACKENDS.values() for e in b.examples]
    hint = None
    if examples:
        hint = "use " + (f"{', '.join(examples[:-1])} or " if len(examples) > 1 else "")
        hint += examples[-1]
    return ConfigError(
        f"Cannot open metastore {strip_userinfo(url)!r}: {what}; supported schemes: "
        + ", ".join(f"{s}://" for s in supported_schemes()), hint=hint)


def _import(scheme: str, backend: _Backend) -> type[Metastore]:
    module_name, _, class_name = cast(str, backend.target).partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        # The backend's own module missing is a bad registration; a package it imports
        # missing is an optional dependency not installed.
        if (backend.extra is None or e.name is None or e.name == module_name
                or module_name.startswith(e.name + ".")):
            raise ConfigError(
                f"Cannot open a {scheme}:// metastore: its backend {backend.target} cannot "
                f"be imported ({e})") from e
        raise ConfigError(
            f"Cannot open a {scheme}:// metastore: its backend needs the package {e.name!r}, "
            "which is not installed",
            hint=f"install ingest's '{backend.extra}' extra: pip install "
                 f"'ingest[{backend.extra}]'") from e
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise ConfigError(f"Cannot open a {scheme}:// metastore: {module_name} has no class "
                          f"{class_name}")
    return cast("type[Metastore]", found)


def strip_userinfo(url: str) -> str:
    """`url` with anything before an '@' of its authority cut out: never a password in a
    message, whatever the scheme."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"


def redact_url(url: str) -> str:
    """A metastore URL fit to print, as its backend shows it (`Metastore.redact_url`): never
    a password. A URL no backend opens loses its user information.

    Raises:
        ConfigError: the backend cannot parse the URL (e.g. a malformed postgresql:// URL).
    """
    try:
        backend = backend_for(url)
    except ConfigError:
        return strip_userinfo(url)
    return backend.redact_url(url)


# The built-in backends, registered by name so none is imported before a URL needs it; a
# backend with an optional dependency names its extra.
_SQL = "ingest.txn.sql:SqlMetastore"
register_metastore("sqlite", _SQL, examples=("sqlite:///absolute/path.sqlite", MEMORY_URL))
register_metastore("postgresql", _SQL, examples=("postgresql://USER@HOST:PORT/DATABASE",))
register_metastore("postgres", _SQL)  # libpq's and many hosting services' spelling
register_metastore("postgresql+psycopg", _SQL)
register_metastore("thrift", "ingest.txn.hms.metastore:HiveMetastore",
                   examples=("thrift://HOST:9083",), extra="hms")

__all__ = ["MEMORY_URL", "backend_for", "redact_url", "register_metastore", "strip_userinfo",
           "supported_schemes", "url_scheme"]
