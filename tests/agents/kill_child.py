"""Child process of test_kill_mid_episode: ``rizz run``'s code path with a slow stub agent that,
given MARK, touches it and stalls in the middle of the second element's episode (to be killed)."""

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rizz.adapters.agents.calls import ToolCall, format_call  # noqa: E402
from rizz.adapters.embedder import Embedder  # noqa: E402
from rizz.engine.model_agent import GREETING  # noqa: E402
from rizz.engine.run import run_stream  # noqa: E402
from rizz.formats.policy_file import load_policy  # noqa: E402
from rizz.formats.streams import read_stream  # noqa: E402
from tests.agents.conftest import StubModel  # noqa: E402

stream, out = sys.argv[1], sys.argv[2]
mark = sys.argv[3] if len(sys.argv) > 3 else None
els = read_stream(stream).elements


def fn(prompt: str) -> str:
    if prompt.startswith("You are playing a customer"):  # the customer names its task, then stops
        if not prompt.endswith(GREETING):  # the agent has spoken after its greeting
            return "###STOP###"
        return f"Hi, this is task {next(i for i, e in enumerate(els) if e.user in prompt)}."
    if "Tools:" not in prompt:
        return ""
    i = int(re.search(r"User: Hi, this is task (\d+)\.", prompt).group(1))
    gold = [ToolCall(a["name"], a["kwargs"]) for a in json.loads(els[i].reference)["actions"]]
    k = prompt.count("\nTool ")
    if mark and i == 1 and k == 1:
        Path(mark).touch()
        time.sleep(120)  # killed here, mid-episode
    return format_call(gold[k]) if k < len(gold) else (" ".join(json.loads(els[i].reference)["outputs"]) or "Done.")


s = run_stream(stream, load_policy("default"), "default", out, StubModel(fn), Embedder(), log=lambda m: None)
print(s["state_digest"])
