"""The text call protocol: parsed with ast, never evaluated."""

from __future__ import annotations

import pytest

from rizz.adapters.agents.calls import CallSyntaxError, ToolCall, format_call, parse_reply


def test_single_list_dotted_and_fenced_calls() -> None:
    assert parse_reply("cd(folder='docs')") == (ToolCall("cd", {"folder": "docs"}),)
    assert parse_reply("[math.factorial(number=5), f(x=[1, 2], y={'a': None})]") == (
        ToolCall("math.factorial", {"number": 5}), ToolCall("f", {"x": [1, 2], "y": {"a": None}}))
    assert parse_reply("```python\nls(a=True)\n```") == (ToolCall("ls", {"a": True}),)
    assert parse_reply("cd(folder='a')\nls()") == (ToolCall("cd", {"folder": "a"}), ToolCall("ls", {}))
    assert parse_reply("(1, 2) is a tuple") == ()


def test_calls_separated_by_semicolons_as_trajectory_memory_writes_them() -> None:
    """``a(x=1); b(y=2)`` is how a verified trajectory is stored (compact_trajectory); the
    Qwen2.5-Coder-1.5B, shown such examples, answered in that form."""
    calls = (ToolCall("find_user_id_by_name_zip", {"first_name": "Yusuf", "zip": "19122"}), ToolCall("list_all_product_types", {}))
    text = "find_user_id_by_name_zip(first_name='Yusuf', zip='19122'); list_all_product_types();"
    assert parse_reply(text) == calls
    assert parse_reply(text.rstrip(";")) == calls
    assert parse_reply("; ".join(format_call(c) for c in calls)) == calls
    assert parse_reply("Hello; how can I help?") == ()
    with pytest.raises(CallSyntaxError, match="cannot parse"):
        parse_reply("a(x=1); y = 2")  # a statement that is not a call: not a call sequence
    with pytest.raises(CallSyntaxError, match="cannot parse"):
        parse_reply("Note (see below); the order shipped.")


def test_plain_text_is_a_message() -> None:
    assert parse_reply("Your order #W1 was cancelled.") == ()


@pytest.mark.parametrize("text, words", [
    ("get(order_id=open('/etc/passwd').read())", "not a literal"),
    ("__import__('os').system('touch /tmp/rizz-pwned')", "plain or dotted name"),
    ("get('#W1')", "by keyword"),
    ("get(order_id='x'", "cannot parse"),
    ("[1, 2]", "is not a call"),
    ("f(**{'a': 1})", "**kwargs"),
])
def test_malformed_calls_raise_and_nothing_runs(tmp_path, text, words) -> None:
    with pytest.raises(CallSyntaxError, match=words.replace("*", r"\*")):
        parse_reply(text)


def test_format_call_round_trips() -> None:
    call = ToolCall("book", {"flights": [{"flight_number": "HAT1", "date": "2024-05-20"}], "n": 2.5, "ok": False})
    assert parse_reply(format_call(call)) == (call,)


def test_the_task_text_is_the_same_in_every_process() -> None:
    """A frozen element's tools are pmaps, whose order follows the string-hash seed: the prompt's
    tool list must not (prompts, cache keys and llama.cpp's argument grammar depend on it)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("from rizz.formats.streams import read_stream; from rizz.engine.agent_prompt import task_text; "
            "import hashlib; els = read_stream('data/bfcl-mini/test.jsonl').elements; "
            "print(hashlib.sha256(''.join(task_text(e) for e in els).encode()).hexdigest())")
    outs = {subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                           env={"PYTHONPATH": str(root), "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(outs) == 1
