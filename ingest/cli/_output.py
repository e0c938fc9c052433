"""Rendering for the CLI: JSON values for Arrow rows, and progress and warning lines on stderr."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import click
import pyarrow as pa
import pyarrow.compute as pc


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


def rows(batch: pa.RecordBatch | pa.Table) -> list[dict[str, Any]]:
    """`batch.to_pylist()`, with strings that are not UTF-8 shown backslash-escaped.

    Hive and other writers can store such bytes in a STRING column; one of them must not make
    a whole table unreadable, so it is rendered as e.g. "\\xff\\xfe" instead of failing.
    """
    try:
        out: list[dict[str, Any]] = batch.to_pylist()
    except UnicodeDecodeError:
        columns = [_escaped(batch.column(i)) for i in range(batch.num_columns)]
        out = pa.table(columns, names=batch.schema.names).to_pylist()
    _restore_earliest_nanosecond(batch, out)
    return out


_NS_MIN = -(2**63)


def _restore_earliest_nanosecond(batch: pa.RecordBatch | pa.Table,
                                 out: list[dict[str, Any]]) -> None:
    """pandas turns timestamp[ns]'s first value, 1677-09-21 00:12:43.145224192, into NaT
    (its null marker): write that value out instead (docs/format.md §19)."""
    for i, field in enumerate(batch.schema):
        if not (pa.types.is_timestamp(field.type) and field.type.unit == "ns"):
            continue
        low = pc.min(batch.column(i))
        if not low.is_valid or low.value != _NS_MIN:  # the common case: one pass, no loop
            continue
        values = batch.column(i).cast(pa.int64()).to_pylist()
        for row, value in zip(out, values, strict=True):
            if value == _NS_MIN:
                row[field.name] = "1677-09-21T00:12:43.145224192"


def _escaped(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    t = array.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        try:
            array.validate(full=True)
            return array
        except pa.ArrowInvalid:
            raw = array.view(pa.binary() if pa.types.is_string(t) else pa.large_binary())
            return pa.array([None if v is None else v.decode("utf-8", "backslashreplace")
                             for v in raw.to_pylist()], t)
    if pa.types.is_struct(t):
        children = [_escaped(array.field(i)) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=array.is_null())
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(array.offsets, _escaped(array.keys),
                                       _escaped(array.items), type=t, mask=array.is_null())
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        cls = pa.ListArray if pa.types.is_list(t) else pa.LargeListArray
        return cls.from_arrays(array.offsets, _escaped(array.flatten()), type=t,
                               mask=array.is_null())
    return array


def dumps(value: Any) -> str:
    return json.dumps(value, default=json_default, separators=(",", ":"))


def progress(message: str, *, quiet: bool = False) -> None:
    """A progress or summary line: stderr only, so stdout keeps results alone."""
    if not quiet:
        click.echo(message, err=True)


@contextmanager
def warnings_to_stderr() -> Iterator[None]:
    """Show the warnings raised in the block (e.g. reading without a snapshot) as lines on
    stderr at its end."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for w in caught:
                click.echo(f"Warning: {w.message}", err=True)


@contextmanager
def warnings_as_they_come() -> Iterator[None]:
    """Show warnings as lines on stderr the moment they are raised (the reader raises them
    while rows stream: before the first row for a read without a snapshot)."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _echo_warning
        yield


def _echo_warning(message: Warning | str, *args: object, **kwargs: object) -> None:
    click.echo(f"Warning: {message}", err=True)


class ProgressBar:
    """A progress bar on stderr for long commands, drawn only when stderr is a terminal and
    --quiet (or --json) is off; otherwise calling it does nothing and `active` is False, so
    the command prints its per-partition lines instead (docs: STYLE, long work).

    Call it as the `on_progress` of a table operation: (done, total, current item). With a
    `unit` ("rows", "bytes") the bar shows the amounts done and the rate instead of a count
    of items (`ingest load`); click adds the ETA.
    """

    def __init__(self, label: str, *, quiet: bool, stream: Any = None,
                 unit: Literal["", "rows", "bytes"] = "") -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.active = not quiet and _is_terminal(self.stream)
        self.unit = unit
        self._bar: Any = None
        self._first: tuple[float, int] = (0.0, 0)  # (when, done) of the first call

    def __call__(self, done: int, total: int, item: str) -> None:
        if not self.active or total <= 0:
            return
        if self._bar is None:
            self._bar = click.progressbar(
                length=total, label=self.label, file=self.stream, show_pos=not self.unit,
                show_percent=True, item_show_func=lambda current: current)
            self._bar.__enter__()
            self._first = (time.monotonic(), done)
        shown = "/".join(item.rstrip("/").split("/")[-2:])  # partition/file, not the root
        if self.unit:
            # The rate since the first call: its work's start is not known here.
            since, first_done = self._first
            seconds = time.monotonic() - since
            rate = (f" {_amount((done - first_done) / seconds, self.unit)}/s"
                    if done > first_done and seconds > 0 else "")
            done_text = f"{done:,}" if self.unit == "rows" else _amount(done, self.unit)
            shown = (f"{done_text}/{_amount(total, self.unit)}{rate} "
                     f"{shown}").rstrip()
        step = max(done - self._bar.pos, 0)
        self._bar.update(step, current_item=shown)
        if step == 0:  # a new item alone (e.g. "parsing" after the last byte): show it
            self._bar.render_progress()

    def close(self) -> None:
        """Finish the bar's line (the summary then starts on a line of its own)."""
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def _amount(value: float, unit: str) -> str:
    """Rows as 1,234,567 rows; bytes in MB (or kB below one)."""
    if unit == "bytes":
        return f"{value / 1e6:.1f} MB" if value >= 1e6 else f"{value / 1e3:.0f} kB"
    return f"{value:,.0f} {unit}"


@contextmanager
def progress_bar(label: str, *, quiet: bool,
                 unit: Literal["", "rows", "bytes"] = "") -> Iterator[ProgressBar]:
    """A `ProgressBar` closed at the end of the block."""
    bar = ProgressBar(label, quiet=quiet, unit=unit)
    try:
        yield bar
    finally:
        bar.close()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or file-less stream is no terminal
        return False
