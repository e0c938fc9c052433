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


ProgressUnit = Literal["rows", "bytes", "partitions", "files"]
"""What a bar counts: amounts of work (`ingest load`) or items done (compact, clean, verify,
recover)."""


class ProgressBar:
    """A progress bar on stderr for long commands, drawn only when stderr is a terminal and
    --quiet (or --json) is off; otherwise calling it does nothing and `active` is False, so
    the command prints its per-partition lines instead (docs: STYLE, long work).

    Call it as the `on_progress` of a table operation: (done, total, current item). The bar
    shows the percent, the amount done of the total in `unit`, the rate, the ETA (the rest
    at that rate) and the current item, e.g.
    ``Compacting  [####----]   66%  2/3 partitions  1.4 partitions/s  ETA 1s  events/dt=...``.
    """

    def __init__(self, label: str, *, unit: ProgressUnit, quiet: bool, stream: Any = None,
                 rate_from: Literal["start", "first-call"] = "start") -> None:
        """Args:
            label: the bar's title.
            unit: what `done` and `total` count.
            quiet: draw nothing.
            stream: default: stderr.
            rate_from: count the rate from when the bar is made ("start": its work starts
                then), or from its first call (its work waits behind another bar's, as
                `ingest load`'s rows written behind the bytes read).
        """
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.active = not quiet and _is_terminal(self.stream)
        self.unit = unit
        self._rate_from = rate_from
        self._bar: Any = None
        self._first: tuple[float, int] = (time.monotonic(), 0)  # (when, done) of the start

    def __call__(self, done: int, total: int, item: str) -> None:
        if not self.active or total <= 0:
            return
        if self._bar is None:
            # click draws the bar and the percent; the amounts, rate and ETA are ours, so
            # they show from the first call (click's ETA waits a second and hides at 100%).
            self._bar = click.progressbar(
                length=total, label=self.label, file=self.stream, show_pos=False,
                show_percent=True, show_eta=False, item_show_func=lambda current: current)
            self._bar.__enter__()
            if self._rate_from == "first-call":
                self._first = (time.monotonic(), done)
        shown = "/".join(item.rstrip("/").split("/")[-2:])  # partition/file, not the root
        since, first_done = self._first
        seconds = time.monotonic() - since
        rate = (done - first_done) / seconds if done > first_done and seconds > 0 else None
        rate_text = _amount(rate, self.unit) if rate is not None else f"-- {self.unit}"
        eta = (_duration((total - done) / rate) if rate is not None
               else "0s" if done >= total else "--")
        done_text = f"{done:,}" if self.unit != "bytes" else _amount(done, self.unit)
        shown = (f"{done_text}/{_amount(total, self.unit)}  {rate_text}/s  ETA {eta}  "
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
    """Rows as 1,234,567 rows; bytes in MB (or kB below one); items with one decimal below
    ten (a rate of 0.5 partitions)."""
    if unit == "bytes":
        return f"{value / 1e6:.1f} MB" if value >= 1e6 else f"{value / 1e3:.0f} kB"
    if unit != "rows" and value < 10 and value != int(value):
        return f"{value:.1f} {unit}"
    return f"{value:,.0f} {unit}"


def _duration(seconds: float) -> str:
    """5s, 2m05s, 1h02m."""
    s = max(round(seconds), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@contextmanager
def progress_bar(label: str, *, unit: ProgressUnit, quiet: bool,
                 rate_from: Literal["start", "first-call"] = "start",
                 ) -> Iterator[ProgressBar]:
    """A `ProgressBar` (arguments as there) closed at the end of the block."""
    bar = ProgressBar(label, unit=unit, quiet=quiet, rate_from=rate_from)
    try:
        yield bar
    finally:
        bar.close()


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or file-less stream is no terminal
        return False
