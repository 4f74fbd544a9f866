"""Decoding an encoder–decoder network: greedy and beam search, cached.

**What is computed once.** The encoder runs once per source batch. Each cross-attention module
projects the memory to keys and values once per generation (a ``memory_cache`` dict, filled by
the module's first call and read by every later stage and step). Every evaluation of the
decoder's causal self-attention keeps a key/value cache (:class:`splitnet.nets.generation.KVCache`,
one per stage and sub-step evaluation, as for language models), so a step feeds one token per
row through the decoder instead of the whole prefix. Cached and uncached decoding compute the
same function (``tests/test_seq2seq.py``). A reversible decoder (:mod:`splitnet.reversible`)
steps its pair ``(x1, x2)``, started at the new tokens' embedding and read out as its mean, with
the same caches (``tests/test_reversible_seq2seq.py``).

**Greedy** (``beam=1``): the argmax token per row until every row has produced ``eos_id`` or
``max_new_tokens`` tokens. ``pad_id`` and ``bos_id`` are never produced.

**Beam search** (fairseq's candidate and length-penalty conventions): per source,
``K`` live hypotheses; each step takes the ``2K`` best extensions by summed log-probability
``log p(y_1..y_t | x)``; an extension ending in ``eos`` among the best ``K`` is finished with
score ``log p / t ** length_penalty`` (``t`` counting the eos), the other extensions fill the
``K`` live slots; the ``K`` best finished are kept. A source is done once it has ``K`` finished
hypotheses and no live one, scored as if it ended now, beats the worst of them (Hugging Face's
criterion: fairseq's, stop at ``K`` finished, lets early improbable endings of the weaker beams
crowd out a better, longer hypothesis); at ``max_new_tokens`` the live ones are finished as
they stand. The best finished hypothesis wins. ``length_penalty``
0 ranks by ``log p`` (short outputs win), 1 by the mean per token; the seed used beam 5 with 1.0
(IWSLT) and beam 4 with 0.6 (WMT). With ``K`` at least the number of possible outputs the search
is exhaustive (a test enumerates them on a tiny vocabulary); ``beam=1`` equals greedy (a test).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import torch

from ..configs.config import MAX_BEAM
from ..integrators.subflows import get_method
from ..runenv import require_memory
from ..stagelists.stages import CROSS, DIFFUSION
from .generation import GenerationCache, cache_unsupported


class _DecoderView:
    """The decoder as :class:`~splitnet.nets.generation.GenerationCache` reads a network: its
    layers,
    causal."""

    causal = True

    def __init__(self, model):
        self.layers = model.decoder_layers


def _check(model, src, max_new_tokens, beam, length_penalty) -> None:
    c = model.config
    if not isinstance(src, torch.Tensor):
        raise TypeError(f"src must be a tensor of token ids (batch, seq), got "
                        f"{type(src).__name__}")
    if src.dim() != 2:
        raise ValueError(f"src must have shape (batch, seq), got {tuple(src.shape)}"
                         f"{'; one sentence is src[None]' if src.dim() == 1 else ''}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) \
            or not 1 <= max_new_tokens <= c.max_len:
        raise ValueError(f"max_new_tokens must be an int in [1, max_len={c.max_len}], got "
                         f"{max_new_tokens!r}")
    if isinstance(beam, bool) or not isinstance(beam, numbers.Integral) \
            or not 1 <= beam <= MAX_BEAM:
        raise ValueError(f"beam must be an int in [1, {MAX_BEAM:,}], got {beam!r}")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, numbers.Real) \
            or not -10.0 <= length_penalty <= 10.0:
        raise ValueError(f"length_penalty must be a number in [-10, 10], got {length_penalty!r}")


def decode_memory(config, sources: int, src_len: int, max_new_tokens: int, beam: int) -> float:
    """Bytes a decode of ``sources`` sources of ``src_len`` tokens holds at once (float32), an
    estimate to refuse a search before it starts. ``R = sources x beam`` rows, each with a key
    and a value cache of ``max_new_tokens x d_model`` per evaluation of the decoder's
    self-attention (stages x the method's evaluations, every layer), counted twice (a beam's
    reordering copies it), the memory repeated per row with its keys and values per
    cross-attention module (``src_len x d_model`` each), and per vocabulary entry 32 bytes (the
    step's logits and log-probabilities, and in float64 these and the candidate scores). On
    the CPU, 32 sources of 16 tokens at beam 1,024 (d_model 16, 259 tokens, one layer) grew
    the peak RSS by 435-456 MiB against 487 MiB estimated (beam 256: 147 against 122)."""
    stack = config.stack_config("decoder")
    plan = stack.layer_fields(0)            # a stack's layers are alike (no gates)
    evals = get_method(config.method).evals or 1
    attn = stack.n_layers * evals * sum(f.calls for f in plan if f.field == DIFFUSION)
    cross = stack.n_layers * sum(f.n_modules for f in plan if f.field == CROSS)
    per_row = 4.0 * config.d_model * (4 * attn * max_new_tokens + src_len * (1 + 2 * cross)) \
        + 32.0 * config.tgt_vocab + 8.0 * max_new_tokens
    return sources * beam * per_row


def step_function(model, memory, mask, use_cache: bool, capacity: int) -> Callable:
    """``next(seq, reorder=None) -> log-probabilities (R, V)`` of the token after each row of
    ``seq`` (R, L) (bos first), its R decoder rows reading ``memory`` (R, S, D), the caches
    holding up to ``capacity`` tokens.
    ``reorder`` (R,) int64: the row of the previous step each row continues (beam search),
    applied to the caches first. ``pad_id`` and ``bos_id`` get ``-inf``."""
    c = model.config
    store: dict = {}
    cache = GenerationCache(_DecoderView(model), capacity) if use_cache else None

    def next_logprobs(seq: torch.Tensor, reorder: torch.Tensor | None = None) -> torch.Tensor:
        if cache is None:
            logits = model.decode(seq, memory, mask)[:, -1]
        else:
            if reorder is not None:
                cache.reorder(reorder)
            x = model.embed_target(seq[:, cache.length:], start=cache.length)
            ctx = {"memory": memory, "memory_mask": mask, "memory_cache": store,
                   **model.embedding_context(x)}
            x = model.decoder_layers.run_cached(x, cache.layers, **ctx)
            cache.length = seq.shape[1]
            logits = model.head(model.decoder_norm(x[:, -1]))
        logp = torch.log_softmax(logits.float(), dim=-1)
        logp[:, [c.pad_id, c.bos_id]] = float("-inf")
        return logp

    return next_logprobs


def _pad_rows(rows: list[list[int]], pad: int, device) -> torch.Tensor:
    n = max(1, max(map(len, rows)))
    return torch.tensor([r + [pad] * (n - len(r)) for r in rows], dtype=torch.long,
                        device=device)


def greedy(model, memory, mask, max_new_tokens: int, use_cache: bool = True) -> torch.Tensor:
    """The argmax continuation of every row (see the module docstring)."""
    c = model.config
    B = memory.shape[0]
    nxt = step_function(model, memory, mask, use_cache, max_new_tokens)
    seq = torch.full((B, 1), c.bos_id, dtype=torch.long, device=memory.device)
    done = torch.zeros(B, dtype=torch.bool, device=memory.device)
    for _ in range(max_new_tokens):
        tok = nxt(seq).argmax(dim=-1)
        tok = torch.where(done, torch.full_like(tok, c.pad_id), tok)
        seq = torch.cat([seq, tok[:, None]], dim=1)
        done |= tok.eq(c.eos_id)
        if bool(done.all()):
            break
    return seq[:, 1:]


def beam_search(model, memory, mask, max_new_tokens: int, beam: int,
                length_penalty: float = 1.0, use_cache: bool = True) -> torch.Tensor:
    """The best finished hypothesis of a beam of ``beam`` per row (module docstring)."""
    c = model.config
    B, K, dev = memory.shape[0], beam, memory.device
    memory = memory.repeat_interleave(K, dim=0)                 # (B K, S, D): row b K + j
    mask = None if mask is None else mask.repeat_interleave(K, dim=0)
    nxt = step_function(model, memory, mask, use_cache, max_new_tokens)
    seq = torch.full((B * K, 1), c.bos_id, dtype=torch.long, device=dev)
    scores = torch.full((B, K), float("-inf"), dtype=torch.float64, device=dev)
    scores[:, 0] = 0.0                                          # one live hypothesis at first
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    done = [False] * B
    reorder = None
    for t in range(1, max_new_tokens + 1):
        logp = nxt(seq, reorder).double()                       # (B K, V)
        V = logp.shape[1]
        cand = (scores.reshape(B * K, 1) + logp).reshape(B, K * V)
        top, idx = cand.topk(min(2 * K, K * V), dim=1)
        top, idx = top.tolist(), idx.tolist()
        rows, toks, new_scores = [], [], []
        for b in range(B):
            live = _extend(b, K, V, t, top[b], idx[b], seq, finished[b], length_penalty,
                           c.eos_id, last=t == max_new_tokens, skip=done[b])
            done[b] = done[b] or _done(finished[b], live, K, t, length_penalty)
            live += [(b * K, c.pad_id, float("-inf"))] * (K - len(live))
            for r, tok, s in live:
                rows.append(r)
                toks.append(tok)
                new_scores.append(s)
        if all(done):
            break
        reorder = torch.tensor(rows, dtype=torch.long, device=dev)
        seq = torch.cat([seq.index_select(0, reorder),
                         torch.tensor(toks, dtype=torch.long, device=dev)[:, None]], dim=1)
        scores = torch.tensor(new_scores, dtype=torch.float64, device=dev).reshape(B, K)
    best = [max(f, key=lambda h: h[0])[1] if f else [] for f in finished]
    return _pad_rows(best, c.pad_id, dev)


def _extend(b, K, V, t, top, idx, seq, finished, alpha, eos, last, skip) -> list:
    """One source's step: finish eos extensions among the best K (and every extension at the
    last step), keeping the K best finished; return up to K live ``(row, token, score)``."""
    live = []
    if skip:
        return live
    for rank, (s, i) in enumerate(zip(top, idx)):
        if s == float("-inf") or len(live) == K:
            break
        row, tok = b * K + i // V, i % V
        if tok == eos or last:
            if rank < K or last:
                finished.append((s / t ** alpha, seq[row, 1:].tolist() + [tok]))
                finished.sort(key=lambda h: -h[0])
                del finished[K:]
            continue
        live.append((row, tok, s))
    return live


def _done(finished, live, K: int, t: int, alpha: float) -> bool:
    """A source is done when it has K finished hypotheses and its best live one, scored as if
    it ended now, does not beat the worst of them (Hugging Face's criterion; fairseq's stops at
    K finished, which lets early low-probability endings crowd out a better longer one)."""
    if len(finished) < K:
        return False
    return not live or max(s for _, _, s in live) / t ** alpha <= finished[-1][0]


def generate(model, src: torch.Tensor, max_new_tokens: int, beam: int = 1,
             length_penalty: float = 1.0, src_key_padding_mask=None,
             use_cache: bool | None = None) -> torch.Tensor:
    """:meth:`splitnet.nets.seq2seq.SplitSeq2Seq.generate`: encode once, then greedy (``beam``
    1) or beam search; eval mode (restored after), no gradients. ``use_cache``: ``None``
    automatic (no cache for ``method="exact"``, whose evaluations vary), ``True`` required,
    ``False`` never."""
    _check(model, src, max_new_tokens, beam, length_penalty)
    device = next(model.parameters()).device
    require_memory(decode_memory(model.config, src.shape[0], src.shape[1], max_new_tokens, beam),
                   f"decoding {src.shape[0]} source(s) with beam {beam}",
                   "lower the beam or the sources decoded at once", device)
    reason = cache_unsupported(_DecoderView(model))
    if use_cache and reason:
        raise ValueError(f"decoding cannot use a key/value cache: {reason}")
    use_cache = reason is None if use_cache is None else bool(use_cache)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            memory, mask = model.encode(src, src_key_padding_mask)
            if beam == 1:
                return greedy(model, memory, mask, int(max_new_tokens), use_cache)
            return beam_search(model, memory, mask, int(max_new_tokens), int(beam),
                               float(length_penalty), use_cache)
    finally:
        model.train(was_training)


__all__ = ["beam_search", "decode_memory", "generate", "greedy", "step_function"]
