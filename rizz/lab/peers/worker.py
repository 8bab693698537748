"""The peer worker: one peer package driven over a JSON-lines protocol on stdin/stdout.

Run as ``PYTHON worker.py`` with the Python of the environment that has the peer installed
(ACE: its own venv, since ``ace-framework`` conflicts with rizz's pins; mem0: rizz's own
environment with ``rizz[peers]``). This file imports only the standard library and the peer,
never rizz, so it runs in an environment without rizz.

Protocol (one JSON object per line each way; every request gets exactly one reply):

``{"op": "open", "peer": "ace"|"mem0", "base_url": {kind: URL}, "model": ID, "workdir": DIR, "options": {...}}``
    -> ``{"ok": true, "package": NAME, "version": V}``. ``base_url`` maps each role's call
    kind to an OpenAI base URL (the recording proxy); ``workdir`` holds the peer's files.
``{"op": "answer", "question": Q, "context": C}`` (ACE)
    -> ``{"ok": true, "answer": TEXT|null, "failures": [...]}``: the ACE agent's final answer.
``{"op": "search", "query": Q, "top_k": K}`` (mem0) -> ``{"ok": true, "memories": [TEXT, ...], "failures": [...]}``.
``{"op": "learn", "question": Q, "context": C, "answer": A, "reward": R, "reference": REF, "feedback": F, "verified": B}``
    -> ``{"ok": true, "failures": [...]}``. ACE: the reflector and skill manager run on this
    sample (its online loop, the verifier's reference as ground truth). mem0: a verified
    interaction (question, answer) is added (``infer`` from the options, mem0's default True).
``{"op": "remember", "text": T}`` (mem0, context-only input) -> ``{"ok": true, "failures": [...]}``.
``{"op": "close"}`` -> ``{"ok": true}``, then the worker exits.

A failure is ``{"where": ROLE, "error": MESSAGE}``: an exception raised by the peer (e.g. the
agent's JSON never validated) or an ERROR logged by the peer's logger (mem0 logs and swallows
unparseable JSON). Failures never end the worker; an unknown op gets ``{"ok": false, "error"}``.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
from typing import Any


class _Errors(logging.Handler):
    """Collects ERROR records of the peer's loggers as failures."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.items: list[dict[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.items.append({"where": record.name, "error": record.getMessage()[:2000]})

    def take(self) -> list[dict[str, str]]:
        out, self.items = self.items, []
        return out


def _fail(where: str, e: BaseException) -> dict[str, str]:
    return {"where": where, "error": f"{type(e).__name__}: {e}"[:2000]}


class AcePeer:
    """ace-framework's OnlineACE, one sample at a time: the agent answers, the bench's verifier
    gives feedback and ground truth, then the reflector and skill manager update the skillbook."""

    package = "ace-framework"

    def __init__(self, base_url: dict[str, str], model: str, workdir: str, options: dict[str, Any]) -> None:
        from ace import Agent, OnlineACE, Reflector, Sample, SkillManager, TaskEnvironment
        from ace.adaptation import EnvironmentResult
        from ace.llm_providers import LiteLLMClient

        max_tokens = int(options.get("max_tokens", 512))
        retries = int(options.get("max_retries", 3))

        def client(kind: str) -> Any:
            return LiteLLMClient(model=f"openai/{model}", api_base=base_url[kind], api_key="sk-no-key",
                                 temperature=0.0, max_tokens=max_tokens, max_retries=0)

        self._Sample = Sample
        self._verdicts: queue.Queue = queue.Queue()
        self._answers: queue.Queue = queue.Queue()
        peer = self

        class BenchEnvironment(TaskEnvironment):
            def evaluate(self, sample: Any, agent_output: Any) -> Any:
                peer._answers.put(("answer", agent_output.final_answer))
                v = peer._verdicts.get()
                return EnvironmentResult(feedback=v["feedback"], ground_truth=v["reference"], metrics={"reward": v["reward"]})

        mode = options.get("instructor_mode")  # RIZZ_PEER_ACE_MODE (run_peer.env_options); None: ACE's own md_json
        role = client
        if mode:
            import instructor
            from ace.llm_providers.instructor_client import InstructorClient

            def role(kind: str) -> Any:  # the same client, in the chosen InstructorClient mode
                return InstructorClient(client(kind), mode=instructor.Mode[str(mode).upper()], max_retries=retries)

        self._env = BenchEnvironment()
        self.ace = OnlineACE(agent=Agent(role("answer"), max_retries=retries),
                             reflector=Reflector(role("reflect"), max_retries=retries),
                             skill_manager=SkillManager(role("curate"), max_retries=retries),
                             enable_observability=False)
        self.workdir = workdir
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def _run(self, sample: Any) -> None:
        try:
            self.ace.run([sample], self._env)
        except BaseException as e:  # noqa: BLE001 - reported as a failure
            self._error = e
        finally:
            self._answers.put(("done", None))

    def answer(self, question: str, context: str) -> dict[str, Any]:
        self._error = None
        self._thread = threading.Thread(target=self._run, args=(self._Sample(question=question, context=context or ""),), daemon=True)
        self._thread.start()
        what, ans = self._answers.get()
        if what == "done":  # the agent failed before evaluate(): no answer, nothing learnt
            self._thread.join()
            self._thread = None
            return {"answer": None, "failures": [_fail("ace.agent", self._error)] if self._error else []}
        return {"answer": ans, "failures": []}

    def learn(self, msg: dict[str, Any]) -> dict[str, Any]:
        if self._thread is None:
            return {"failures": []}
        self._verdicts.put(msg)
        self._answers.get()  # "done"
        self._thread.join()
        self._thread = None
        fails = [_fail("ace.learn", self._error)] if self._error else []
        self.ace.skillbook.save_to_file(os.path.join(self.workdir, "skillbook.json"))
        return {"failures": fails, "skills": len(self.ace.skillbook.skills())}


class Mem0Peer:
    """mem0's ``Memory``, fully local: the LLM through the proxy, MiniLM through its Hugging Face
    embedder, Qdrant in local (on-disk, serverless) mode under ``workdir``."""

    package = "mem0ai"
    USER = "rizz-bench"

    def __init__(self, base_url: dict[str, str], model: str, workdir: str, options: dict[str, Any]) -> None:
        from mem0 import Memory

        config = {
            "llm": {"provider": "openai", "config": {"model": model, "openai_base_url": base_url["memory"], "api_key": "sk-no-key",
                                                      "temperature": 0.0, "max_tokens": int(options.get("max_tokens", 512))}},
            "embedder": {"provider": "huggingface", "config": {"model": options["embedder_path"], "embedding_dims": 384,
                                                                "model_kwargs": {"device": "cpu"}}},
            "vector_store": {"provider": "qdrant", "config": {"collection_name": "rizz_bench", "path": os.path.join(workdir, "qdrant"),
                                                              "on_disk": True, "embedding_model_dims": 384}},
            "history_db_path": os.path.join(workdir, "history.db"),
        }
        self.memory = Memory.from_config(config)
        self.infer = bool(options.get("infer", True))  # mem0's default; False stores the messages as they are

    def search(self, query: str, top_k: int) -> dict[str, Any]:
        res = self.memory.search(query, top_k=top_k, filters={"user_id": self.USER})
        items = res.get("results", res) if isinstance(res, dict) else res
        return {"memories": [m.get("memory", "") for m in items], "failures": []}

    def learn(self, msg: dict[str, Any]) -> dict[str, Any]:
        if not msg.get("verified"):
            return {"failures": []}
        q = msg["question"] if not msg.get("context") else f"{msg['context']}\n\n{msg['question']}"
        self.memory.add([{"role": "user", "content": q}, {"role": "assistant", "content": msg["answer"] or ""}], user_id=self.USER,
                        infer=self.infer)
        return {"failures": []}

    def remember(self, text: str) -> dict[str, Any]:
        self.memory.add([{"role": "user", "content": text}], user_id=self.USER, infer=self.infer)
        return {"failures": []}


PEERS = {"ace": AcePeer, "mem0": Mem0Peer}


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # anything the peer prints goes to stderr, never into the protocol
    sys.stdout = sys.stderr
    errors = _Errors()
    logging.getLogger().addHandler(errors)
    peer: Any = None
    name = ""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
            op = msg.get("op")
            errors.take()
            if op == "open":
                name = msg["peer"]
                peer = PEERS[name](msg["base_url"], msg["model"], msg["workdir"], msg.get("options") or {})
                from importlib.metadata import version

                out: dict[str, Any] = {"package": peer.package, "version": version(peer.package)}
            elif op == "close":
                proto.write(json.dumps({"ok": True}) + "\n")
                proto.flush()
                return
            elif peer is None:
                raise RuntimeError("first op must be open")
            elif op in ("answer", "search", "learn", "remember"):
                try:
                    if op == "answer":
                        out = peer.answer(msg["question"], msg.get("context") or "")
                    elif op == "search":
                        out = peer.search(msg["query"], int(msg.get("top_k", 5)))
                    elif op == "learn":
                        out = peer.learn(msg)
                    else:
                        out = peer.remember(msg["text"])
                except Exception as e:  # noqa: BLE001 - a peer failure, counted by the bench
                    out = {"failures": [_fail(f"{name}.{op}", e)]}
                out["failures"] = out.get("failures", []) + errors.take()
            else:
                raise ValueError(f"unknown op {op!r}")
            reply = {"ok": True, **out}
        except Exception as e:  # noqa: BLE001
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        proto.write(json.dumps(reply, ensure_ascii=False) + "\n")
        proto.flush()


if __name__ == "__main__":
    main()
