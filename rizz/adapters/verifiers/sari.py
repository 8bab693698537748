"""SARI (Xu, Napoles, Pavlick, Chen, Callison-Burch, TACL 2016, "Optimizing Statistical
Machine Translation for Text Simplification"), as TRACE scores 20Minuten.

TRACE (`metrics.py`, `caculate_sari`) calls Hugging Face ``load_metric("sari")``, which is the
tensor2tensor variant of the reference ``cocoxu/simplification`` ``SARI.py``. This module
re-implements that variant (no package here ships it without downloading a metric script at
run time):

- text is lower-cased and tokenised with sacreBLEU's ``13a`` tokenizer, then split on spaces;
- for n = 1..4: keep F1, deletion precision, addition F1 over n-grams, where source and
  prediction n-gram counts are multiplied by the number of references (Xu et al. §4.1);
- 0/0 is taken as 1 (a prediction that matches a target exactly scores 100), and the keep
  recall divides by the total count of kept-able n-grams (https://github.com/cocoxu/simplification/issues/6);
- SARI = mean over n of (F1_keep + P_del + F1_add) / 3, in [0, 100].

Checked against the published example of HF ``evaluate`` ``metrics/sari`` (26.9536…).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rizz.extras import extra_needed

with extra_needed("lab", "the SARI verifier"):
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

__all__ = ["sari", "sari_normalize"]

_MAX_N = 4  # n-gram orders 1..4 (Xu et al. 2016, §4.1)
_TOKENIZE = Tokenizer13a()


def sari_normalize(sentence: str) -> list[str]:
    """Lower-case, sacreBLEU-13a tokenise, split on single spaces (HF ``normalize``)."""
    return _TOKENIZE(sentence.lower()).split(" ")


def _ngrams(tokens: list[str], n: int) -> list[str]:
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _f1(precision: float, recall: float) -> float:
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _order_scores(
    source: list[str], prediction: list[str], references: list[list[str]]
) -> tuple[float, float, float]:
    """(F1_keep, P_del, F1_add) for one n-gram order; inputs are n-gram lists."""
    n_refs = len(references)
    refs = Counter(gram for ref in references for gram in ref)
    src = Counter({g: c * n_refs for g, c in Counter(source).items()})
    pred = Counter({g: c * n_refs for g, c in Counter(prediction).items()})

    kept = src & pred
    kept_good = kept & refs
    keepable = src & refs
    keep_p = sum(kept_good[g] / kept[g] for g in kept_good) / len(kept) if kept else 1.0
    keep_r = sum(kept_good.values()) / sum(keepable.values()) if keepable else 1.0

    deleted = src - pred
    deleted_good = deleted - refs
    del_p = sum(deleted_good[g] / deleted[g] for g in deleted_good) / len(deleted) if deleted else 1.0

    added = set(pred) - set(src)
    added_good = added & set(refs)
    addable = set(refs) - set(src)
    add_p = len(added_good) / len(added) if added else 1.0
    add_r = len(added_good) / len(addable) if addable else 1.0
    return _f1(keep_p, keep_r), del_p, _f1(add_p, add_r)


def sari(source: str, prediction: str, references: Sequence[str]) -> float:
    """Sentence SARI of ``prediction`` given its ``source`` and one or more ``references``.

    Args:
      source: the complex input text.
      prediction: the system's simplification.
      references: one or more reference simplifications (all used together, as SARI defines
        multi-reference scoring; not a max over references).

    Returns:
      SARI in [0, 100] (float).

    Raises:
      ValueError: ``references`` is empty.

    Examples:
      >>> round(sari("About 95 species are currently accepted .",
      ...            "About 95 you now get in .",
      ...            ["About 95 species are currently known .",
      ...             "About 95 species are now accepted .",
      ...             "95 species are now accepted ."]), 6)
      26.953602
    """
    if isinstance(references, str) or len(references) == 0:
        raise ValueError("references must be a non-empty sequence of strings")
    s1 = sari_normalize(source)
    c1 = sari_normalize(prediction)
    r1 = [sari_normalize(r) for r in references]
    keep = dele = add = 0.0
    for n in range(1, _MAX_N + 1):
        k, d, a = _order_scores(_ngrams(s1, n), _ngrams(c1, n), [_ngrams(r, n) for r in r1])
        keep, dele, add = keep + k, dele + d, add + a
    return 100.0 * (keep + dele + add) / (3 * _MAX_N)
