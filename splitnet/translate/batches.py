"""Tokens and batches of a parallel corpus for encoder-decoder training.

Tokenizers share one interface (``encode``, ``decode``, ``pad_id``/``bos_id``/``eos_id``,
``vocab_size``, ``to_dict``) and serialise to plain data (str, int), so a ``weights_only``
checkpoint can hold one and rebuild it offline (:func:`tokenizer_from_dict`):

* :class:`ByteTokenizer` -- ids 0..255 are the UTF-8 bytes, 256/257/258 pad/bos/eos: any text
  encodes, nothing to train, and the loss converts to bits per byte.
* :class:`BPETokenizer` from :func:`train_bpe` -- byte-level BPE of the ``tokenizers`` library
  (extra ``translate``), one vocabulary shared by source and target, trained on the training
  split; byte-level, so any input still encodes.

Batches: :func:`pair_batch` is a pure function of ``(seed, step)`` like
:func:`splitnet.runs.data.train_batch`, so resuming needs no sampler state. Each epoch is a seeded
permutation of the pairs; pools of ``POOL`` batches are sorted by length and cut into batches,
and the batches of the epoch are shuffled. Every pair is seen once per epoch (less the
remainder of ``len % batch_size``, a different one each epoch), and a batch holds pairs of
similar length, so it pads little (a random batch pads to its longest pair: with the
catalogues' lengths, 23 bytes median and 333 at the 99.5th percentile, most of it would be
padding). :func:`eval_batches` walks a split in its own order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from ..configs.config import require

POOL = 64       # batches per length-sorted pool: low padding, yet batches mix within an epoch
BPE_SPECIALS = ("<pad>", "<s>", "</s>")


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255, then pad 256, bos 257, eos 258 (vocabulary 259)."""

    kind = "byte"
    pad_id, bos_id, eos_id, vocab_size = 256, 257, 258, 259

    def encode(self, text: str) -> list[int]:
        """The UTF-8 bytes of ``text`` (no bos/eos: the batches add them)."""
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        """Text of ``ids`` up to the first eos; pad and bos skipped, invalid UTF-8 replaced."""
        out = bytearray()
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if 0 <= i < 256:
                out.append(i)
            elif i not in (self.pad_id, self.bos_id):
                raise ValueError(f"token id {i} is outside the byte vocabulary (0..258)")
        return out.decode("utf-8", errors="replace")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "vocab_size": self.vocab_size}

    @classmethod
    def from_dict(cls, d: dict) -> ByteTokenizer:
        if not isinstance(d, dict) or d.get("kind") != cls.kind:
            raise ValueError(f"not a byte tokenizer: {d!r:.80}")
        return cls()

    def __eq__(self, other) -> bool:
        return isinstance(other, ByteTokenizer)

    def __hash__(self) -> int:
        return hash(self.kind)

    def __repr__(self) -> str:
        return "ByteTokenizer()"


class BPETokenizer:
    """A trained byte-level BPE (``tokenizers.Tokenizer``) behind the byte tokenizer's
    interface; its specials are ``<pad>``, ``<s>``, ``</s>``."""

    kind = "bpe"

    def __init__(self, tokenizer):
        ids = [tokenizer.token_to_id(t) for t in BPE_SPECIALS]
        if None in ids:
            raise ValueError(f"a BPE tokenizer needs the special tokens {BPE_SPECIALS}")
        self.tokenizer = tokenizer
        self.pad_id, self.bos_id, self.eos_id = ids
        self.vocab_size = tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        """Text of ``ids`` up to the first eos; specials skipped, broken UTF-8 replaced."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside the BPE vocabulary "
                                 f"(0..{self.vocab_size - 1})")
            if i not in (self.pad_id, self.bos_id):
                out.append(i)
        return self.tokenizer.decode(out, skip_special_tokens=False)

    def to_dict(self) -> dict:
        """The tokenizer's own JSON as a string: rebuilds offline, loads with weights_only."""
        return {"kind": self.kind, "vocab_size": self.vocab_size,
                "json": self.tokenizer.to_str()}

    @classmethod
    def from_dict(cls, d: dict) -> BPETokenizer:
        if not isinstance(d, dict) or d.get("kind") != cls.kind or "json" not in d:
            raise ValueError(f"not a BPE tokenizer: {str(d)[:80]}")
        require("tokenizers", extra="translate", feature="a BPE tokenizer")
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(d["json"]))

    def __eq__(self, other) -> bool:
        return isinstance(other, BPETokenizer) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash((self.kind, self.vocab_size))

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size})"


MAX_PIECE = 64     # the longest run of non-space characters one BPE word may be


def train_bpe(texts, vocab_size: int, min_frequency: int = 2) -> BPETokenizer:
    """A byte-level BPE with ``vocab_size`` entries (256 byte symbols and 3 specials among
    them) learned from ``texts`` -- the training split, sources and targets together, e.g.
    ``train_bpe([s for pair in corpus.train for s in pair], 8000)``. Deterministic."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 260:
        raise ValueError(f"vocab_size must be an int >= 260 (256 bytes, 3 specials and at "
                         f"least one merge), got {vocab_size!r}")
    require("tokenizers", extra="translate", feature="BPE tokenization")
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    # no prefix space: encode -> decode gives back the exact text. A run of more than
    # MAX_PIECE non-space characters is cut into pieces first: BPE training is quadratic in a
    # word's length (a 1 MB line of one character took over 15 minutes, deaf to Ctrl-C)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(rf"\S{{{MAX_PIECE}}}"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=list(BPE_SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(texts), trainer=trainer)
    return BPETokenizer(tok)


def tokenizer_from_dict(d: dict):
    """The tokenizer a checkpoint recorded with ``to_dict()``."""
    kinds = {ByteTokenizer.kind: ByteTokenizer, BPETokenizer.kind: BPETokenizer}
    kind = d.get("kind") if isinstance(d, dict) else None
    if kind not in kinds:
        raise ValueError(f"unknown tokenizer kind {kind!r}; known: {', '.join(kinds)}")
    return kinds[kind].from_dict(d)


# ---------------------------------------------------------------------------------------------
# batches


@dataclass(frozen=True)
class EncodedPairs:
    """Token ids of one split's pairs (no specials) and the tokenizer's special ids."""

    src: tuple[tuple[int, ...], ...]
    tgt: tuple[tuple[int, ...], ...]
    pad_id: int
    bos_id: int
    eos_id: int
    _plan: dict = field(default_factory=dict, compare=False, repr=False)   # the last epoch's

    def __len__(self) -> int:
        return len(self.src)

    def n_truncated(self, max_len: int) -> int:
        """Pairs that ``max_len`` cuts: a source longer than it, or a target that does not fit
        with its bos/eos."""
        return sum(len(s) > max_len or len(t) + 1 > max_len for s, t in zip(self.src, self.tgt))


def encode_pairs(pairs, tokenizer) -> EncodedPairs:
    """Encode ``(source, target)`` pairs (a :class:`~splitnet.translate.pairs.PairCorpus` split)."""
    src, tgt = [], []
    for s, t in pairs:
        src.append(tuple(tokenizer.encode(s)))
        tgt.append(tuple(tokenizer.encode(t)))
    return EncodedPairs(tuple(src), tuple(tgt), tokenizer.pad_id, tokenizer.bos_id,
                        tokenizer.eos_id)


def _generator(*keys) -> torch.Generator:
    """A generator seeded by sha256 of ``keys``: independent of any history or platform."""
    g = torch.Generator()
    g.manual_seed(int.from_bytes(hashlib.sha256(repr(keys).encode()).digest()[:8], "big") >> 1)
    return g


def _epoch_batches(enc: EncodedPairs, batch_size: int, seed: int, epoch: int,
                   max_len: int) -> list[list[int]]:
    """The batches (index lists) of one epoch, in the order they are drawn."""
    key = (batch_size, seed, epoch, max_len)
    if key not in enc._plan:
        g = _generator("pairs", seed, epoch)
        perm = torch.randperm(len(enc), generator=g).tolist()
        perm = perm[:len(perm) - len(perm) % batch_size]
        size = lambda i: min(max(len(enc.src[i]), len(enc.tgt[i]) + 1), max_len)  # noqa: E731
        batches = []
        for p in range(0, len(perm), POOL * batch_size):
            pool = sorted(perm[p:p + POOL * batch_size], key=size)    # stable: ties keep perm
            batches += [pool[k:k + batch_size] for k in range(0, len(pool), batch_size)]
        order = torch.randperm(len(batches), generator=g).tolist()
        enc._plan.clear()                   # one epoch at a time: bounded memory
        enc._plan[key] = [batches[k] for k in order]
    return enc._plan[key]


def _collate(enc: EncodedPairs, idx, max_len: int):
    """``(src, tgt_in, tgt_out, src_pad_mask)`` of the pairs ``idx``: src cut to ``max_len``;
    tgt_in = ([bos] + tgt)[:max_len], tgt_out = (tgt + [eos])[:max_len]; pad everywhere else
    (the loss ignores pad in tgt_out); the mask is True at src padding (torch's convention)."""
    pad = enc.pad_id
    srcs = [list(enc.src[i][:max_len]) for i in idx]
    tin = [([enc.bos_id, *enc.tgt[i]])[:max_len] for i in idx]
    tout = [([*enc.tgt[i], enc.eos_id])[:max_len] for i in idx]
    s_len, t_len = max(map(len, srcs)), max(map(len, tin))
    src = torch.tensor([s + [pad] * (s_len - len(s)) for s in srcs], dtype=torch.long)
    tgt_in = torch.tensor([t + [pad] * (t_len - len(t)) for t in tin], dtype=torch.long)
    tgt_out = torch.tensor([t + [pad] * (t_len - len(t)) for t in tout], dtype=torch.long)
    return src, tgt_in, tgt_out, src.eq(pad)


def _check_int(name: str, v, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return v


def pair_batch(enc: EncodedPairs, step: int, batch_size: int, seed: int, max_len: int,
               rank: int = 0, world_size: int = 1):
    """Training batch ``step``: ``(src, tgt_in, tgt_out, src_pad_mask)`` of rank ``rank``.

    A pure function of ``(seed, step)`` (and the data): step ``s`` is batch ``s mod n`` of
    epoch ``s // n``, ``n = len(enc) // batch_size``. Every rank draws the whole global batch
    and keeps rows ``[r * b, (r + 1) * b)``, ``b = batch_size // world_size``."""
    _check_int("step", step, 0)
    _check_int("max_len", max_len, 1)
    if _check_int("batch_size", batch_size, 1) > len(enc):
        raise ValueError(f"batch size {batch_size} is larger than the split ({len(enc)} pairs)")
    if batch_size % _check_int("world_size", world_size, 1) or not 0 <= rank < world_size:
        raise ValueError(f"batch size {batch_size} must divide into world size {world_size} "
                         f"and rank {rank} lie in [0, {world_size})")
    n = len(enc) // batch_size
    idx = _epoch_batches(enc, batch_size, int(seed), step // n, max_len)[step % n]
    b = batch_size // world_size
    return _collate(enc, idx[rank * b:(rank + 1) * b], max_len)


def eval_batches(enc: EncodedPairs, batch_size: int, max_len: int):
    """Yield the batches of a whole split in its own order (the last one may be smaller):
    the same every evaluation, and row ``i`` of batch ``k`` is pair ``k * batch_size + i``."""
    _check_int("batch_size", batch_size, 1)
    _check_int("max_len", max_len, 1)
    for k in range(0, len(enc), batch_size):
        yield _collate(enc, range(k, min(k + batch_size, len(enc))), max_len)


__all__ = [
    "BPE_SPECIALS",
    "MAX_PIECE",
    "POOL",
    "BPETokenizer",
    "ByteTokenizer",
    "EncodedPairs",
    "encode_pairs",
    "eval_batches",
    "pair_batch",
    "tokenizer_from_dict",
    "train_bpe",
]
