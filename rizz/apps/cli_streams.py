"""``rizz streams ...``: build benchmark streams and check stream files.

Mounted into the main CLI as ``rizz streams``; runnable alone as
``python -m rizz.apps.cli_streams``.

Data root resolution for ``build`` (first that applies): ``--data-root DIR``; the
environment variable ``RIZZ_DATA_ROOT``; ``../shared/data`` relative to the working
directory. The full data is only needed for full-size streams; small real slices ship in
the repository under ``data/``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from rizz.extras import extra_needed

with extra_needed("cli", "the rizz command"):
    import typer

from rizz.apps.cli_help import Command, Group
from rizz.formats.stream_checks import ERRORS_SHOWN, not_jsonl
from rizz.formats.streams import BadLine, StreamElement, StreamError, count_tasks, read_stream, write_stream
from rizz.formats.wording import plural as _plural
from rizz.lab.builders import BENCHES, BuildError, BuildOptions, build, prompt_chars

__all__ = ["app", "resolve_data_root", "DEFAULT_DATA_ROOT", "DATA_ROOT_ENV"]

DEFAULT_DATA_ROOT = Path("..") / "shared" / "data"
DATA_ROOT_ENV = "RIZZ_DATA_ROOT"

# a flag takes metavar="" (rich help would print <bool> beside it; rizz/apps/cli.py)
app = typer.Typer(cls=Group, no_args_is_help=True, add_completion=False,
                  help="Build benchmark streams (JSONL, specs/stream-format.md) and check stream files.")


@app.callback()
def _streams() -> None:
    """Build benchmark streams (JSONL, specs/stream-format.md) and check stream files."""


#: Builders whose data ships in a package, not under the data root.
PACKAGED_BENCHES = ("bfcl",)


def resolve_data_root(option: Path | None) -> Path:
    """The benchmark data root: ``option``, else ``$RIZZ_DATA_ROOT``, else ``../shared/data``.

    Raises:
      BuildError: if the chosen directory does not exist (the message says the data is only
        needed for full-size runs and that shipped slices live in ``data/``).
    """
    if option is not None:
        root, how = option, "--data-root"
    elif os.environ.get(DATA_ROOT_ENV):
        root, how = Path(os.environ[DATA_ROOT_ENV]), f"${DATA_ROOT_ENV}"
    else:
        root, how = DEFAULT_DATA_ROOT, "the default ../shared/data"
    if not root.is_dir():
        raise BuildError(
            f"benchmark data root not found: {root} (from {how}). Pass --data-root DIR or set "
            f"{DATA_ROOT_ENV}. The full benchmark data is only needed to build full-size streams; "
            "small real slices ship in this repository under data/ (data/trace-mini, "
            "data/streambench-mini, data/locomo-mini, data/interference-mini, data/bfcl-mini, "
            "data/tau-bench-mini).")
    return root


def _task_counts(elements: Iterable[StreamElement]) -> str:
    """``FOMC 40, - 3`` (:func:`rizz.formats.streams.count_tasks`, formatted)."""
    return ", ".join(f"{t} {c}" for t, c in count_tasks(elements).items())


def _split_csv(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(v.strip() for v in value.split(",") if v.strip()) or None


@app.command("build", cls=Command)
def build_cmd(
    bench: str = typer.Argument(..., help=f"One of: {', '.join(BENCHES)}."),
    out: Path = typer.Option(..., "--out", metavar="FILE", help="Stream file to write (JSONL)."),
    order: str | None = typer.Option(
        None, metavar="ORDER", help="sequential | interleaved (default: interleaved for streambench and interference, else sequential)."),
    split: str = typer.Option("test", metavar="SPLIT", help="train | eval | test (bfcl: train | test; tau-bench: train | dev | test)."),
    per_task: int | None = typer.Option(None, "--per-task", metavar="N", help="First N items per task (default: every item)."),
    seed: int = typer.Option(0, metavar="N", help="Seed of the interleaving shuffle."),
    tasks: str | None = typer.Option(
        None, metavar="LIST", help="Comma list: TRACE tasks, LoCoMo conversations (conv-41), StreamBench sources or interference groups (numbers, letters, code, text)."),
    data_root: Path | None = typer.Option(
        None, "--data-root", metavar="DIR", help=f"Benchmark data (default ${DATA_ROOT_ENV}, else ../shared/data)."),
    max_input_chars: int | None = typer.Option(
        None, "--max-input-chars", metavar="N", help="Drop (and count) elements with more prompt chars than this."),
    warn_chars: int = typer.Option(24000, "--warn-chars", metavar="N", help="Report elements longer than this."),
    pool: str = typer.Option("500", metavar="SIZE", help="TRACE test pool: 500 or 5000."),
    keep_duplicates: bool = typer.Option(False, "--keep-duplicates", metavar="",
                                         help="TRACE: keep repeated (prompt, answer) records."),
    categories: str | None = typer.Option(
        None, "--categories", metavar="LIST", help="bfcl: comma list of simple_python, multiple, parallel, parallel_multiple, simple_java, "
        "simple_javascript, live_simple, live_multiple, live_parallel, live_parallel_multiple, irrelevance, live_irrelevance, "
        "live_relevance, multi_turn_base, multi_turn_miss_func, multi_turn_miss_param, multi_turn_long_context "
        "(default simple_python; docs/agents.md says how each is checked)."),
    domain: str | None = typer.Option(None, "--domain", metavar="DOMAIN", help="tau-bench: retail | airline."),
) -> None:
    """Build BENCH's stream deterministically and write it to --out."""
    try:
        opts = BuildOptions(split=split, order=order, per_task=per_task, seed=seed,
                            tasks=_split_csv(categories) or _split_csv(tasks), max_input_chars=max_input_chars,
                            warn_chars=warn_chars, pool=pool, keep_duplicates=keep_duplicates, domain=domain)
        if bench not in BENCHES:
            raise BuildError(f"unknown benchmark {bench!r}; expected one of {', '.join(BENCHES)}")
        # BFCL's data ships inside the bfcl-eval wheel: no data root needed (nor checked)
        root = Path(data_root or ".") if bench in PACKAGED_BENCHES else resolve_data_root(data_root)
        result = build(bench, root, opts)
        if not result.elements:
            raise BuildError(f"no elements to write to {out} (an empty stream file is refused by "
                             "`rizz streams check` and `rizz run`); check --tasks, --per-task and --max-input-chars")
    except BuildError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    n = write_stream(out, result.elements)
    typer.echo(f"wrote {_plural(n, 'element')} to {out} ({_task_counts(result.elements)})")


@app.command("check", cls=Command)
def check_cmd(
    streams: list[Path] = typer.Argument(..., metavar="STREAM...", help="Stream files (JSONL) to validate."),
    first_only: bool = typer.Option(False, "--first", metavar="", help="Stop at the first bad line of each file (default: check every line; each error of a line either way)."),
    all_errors: bool = typer.Option(False, "--all", metavar="", help=f"Print every error line, however many (default: the first {ERRORS_SHOWN} of a file, then one line counting the rest)."),
) -> None:
    """Validate stream files against the contract; exit 1 naming FILE:LINE and field if any is bad.

    Each error of a bad line is one ``error: FILE:LINE: field 'PATH': ...`` line (every bad
    field of it, not only the first), up to 20 error lines a file (``--all``: every one); then
    one ``error: FILE: N more errors ... not shown`` line, which also says when the file does
    not look like JSONL (most of its lines, of 3 or more, are not JSON objects: a binary file, CSV, prose).
    Prints ``FILE: N elements ok, M bad; TASK N, ...; longest N chars`` for each file (``M bad
    (K errors)`` when a line has several; ``-`` counts elements without ``metadata.task``, as
    in ``summary.json``). An empty file is an error.
    """
    bad = [stream for stream in streams if not _check_stream(stream, first_only, all_errors)]
    if bad:
        raise typer.Exit(1)


def _check_stream(stream: Path, first_only: bool, all_errors: bool = False) -> bool:
    """Report on ``stream`` (its bad lines on stderr, its counts on stdout); True when it is all good."""
    try:
        read = read_stream(stream, skip_bad=not first_only, every_error=True)
    except StreamError as err:
        # a file whose every line is bad (each non-blank line is one of err.bad's); with --first,
        # each error of the first bad line (the file's other lines unread: no JSONL verdict)
        _say_bad(stream, err.bad, len({b.line for b in err.bad}) if err.line is None else None, all_errors)
        if err.line is None or not err.bad:  # a bad line's errors are err.bad, the first of them err
            typer.echo(f"error: {err}", err=True)
        return False
    except OSError as err:  # "error: s.jsonl: No such file or directory", not Python's [Errno 2] form
        typer.echo(f"error: {stream}: {err.strerror or err}", err=True)
        return False
    _say_bad(stream, read.bad, len(read.elements) + read.bad_lines, all_errors)
    longest = max((prompt_chars(el) for el in read.elements), default=0)
    errors = f" ({_plural(len(read.bad), 'error')})" if len(read.bad) > read.bad_lines else ""
    typer.echo(f"{stream}: {_plural(len(read.elements), 'element')} ok, {read.bad_lines} bad{errors}; "
               f"{_task_counts(read.elements)}; longest {_plural(longest, 'char')}")
    return not read.bad


def _say_bad(stream: Path, bad: Sequence[BadLine], lines: int | None, all_errors: bool) -> None:
    """Print ``bad``'s errors on stderr, one line each: the first :data:`ERRORS_SHOWN` (every one
    with ``all_errors``), then one line counting the rest and saying when ``stream`` (of
    ``lines`` non-blank lines, None when not all were read) does not look like JSONL
    (:func:`rizz.formats.stream_checks.not_jsonl`), or that line alone when nothing was left out."""
    shown = bad if all_errors else bad[:ERRORS_SHOWN]
    for b in shown:
        typer.echo(f"error: {stream}:{b.line}: {b.message}", err=True)
    not_objects = len({b.line for b in bad if b.field is None})  # not UTF-8, not JSON, or not an object
    doubt = None
    if lines is not None and not_jsonl(lines, not_objects):  # then look for NUL bytes (a read of the file) to say so
        doubt = not_jsonl(lines, not_objects, _holds_nul(stream))
    rest = bad[len(shown):]
    if rest:
        more = {b.line for b in rest} - {b.line for b in shown}
        on = f" on {_plural(len(more), 'more line')}" if more else ""
        summary = (f"{_plural(len(rest), 'more error')}{on} not shown (the first {ERRORS_SHOWN} are; "
                   "--all prints every one)") + (f"; {doubt}" if doubt else "")
        typer.echo(f"error: {stream}: {summary}", err=True)
    elif doubt:
        typer.echo(f"error: {stream}: {doubt}", err=True)


def _holds_nul(path: Path) -> bool:
    """Whether the file at ``path`` holds a NUL byte (False when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            return any(b"\0" in chunk for chunk in iter(lambda: fh.read(1 << 20), b""))
    except OSError:
        return False


if __name__ == "__main__":  # pragma: no cover
    app()
