"""Small RUN_DIRs for the ``rizz view`` tests and benchmark (tests only), made in about a second.

:class:`FamilyModel` and :class:`FamilyEmbedder` stand in for the model and the embedder: an
element's family is the first word of its input (``Sum:``, ``Total:``, ``Stance:``,
``Capital:``, ``Note:``), the embedder puts each family on its own axis (``Total`` next to
``Sum``), and the model labels by family, adds numbers (wrong when the sum is a multiple of
3), picks a letter by hash, and answers every capital with an HTML-laden wrong reply. With
:data:`VIEW_POLICY` (the judge asked every time, labels never snapped, the anchor weighing
little, a lifecycle pass every 8 steps) a short stream spawns, merges and prunes branches,
writes episodes, rules, anti-patterns and scoped context, and reuses them in later prompts.

:data:`HOSTILE` is stream text that would run as script if a page ever rendered it as markup.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from stubs import StubBackend

from tests.core.helpers import unit

#: Text that runs script if rendered as markup; the view must show it as text.
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
#: A policy that makes branches move in a short stream (see the module docstring).
VIEW_POLICY = """extends: default
routing: {judge: always, snap_enabled: false, jaccard_enabled: false, w_anchor: 0.2}
lifecycle: {merge_every: 8, stale_after: 12}
rules: {distill_every: 2}
"""
_FAMILIES = {"Sum": 0, "Total": 0, "Stance": 1, "Capital": 2, "Note": 3}
_LABELS = {"Sum": ("solve-math", "sum"), "Total": ("solve-math", "sum-total"), "Stance": ("classify", "stance"),
           "Capital": ("answer-question", "capital-city")}
_CURRENT = re.compile(r"(Sum|Total|Stance|Capital): (?:What is (\d+) \+ (\d+)\?)?")


class FamilyEmbedder:
    """Unit vectors on the family's axis (16-d), nudged by the text's hash."""

    name = "stub:family"
    dim = 16

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            h = np.frombuffer(hashlib.sha256(t.encode()).digest()[: self.dim], np.uint8).astype(np.float32) / 255.0
            family = t.split(":")[0].split(" ")[0].capitalize()  # an input's "Sum: ...", a label's "sum total"
            out[i] = unit(h * 0.15 + 3.0 * np.eye(self.dim, dtype=np.float32)[_FAMILIES.get(family, 4)])
        return out


class FamilyModel(StubBackend):
    """Labels, answers and rules by family (see the module docstring)."""

    name = "stub:family"

    def reply(self, messages: Sequence[Any]) -> str:
        text = messages[-1].content
        if any("You label tasks" in m.content for m in messages):
            fam = _CURRENT.findall(text)
            f, a = _LABELS[fam[-1][0]] if fam else ("answer-question", "general")
            return json.dumps({"function": f, "application": a})
        if any("IF-THEN" in m.content for m in messages):
            return "IF the question adds two numbers THEN answer with their sum"
        found = list(_CURRENT.finditer(text))
        if not found:
            return "?"
        fam, a, b = found[-1].groups()
        if fam in ("Sum", "Total"):
            total = int(a) + int(b)
            return str(total if total % 3 else total + 1)
        if fam == "Stance":
            return "ABC"[int(hashlib.sha256(text[found[-1].start():].encode()).hexdigest(), 16) % 3]
        return f'{HOSTILE} Paris'


def family_stream(path: Path, n: int, *, hostile: bool = True) -> Path:
    """``n`` elements: sums throughout, ``Total`` sums from a third of the way (a second branch
    that merges), stances, three capitals at the start (a branch that goes stale and is
    pruned) and a context note every 9th; ``hostile``: one stance input carries :data:`HOSTILE`."""
    lines = []
    for i in range(n):
        a, b = (i * 7) % 23, (i * 5) % 17
        if i in (1, 2, 4):
            lines.append({"id": f"cap{i}", "input": f"Capital: which city is the capital of country {i}?", "reference": "Rome",
                          "verifier": "exact_match", "metadata": {"shape": "span", "task": "capital"}})
        elif i % 9 == 8:
            lines.append({"id": f"note{i}", "input": f"Note: user u1 likes the number {a}.", "context_only": True, "metadata": {"scope": "u1"}})
        elif i % 3 == 0:
            body = f"Stance: {HOSTILE} text {i} — A, B or C?" if hostile and i == 6 else f"Stance: what is the stance of text {i}? A, B or C."
            lines.append({"id": f"st{i}", "input": body, "reference": "B", "verifier": "exact_match",
                          "metadata": {"shape": "letter", "task": "stance", "scope": "u1"}})
        else:
            fam = "Total" if i >= n // 3 and i % 2 else "Sum"
            lines.append({"id": f"q{i}", "input": f"{fam}: What is {a} + {b}?", "reference": str(a + b), "verifier": "exact_match",
                          "metadata": {"shape": "number", "task": fam.lower(), "scope": "u1"}})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def view_policy(folder: Path) -> Path:
    """:data:`VIEW_POLICY` written as ``folder/view-test.yaml``."""
    p = folder / "view-test.yaml"
    p.write_text(VIEW_POLICY, encoding="utf-8")
    return p


def make_run(out: Path, n: int = 48, *, policy: str | Path | None = None, stream: Path | None = None) -> Path:
    """``rizz run`` (in-process) of :func:`family_stream` into ``out`` with the stubs; returns ``out``."""
    from rizz.adapters.models.cache import CachedModel, ResponseCache
    from rizz.engine.run import run_stream
    from rizz.formats.policy_file import load_policy

    out.mkdir(parents=True, exist_ok=True)
    stream = stream or family_stream(out.parent / f"{out.name}.jsonl", n)
    source = str(policy or view_policy(out.parent))
    model = CachedModel(FamilyModel(), ResponseCache(out / "responses.sqlite"))
    run_stream(stream, load_policy(source), source, out, model, FamilyEmbedder(), rendering="chat", log=lambda m: None)
    return out


def make_bench(out: Path, n: int = 30, policies: Sequence[str] = ("frozen", "default")) -> Path:
    """``rizz bench`` (in-process) of :func:`family_stream` over ``policies`` into ``out``."""
    from rizz.adapters.models.cache import CachedModel, ResponseCache
    from rizz.lab.bench import run_bench

    out.mkdir(parents=True, exist_ok=True)
    stream = family_stream(out.parent / f"{out.name}.jsonl", n)
    model = CachedModel(FamilyModel(), ResponseCache(out / "responses.sqlite"))
    run_bench(stream, list(policies), out, model, FamilyEmbedder(), rendering="chat", log=lambda m: None)
    return out


def make_session(path: Path, n: int = 20, *, policy: str | Path = "default") -> str:
    """A live :class:`rizz.Session` over :func:`family_stream`'s first ``n`` elements: verdicts folded
    two answers late, every fifth answer expired, the last two left pending; returns its digest."""
    from rizz import Session, Verdict

    path.parent.mkdir(parents=True, exist_ok=True)
    elements = [json.loads(x) for x in family_stream(path.parent / f"{path.name}.jsonl", n).read_text(encoding="utf-8").splitlines()]
    s = Session.open(path, policy=str(policy), model=FamilyModel(), embedder=FamilyEmbedder(), durability="os")
    try:
        pending = []
        for el in elements:
            p = s.answer(el)
            if not el.get("context_only"):
                pending.append((p, el))
            while len(pending) > 2:
                q, qel = pending.pop(0)
                if q.step % 5 == 4:
                    s.expire(q, "the user left")
                else:
                    s.fold(q, Verdict(1.0 if q.answer == qel["reference"] else 0.0, qel["verifier"]))
        return s.digest()
    finally:
        s.close()


def find_chromium() -> str | None:
    """A Chromium or Chrome to drive headless: ``$RIZZ_CHROMIUM``, else the first on PATH (Debian's
    ``chromium`` package, which ``make test`` installs as root), else None."""
    import os
    import shutil

    env = os.environ.get("RIZZ_CHROMIUM")
    if env:
        return env
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")) if p), None)


def add_fake_peer(bench: Path, name: str = "peer:mem0", source: str = "frozen") -> Path:
    """A peer's folder in ``bench`` shaped as ``rizz bench -P peer:NAME`` writes it (run.json with
    no policy_data, log.jsonl without inputs, calls.jsonl with each answer request), made from
    ``source``'s answers; ``results.json`` lists it last. For the view only: no peer ran."""
    from rizz.engine.logfold import views
    from rizz.store.runlog import RunDir

    out = bench / name
    out.mkdir()
    recs = views(list(RunDir(bench / source).records()))
    (out / "run.json").write_text(json.dumps({"policy": name, "model": FamilyModel.name, "rendering": "chat"}))
    log, calls = [], []
    for r in recs:
        rec = {"step": r["step"], "id": r["id"], "task": r.get("task"), "context_only": r.get("context_only", False),
               "calls": [], "peer": {"failures": [], "http_errors": 0}, "wall_s": 0.01}
        if r.get("answer"):
            rec.update(answer=r["answer"], verdict=r["verdict"])
            rec["calls"] = [{"kind": "answer", "prompt_tokens": 40, "completion_tokens": 1, "latency_s": 0.01, "cost_usd": None, "cached": False}]
            calls.append({"step": r["step"], "id": r["id"], "kind": "answer",
                          "request": [{"role": "user", "content": f"Memories:\n- none\n\n{r['input']['text']}"}], "reply": r["answer"]["raw"]})
        log.append(rec)
    (out / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in log))
    (out / "calls.jsonl").write_text("".join(json.dumps(x) + "\n" for x in calls))
    results = json.loads((bench / "results.json").read_text())
    results["policies"].append(name)
    (bench / "results.json").write_text(json.dumps(results))
    return out
