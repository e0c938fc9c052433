"""The Hive Metastore's Thrift API, imported in one place so a missing extra is one clear error.

The stubs are Hive 4's (`hive_metastore`, generated from Hive's `hive_metastore.thrift` and
shipped in pyiceberg's wheel); older servers skip the fields they do not know, and a method
they lack answers TApplicationException UNKNOWN_METHOD (connection.py maps it).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ingest.errors import ConfigError

_HINT = "install the Hive Metastore extra: pip install 'ingest[hms]' (pyiceberg[hive] and thrift)"


def _load() -> tuple[ModuleType, ModuleType, Any, Any, Any, Any] | None:
    try:
        from hive_metastore import ThriftHiveMetastore, ttypes
        from thrift.protocol import TBinaryProtocol
        from thrift.Thrift import TApplicationException, TException
        from thrift.transport import TSocket, TTransport
    except ImportError:
        return None
    return ThriftHiveMetastore, ttypes, TBinaryProtocol, TSocket, TTransport, (
        TApplicationException, TException)


_LOADED = _load()


def require() -> tuple[ModuleType, ModuleType, Any, Any, Any, Any]:
    """The stub modules and the thrift runtime.

    Returns:
        (ThriftHiveMetastore, ttypes, TBinaryProtocol, TSocket, TTransport,
        (TApplicationException, TException)).

    Raises:
        ConfigError: the `hms` extra is not installed.
    """
    if _LOADED is None:
        raise ConfigError("Cannot talk to a Hive Metastore: the Thrift client is not installed",
                          hint=_HINT)
    return _LOADED


def ttypes() -> Any:
    """Hive's Thrift structs and enums (`hive_metastore.ttypes`).

    Raises:
        ConfigError: the `hms` extra is not installed.
    """
    return require()[1]
