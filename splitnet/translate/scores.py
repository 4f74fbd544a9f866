"""Translation scores: corpus BLEU and chrF with sacrebleu (extra ``translate``), offline.

sacrebleu's defaults (BLEU: 13a tokenisation, exponential smoothing; chrF: character 6-grams,
beta 2) are what papers report, and its signature strings say which settings produced a number,
so a score is comparable across runs and with published ones. For Chinese, Japanese or Korean
targets pass ``tokenize="zh"`` / ``"ja-mecab"`` / ``"ko-mecab"`` (the latter two need sacrebleu's
own extras); chrF needs no tokenisation.
"""

from __future__ import annotations

from ..configs.config import require


def _check(hypotheses, references) -> tuple[list[str], list[str]]:
    hyps, refs = list(hypotheses), list(references)
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references; they must pair up")
    if not hyps:
        raise ValueError("no hypotheses to score")
    for name, xs in (("hypothesis", hyps), ("reference", refs)):
        bad = next((i for i, x in enumerate(xs) if not isinstance(x, str)), None)
        if bad is not None:
            raise ValueError(f"{name} {bad} is a {type(xs[bad]).__name__}, not a str")
    return hyps, refs


def bleu_chrf(hypotheses, references, tokenize: str = "13a") -> dict:
    """Corpus BLEU and chrF (0-100) of ``hypotheses`` against one reference each, with the
    signatures that make them reproducible: ``{"bleu", "chrf", "signature"}``."""
    hyps, refs = _check(hypotheses, references)
    require("sacrebleu", extra="translate", feature="BLEU and chrF scores")
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(tokenize=tokenize), CHRF()
    b, c = bleu.corpus_score(hyps, [refs]), chrf.corpus_score(hyps, [refs])
    return {"bleu": float(b.score), "chrf": float(c.score),
            "signature": f"BLEU {bleu.get_signature()} chrF {chrf.get_signature()}"}


__all__ = ["bleu_chrf"]
