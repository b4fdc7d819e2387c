"""The `countersign` command: `run`, `chat`, `migrate`.

Settings come from environment variables (or a `.env` file); docs/configuration.md lists them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from bot.base.errors import ConfigurationError, DatabaseUnavailableError, UnreachableError
from bot.settings import Settings
from countersign import event_loop
from countersign.exits import CONFIGURATION_EXIT, START_FAILED_EXIT, UNREACHABLE_EXIT
from countersign.logs import configure_logging
from countersign.signals import cancel_on_signals

log = logging.getLogger("countersign")


def open_standard_streams() -> None:
    """Reopen stdin, stdout or stderr on `/dev/null` when the process was started with one closed.

    A descriptor the process opens later would otherwise take the number: libuv (uvloop)
    aborts when it closes a descriptor numbered 0 to 2 it opened itself (`uv__close`), and
    `countersign run --workers N` started with stdout closed (`1>&-`) crash-looped its workers,
    which inherit the supervisor's descriptors.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run; returns the process exit code.

    Known failures print one line to stderr: a refusal (a missing key, a token refused, a wrong
    database password, invalid settings) exits 2; an outage that outlasted `START_RETRY_S`
    (PostgreSQL, Slack or Discord unreachable, a migration lock held elsewhere:
    `countersign.starting`; `migrate` does not try again) exits 75; any other failure of
    `countersign run`'s start exits 70 (`StartFailedError`); `migrate` stopped by SIGTERM or
    Ctrl-C says so and exits 1; tracebacks are for bugs after the start. In a worker of
    `countersign run --workers N` that line is logged, with its time and `worker N`, as the
    worker's other lines are (`_say`).
    """
    open_standard_streams()
    parser = argparse.ArgumentParser(prog="countersign", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="serve every platform whose credentials are set (terminal chat when none)")
    run.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="worker processes sharing the port and the database (default: COUNTERSIGN_WORKERS, else 1)",
    )
    chat = commands.add_parser("chat", help="a conversation in the terminal, approvals as prompts")
    migrate = commands.add_parser("migrate", help="apply migrations and LangGraph's checkpoint setup, then exit")
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # argparse reports a subcommand's unknown option with the top-level usage; the
        # subcommand's own usage says what it takes (it exits with status 2).
        {"run": run, "chat": chat, "migrate": migrate}[args.command].error(
            f"unrecognized arguments: {' '.join(unknown)}"
        )

    if getattr(args, "workers", None) is not None:
        os.environ["COUNTERSIGN_WORKERS"] = str(args.workers)  # validated with the other settings
    try:
        settings = Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        if where == "COUNTERSIGN_WORKERS" and getattr(args, "workers", None) is not None:
            where = "--workers"
        print(f"countersign: invalid setting {where}: {_problem(first)}", file=sys.stderr)
        return CONFIGURATION_EXIT
    configure_logging(settings.server.log_level, settings.server.log_format, settings.server.worker_index)
    worker = settings.server.worker_index
    from countersign.starting import StartFailedError  # the drivers it imports: only past the settings

    try:
        event_loop.run(_dispatch(args.command, settings), settings.server.event_loop)
    except UnreachableError as exc:  # before DatabaseUnavailableError: an unreachable database is both
        _say(exc, worker)
        return UNREACHABLE_EXIT
    except (ConfigurationError, DatabaseUnavailableError) as exc:
        _say(exc, worker)
        return CONFIGURATION_EXIT
    except StartFailedError as exc:
        _say(exc, worker)
        return START_FAILED_EXIT
    except _StoppedEarlyError as exc:
        _say(exc, worker)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _say(failure: Exception, worker: int | None) -> None:
    """The one line a failure ends the command with: `countersign: <failure>` on stderr.

    In a worker (`worker`, its index) it is logged instead, as an error of the `countersign`
    logger: the worker's lines all reach the supervisor's stderr, and this one then carries the
    time and `worker N` (or the JSON fields, `LOG_FORMAT=json`) as the others do.
    """
    if worker is None:
        print(f"countersign: {failure}", file=sys.stderr)
    else:
        log.error("%s", failure)


_PYDANTIC_WORDS = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "int_parsing": "must be a whole number",
    "float_parsing": "must be a number",
}
"""Pydantic's range and number errors, by type, in the words the rest of the command line uses."""


def _problem(error: ErrorDetails) -> str:
    """What is wrong with a refused setting: `--workers 0` reads "must be at least 1, not 0".

    Pydantic's own range and number messages ("Input should be greater than or equal to 1") are
    reworded with the value given; our validators' sentences are kept, without the
    "Value error, " prefix pydantic adds to them.
    """
    words = _PYDANTIC_WORDS.get(error["type"])
    if words is None:
        return error["msg"].removeprefix("Value error, ")
    given = str(error.get("input", ""))
    shown = given if given.isprintable() and len(given) <= 40 else repr(given[:40])
    return f"{words.format(**error.get('ctx', {}))}, not {shown}"


class _StoppedEarlyError(Exception):
    """A signal stopped a command that had not finished its work (exit status 1)."""


async def _dispatch(command: str, settings: Settings) -> None:
    if command == "migrate":
        from contextlib import AsyncExitStack

        from bot.storage.database import migrate, resolve_url

        # Without DATABASE_URL this starts the embedded PostgreSQL: a signal must stop it too.
        stopping = cancel_on_signals(signal.SIGINT, signal.SIGTERM)
        try:
            async with AsyncExitStack() as stack:
                url = await resolve_url(settings.database, stack)
                applied = await migrate(url)
        except asyncio.CancelledError:
            if not stopping.is_set():
                raise
            raise _StoppedEarlyError("migrate was stopped by a signal before it finished") from None
        if not applied:  # what was applied, `apply_migrations` has logged
            log.info("migrations: already up to date")
        return
    if settings.gemini.api_key is None:
        # Before anything starts, so the operator reads one line.
        raise ConfigurationError("GOOGLE_API_KEY is not set: the agent needs a Gemini API key")
    from countersign.server import chat, serve

    if command == "chat":
        await chat(settings)
    else:
        await serve(settings)


if __name__ == "__main__":
    raise SystemExit(main())
