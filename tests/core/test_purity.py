"""The core imports only the standard library, attrs, pyrsistent and numpy."""

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "rizz" / "core"
ALLOWED = {"attrs", "pyrsistent", "numpy", "rizz"}
FORBIDDEN_STDLIB = {"random", "time", "datetime", "socket", "subprocess", "os", "io", "pathlib", "urllib", "http", "secrets", "uuid", "threading"}
# no datetime at all: metadata.time is parsed by the shell (rizz/formats/timekeys.py) into an instant
CLOCK_CALLS = {"now", "today", "utcnow", "fromtimestamp", "utcfromtimestamp", "timestamp", "astimezone", "localtime"}


def test_core_imports_only_allowed_modules():
    import sys

    bad = []
    for f in CORE.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for n in names:
                top = n.split(".")[0]
                if top in FORBIDDEN_STDLIB or (top not in ALLOWED and top not in sys.stdlib_module_names):
                    bad.append(f"{f.name}: {n}")
            if isinstance(node, ast.Attribute) and node.attr in CLOCK_CALLS:
                bad.append(f"{f.name}: .{node.attr}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in {"open", "print", "input"}:
                bad.append(f"{f.name}: call to {node.func.id}()")
    assert bad == []


def test_core_import_does_not_load_torch_or_yaml():
    import subprocess
    import sys

    code = "import sys, rizz.core; print(sorted(m for m in ('torch','yaml','llama_cpp','sentence_transformers','anthropic') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
