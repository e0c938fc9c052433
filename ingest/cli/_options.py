"""Option parsing shared by several commands: `--property KEY=VALUE`, `--txn-timeout-s`.

Parsing only; what a value means is the table layer's (`ingest.table`).
"""

from __future__ import annotations

import math

import click

from ingest.errors import ConfigError


def parse_properties(values: tuple[str, ...]) -> dict[str, str]:
    """`("k=v", ...)` as a dict, keys and values stripped.

    Raises:
        ConfigError: an item has no `=` or an empty key.
    """
    out = {}
    for item in values:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"Cannot use --property {item!r}: expected KEY=VALUE",
                              hint="for example --property orc.compress=ZLIB")
        out[key.strip()] = value.strip()
    return out


class Seconds(click.ParamType):
    """A finite number of seconds, at least 0 (click's FloatRange lets nan and inf pass)."""

    name = "SECONDS"

    def convert(self, value: object, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds < 0:
            self.fail(f"{value!r} must be a finite number of seconds, at least 0", param, ctx)
        return seconds


SECONDS = Seconds()
