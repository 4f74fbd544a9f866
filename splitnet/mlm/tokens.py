"""Tokens of a masked language model: UTF-8 bytes (the default, 256 ids and the mask token) or a
byte-level BPE of N tokens (``--task mlm --bpe N``), trained on the training split's text and
kept in the checkpoint, with the mask token after its vocabulary (model vocabulary N + 1).

A BPE corpus is the byte corpus encoded line by line (:func:`tokenize`), so a window is
``context`` tokens; the held-out score is then nats (and bits) per masked *token*, which does
not compare with a byte model's per masked byte. The tokenizer is the translation task's
(:mod:`splitnet.translate.batches`: ``tokenizers``' byte-level BPE, exact round trip)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..configs.config import MLM_MASK_ID
from ..runs import data as D
from ..translate.batches import BPETokenizer, tokenizer_from_dict, train_bpe

BYTE_PAD = 32          # a space: the probe's padding of byte texts (its positions left out)


class ByteText:
    """Texts as UTF-8 bytes, for the probe: ``encode`` and the padding id."""

    pad_id = BYTE_PAD

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))


@dataclass
class TokenCorpus(D.Corpus):
    """A :class:`~splitnet.runs.data.Corpus` whose arrays are BPE ids (int32), with its
    tokenizer; the mask token is the id after the tokenizer's vocabulary."""

    tokenizer: BPETokenizer | None = None
    text_bytes: int = 0          # of the text it encodes: the fingerprint is the text's

    def fingerprint(self) -> dict:
        return {**super().fingerprint(), "bytes": self.text_bytes}

    @property
    def mask_id(self) -> int:
        return self.tokenizer.vocab_size

    def describe(self) -> str:
        return (super().describe().replace(" bytes", " tokens") +
                f" (BPE of {self.tokenizer.vocab_size:,})")


def mask_id_of(corpus) -> int:
    """The mask token of a corpus: after a BPE's vocabulary, else :data:`MLM_MASK_ID`."""
    return getattr(corpus, "mask_id", MLM_MASK_ID)


def _lines(arr: np.ndarray) -> list[str]:
    return bytes(arr).decode("utf-8", errors="replace").splitlines(keepends=True)


def tokenize(corpus: D.Corpus, tokenizer: BPETokenizer) -> TokenCorpus:
    """Both splits encoded line by line (each line's ids, in order, concatenated)."""
    def ids(arr):
        enc = tokenizer.tokenizer.encode_batch(_lines(arr), add_special_tokens=False)
        return np.fromiter((i for e in enc for i in e.ids), dtype=np.int32)

    return TokenCorpus(ids(corpus.train), ids(corpus.val), corpus.source, corpus.files,
                       corpus.skipped, corpus.digest, tokenizer, corpus.fingerprint()["bytes"])


def bpe_corpus(corpus: D.Corpus, vocab: int, state: dict | None, log) -> TokenCorpus:
    """``corpus`` in BPE tokens: the checkpoint's tokenizer on resume, else one of ``vocab``
    tokens trained on the training split."""
    if state is not None and state.get("tokenizer") is not None:
        tok = tokenizer_from_dict(state["tokenizer"])
    else:
        t0 = time.perf_counter()
        tok = train_bpe(_lines(corpus.train), vocab)
        log(f"BPE of {tok.vocab_size:,} tokens trained on the training split in "
            f"{time.perf_counter() - t0:.1f} s")
    return tokenize(corpus, tok)


def text_tokens(state: dict | None):
    """What the probe encodes texts with for a checkpoint: its BPE, else bytes."""
    d = (state or {}).get("tokenizer")
    return ByteText() if d is None else tokenizer_from_dict(d)


__all__ = ["BYTE_PAD", "ByteText", "TokenCorpus", "bpe_corpus", "mask_id_of", "text_tokens",
           "tokenize"]
