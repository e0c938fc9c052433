"""What a table definition says to the operations: its input columns, its load codec, and
which table properties it may carry.

Plain functions of an `ingest.txn.TableDefinition`; no files, no metastore. The properties
checked are the ones Hive's full-ACID ORC tables rely on (`orc.compress`, `transactional`,
`transactional_properties`, `bucketing_version`), the compactor's thresholds, and our own
`ingest.*` keys.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pyarrow as pa

from ingest.acid import CODECS, can_append, parse_codec
from ingest.acid.compaction import CompactionThresholds
from ingest.acid.format import to_ddl
from ingest.acid.write import Compression
from ingest.errors import ConfigError
from ingest.txn import TableDefinition

# Set by `create_table(adopt=True)`: the highest write id found on disk when the table took
# over existing ACID data. Write ids up to it are committed without a metastore record.
ADOPTED_PROPERTY = "ingest.adopted_max_write_id"

# How long the cleaner leaves obsolete directories for readers outside the metastore (Hive's
# delayed cleanup); `ingest clean --retention` overrides it for one run.
RETENTION_PROPERTY = "ingest.cleaner.retention.seconds"
DEFAULT_RETENTION_S = 300.0

# Whether compaction names its output with Hive 4's `_vT` suffix (T: the compactor's own
# transaction) so it becomes visible when T commits, not when it is renamed (docs/format.md
# §17). Default: on only where a rename is not atomic (object stores).
VISIBILITY_PROPERTY = "ingest.compaction.visibility_suffix"

# The codecs `orc.compress` may name, as Hive spells them: exactly those the writer has.
ORC_CODECS: tuple[str, ...] = tuple(c.upper() for c in CODECS)

# The initiator's per-table thresholds, under the names Hive reads (docs/format.md §17):
# property -> (CompactionThresholds field, type, smallest value).
THRESHOLD_PROPERTIES: dict[str, tuple[str, type, float]] = {
    "compactorthreshold.hive.compactor.delta.num.threshold": ("delta_num", int, 0),
    "compactorthreshold.hive.compactor.delta.pct.threshold": ("delta_pct", float, 0.0),
    "compactorthreshold.hive.compactor.abortedtxn.threshold": ("aborted", int, 0),
    # Ours, in Hive's per-table pattern (Hive has no delete-event trigger, §17).
    "compactorthreshold.ingest.compactor.delete.pct.threshold": ("delete_pct", float, 0.0),
}
NO_AUTO_COMPACTION = "no_auto_compaction"

# Properties every full-ACID table has, with the one value this format allows.
_FIXED = {"transactional": "true", "transactional_properties": "default",
          "bucketing_version": "2"}


def check_properties(properties: Mapping[str, str], *, table: str,
                     action: str = "create") -> dict[str, str]:
    """`properties` with known values normalised (`orc.compress` upper case), or an error.

    Args:
        properties: table properties a user gives (`--property KEY=VALUE`).
        table: the table's name, for the message.
        action: "create" or "alter", for the message.

    Returns:
        The properties to store.

    Raises:
        ConfigError: a known property has a value this table cannot have, or a key is ours
            (`ingest.*`, set by ingest itself, except the cleaner's retention and the
            compaction's visibility suffix).
    """
    out = dict(properties)
    for key, value in properties.items():
        where = f"Cannot {action} table {table}: table property {key}={value!r}"
        if key == RETENTION_PROPERTY:
            _seconds(value, where)
        elif key == VISIBILITY_PROPERTY:
            out[key] = _boolean(key, value, where)
        elif key.lower().startswith("ingest."):
            raise ConfigError(f"{where} is reserved: ingest sets ingest.* properties itself",
                              hint="leave it out")
        if key == "orc.compress":
            if value.upper() not in ORC_CODECS:
                raise ConfigError(f"{where} names no ORC codec: expected one of "
                                  f"{', '.join(ORC_CODECS)}",
                                  hint="for example --property orc.compress=ZLIB (Hive 3 "
                                  "reads ZLIB, SNAPPY, LZ4 and NONE; ZSTD needs ORC 1.6)")
            out[key] = value.upper()
        elif key in _FIXED and value.lower() != _FIXED[key]:
            raise ConfigError(f"{where} is not supported: ingest writes full-ACID tables, "
                              f"which have {key}={_FIXED[key]}", hint="leave it out")
        elif key in _FIXED:
            out[key] = _FIXED[key]
        elif key in THRESHOLD_PROPERTIES or key.lower() == NO_AUTO_COMPACTION:
            out[key] = _compaction_value(key, value, where)
    return out


def _compaction_value(key: str, value: str, where: str) -> str:
    """A threshold or `no_auto_compaction` value, normalised, or an error."""
    if key.lower() == NO_AUTO_COMPACTION:
        return _boolean(key, value, where)
    _, kind, least = THRESHOLD_PROPERTIES[key]
    try:
        number = kind(value)
    except ValueError:
        number = None
    if number is None or not math.isfinite(number) or number < least:
        what = "a whole number" if kind is int else "a number"
        raise ConfigError(f"{where} is not {what} >= {least:g}",
                          hint=f"for example --property {key}="
                          + ("10" if kind is int else "0.1"))
    return str(number)


def _boolean(key: str, value: str, where: str) -> str:
    if value.lower() not in ("true", "false"):
        raise ConfigError(f"{where} is not true or false",
                          hint=f"for example --property {key}=true")
    return value.lower()


def uses_visibility_suffix(defn: TableDefinition, protocol: str | Sequence[str],
                           metastore: bool | None = None) -> bool:
    """Whether compaction of the table names its output `base_N_vT` / `delta_A_B_vT`.

    Args:
        defn: the table; its `ingest.compaction.visibility_suffix` decides when set.
        protocol: the table filesystem's fsspec protocol(s). Where files cannot be appended
            to (object stores) a directory "rename" copies object by object, so a reader
            could see half an output under a Hive 3 name: the suffix is then the default and
            cannot be turned off. (memory:// keeps Hive 3 names like a local disk.)
        metastore: what the metastore's readers need
            (`MetastoreCapabilities.visibility_suffix`): True (Hive 4) names every output
            `_vT`; False (Hive 3, which cannot parse it) never does; None leaves it to the
            table.

    Raises:
        ConfigError: the stored value is not true or false (set outside ingest), or it is
            false on such storage, or the storage needs the suffix and the metastore's
            readers cannot parse it.
    """
    protocols = (protocol,) if isinstance(protocol, str) else tuple(protocol)
    no_rename = not any(can_append(f"{p}://") for p in protocols)
    if metastore is not None:
        if no_rename and not metastore:
            raise ConfigError(
                f"Cannot compact table {defn.name} on {protocols[0]}://: a directory is moved "
                "file by file there, so the output needs Hive 4's _vT names, and the Hive 3 "
                "metastore's readers do not parse them",
                hint="use a Hive 4 metastore for tables on object stores")
        return metastore
    value = defn.properties.get(VISIBILITY_PROPERTY)
    if value is None:
        return no_rename
    chosen = _boolean(VISIBILITY_PROPERTY, value,
                      f"Cannot compact table {defn.name}: table property "
                      f"{VISIBILITY_PROPERTY}={value!r}") == "true"
    if no_rename and not chosen:
        raise ConfigError(
            f"Cannot compact table {defn.name} with {VISIBILITY_PROPERTY}=false: on "
            f"{protocols[0]}:// a directory is moved file by file, so readers could see a "
            "half-moved output under a Hive 3 name",
            hint=f"set {VISIBILITY_PROPERTY}=true with `ingest alter`")
    return chosen


def compaction_thresholds(defn: TableDefinition) -> CompactionThresholds:
    """The initiator's thresholds for a table: its properties over Hive's defaults."""
    values: dict[str, float | bool] = {}
    for key, (field, kind, _) in THRESHOLD_PROPERTIES.items():
        if key in defn.properties:
            values[field] = kind(defn.properties[key])
    off = {k.lower(): v for k, v in defn.properties.items()}.get(NO_AUTO_COMPACTION, "false")
    return CompactionThresholds(**values, auto=off.lower() != "true")  # type: ignore[arg-type]


def _seconds(value: str, where: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(f"{where} is not a number of seconds, at least 0",
                          hint=f"for example --property {RETENTION_PROPERTY}=300")
    return seconds


def cleaner_retention_s(defn: TableDefinition) -> float:
    """The table's `ingest.cleaner.retention.seconds` (300 when unset).

    Raises:
        ConfigError: the stored value is not a number of seconds (set outside ingest).
    """
    value = defn.properties.get(RETENTION_PROPERTY)
    if value is None:
        return DEFAULT_RETENTION_S
    return _seconds(value, f"Cannot clean table {defn.name}: table property "
                           f"{RETENTION_PROPERTY}={value!r}")


def table_schema(defn: TableDefinition) -> pa.Schema:
    """Row columns followed by partition columns (strings): what a load's input holds."""
    return pa.schema(list(defn.row_schema) + [pa.field(c, pa.string())
                                              for c in defn.partition_columns])


def table_compression(defn: TableDefinition) -> Compression:
    """The ORC codec of the table's `orc.compress` property (zlib when unset).

    Raises:
        ConfigError: the property names no codec the writer has.
    """
    return parse_codec(defn.properties.get("orc.compress", "zlib"),
                       where=f"Cannot load into {defn.name}: table property orc.compress=",
                       hint=f"change it with `ingest alter {defn.location} --property "
                       "orc.compress=ZLIB`")


def adopted_max_write_id(defn: TableDefinition) -> int:
    """The highest write id the table adopted from disk at create (0: none)."""
    value = defn.properties.get(ADOPTED_PROPERTY, "0")
    return int(value) if value.isdigit() else 0


def ddl_type(field: pa.Field) -> str:
    """The Hive type of one column, as `--schema` spells it (e.g. ``BIGINT``)."""
    return to_ddl(pa.schema([field])).split(" ", 1)[1]
