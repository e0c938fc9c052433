"""Rendering for the CLI: JSON values for Arrow rows, and progress lines on stderr."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from typing import Any

import click


def json_default(value: Any) -> Any:
    """JSON for the Python values pyarrow's to_pylist produces."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    raise TypeError(f"cannot render {type(value).__name__} as JSON")


def dumps(value: Any) -> str:
    return json.dumps(value, default=json_default, separators=(",", ":"))


def progress(message: str, *, quiet: bool = False) -> None:
    """A progress or summary line: stderr only, so stdout keeps results alone."""
    if not quiet:
        click.echo(message, err=True)
