"""The ``translate`` task: an encoder–decoder (:class:`~splitnet.nets.seq2seq.SplitSeq2Seq`) on
sentence pairs (:mod:`splitnet.translate.translation`).

* batch of step ``s``: ``batch_size`` pairs drawn by ``(seed, s)``, padded, with each row's
  share of the global batch's target tokens (the loss is the mean over every target token
  whatever the processes);
* held-out score: the validation split's label-free cross-entropy, the whole (small) split on
  every rank;
* after the last step: BLEU and chrF of beam search on the test split (sacrebleu).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from ..configs.config import MAX_BEAM, PAIR_NAMES
from ..configs.options import FREE, check_int, check_real, option
from .lm import bpe_option, check_bpe
from .task import Task, register

TEST_BATCH = 32     # sources decoded together for the test scores (translate_lines' default)


@dataclass(frozen=True)
class TranslationOptions:
    """A translation run's own options: its pairs and tokens, the training loss's smoothing, and
    the beam search of the test scores at the end."""

    pairs: str | None = option(None, "translate: sentence pairs, a TSV file 'source<TAB>target', "
                               "a folder of gettext catalogues (.po/.mo), 'bible' (the SWORD "
                               "modules) or 'copy' / 'reverse' (synthetic alignment tasks over "
                               "400 words); default: this machine's gettext catalogues",
                               metavar="PATH")
    src_lang: str | None = option(None, "translate: source language (default en)", metavar="L")
    tgt_lang: str | None = option(None, "translate: target language (default de for the "
                                  "catalogues)", metavar="L")
    bpe: int = bpe_option()
    label_smoothing: float = option(0.1, "translate: label smoothing of the training loss")
    beam: int = option(4, "translate: beam width of the BLEU and chrF at the end", resume=FREE)
    length_penalty: float = option(0.6, "translate: beam search ranks log p / length^A",
                                   resume=FREE, metavar="A")
    bleu_sentences: int = option(500, "translate: test pairs translated for BLEU and chrF at "
                                 "the end (0 = none)", resume=FREE)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        check_bpe(self)
        set_(self, "beam", check_int("beam", self.beam))
        if self.beam > MAX_BEAM:
            raise ValueError(f"beam must be <= {MAX_BEAM:,} (each source decodes beam rows at "
                             f"once), got {self.beam:,}")
        set_(self, "bleu_sentences", check_int("bleu_sentences", self.bleu_sentences, lo=0))
        set_(self, "label_smoothing", check_real("label_smoothing", self.label_smoothing, 0.0,
                                                 1.0, hi_open=True))
        set_(self, "length_penalty", check_real("length_penalty", self.length_penalty, -10.0,
                                                10.0))
        if self.pairs is not None and str(self.pairs) not in PAIR_NAMES:
            if not str(self.pairs).strip():
                raise ValueError("pairs is empty: give a TSV file, a folder of catalogues or "
                                 f"one of {', '.join(PAIR_NAMES)}")
            set_(self, "pairs", os.path.abspath(os.path.expanduser(str(self.pairs))))


class Translation(Task):
    """``translate``: an encoder–decoder on sentence pairs (``--pairs``), label-smoothed
    cross-entropy, in bits per target token; BLEU and chrF at the end."""

    name = "translate"
    help = "an encoder–decoder on sentence pairs (--pairs)"
    init = "xavier"                    # torch.nn.Transformer's rule
    network = "seq2seq"
    options = TranslationOptions
    ONLY_WITH: ClassVar[dict] = {      # scored on its validation pairs, not on windows
        "eval_windows": ("to a run scored on held-out windows (a language model's; a "
                         "translation run scores its validation pairs)", lambda c: False),
    }
    family = "encoder–decoder"
    noun = "a translation model"
    unit = "bits per token"
    reader = "'splitnet translate' translates with it"

    def check(self, cfg) -> None:
        clash = [n for n, v in (("refine_prob", cfg.refine_prob > 0),
                                ("loss chunked", cfg.loss == "chunked"),
                                ("compile", cfg.compile)) if v]
        if clash:
            raise ValueError(f"--task translate does not take {', '.join(clash)} (language-"
                             f"model features)")

    def hint(self, option: str) -> str:
        if option == "val_fraction":
            return ("; a translation run splits its pairs by a fixed rule, 10% of the groups "
                    "valid and 10% test, so its test scores compare across runs")
        return "; its corpus is --pairs" if option == "text" else ""

    def memory(self, cfg, world, cuda):
        from ..translate.translation import estimate_memory

        return estimate_memory(cfg, world, cuda)

    def requires(self, cfg) -> None:
        if cfg.bleu_sentences:                  # scored after the last step
            from ..configs.config import require

            require("sacrebleu", extra="translate", feature="the test BLEU and chrF at the end "
                    "of --task translate (--bleu-sentences 0: none)")

    def corpus(self, cfg, state, log):
        from ..translate.translation import load_data

        return load_data(cfg, state, log)

    def check_data(self, cfg, state, corpus, log) -> None:
        """Done by :func:`~splitnet.translate.translation.load_data` (the pairs compared
        whatever the path they are read from), before a tokenizer is trained."""

    def fit(self, cfg, corpus, state, device):
        """The tokenizer's vocabulary and special ids; the beam search of the test scores
        checked against the device's memory before the first step."""
        from ..translate.translation import model_config

        model = model_config(cfg, corpus.tokenizer)
        if state is not None and model != cfg.model:
            raise ValueError("incompatible checkpoint: its tokenizer does not fit its model "
                             "(edited by hand?)")
        cfg = cfg.replace(model=model)
        self._check_decode_memory(cfg, device)
        return cfg

    @staticmethod
    def _check_decode_memory(cfg, device) -> None:
        """``--beam`` rows per source, in batches of :data:`TEST_BATCH` sources of up to
        ``context`` tokens (:func:`splitnet.nets.decoding.decode_memory`)."""
        if not cfg.bleu_sentences:
            return
        from ..nets.decoding import decode_memory
        from ..runenv import require_memory

        rows = min(cfg.bleu_sentences, TEST_BATCH)
        require_memory(decode_memory(cfg.model, rows, cfg.context, cfg.context, cfg.beam),
                       f"the beam search of the test scores (--beam {cfg.beam}, {rows} sources "
                       f"at once)", "lower --beam, or --bleu-sentences 0 for none", device)

    def loss(self, model, cfg):
        from ..translate.translation import Seq2SeqLoss

        return Seq2SeqLoss(model, cfg.label_smoothing)

    def batch(self, cfg, corpus, step, replica, replicas):
        from ..translate.translation import train_batch

        batch, tokens = train_batch(corpus, cfg, step, replica, replicas)
        return list(batch), tokens

    def held_out(self, model, corpus, cfg, env, val):
        from ..translate.translation import validation_loss

        return validation_loss(model, corpus, env.device), {}

    def scores_at_end(self, cfg) -> bool:
        return bool(cfg.bleu_sentences)

    def final_scores(self, model, corpus, cfg, device, log) -> dict:
        from ..translate.translation import test_scores

        return test_scores(model, corpus, cfg.bleu_sentences, cfg.beam, cfg.length_penalty,
                           device, log)


MT = register(Translation())

__all__ = ["MT", "TEST_BATCH", "Translation", "TranslationOptions"]
