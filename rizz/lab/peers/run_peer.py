"""One peer (``peer:ace``, ``peer:mem0``) over a stream into a RUN_DIR-shaped folder.

The folder has what ``rizz bench``'s report reads from a rizz run (``run.json``,
``log.jsonl``, ``summary.json``) plus the peer's own files (``peer/``: ACE's skillbook, mem0's
Qdrant store and history), ``calls.jsonl`` (every model call with its request and reply: the
evidence of what the peer sent and got) and ``worker.log`` (the worker's stderr).

Per element the record holds, like ``rizz run``'s: ``step``, ``id``, ``task``, ``calls`` (kind,
prompt/completion tokens, latency s, cached), ``answer`` (raw, extracted, parsed), ``verdict``
(the element's own verifier), ``wall_s``, and ``peer.failures`` (the peer's exceptions and
logged errors; counted, never fatal).

How each peer learns online (docs/peers.md):
- ACE (``ace-framework``): OnlineACE's loop per sample: agent (kind ``answer``) → the bench's
  verifier as environment (feedback text + the reference as ground truth) → reflector
  (``reflect``) → skill manager (``curate``) → skillbook update. Question = instruction +
  input; context = the element's evidence.
- mem0 (``mem0ai``): before answering, ``search`` the top :data:`MEM0_TOP_K` memories; the
  answer prompt is rizz's frozen prompt, compiled and rendered by rizz's own code under the
  bench's budget (:func:`mem0_messages`), with the memories above it (kind ``answer``); after
  the verdict, an interaction whose reward reaches the ``default`` policy's write threshold
  for its verifier is added (``infer=True``: mem0's own extraction call, kind ``memory``);
  context-only input is added as it is.

Resume: a finished folder is kept; an unfinished one is started again from scratch (a peer's
state cannot be rebuilt from the log), and the replies come back from the response caches. A
step whose every call comes back from the caches keeps the ``wall_s`` of the run that computed
it (its replay's own time is ``wall_s_replay``), so a resumed peer's wall time adds up across
runs as a resumed rizz run's does.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rizz.adapters.models import Message
from rizz.adapters.verifiers import extract_answer, verify
from rizz.core import prompt_blocks
from rizz.core.retrieval import Retrieved
from rizz.engine.answering import (
    budget as prompt_budget,
    compile_sent,
    evidence_text as step_evidence,  # the evidence text rizz's own answer path compiles
)
from rizz.engine.render import answer_settings
from rizz.errors import RizzError
from rizz.formats.policy_file import load_policy
from rizz.formats.streams import StreamElement, read_stream
from rizz.lab.peers.report import distinct_failures
from rizz.store.runlog import RunDir, RunDirMismatch, setting_changes, write_json_atomic

__all__ = ["ACE_MODES", "MEM0_TOP_K", "PEERS", "PEER_OPTIONS", "env_options", "PeerError", "PeerWorker", "is_peer", "peer_python", "run_peer"]

PEERS = ("ace", "mem0")
#: Settings handed to each peer (recorded in run.json), before :func:`env_options`. Completion
#: cap 1,024 tokens per call: the Qwen2.5-Coder models write ACE's reflections and mem0's
#: extracted facts as JSON longer than the 256 tokens the SmolLM2 runs allowed (with 256, ACE's
#: reflector stopped at the cap on every step and one mem0 extraction in six was cut:
#: results/2026-12-02-peers-qwen05-probe.md). ACE's instructor retries cut from the package's 3
#: to 1 (one ACE call takes a minute on 2 cores). mem0's ``infer``: its own default, True (an LLM
#: call extracts facts before storing).
PEER_OPTIONS: dict[str, dict[str, Any]] = {"ace": {"max_tokens": 1024, "max_retries": 1},
                                           "mem0": {"max_tokens": 1024, "infer": True}}
#: ACE's structured-output modes (instructor's ``Mode`` names, lower case) that
#: ``RIZZ_PEER_ACE_MODE`` may name: ``md_json``, ACE's own default, and ``tools``, the one run
#: here (instructor's ``json_schema`` sends a ``response_format`` type llama.cpp's server does
#: not take; its ``json`` forces JSON but not the schema).
ACE_MODES = ("md_json", "tools")
_SWITCH = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def env_options(name: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings the environment gives peer ``name`` (over :data:`PEER_OPTIONS`).

    - ``RIZZ_PEER_MEM0_INFER`` (mem0): ``0``/``false``/``no``/``off`` stores each verified
      interaction as it is (``infer=False``), without mem0's extraction call, whose prompt alone
      is ~8,500 tokens, more than SmolLM2's 8,192-token window; ``1``/``true``/``yes``/``on``,
      or unset: mem0's own default, ``infer=True``.
    - ``RIZZ_PEER_ACE_MODE`` (ACE): ``tools`` hands ACE's roles an ``InstructorClient`` in
      instructor's ``Mode.TOOLS`` (ACE's ``ace/llm_providers/instructor_client.py``: "use
      Mode.JSON for OpenAI structured outputs"; TOOLS is instructor's own default for OpenAI)
      instead of ACE's default ``Mode.MD_JSON``: each role's schema goes as a named
      ``tool_choice``, which llama.cpp's OpenAI server decodes under a grammar made from it, as
      OpenAI's API forces a named function's arguments; the prompts stay ACE's (measured:
      results/2026-12-05-ace-tools-qwen15.md). Unset, or ``md_json``: ACE as it ships, with no ``instructor_mode``
      key (so runs recorded before the setting existed resume).

    Case and surrounding spaces are ignored. Raises PeerError naming the variable and the
    values it takes, for any other value.
    """
    env = os.environ if environ is None else environ
    if name == "mem0" and (raw := env.get("RIZZ_PEER_MEM0_INFER")) is not None:
        if (on := _SWITCH.get(raw.strip().lower())) is None:
            raise PeerError(f"RIZZ_PEER_MEM0_INFER={raw!r}: give 0 (store as it is, no extraction call) or 1 (mem0's extraction, "
                            "its default); also false/true, no/yes, off/on")
        return {"infer": on}
    if name == "ace" and (raw := env.get("RIZZ_PEER_ACE_MODE")):
        if (mode := raw.strip().lower()) not in ACE_MODES:
            raise PeerError(f"RIZZ_PEER_ACE_MODE={raw!r}: ACE's structured-output mode is one of {', '.join(ACE_MODES)}")
        return {} if mode == "md_json" else {"instructor_mode": mode}
    return {}


MEM0_TOP_K = 5  # memories put in the answer prompt (mem0's search default is 20; 5 keeps prompts near rizz's)
WORKER = Path(__file__).with_name("worker.py")
REPO_ROOT = Path(__file__).resolve().parents[3]
#: Where ``make peers`` creates ACE's own venv (ace-framework pins anthropic<2, rizz needs >=2).
ACE_VENV = REPO_ROOT / ".venv-peers" / "ace"


class PeerError(RuntimeError, RizzError):
    """A peer cannot run here (its Python or package is missing, or its worker died)."""


def is_peer(entry: str) -> bool:
    """True for a ``peer:NAME`` bench entry."""
    return entry.startswith("peer:")


def peer_python(name: str) -> str:
    """The Python that runs peer ``name``'s worker: ``$RIZZ_PEER_PYTHON_<NAME>`` if set; else
    ACE: ``.venv-peers/ace/bin/python`` (``make peers``); mem0: this interpreter (``rizz[peers]``).

    Raises PeerError for an unknown peer or a missing interpreter."""
    if name not in PEERS:
        raise PeerError(f"unknown peer {name!r}; known: {', '.join('peer:' + p for p in PEERS)}")
    env = os.environ.get(f"RIZZ_PEER_PYTHON_{name.upper()}")
    py = env or (str(ACE_VENV / "bin" / "python") if name == "ace" else sys.executable)
    if not Path(py).exists():
        raise PeerError(f"peer:{name} needs its Python at {py} (run `make peers`, or set RIZZ_PEER_PYTHON_{name.upper()})")
    return py


class PeerWorker:
    """The worker subprocess of one peer (protocol: :mod:`rizz.lab.peers.worker`)."""

    def __init__(self, name: str, workdir: Path, *, python: str | None = None) -> None:
        self.name = name
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", MEM0_TELEMETRY="False",
                   MEM0_DIR=str(workdir / "mem0-home"), LITELLM_LOCAL_MODEL_COST_MAP="True", ANONYMIZED_TELEMETRY="false",
                   PYTHONUNBUFFERED="1")  # nothing downloads or phones home at run time
        self._log = open(workdir.parent / "worker.log", "ab")
        self._proc = subprocess.Popen([python or peer_python(name), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, env=env, cwd=str(workdir), text=True, encoding="utf-8")

    def request(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Send one request, return its reply. Raises PeerError if the worker died or refused."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps(msg, ensure_ascii=False) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except (BrokenPipeError, OSError) as e:
            raise PeerError(f"peer:{self.name} worker died ({e}); see worker.log") from None
        if not line:
            raise PeerError(f"peer:{self.name} worker exited with {self._proc.wait()}; see worker.log")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise PeerError(f"peer:{self.name} refused {msg.get('op')}: {reply.get('error')}")
        return reply

    def close(self) -> None:
        try:
            if self._proc.poll() is None:
                self.request({"op": "close"})
            self._proc.wait(timeout=30)
        except (PeerError, subprocess.TimeoutExpired, ValueError):
            self._proc.kill()
            self._proc.wait()
        finally:
            self._log.close()


def _question(el: StreamElement) -> str:
    return el.input if not el.instruction else f"{el.instruction}\n\n{el.input}"


def _evidence(el: StreamElement) -> str:
    ev = el.evidence
    return "\n\n".join(ev) if isinstance(ev, tuple) else (ev or "")


def _reference(el: StreamElement) -> str:
    refs = el.references
    return refs[0] if len(refs) == 1 else " | ".join(refs)


def mem0_messages(el: StreamElement, memories: list[str], rendering: str, model: Any, budget_cap: int | None = None) -> list[Message]:
    """The mem0 entry's answer prompt: rizz's ``frozen`` prompt for ``el`` (compiled under the
    same budget and rendered as rizz's entries are, so with no memories it is frozen's prompt
    exactly) with mem0's memories above it (``Memories:``, one ``- `` line each; outside the
    budget: mem0 has none).

    Raises PromptBudgetError when the instruction and input alone overflow the budget (frozen
    then gives no answer either).
    """
    frozen = load_policy("frozen")
    _, msgs = compile_sent(prompt_blocks(Retrieved(), el.input, el.instruction, step_evidence(el)), frozen, model, el.shape, rendering,
                           prompt_budget(frozen, model, el.shape, budget_cap))
    if not memories:
        return msgs
    first = msgs[0]
    return [Message(first.role, "Memories:\n" + "\n".join(f"- {m}" for m in memories) + "\n\n" + first.content), *msgs[1:]]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_peer(stream: str | Path, name: str, out: str | Path, model: Any, proxy: Any, model_id: str, *,
             limit: int | None = None, rendering: str = "chat", write_threshold: Callable[[str | None], float] = lambda v: 1.0,
             embedder_path: str | None = None, options: dict[str, Any] | None = None, budget: int | None = None,
             on_step: Callable[[dict[str, Any]], None] | None = None,
             log: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> dict[str, Any]:
    """Run peer ``name`` over ``stream`` into ``out``; returns the summary (see module docstring).

    Args:
      model: rizz's backend (the mem0 entry's answer calls, and ``llm_judge``), cached by the caller.
      proxy: a :class:`~rizz.lab.peers.proxy.CallProxy` in front of the same model.
      model_id: the model id the peers send (``smollm2`` for the bench's llama server).
      write_threshold: verifier name -> reward an interaction needs to be written (mem0).
      budget: the bench's prompt budget cap (``--budget``), under which mem0's answer prompt
        compiles rizz's frozen prompt (:func:`mem0_messages`); recorded as ``budget_cap``.
    Raises:
      PeerError (the peer cannot start), StreamError, RunDirBusy, RunDirMismatch.
    """
    stream, out = Path(stream), Path(out)
    elements = list(read_stream(stream).elements)[: limit if limit is not None else None]
    options = dict(PEER_OPTIONS.get(name, {}), **env_options(name), **(options or {}))
    if options.get("instructor_mode", "md_json") not in ACE_MODES:
        raise PeerError(f"RIZZ_PEER_ACE_MODE={options['instructor_mode']!r}: ACE's structured-output mode is one of {', '.join(ACE_MODES)}")
    meta = {"stream": str(stream), "stream_sha256": _sha(stream), "policy": f"peer:{name}", "model": model.name,
            "rendering": rendering, "peer_options": options, "budget_cap": budget}
    earlier: dict[int, tuple[str, float]] = {}
    with RunDir(out) as rd:
        if rd.meta_path.exists():
            old = rd.meta()  # RunDirCorrupt (a ValueError) naming a run.json that cannot be read
            compared = ("stream_sha256", "model", "rendering", "peer_options") + (("budget_cap",) if "budget_cap" in old else ())
            diffs = [k for k in compared if old.get(k) != meta.get(k)]  # a folder written before budget_cap was recorded: not compared
            if diffs:
                raise RunDirMismatch(root=out, changes=tuple(setting_changes(old, meta, diffs)))
            if rd.summary_path.exists():  # a finished peer run is kept whole (an unfinished one starts again)
                rd.check_limit(limit)
            if len(list(rd.records())) >= len(elements) and rd.summary_path.exists():
                log(f"{out}: already finished; nothing to run")
                return json.loads(rd.summary_path.read_text(encoding="utf-8"))
            earlier = {r["step"]: (r["id"], r["wall_s"]) for r in rd.records() if "wall_s" in r}  # kept for replayed steps
            for p in (rd.log_path, rd.summary_path, out / "calls.jsonl"):
                p.unlink(missing_ok=True)
            shutil.rmtree(out / "peer", ignore_errors=True)
            log(f"{out}: unfinished peer run; starting it again (replies come from the caches)")
        write_json_atomic(rd.meta_path, meta)
        workdir = out / "peer"
        workdir.mkdir(exist_ok=True)
        worker = PeerWorker(name, workdir)
        try:
            kinds = {"ace": ("answer", "reflect", "curate"), "mem0": ("memory",)}[name]
            opened = worker.request({"op": "open", "peer": name, "model": model_id, "workdir": str(workdir),
                                     "base_url": {k: proxy.base_url(k) for k in kinds},
                                     "options": dict(options, embedder_path=embedder_path)})
            meta["peer_package"] = f"{opened['package']}=={opened['version']}"
            write_json_atomic(rd.meta_path, meta)
            records = []
            with open(out / "calls.jsonl", "a", encoding="utf-8") as calls_log:
                for i, el in enumerate(elements):
                    rec = _step(i, el, name, worker, model, proxy, rendering, write_threshold, budget)
                    before = earlier.get(i)
                    if before is not None and before[0] == el.id and rec["calls"] and all(c["cached"] for c in rec["calls"]):
                        # replayed from the caches: the step's wall time is the run's that computed it
                        rec["wall_s_replay"], rec["wall_s"] = rec["wall_s"], before[1]
                    for c in rec.pop("_calls"):
                        calls_log.write(json.dumps({"step": i, "id": el.id, **c}, ensure_ascii=False) + "\n")
                    calls_log.flush()
                    rd.append(rec)
                    records.append(rec)
                    if on_step is not None:
                        on_step(rec)
        finally:
            worker.close()
        summary = summarise_peer(records, meta)
        write_json_atomic(rd.summary_path, summary)
        return summary


def _step(i: int, el: StreamElement, name: str, worker: PeerWorker, model: Any, proxy: Any, rendering: str,
          write_threshold: Callable[[str | None], float], budget_cap: int | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    proxy.take()
    failures: list[dict[str, str]] = []
    own_calls: list[dict[str, Any]] = []
    rec: dict[str, Any] = {"step": i, "id": el.id, "task": el.task, "context_only": el.context_only}
    if el.context_only:
        if name == "mem0":
            failures += worker.request({"op": "remember", "text": el.input})["failures"]
    else:
        raw: str | None = None
        if name == "ace":
            r = worker.request({"op": "answer", "question": _question(el), "context": _evidence(el)})
            raw, failures = r["answer"], failures + r["failures"]
        else:
            r = worker.request({"op": "search", "query": _question(el), "top_k": MEM0_TOP_K})
            failures += r["failures"]
            s = answer_settings(el.shape)
            try:
                msgs = mem0_messages(el, r["memories"], rendering, model, budget_cap)
                g = model.generate(msgs, max_tokens=s.max_tokens, stop=s.stop if rendering == "raw" else (), rendering=rendering)
                raw = g.text
                own_calls.append({"kind": "answer", "prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens,
                                  "latency_s": round(g.latency_s, 4), "cost_usd": g.cost_usd, "cached": g.cached, "status": 200,
                                  "request": [m.content for m in msgs], "reply": g.text})
            except Exception as e:  # noqa: BLE001 - e.g. the memories overflow the window, or the input the budget: a failure, reward 0
                failures.append({"where": "mem0.answer", "error": f"{type(e).__name__}: {e}"[:2000]})
            rec["peer_memories"] = len(r["memories"])
        name_v = el.verifier or "exact_match"
        judge = (lambda p: model.generate([Message("user", p)], max_tokens=8).text) if name_v == "llm_judge" else None
        res = verify(name_v, raw or "", el.references or "", shape=el.shape, metadata=dict(el.metadata), judge=judge)
        ext = extract_answer(raw or "", el.shape)
        reward = float(res.reward)
        rec["answer"] = {"raw": raw, "extracted": ext.answer, "parsed": ext.parsed}
        rec["verdict"] = {"reward": reward, "verifier": name_v, "parsed": res.parsed}
        ref = _reference(el)
        feedback = (f"Correct (reward {reward:.2f})." if reward >= write_threshold(name_v)
                    else f"Incorrect (reward {reward:.2f}). The expected answer is: {ref}")
        r = worker.request({"op": "learn", "question": _question(el), "context": _evidence(el), "answer": raw, "reward": reward,
                            "reference": ref, "feedback": feedback, "verified": reward >= write_threshold(name_v) and raw is not None})
        failures += r["failures"]
    calls = own_calls + proxy.take()  # the answer call comes before anything the peer does to learn
    rec["calls"] = [{k: c[k] for k in ("kind", "prompt_tokens", "completion_tokens", "latency_s", "cost_usd", "cached")} for c in calls]
    rec["peer"] = {"failures": failures, "http_errors": sum(1 for c in calls if c.get("status", 200) != 200)}
    rec["wall_s"] = round(time.perf_counter() - t0, 4)
    rec["_calls"] = calls
    return rec


def summarise_peer(records: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """``summary.json`` of a peer run (the fields of a rizz run's that apply, plus failures)."""
    answered = [r for r in records if "verdict" in r]
    calls = [c for r in records for c in r.get("calls", [])]
    kinds = sorted({c["kind"] for c in calls})
    fails = [f for r in records for f in distinct_failures(r["peer"]["failures"])]
    return {
        "steps": len(records), "answered": len(answered),
        "mean_reward": round(sum(r["verdict"]["reward"] for r in answered) / len(answered), 6) if answered else 0.0,
        "prompt_tokens": sum(c["prompt_tokens"] for c in calls), "completion_tokens": sum(c["completion_tokens"] for c in calls),
        "model_calls": len(calls), "calls_per_answered_step": round(len(calls) / len(answered), 4) if answered else 0.0,
        "calls_by_kind": {k: sum(1 for c in calls if c["kind"] == k) for k in kinds},
        "wall_s": round(sum(r.get("wall_s", 0.0) for r in records), 2),
        "peer_failures": len(fails), "steps_with_failures": sum(1 for r in records if r["peer"]["failures"]),
        "no_answer": sum(1 for r in answered if r["answer"]["raw"] is None),
        "branches": {"total": None, "active": None}, "policy": meta["policy"], "model": meta["model"],
        "peer_package": meta.get("peer_package"), "state_digest": None,
    }
