"""The `ingest` command: a click group; each command lives in its own module under ingest.cli.

Exit codes: 0 ok; 1 ran and found problems; 2 bad usage or config; 3 an operation failed
with an IngestError; 4 internal error (a bug); 130 interrupted.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

from ingest.errors import ConfigError, IngestError

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_FAILED, EXIT_BUG, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130

# Command modules, each exposing `command` (a click.Command). Imported lazily by the group so
# `ingest --help` stays fast and one broken command cannot break the others.
COMMAND_MODULES = {
    "alter": "ingest.cli.alter",
    "cat": "ingest.cli.cat",
    "clean": "ingest.cli.clean",
    "compact": "ingest.cli.compact",
    "compactions": "ingest.cli.compactions",
    "create": "ingest.cli.create",
    "delete": "ingest.cli.delete",
    "dump": "ingest.cli.dump",
    "load": "ingest.cli.load",
    "produce": "ingest.cli.produce",
    "recover": "ingest.cli.recover",
    "status": "ingest.cli.status",
    "stream": "ingest.cli.stream",
    "upsert": "ingest.cli.upsert",
    "verify": "ingest.cli.verify",
}

EPILOG = """\b
Exit codes: 0 ok; 1 ran and found problems; 2 bad usage or config;
3 operation failed; 4 internal error (rerun with --debug); 130 interrupted."""


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is None:
            return None
        return importlib.import_module(module).command  # type: ignore[no-any-return]


@click.group(cls=_LazyGroup, epilog=EPILOG,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for internal errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Stream Kafka into Hive ACID tables stored as ORC, and inspect or repair them."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def report_error(error: BaseException, *, as_json: bool, hint: str | None = None) -> None:
    """Write an error to stderr, as text or as one JSON object."""
    hint = hint if hint is not None else getattr(error, "hint", None)
    message = getattr(error, "message", None) or str(error)
    if isinstance(error, FileNotFoundError) and error.filename:
        message = f"Cannot open file, does not exist: {error.filename}"
    elif isinstance(error, PermissionError) and error.filename:
        message = f"Cannot open file, permission denied: {error.filename}"
    if as_json:
        body: dict[str, Any] = {"type": type(error).__name__, "message": message, "hint": hint}
        for field in ("path", "offset", "table", "write_id"):
            if getattr(error, field, None) is not None:
                body[field] = getattr(error, field)
        click.echo(json.dumps({"error": body}), err=True)
    else:
        click.echo(f"Error: {message}", err=True)
        if hint:
            click.echo(f"Hint: {hint}", err=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the group and maps exceptions to the documented exit codes."""
    args = sys.argv[1:] if argv is None else argv
    as_json = "--json" in args
    debug = "--debug" in args
    try:
        # Without standalone mode click returns ctx.exit(n)'s code instead of exiting.
        code = cli.main(args=args, prog_name="ingest", standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.UsageError as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except ConfigError as e:
        report_error(e, as_json=as_json)
        sys.exit(EXIT_USAGE)
    except (IngestError, FileNotFoundError, PermissionError, IsADirectoryError) as e:
        report_error(e, as_json=as_json)
        sys.exit(EXIT_FAILED)
    except Exception as e:
        if debug:
            raise
        report_error(
            RuntimeError(f"internal error: {type(e).__name__}: {e}"), as_json=as_json,
            hint="this is a bug; rerun with --debug for the traceback",
        )
        sys.exit(EXIT_BUG)
    sys.exit(code if isinstance(code, int) else EXIT_OK)
