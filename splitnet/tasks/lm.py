"""The language-model tasks: ``lm`` (next byte, a causal SplitTransformer) and ``mlm`` (masked
bytes, a bidirectional one, :mod:`splitnet.mlm`).

* batch of step ``s``: ``batch_size`` windows of ``context`` bytes drawn by ``(seed, s)``
  (:func:`splitnet.runs.data.train_batch`); ``mlm`` masks them (15 %, BERT's 80/10/10);
* held-out score: the mean cross-entropy over fixed validation windows, shared out over the
  ranks (each a contiguous share) and all-reduced; ``mlm`` over the masked bytes only, with the
  share restored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..configs.config import CORPORA, MLM_VOCAB
from ..configs.options import check_choice, check_real, option
from .task import Task, register


def bpe_option():
    """``bpe``, as every task that reads it declares it (mlm, translate: one flag)."""
    return option(0, "translate, mlm: a byte-level BPE of N tokens trained on the training "
                  "pairs or text (tokenizers; 0 = byte tokens)", metavar="N")


def check_bpe(options) -> None:
    from ..configs.options import check_int

    object.__setattr__(options, "bpe", check_int("bpe", options.bpe, lo=0))
    if options.bpe and not 260 <= options.bpe <= 2**20:
        raise ValueError(f"bpe must be 0 (bytes) or a vocabulary of 260 .. 2**20 tokens, "
                         f"got {options.bpe}")


@dataclass(frozen=True)
class CorpusOptions:
    """A language model's corpus (``--text`` or ``--corpus``) and its held-out share."""

    text: str | None = option(None, "corpus: a text file, a directory, a glob pattern or a "
                              ".tar.gz/.zip archive (default: the Python standard library's "
                              ".py files)", metavar="PATH")
    corpus: str | None = option(None, "a named corpus instead of --text: stdlib (default), "
                                "austen (Jane Austen's novels, Persuasion held out; "
                                "r-cran-janeaustenr), wordnet (WordNet's glosses; wordnet-base)",
                                choices=CORPORA)
    val_fraction: float = option(0.05, "validation share of the language model's corpus (a "
                                 "translation run splits its pairs by a fixed rule)")

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "val_fraction", check_real("val_fraction", self.val_fraction, 0.0, 1.0, True,
                                              True))
        if self.text is not None:
            if not str(self.text).strip():
                raise ValueError("text is empty: give a file, a directory, a glob or an archive")
            set_(self, "text", os.path.abspath(os.path.expanduser(str(self.text))))
        if self.text is not None and self.corpus is not None:
            raise ValueError("--text and --corpus both name the corpus: give one")
        check_choice("corpus", self.corpus, CORPORA, none=True)
        if self.corpus == "austen" and self.val_fraction != 0.05:     # never ignored silently
            raise ValueError("--val-fraction does not apply to --corpus austen: its validation "
                             "text is the held-out novel (Persuasion); drop it")


@dataclass(frozen=True)
class MaskedOptions(CorpusOptions):
    """A masked language model's: the corpus, and its tokens (bytes or a BPE)."""

    bpe: int = bpe_option()

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bpe(self)


def _all_reduce(env, *tensors) -> None:
    if env.distributed:
        import torch.distributed as dist

        for t in tensors:
            dist.all_reduce(t)


class LanguageModel(Task):
    """``lm``: a byte-level language model of ``--text`` / ``--corpus``: next-byte
    cross-entropy, in bits per byte."""

    name = "lm"
    help = "a byte-level language model of --text"
    options = CorpusOptions

    def check(self, cfg) -> None:
        if cfg.model.vocab_size != 256:
            raise ValueError(f"a byte-level model needs vocab_size 256, got "
                             f"{cfg.model.vocab_size}")

    def corpus(self, cfg, state, log):
        from ..mlm.corpora import load_run_corpus
        from ..runs import data as D

        # the run directory is never part of its own corpus (--out inside the --text folder)
        corpus = load_run_corpus(cfg.text, cfg.corpus, cfg.val_fraction, exclude=[cfg.out])
        D.check_context(corpus, cfg.context)
        return corpus

    def same_data(self, recorded, corpus) -> bool:
        from ..runs import data as D

        return D.same_content(recorded, corpus.fingerprint())

    def batch(self, cfg, corpus, step, replica, replicas):
        from ..runs import data as D

        x, y = D.train_batch(corpus, step, cfg.batch_size, cfg.context, cfg.seed, replica,
                             replicas)
        return [x, y], cfg.batch_size * cfg.context

    def validation(self, cfg, corpus):
        from ..runs import data as D

        return D.val_starts(corpus, cfg.eval_windows, cfg.context, seed=0)

    @staticmethod
    def _share(cfg, env, starts):
        rows = max(cfg.batch_size // (env.replicas * cfg.grad_accum), 32)
        return starts.tensor_split(env.replicas)[env.replica], rows

    def held_out(self, model, corpus, cfg, env, val):
        import torch
        import torch.nn.functional as F

        from ..runs import data as D

        share, rows = self._share(cfg, env, val)
        tot = torch.zeros((), dtype=torch.float64, device=env.device)
        n = 0
        for x, y in D.val_batches(corpus, share, rows, cfg.context):
            x, y = x.to(env.device), y.to(env.device)
            logits = model(x)
            tot += F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1),
                                   reduction="sum").double()
            n += y.numel()
        cnt = torch.tensor(float(n), dtype=torch.float64, device=env.device)
        _all_reduce(env, tot, cnt)
        return float(tot / cnt), {}


class MaskedLanguageModel(LanguageModel):
    """``mlm``: a masked language model of ``--text`` (a bidirectional encoder, 15 % of the
    bytes masked, BERT's objective): cross-entropy over the masked bytes (tokens with
    ``--bpe``), and the share restored."""

    name = "mlm"
    help = "a masked language model of --text (a bidirectional encoder, 15% masked)"
    options = MaskedOptions
    init = "xavier"                    # an encoder's rule (the Macaron study's models)
    noun = "a masked language model"
    reader = "'splitnet evaluate' scores a masked LM"

    def model_options(self, cfg, options):
        """Bytes and the mask token (``--bpe N``: its N + 1 ids, set once the BPE is trained),
        every token seeing every other."""
        out = super().model_options(cfg, options)
        if not cfg.bpe:
            out["vocab_size"] = MLM_VOCAB
        return {**out, "causal": False}

    def check(self, cfg) -> None:
        if cfg.loss == "chunked":
            raise ValueError("--task mlm does not take --loss chunked (its loss counts masked "
                             "tokens only)")

    def planned_model(self, cfg):
        return cfg.model.replace(vocab_size=cfg.bpe + 1) if cfg.bpe else cfg.model

    def notes(self, cfg) -> list[str]:
        """Shared-weight compositions of order >= 3 can sit on the masked-LM plateau for
        thousands of steps (docs/mlm.md, "Why the shared compositions stall")."""
        s = cfg.model.plan.scheme
        if cfg.model.weights != "shared" or s.order < 3:
            return []
        return [f"a masked LM of {s.name} (order {s.order}) with shared weights: on the Austen "
                f"corpus all eight seeds of Yoshida4 sat on the plateau near 2.7 nats for "
                f"3,000 steps, and at initialisation its stage calls' gradients of a shared "
                f"field partly cancel (the feed-forward's summed gradient is 0.25 of the calls' "
                f"summed norms; Strang's 0.98): docs/mlm.md; --weights per-stage gives each "
                f"stage its own sub-layer"]

    def corpus(self, cfg, state, log):
        corpus = super().corpus(cfg, state, log)
        if not cfg.bpe:
            return corpus
        from ..mlm.tokens import bpe_corpus
        from ..runs import data as D

        corpus = bpe_corpus(corpus, cfg.bpe, state, log)
        D.check_context(corpus, cfg.context)
        return corpus

    def fit(self, cfg, corpus, state, device):
        """The BPE's vocabulary and the mask token."""
        if not cfg.bpe:
            return cfg
        model = cfg.model.replace(vocab_size=corpus.mask_id + 1)
        if state is not None and model != cfg.model:
            raise ValueError("incompatible checkpoint: its tokenizer does not fit its model "
                             "(edited by hand?)")
        return cfg.replace(model=model)

    def batch(self, cfg, corpus, step, replica, replicas):
        from ..mlm import train_batch

        x, y = train_batch(corpus, step, cfg.batch_size, cfg.context, cfg.seed, replica,
                           replicas)
        return [x, y], cfg.batch_size * cfg.context

    def held_out(self, model, corpus, cfg, env, val):
        from ..mlm import validation

        share, rows = self._share(cfg, env, val)
        tot, right, cnt = validation(model, corpus, share, cfg.context, cfg.seed, rows,
                                     env.device)
        _all_reduce(env, tot, right, cnt)
        return float(tot / cnt), {"val_acc": float(right / cnt)}

    def result(self, cfg, val, extra):
        per = "bits per token" if cfg.bpe else "bpb"
        unit = "tokens" if cfg.bpe else "bytes"
        return f"val {per} {val} (masked {unit}), {extra.get('val_acc', 0.0):.1%} restored"


LM = register(LanguageModel())
MLM = register(MaskedLanguageModel())

__all__ = ["LM", "MLM", "CorpusOptions", "LanguageModel", "MaskedLanguageModel", "MaskedOptions",
           "bpe_option", "check_bpe"]
