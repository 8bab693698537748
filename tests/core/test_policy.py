import json
from pathlib import Path

import attrs
import pytest

from rizz.core import Policy, policy_schema
from rizz.formats.policy_file import PolicyError, load_policy, parse_policy

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["default", "cross-zone", "frozen", "single-branch", "no-procedural", "no-anti-fragmentation", "judge-always", "ace-style"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_policies_load(name):
    p = load_policy(ROOT / "policies" / f"{name}.yaml")
    assert p.name == name


def test_default_yaml_is_the_paper_constants():
    p = load_policy(ROOT / "policies/default.yaml")
    # the shipped default turns on what the Python record's defaults keep off for old runs (AREAS.md 1)
    # and reads only the routed zone, shows a failure only beside the same input, and spaces its
    # distillations geometrically (results/2026-12-02-qwen15-heldout131.md), only where the model missed,
    # and labels a route in doubt without a model call (results/2026-12-03-streambench-qwen15.md),
    # its application from the task's line (results/2026-12-04-first-line-default.md)
    assert p == attrs.evolve(Policy(), name="default", routing=attrs.evolve(Policy().routing, judge="local", fallback_application="first_line"),
                             write=attrs.evolve(Policy().write, supersede=True, supersede_derived=True),
                             retrieval=attrs.evolve(Policy().retrieval, examples_cross_scope=False, examples_cross_branch=False,
                                                    rules_cross_branch=False, failures_min_similarity=0.92),
                             rules=attrs.evolve(Policy().rules, distill_growth=2.0, distill_after_miss=True))
    assert p.retrieval.failures_min_similarity == p.routing.snap_threshold
    assert (p.routing.snap_threshold, p.routing.jaccard_threshold) == (0.92, 0.40)
    assert (p.retrieval.rule_alpha, p.retrieval.rule_m_min, p.retrieval.rule_m_max) == (0.30, 0.30, 3.00)
    assert (p.lifecycle.max_branches, p.lifecycle.max_active) == (48, 31)
    assert p.compiler.token_budget == 65536


def test_cross_zone_is_the_default_before_own_zone_reads():
    p = load_policy(ROOT / "policies/cross-zone.yaml")
    before = attrs.evolve(Policy(), name="cross-zone", write=attrs.evolve(Policy().write, supersede=True, supersede_derived=True),
                          retrieval=attrs.evolve(Policy().retrieval, examples_cross_scope=False))
    assert p == before
    assert load_policy(ROOT / "policies/judge-uncertain.yaml") == attrs.evolve(
        load_policy(ROOT / "policies/default.yaml"), name="judge-uncertain", routing=attrs.evolve(p.routing, judge="when_uncertain"))


def test_ablations_change_only_what_they_say():
    d = load_policy(ROOT / "policies/default.yaml")
    assert load_policy(ROOT / "policies/single-branch.yaml").routing == attrs.evolve(d.routing, mode="single")
    naf = load_policy(ROOT / "policies/no-anti-fragmentation.yaml")
    assert (naf.routing.snap_enabled, naf.routing.jaccard_enabled, naf.write.dedupe, naf.lifecycle.merge_enabled) == (False,) * 4
    assert naf.retrieval == d.retrieval
    fz = load_policy(ROOT / "policies/frozen.yaml")
    assert fz.compiler.layout == ("instruction", "evidence", "input") and not fz.write.enabled


def test_schema_file_in_sync():
    on_disk = json.loads((ROOT / "specs/policy.schema.json").read_text())
    assert on_disk == policy_schema(), "regenerate: python -m rizz.apps.cli policy schema > specs/policy.schema.json"


BAD = [
    ({"routing": {"snap_threshold": 1.7}}, "$.routing.snap_threshold: expected a number in [0, 1], got 1.7"),
    ({"routing": {"snap_treshold": 0.9}}, "$.routing.snap_treshold: unknown key"),
    ({"routing": {"mode": "many"}}, "$.routing.mode: expected one of branches, single, got 'many'"),
    ({"routing": {"judge": True}}, "$.routing.judge: expected one of always, when_uncertain, local, got true"),
    ({"lifecycle": {"max_branches": 0}}, "$.lifecycle.max_branches: expected an integer in [1, 100000], got 0"),
    ({"lifecycle": {"max_active": 2.5}}, "$.lifecycle.max_active: expected an integer in [1, 100000], got 2.5"),
    ({"retrieval": {"rule_alpha": "high"}}, "$.retrieval.rule_alpha: expected a number in [0, 10], got 'high'"),
    ({"write": {"thresholds": {"rouge_l": 2}}}, "$.write.thresholds.rouge_l: expected a number in [0, 1], got 2"),
    ({"write": {"enabled": "yes"}}, "$.write.enabled: expected true or false, got 'yes'"),
    ({"compiler": {"layout": ["input", "banner"]}}, "$.compiler.layout[1]: expected one of scoped_context"),
    ({"compiler": {"drop_order": ["rules", "rules"]}}, "$.compiler.drop_order: expected distinct values"),
    ({"compiler": {"token_budget": -5}}, "$.compiler.token_budget: expected an integer in [16, 10000000], got -5"),
    ({"quarantine": None}, "$.quarantine: expected a mapping, got null"),
    ({"extra": 1}, "$.extra: unknown key"),
    ({"lifecycle": {"max_active": 60}}, "$.lifecycle.max_active: expected at most lifecycle.max_branches (48), got 60"),
    ({"write": {"thresholds": {"rouge": 0.3}}}, "$.write.thresholds.rouge: unknown verifier"),
    ({"write": {"failure_threshold": 0.5}}, "$.write.failure_threshold: expected at most quarantine.middling_min (0.1), got 0.5"),
    ({"compiler": {"drop_order": ["input"]}}, "$.compiler.drop_order: 'input' is never dropped"),
    ({"retrieval": {"rule_m_min": 3.0, "rule_m_max": 0.3}}, "$.retrieval.rule_m_min: expected at most retrieval.rule_m_max (0.3), got 3"),
    # a bench writes BENCH_DIR/<name>: a name with a path in it escaped --out (a newcomer's report)
    ({"name": "../../escaped"}, "$.name: expected no '/', '\\' or NUL in the name, got '../../escaped'"),
    ({"name": "a\\b"}, "$.name: expected no '/', '\\' or NUL in the name"),
    ({"name": ".."}, "$.name: expected a name that does not start with '.'"),
    ({"name": " "}, "$.name: expected a non-empty name"),
    ({"name": "peer:ace"}, "$.name: expected a name that does not start with 'peer:'"),
]


@pytest.mark.parametrize("data,message", BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_bad_policy_names_its_path(data, message):
    with pytest.raises(PolicyError) as info:
        parse_policy(data, "p.yaml")
    assert any(e.startswith(message) for e in info.value.errors), info.value.errors


def test_every_bad_field_is_reported_at_once():
    with pytest.raises(PolicyError) as info:
        parse_policy({"routing": {"snap_threshold": 3, "w_anchor": -1}, "rules": {"enabled": 1}})
    paths = sorted(e.split(":")[0] for e in info.value.errors)
    assert paths == ["$.routing.snap_threshold", "$.routing.w_anchor", "$.rules.enabled"]


def test_a_misspelt_key_gets_the_closest_valid_key_at_its_level():
    with pytest.raises(PolicyError) as info:
        parse_policy({"routing": {"snap_treshold": 0.5}, "lifecycle": {"max_brnches": 4},
                      "write": {"thresholds": {"rouge": 0.3}}, "zzz": 1})
    by_path = {e.split(":")[0]: e for e in info.value.errors}
    assert by_path["$.routing.snap_treshold"].startswith(
        "$.routing.snap_treshold: unknown key; did you mean `snap_threshold`? (allowed: confident_margin,")
    assert "did you mean `max_branches`?" in by_path["$.lifecycle.max_brnches"]
    assert by_path["$.write.thresholds.rouge"].startswith("$.write.thresholds.rouge: unknown verifier; did you mean `rouge_l`?")
    assert by_path["$.zzz"].startswith("$.zzz: unknown key (allowed: ")  # nothing close: no guess


def test_a_misspelt_choice_gets_the_closest_valid_choice(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("extends: default\nrouting:\n  judge: when-uncertain\n  mode: branch\n  router: zzz\n"
                 "compiler:\n  layout: [instruction, rulez, input]\nevidence: {blocks: [Examples]}\n")
    with pytest.raises(PolicyError) as info:
        load_policy(f)
    assert info.value.errors == [
        "$.routing.judge: expected one of always, when_uncertain, local, got 'when-uncertain'; did you mean `when_uncertain`?",
        "$.routing.mode: expected one of branches, single, got 'branch'; did you mean `branches`?",
        "$.routing.router: expected one of fixed, linucb, got 'zzz'",  # nothing close: no guess
        "$.compiler.layout[1]: expected one of scoped_context, preamble, instruction, evidence, rules, examples, mistakes, "
        "working_memory, input, got 'rulez'; did you mean `rules`?",
        "$.evidence.blocks[0]: expected one of scoped_context, rules, examples, mistakes, working_memory, got 'Examples'; "
        "did you mean `examples`?",
    ]
    assert info.value.lines == [3, 4, 5, 7, 8]


@pytest.mark.parametrize("raw,want", [
    (b"routing:\n  snap_threshold: [0.9\n", "p.yaml:3:1: YAML error: expected ',' or ']', but got '<stream end>'"),
    (b"extends: default\n  mode: single\n", "p.yaml:2:7: YAML error: mapping values are not allowed here"),
    (b"extends: default\n\trouting: {}\n", "p.yaml:2:1: YAML error: found character '\\t' that cannot start any token"),
    # errors PyYAML raises without a position
    (b"extends: default\nname: \"a\x01\"\n", "p.yaml:2:9: YAML error: unacceptable character #x0001: special characters are not allowed"),
    (b"extends: default\n? [a]\n: 1\n", "p.yaml:2:3: YAML error: a list cannot be a key"),
    (b"extends: default\nname: 2025-02-30\n", "p.yaml:2:7: YAML error: day is out of range for month"),
    (b"extends: default\nname: r\xc3\n", "p.yaml:2: not UTF-8 text at byte 8 of the line"),
])
def test_a_yaml_error_names_its_position_once(tmp_path, monkeypatch, raw, want):
    monkeypatch.chdir(tmp_path)
    Path("p.yaml").write_bytes(raw)
    with pytest.raises(PolicyError) as info:
        load_policy("p.yaml")
    assert str(info.value) == f"p.yaml: invalid policy\n  {want}"


def test_a_too_deeply_nested_file_names_where_the_parser_gave_up(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("extends: default\nrouting: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(PolicyError) as info:
        load_policy(f)
    assert info.value.errors == ["YAML error: nested too deeply"] and info.value.lines == [2], info.value
    assert 10 < info.value.columns[0] < 5000


def test_extends_overrides_and_detects_cycles(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\nrouting: {snap_threshold: 0.5}\n")
    (tmp_path / "b.yaml").write_text("routing: {jaccard_threshold: 0.1}\nname: b\n")
    p = load_policy(tmp_path / "a.yaml")
    assert (p.routing.snap_threshold, p.routing.jaccard_threshold, p.name) == (0.5, 0.1, "a")  # name not inherited
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(PolicyError, match="cycle"):
        load_policy(tmp_path / "a.yaml")


def test_records_validate_on_evolve():
    with pytest.raises(ValueError, match="snap_threshold: expected a number in \\[0, 1\\], got 1.7"):
        attrs.evolve(Policy().routing, snap_threshold=1.7)


def test_constants_doc_in_sync():
    from rizz.formats.policy_file import constants_markdown

    assert (ROOT / "specs/constants.md").read_text() == constants_markdown(), "regenerate: rizz policy constants > specs/constants.md"


def test_extends_a_shipped_name(tmp_path):
    (tmp_path / "mine.yaml").write_text("extends: default\nrouting: {snap_threshold: 0.8}\n")
    p = load_policy(tmp_path / "mine.yaml")
    assert p.routing.snap_threshold == 0.8 and p.routing.w_anchor == Policy().routing.w_anchor
    (tmp_path / "bad.yaml").write_text("extends: nothere.yaml\n")
    with pytest.raises(PolicyError, match=r"\$\.extends: 'nothere.yaml' not found"):
        load_policy(tmp_path / "bad.yaml")


def test_extends_errors_name_the_file_and_line_of_extends(tmp_path, monkeypatch):
    from rizz.formats.policy_file import POLICY_DIR

    monkeypatch.chdir(tmp_path)
    names = ", ".join(sorted(q.stem for q in POLICY_DIR.glob("*.yaml")))
    cases = [
        ("# mine\nextends: some-name-that-does-not-exist\n", "p.yaml:2: $.extends: 'some-name-that-does-not-exist' not found "
         f"(looked for some-name-that-does-not-exist and a shipped some-name-that-does-not-exist.yaml; shipped names: {names})"),
        ("routing: {mode: single}\nextends: [default]\n", "p.yaml:2: $.extends: expected a path, got ['default']"),
        ("extends: yes\n", "p.yaml:1: $.extends: expected a path, got true"),
    ]
    for text, want in cases:
        Path("p.yaml").write_text(text)
        with pytest.raises(PolicyError) as info:
            load_policy("p.yaml")
        assert str(info.value) == f"p.yaml: invalid policy\n  {want}"
    # a cycle is named at the `extends:` that closes it
    Path("a.yaml").write_text("extends: b.yaml\n")
    Path("b.yaml").write_text("# b\nextends: a.yaml\n")
    with pytest.raises(PolicyError) as info:
        load_policy("a.yaml")
    assert str(info.value) == "b.yaml: invalid policy\n  b.yaml:2: $.extends: cycle through a.yaml -> b.yaml -> a.yaml"
    Path("a.yaml").write_text("name: a\nextends: a.yaml\n")
    with pytest.raises(PolicyError) as info:
        load_policy("a.yaml")
    assert str(info.value) == "a.yaml: invalid policy\n  a.yaml:2: $.extends: cycle through a.yaml -> a.yaml"


def test_extends_without_a_name_is_named_after_its_file(tmp_path):
    (tmp_path / "exp-1.yaml").write_text("extends: default\n")
    (tmp_path / "exp-2.yaml").write_text("extends: exp-1.yaml\nname: second\n")
    assert load_policy(tmp_path / "exp-1.yaml").name == "exp-1"
    assert load_policy(tmp_path / "exp-2.yaml").name == "second"


def test_a_key_written_twice_is_an_error_naming_both_lines(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("extends: default\nrouting:\n  snap_threshold: 0.9\n  snap_threshold: 0.8\n")
    with pytest.raises(PolicyError) as info:
        load_policy(f)
    assert info.value.errors == ["YAML error: key 'snap_threshold' written twice (first on line 3)"]
    assert (info.value.lines, info.value.columns) == ([4], [3])
    assert str(info.value).endswith("p.yaml:4:3: YAML error: key 'snap_threshold' written twice (first on line 3)")


def test_an_empty_policy_file_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    empty = "p.yaml:1: $: the file is empty (start from the defaults with `extends: default`)"
    for text, want in [("", empty), ("# nothing here\n", empty), ("---\n", empty),
                       ("# a list\n\n- extends: default\n- routing: {mode: single}\n", "p.yaml:3: $: expected a mapping, got list"),
                       ("default\n", "p.yaml:1: $: expected a mapping, got str")]:
        Path("p.yaml").write_text(text)
        with pytest.raises(PolicyError) as info:
            load_policy("p.yaml")
        assert str(info.value) == f"p.yaml: invalid policy\n  {want}", text


def test_errors_name_the_file_as_the_user_would(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub/p.yaml").write_text("extends: q.yaml\n")
    (tmp_path / "sub/q.yaml").write_text("routing: {snap_threshold: 2}\n")
    for given in ("sub/p.yaml", tmp_path / "sub/p.yaml"):
        with pytest.raises(PolicyError) as info:
            load_policy(given)
        assert info.value.path == "sub/p.yaml"
    (tmp_path / "sub/q.yaml").write_text("extends: nothere.yaml\n")
    with pytest.raises(PolicyError) as info:
        load_policy("sub/p.yaml")
    assert info.value.path == "sub/q.yaml" and "looked for sub/nothere.yaml" in info.value.errors[0]


def test_nan_duplicates_and_threshold_names_are_reported_together(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("extends: default\nrouting: {judge: 3, snap_threshold: .nan}\nwrite:\n  thresholds: {rouge_l: 2, bogus: 0.5}\n")
    with pytest.raises(PolicyError) as info:
        load_policy(f)
    assert info.value.errors == [
        "$.routing.snap_threshold: expected a finite number, got nan",
        "$.routing.judge: expected one of always, when_uncertain, local, got 3",
        "$.write.thresholds.rouge_l: expected a number in [0, 1], got 2",
        "$.write.thresholds.bogus: unknown verifier (expected one of exact_match, label_match, first_char, "
        "fuzzy_ratio, rouge_l, sari, token_f1, code_exec, llm_judge, bfcl_ast, bfcl_multi_turn, tau_db)",
    ]


def test_a_copied_shipped_policy_still_loads(tmp_path):
    for name in ("frozen", "single-branch", "ace-style"):
        (tmp_path / f"{name}.yaml").write_text((ROOT / "policies" / f"{name}.yaml").read_text())
        assert load_policy(tmp_path / f"{name}.yaml") == load_policy(ROOT / "policies" / f"{name}.yaml")


def test_a_missing_policy_file_is_not_found_and_names_the_paths_tried(tmp_path, monkeypatch):
    from rizz.formats.policy_file import POLICY_DIR

    monkeypatch.chdir(tmp_path)
    with pytest.raises(PolicyError) as info:
        load_policy("nosuch")
    head, line = str(info.value).splitlines()
    assert head == "nosuch: policy file not found" and info.value.summary == "policy file not found"
    assert line.startswith(f"  cannot read: No such file or directory; looked for {tmp_path / 'nosuch'} and {POLICY_DIR / 'nosuch.yaml'} "
                           "(shipped names: "), line
    (tmp_path / "lenient.yaml").write_text("extends: default\n")  # a name without its suffix: the file beside it is suggested
    with pytest.raises(PolicyError, match=r"^lenient: policy file not found\n.*looked for .*lenient and .*lenient\.yaml; did you mean `lenient\.yaml`\? \(shipped"):
        load_policy("lenient")
    with pytest.raises(PolicyError, match=rf"^sub/p\.yaml: policy file not found\n  cannot read: No such file or directory; looked for {tmp_path / 'sub' / 'p.yaml'} \(shipped"):
        load_policy("sub/p.yaml")
    assert load_policy("lenient.yaml").name == "lenient"
