"""Text generation: autoregressive sampling, with a key/value cache per attention evaluation.

**Why a cache is exact for every scheme.** In a causal network the state of token i, after every
stage and inside every sub-step, depends on tokens 0..i only. So every *evaluation* of the
attention field in the network -- one per diffusion stage with Euler sub-layers (a sum stage
``d+c`` included: its attention component takes the cache), two with ``midpoint``, four with
``rk4`` -- sees, for the earlier tokens, keys and values that never change
once computed. Each evaluation gets its own :class:`KVCache`; a shared attention module called by
several stages of a layer has one per stage (each stage sees a different state), and a
``Gated`` attention hands the cache to its attention (the gate is position-wise). With the cache a
new token costs one pass of one token through the network instead of a pass over the prefix::

    logits = model(prompt)                  # prefill: fills every cache, O(T) rows
    for each new token:
        sample -> token;  logits = model(token at position L, caches)   # O(1) rows

**Context (sliding window).** Positions are learned absolute embeddings, ``max_len`` of them.
The next token after a sequence of length L is predicted from its last ``min(L, max_len)``
tokens, at positions ``0 .. min(L, max_len) - 1`` (nanoGPT's crop). While ``L <= max_len`` the
cache grows; once ``L > max_len`` the window slides by one token per step, every token's
position changes, nothing cached stays valid (a cache cannot be shifted), and each further token
costs a full forward of the ``max_len``-token window, as it would without a cache. Cached and
uncached generation compute the same function (``tests/test_generation.py`` checks them equal).

A model whose ``config.context_slides`` is False never slides: a request whose prompt and new
tokens do not fit in ``max_len`` is refused before any work (:func:`check_request`). Imports
before issue 61 set it on a Mistral or Qwen2 whose attention window was its ``max_len``
(sliding a ``W``-token context is not sliding-window attention once there are several layers,
for information travels ``W`` tokens back per layer), so such saved models keep refusing;
imports now carry the window itself (``sliding_window``) and may slide.

**Without a cache** (``use_cache=False``, or when a cache cannot be exact): a forward of the
window per token. The automatic choice (``use_cache=None``) falls back to it for
``method="exact"`` (the adaptive solver evaluates the fields a varying number of times at
varying states, so there is no fixed set of evaluations to cache), for a non-causal model
(earlier tokens' states change when a token is added) and for fields that mix tokens but keep
no cache (``mixes_tokens`` without ``supports_cache``: a field of a user's that does not say it
can); ``use_cache=True`` raises ``ValueError`` there instead. The causal GLU convolution of
``diffusion_field="conv"`` keeps its window's inputs in a :class:`KVCache` (as keys of one
head, values empty).

**Sampling.** ``temperature == 0``: greedy (argmax, first index on ties). Otherwise
``softmax(logits / temperature)``, restricted to the ``top_k`` largest logits when given, drawn
with ``torch.multinomial`` from ``generator`` (or torch's global RNG): the same seed gives the same
tokens.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator

import torch


class KVCache:
    """Keys and values of one attention evaluation for the positions seen so far.

    A buffer of ``capacity`` positions, allocated at the first :meth:`append` (which fixes
    batch, heads, dtype and device); appending writes in place, so a generation of N tokens
    copies each key once instead of re-concatenating the prefix. The buffer is position-major,
    (capacity, B, H, d_h): the filled prefix is one contiguous block, handed to attention as the
    (B, H, length, d_h) view it expects (attention kernels take strided keys).

    :meth:`reorder` (beam search) gathers the rows of the *filled* prefix only, into a second
    buffer that then becomes the cache (allocated at the first reorder, reused after): a step's
    reorder costs the prefix, not the capacity, and allocates nothing. (Reordering the whole
    preallocated buffer cost 28-33 % of a beam search at batch 16-64 on the CPU.)"""

    def __init__(self, capacity: int):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
        self.capacity = capacity
        self.length = 0
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self._spare: tuple[torch.Tensor, torch.Tensor] | None = None

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k``, ``v`` (B, H, n, d_h) at positions ``length .. length + n - 1``; return the
        keys and values of all positions so far, (B, H, length + n, d_h)."""
        b, heads, n, hd = k.shape
        end = self.length + n
        if end > self.capacity:
            raise ValueError(f"key/value cache full: {self.length} + {n} positions exceed its "
                             f"capacity {self.capacity}")
        if self.k is None:
            self.k = k.new_empty(self.capacity, b, heads, hd)
            self.v = v.new_empty(self.capacity, b, heads, v.shape[-1])   # (a conv's: 0)
        self.k[self.length:end] = k.permute(2, 0, 1, 3)
        self.v[self.length:end] = v.permute(2, 0, 1, 3)
        self.length = end
        return self.k[:end].permute(1, 2, 0, 3), self.v[:end].permute(1, 2, 0, 3)

    def reorder(self, index: torch.Tensor) -> None:
        """Row ``i`` becomes the old row ``index[i]`` (int64, one entry per row), keys and
        values alike; positions ``length ..`` are not copied (nothing there is read)."""
        if self.k is None or self.length == 0:
            return
        if index.shape != (self.k.shape[1],):
            raise ValueError(f"a reorder index needs one entry per cached row "
                             f"({self.k.shape[1]}), got shape {tuple(index.shape)}")
        if self._spare is None:
            self._spare = (torch.empty_like(self.k), torch.empty_like(self.v))
        n, (k2, v2) = self.length, self._spare
        torch.index_select(self.k[:n], 1, index, out=k2[:n])
        torch.index_select(self.v[:n], 1, index, out=v2[:n])
        self._spare = (self.k, self.v)
        self.k, self.v = k2, v2


class GenerationCache:
    """Every key/value cache a model needs: ``layers[k][i]`` is ``None`` for a stage of layer k
    whose field is position-wise (it needs no cache) and a list of ``method.evals``
    :class:`KVCache` for a stage whose field takes one (``supports_cache``: causal attention,
    alone, gated or in a sum stage). ``length``: the tokens (positions) processed so far."""

    def __init__(self, model, capacity: int):
        reason = cache_unsupported(model)
        if reason:
            raise ValueError(f"generation cannot use a key/value cache: {reason}")
        self.layers = [[[KVCache(capacity) for _ in range(layer.method.evals)]
                        if takes_cache(f) else None for f in layer.stage_callables()]
                       for layer in model.layers]
        self.capacity = capacity
        self.length = 0

    def reorder(self, index: torch.Tensor) -> None:
        """Row ``i`` of every key/value cache becomes the old row ``index[i]`` (beam search:
        each hypothesis continues the one it extends); see :meth:`KVCache.reorder`."""
        for layer in self.layers:
            for caches in layer:
                for kv in caches or ():
                    kv.reorder(index)

    def n_caches(self) -> int:
        """Number of cached field evaluations per token (one :class:`KVCache` each)."""
        return sum(len(c) for layer in self.layers for c in layer if c is not None)


def takes_cache(f) -> bool:
    """Whether the stage callable ``f`` reads and extends a key/value cache."""
    return bool(getattr(f, "supports_cache", False))


def mixes_tokens(f) -> bool:
    """Whether a token's update by ``f`` depends on other tokens (a callable that does not say
    is taken to: only a field that declares ``mixes_tokens = False`` is position-wise)."""
    return bool(getattr(f, "mixes_tokens", True))


def _name(f) -> str:
    """``GLUConv``; ``Gated(GLUConv)``; ``SumField(GLUConv, FeedForward)``."""
    parts = getattr(f, "fields", None)         # a sum stage: name its components
    if not isinstance(parts, list):
        inner = getattr(f, "field", None)      # a Gated field: name what it gates
        parts = None if inner is None or isinstance(inner, str) else [inner]
    return type(f).__name__ if not parts else \
        f"{type(f).__name__}({', '.join(_name(p) for p in parts)})"


def cache_unsupported(model) -> str | None:
    """Why ``model`` cannot generate with a key/value cache, or ``None`` when it can: every stage
    whose field mixes tokens must take a cache (``supports_cache``), and the sub-flow method
    must evaluate the fields a fixed number of times."""
    if not model.causal:
        return "the model is not causal (earlier tokens' states depend on later tokens)"
    for k, layer in enumerate(model.layers):
        evals = layer.method.evals
        if isinstance(evals, bool) or not isinstance(evals, int):
            return (f"sub-flow method {layer.method.name!r} evaluates the fields an adaptive "
                    f"number of times")
        for st, f in zip(layer.stages, layer.stage_callables()):
            if mixes_tokens(f) and not takes_cache(f):
                return (f"the {st.field} field of layer {k} ({_name(f)}) mixes tokens but keeps "
                        f"no key/value cache (each new token recomputes the window instead)")
    return None


# ---------------------------------------------------------------------------------------------
# forward passes


def forward_cached(model, idx: torch.Tensor, cache: GenerationCache) -> torch.Tensor:
    """Logits (B, n, V) of new tokens ``idx`` (B, n) at positions ``cache.length ..`` of a
    causal model, every attention evaluation reading and extending its cache: the last n rows
    of ``model(whole sequence)``. The caller holds ``torch.no_grad()``."""
    start = cache.length
    x = model.embed(idx, start=start)             # checks ids and start + n <= max_len
    x = model.run_layers_cached(x, cache.layers)
    cache.length = start + idx.shape[1]
    return model.to_logits(model.norm(x))


def forward_last(model, idx: torch.Tensor) -> torch.Tensor:
    """Logits (B, V) of the token after ``idx`` (B, T), T <= max_len, without a cache: the
    network on the whole window, the head on its last position only (as ``model(idx)[:, -1]``,
    without projecting every position onto the vocabulary)."""
    x = model.run_layers(model.embed(idx))
    return model.to_logits(model.norm(x[:, -1]))


def _next_logits(model, seq: torch.Tensor, cache: GenerationCache | None) -> torch.Tensor:
    """Logits (B, V) of the token after ``seq`` (B, L): cached while L <= max_len, else a
    forward of the last max_len tokens (the window has slid: nothing cached is valid)."""
    with torch.no_grad():
        L = seq.shape[1]
        if cache is None or L > model.max_len:
            return forward_last(model, seq[:, max(0, L - model.max_len):])
        return forward_cached(model, seq[:, cache.length:], cache)[:, -1]


# ---------------------------------------------------------------------------------------------
# sampling


def sample(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row of ``logits`` (B, V) -> (B, 1) int64.

    ``temperature == 0``: argmax. Else a draw from ``softmax(logits / temperature)`` over the
    ``top_k`` largest logits (all when ``None``; ties at the k-th value are all kept). The
    logits are shifted by their maximum before dividing, so a tiny temperature tends to argmax
    instead of overflowing; bf16/fp16 logits are sampled in float32."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    z = (logits - logits.max(dim=-1, keepdim=True).values) / temperature
    if top_k is not None and top_k < z.shape[-1]:
        kth = torch.topk(z, top_k, dim=-1).values[:, -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    return torch.multinomial(torch.softmax(z, dim=-1), 1, generator=generator)


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def check_request(model, idx, max_new_tokens, temperature, top_k, generator, use_cache) -> None:
    """Every argument of :func:`generate`, checked before any work (TypeError / ValueError
    naming the problem)."""
    if not isinstance(idx, torch.Tensor):
        raise TypeError(f"idx must be a torch.Tensor of int64 token ids, got {type(idx).__name__}")
    if idx.dtype != torch.long:
        raise TypeError(f"idx must have dtype torch.int64 (token ids), got {idx.dtype}")
    if idx.dim() != 2 or idx.shape[0] < 1 or idx.shape[1] < 1:
        raise ValueError(f"idx must have shape (batch, seq) with batch >= 1 and seq >= 1, got "
                         f"{tuple(idx.shape)}")
    if not getattr(model.config, "causal", True):   # issue 49 D12: every door refuses it
        raise ValueError("the model is bidirectional (causal=False: a masked language model): "
                         "each token's state reads the tokens after it, so it does not continue "
                         "text; score it with 'splitnet evaluate' or fill masked tokens")
    device = model.tok_emb.weight.device
    if idx.device != device:
        raise ValueError(f"idx is on {idx.device} but the model is on {device}")
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0 or hi >= model.vocab_size:
        raise ValueError(f"token ids must lie in [0, {model.vocab_size}), got [{lo}, {hi}]")
    if not _is_int(max_new_tokens) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    if (isinstance(temperature, bool) or not isinstance(temperature, numbers.Real)
            or not math.isfinite(temperature) or temperature < 0):
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got "
                         f"{temperature!r}")
    if top_k is not None and (not _is_int(top_k) or top_k < 1):
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got "
                            f"{type(generator).__name__}")
        if generator.device.type != device.type:
            raise ValueError(f"generator is on {generator.device} but the model is on {device}")
    if use_cache not in (None, True, False):
        raise TypeError(f"use_cache must be None (automatic), True or False, got {use_cache!r}")
    _check_fits(model, idx.shape[1], max_new_tokens)


def _check_fits(model, T: int, n_new: int) -> None:
    """A model whose context may not slide (``context_slides=False``: an imported sliding
    attention window) predicts every token from the whole sequence, which must fit in it."""
    if n_new == 0 or getattr(model.config, "context_slides", True) or \
            T + n_new - 1 <= model.max_len:
        return
    room = f"room for {model.max_len - T + 1} new tokens" if T <= model.max_len else \
        "no room for any"
    raise ValueError(f"this model's context of {model.max_len} tokens may not slide (an "
                     f"attention window imported exactly: equal to the original only while the "
                     f"whole sequence fits in it); a {T}-token prompt leaves {room} (asked "
                     f"for {n_new})")


def stream(model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
           top_k: int | None = None, *, generator: torch.Generator | None = None,
           use_cache: bool | None = None) -> Iterator[torch.Tensor]:
    """Yield the new tokens one at a time, each (B, 1) int64, as :func:`generate` produces them.

    Arguments are checked when this is called, before the first token. The model is in eval
    mode from the first ``next()`` until the stream ends or is closed, then back in the mode it
    had; gradients are off inside each step only."""
    check_request(model, idx, max_new_tokens, temperature, top_k, generator, use_cache)
    reason = cache_unsupported(model)
    if use_cache and reason:
        raise ValueError(f"use_cache=True, but this model cannot use a key/value cache: {reason}")
    cached = reason is None if use_cache is None else use_cache
    return _tokens(model, idx, max_new_tokens, temperature, top_k, generator, cached)


def _tokens(model, idx, n_new, temperature, top_k, generator, cached):
    b, T = idx.shape
    seq = idx.new_empty(b, T + n_new)
    seq[:, :T] = idx
    if n_new == 0:
        return
    # A prompt longer than max_len: the window slides from the first token on, nothing to
    # cache. Otherwise buffers as long as the cache can get (the last token is never fed back).
    cached = cached and T <= model.max_len
    cache = GenerationCache(model, min(T + n_new - 1, model.max_len)) if cached else None
    was_training = model.training
    model.eval()
    try:
        for i in range(n_new):
            logits = _next_logits(model, seq[:, :T + i], cache)
            tok = sample(logits, temperature, top_k, generator)
            seq[:, T + i] = tok[:, 0]
            yield tok
    finally:
        model.train(was_training)


def generate(model, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, *, generator: torch.Generator | None = None,
             use_cache: bool | None = None) -> torch.Tensor:
    """``idx`` (B, T) int64 followed by ``max_new_tokens`` sampled tokens: (B, T + N) int64.

    Each new token is drawn (:func:`sample`) from the logits after the last ``min(L, max_len)``
    tokens; ``use_cache``: ``None`` caches keys and values whenever that is exact (not for
    ``method="exact"``, a non-causal model, or a field that mixes tokens without a cache: those
    recompute the window per token), ``True`` insists (``ValueError`` if
    impossible), ``False`` recomputes. See the module docstring for the maths."""
    new = list(stream(model, idx, max_new_tokens, temperature, top_k, generator=generator,
                      use_cache=use_cache))
    return torch.cat([idx, *new], dim=1)


__all__ = ["GenerationCache", "KVCache", "cache_unsupported", "check_request", "forward_cached",
           "forward_last", "generate", "mixes_tokens", "sample", "stream", "takes_cache"]
