"""Self-attention, the diffusion field ``F(x_i, [x_1..x_n])``: particles interact.

``F(x) = W_o softmax(Q K^T / sqrt(d_h)) V`` on ``LN(x)`` (pre-norm inside); causal or not;
optionally with rotary position embeddings on Q and K (:mod:`splitnet.fields.rotary`). Its
kind (built from a config, closed-form cost): :class:`splitnet.configs.kinds.AttentionKind`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..configs.options import QK_NORMS
from .dropout import drop
from .norms import make_norm, make_norms, post
from .rotary import Rotary


class Attention(nn.Module):
    """Multi-head self-attention with pre-norm inside (diffusion field).

    Uses ``F.scaled_dot_product_attention`` (flash / memory-efficient kernels on CUDA).
    ``causal=True`` masks the future.

    ``forward(t, x, padding_mask=m)``: ``m`` (B, n) bool, True at padding (torch's convention);
    padded tokens are not attended (a padded token's own output is computed and meaningless).
    Every row needs one token that is not padding.

    ``forward(t, x, cache)`` with a key/value cache (generation, causal only): ``x`` (B, n, d)
    holds the *new* tokens only; their keys and values are appended to ``cache`` and their
    queries attend to every cached position and, causally, to each other -- the last n rows of
    the attention over the whole sequence. ``cache`` is any object with ``length`` (positions
    held) and ``append(k, v) -> (k_all, v_all)`` on (B, H, n, d_h) tensors
    (:class:`splitnet.nets.generation.KVCache`). Without a cache, ``forward`` is the training path,
    unchanged.

    ``rotary_dims`` > 0 rotates that many channels of every head's queries and keys by the
    tokens' positions (RoPE, GPT-NeoX's convention; positions ``0 .. n-1``, and with a cache
    ``cache.length ..``: the absolute positions of the new tokens).

    ``n_kv_heads`` < ``n_heads``: grouped-query attention (Ainslie et al. 2023), each key/value
    head shared by ``n_heads / n_kv_heads`` query heads (the cache holds the key/value heads
    only). ``bias``: which projections have biases, ``"all"`` (or True: q, k, v and the
    output), ``"qkv"`` (Qwen2) or ``"none"`` (or False); ``norm``: ``"layer"`` or ``"rms"``.

    ``head_dim``: each head's width ``d_h`` when it is not ``d_model / n_heads`` (Qwen3, Gemma):
    queries ``n_heads d_h`` wide, keys and values ``n_kv_heads d_h``, the output projection
    ``n_heads d_h -> d_model``.

    ``qk_norm``: queries and keys normalised (the ``norm`` kind, with its own weights) after the
    projection and before rotary: ``"head"`` over each head's ``d_h`` channels, one weight
    vector shared by every head (Qwen3, Gemma 3); ``"projection"`` over the whole projection,
    ``n_heads d_h`` channels for the queries and ``n_kv_heads d_h`` for the keys (OLMo 2);
    ``"none"`` (default) not at all. Both keep the field a function of the token states
    alone: a layer with them is the same splitting step of a different diffusion field.

    ``attention_softcap`` ``c``: the logits capped, ``c tanh(z / c)``, before the mask and the
    softmax (Gemma 2); ``attention_scalar`` ``s``: logits ``Q K^T / sqrt(s)`` instead of
    ``sqrt(d_h)`` (Gemma's ``query_pre_attn_scalar``); ``window`` ``W`` (causal only): each
    query sees its last ``W`` positions, itself included (a local layer of Gemma 2 / 3: the
    field is then local in the tokens; a cache still holds every position, masked).

    ``norm_position``: the norm on the input (``"pre"``), on the output (``"post"``: OLMo 2's
    ``x + N(attn(x))``) or both (``"sandwich"``: Gemma's ``x + N2(attn(N1(x)))``), weights
    ``norm`` and ``post_norm`` (:func:`splitnet.fields.norms.make_norms`).
    """

    uses_memory = False
    mixes_tokens = True        # a token's update depends on the other tokens
    masks_padding = True       # forward(..., padding_mask=): padded keys are not attended

    @property
    def supports_cache(self) -> bool:
        """A key/value cache is exact for causal attention only."""
        return self.causal

    def __init__(self, d_model: int, n_heads: int, causal: bool = False, dropout: float = 0.0,
                 bias: bool | str = True, norm_eps: float = 1e-5, rotary_dims: int = 0,
                 rotary_base: float = 10000.0, n_kv_heads: int | None = None,
                 norm: str = "layer", head_dim: int | None = None, qk_norm: str = "none",
                 norm_position: str = "pre", attention_softcap: float | None = None,
                 attention_scalar: float | None = None, window: int | None = None):
        super().__init__()
        if head_dim is None and d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        kv = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads % kv:
            raise ValueError(f"n_kv_heads={kv} does not divide n_heads={n_heads}")
        bias = {True: "all", False: "none"}.get(bias, bias)
        if bias not in ("all", "qkv", "none"):
            raise ValueError(f"bias must be 'all', 'qkv' or 'none', got {bias!r}")
        self.d_model, self.n_heads, self.causal, self.dropout = d_model, n_heads, causal, dropout
        self.n_kv_heads = kv
        self.head_dim = d_model // n_heads if head_dim is None else int(head_dim)
        self.q_width = self.head_dim * n_heads           # queries' width (d unless head_dim)
        self.kv_width = self.head_dim * kv               # keys' (and values') width
        self.norm, self.post_norm = make_norms(norm, d_model, norm_eps, norm_position)
        self.qkv = nn.Linear(d_model, self.q_width + 2 * self.kv_width, bias=bias != "none")
        self.proj = nn.Linear(self.q_width, d_model, bias=bias == "all")
        if qk_norm not in QK_NORMS:
            raise ValueError(f"qk_norm must be one of {', '.join(QK_NORMS)}; got {qk_norm!r}")
        self.qk_norm = qk_norm
        if qk_norm != "none":
            if norm == "none":
                raise ValueError("qk_norm normalises with the norm kind, and norm is 'none'")
            per_head = qk_norm == "head"
            self.q_norm = make_norm(norm, self.head_dim if per_head else self.q_width, norm_eps)
            self.k_norm = make_norm(norm, self.head_dim if per_head else self.kv_width, norm_eps)
        self.resid_dropout = nn.Dropout(dropout)
        self.rotary = Rotary(rotary_dims, rotary_base) if rotary_dims else None
        if window is not None and (not causal or int(window) < 1):
            raise ValueError(f"an attention window needs causal attention and a width >= 1, "
                             f"got window={window!r} with causal={causal}")
        self.softcap = None if attention_softcap is None else float(attention_softcap)
        # SDPA's scale: None is its own 1/sqrt(d_h); Gemma's query_pre_attn_scalar s: 1/sqrt(s)
        self.scale = None if attention_scalar is None else float(attention_scalar) ** -0.5
        self.window = None if window is None else int(window)

    def forward(self, t, x: torch.Tensor, cache=None,
                padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        if cache is not None:
            if padding_mask is not None:
                raise ValueError("a key/value cache and a padding mask together are not "
                                 "supported (generation pads nothing)")
            return self._forward_cached(x, cache)
        if x.dim() < 2:
            raise ValueError(f"Attention needs states of shape (..., n_tokens, d_model), got "
                             f"shape {tuple(x.shape)}")
        *lead, n, d = x.shape                                   # (..., n, d)
        if d != self.d_model:
            raise ValueError(f"Attention expects states of width d_model={self.d_model}, got "
                             f"shape {tuple(x.shape)}")
        h = self.norm(x)
        if x.dim() != 3:   # only then: a no-op reshape still costs a view op in fwd and bwd
            h = h.reshape(-1, n, d)                             # (B, n, d)
        q, k, v = self._split(self.qkv(h))
        hd = self.head_dim
        heads = q.shape[-1] // hd
        q, k = self._normed(q, k)
        q = q.view(-1, n, heads, hd).transpose(1, 2)                           # (B, H, n, hd)
        k, v = (z.view(-1, n, z.shape[-1] // hd, hd).transpose(1, 2) for z in (k, v))
        q, k = self._normed_heads(q, k)
        if self.rotary is not None:
            q, k = self.rotary(q, k)
        mask, causal = None, self.causal
        if self.window is not None:             # causal within the window: a band
            mask, causal = self._visible(n, 0, x.device), False
        if padding_mask is not None:            # (B, n), True = padding: keys not attended
            keep = ~padding_mask.bool().reshape(-1, 1, 1, n)
            if causal:
                mask, causal = self._visible(n, 0, x.device), False
            mask = keep if mask is None else keep & mask
        y = self._attend(q, k, v, mask, causal, self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).reshape(*lead, n, heads * hd)     # (..., n, d')
        return drop(self.resid_dropout, post(self.post_norm, self.proj(y)))

    def _forward_cached(self, x: torch.Tensor, cache) -> torch.Tensor:
        """New tokens ``x`` (B, n, d) at positions ``cache.length ..``: query i attends to every
        cached key and to the new keys up to its own position."""
        if not self.causal:
            raise ValueError("a key/value cache needs causal attention: with causal=False the "
                             "earlier tokens' outputs change when a token is added")
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"cached Attention expects new tokens of shape (batch, n, "
                             f"{self.d_model}), got shape {tuple(x.shape)}")
        b, n, _ = x.shape
        hd = self.head_dim
        q, k, v = self.qkv(self.norm(x)).split((self.q_width, self.kv_width, self.kv_width),
                                               dim=-1)
        q, k = self._normed(q, k)
        q = q.view(b, n, self.n_heads, hd).transpose(1, 2)                     # (B, H, n, hd)
        k, v = (z.view(b, n, self.n_kv_heads, hd).transpose(1, 2) for z in (k, v))
        q, k = self._normed_heads(q, k)
        past = cache.length
        if self.rotary is not None:
            q, k = self.rotary(q, k, start=past)                # keys cached rotated
        k, v = cache.append(k, v)                               # (B, H, past + n, hd)
        mask = None
        if (n > 1 and past > 0) or self.window is not None:   # i sees (past + i - W) .. past + i
            mask = self._visible(n, past, x.device)
        y = self._attend(q, k, v, mask, mask is None and past == 0 and n > 1, 0.0)
        return drop(self.resid_dropout, post(self.post_norm,
                                             self.proj(y.transpose(1, 2).reshape(b, n, -1))))

    def _visible(self, n: int, past: int, device) -> torch.Tensor:
        """(n, past + n) bool: which keys query ``past + i`` sees -- positions up to its own
        and, with a window ``W``, after ``past + i - W`` (the last W positions, itself
        included: transformers' ``sliding_window_overlay``)."""
        i = torch.arange(past, past + n, device=device)[:, None]
        j = torch.arange(past + n, device=device)[None, :]
        seen = j <= i
        return seen if self.window is None else seen & (j > i - self.window)

    def _attend(self, q, k, v, mask, causal: bool, dropout: float) -> torch.Tensor:
        """``softmax(cap(s Q K^T) + mask) V``, ``s`` the scale, ``cap(z) = c tanh(z / c)`` with a
        soft-cap ``c`` (Gemma 2), else the identity; SDPA without a cap (its kernels), the
        explicit product with one (SDPA has none)."""
        if self.softcap is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout,
                                                  is_causal=causal, scale=self.scale, **self._gqa)
        if k.shape[-3] != q.shape[-3]:                  # grouped keys: one per query head
            k, v = (z.repeat_interleave(q.shape[-3] // z.shape[-3], dim=-3) for z in (k, v))
        scale = q.shape[-1] ** -0.5 if self.scale is None else self.scale
        s = q @ k.transpose(-1, -2) * scale
        s = self.softcap * torch.tanh(s / self.softcap)
        if causal:
            mask = self._visible(q.shape[-2], k.shape[-2] - q.shape[-2], q.device)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return F.dropout(torch.softmax(s, dim=-1), dropout, training=dropout > 0) @ v

    def _split(self, qkv: torch.Tensor):
        """q, k, v of the projected states: thirds (d' = d, or this rank's heads' width under
        --tp, whose plan, splitnet.training.tensor_parallel, hands each rank the q, k and v
        rows of its heads), or with grouped-query attention d and two key/value widths."""
        if self.n_kv_heads == self.n_heads:
            return qkv.chunk(3, dim=-1)
        return qkv.split((self.q_width, self.kv_width, self.kv_width), dim=-1)

    def _normed(self, q: torch.Tensor, k: torch.Tensor):
        """``qk_norm="projection"``: q and k normalised over their whole width (OLMo 2)."""
        if self.qk_norm != "projection":
            return q, k
        return self.q_norm(q), self.k_norm(k)

    def _normed_heads(self, q: torch.Tensor, k: torch.Tensor):
        """``qk_norm="head"``: q and k (B, H, n, d_h) normalised per head (Qwen3, Gemma 3)."""
        if self.qk_norm != "head":
            return q, k
        return self.q_norm(q), self.k_norm(k)

    @property
    def _gqa(self) -> dict:
        """SDPA's grouped-query switch, only when the heads are grouped (the kernels that take
        it are then the only ones asked)."""
        return {"enable_gqa": True} if self.n_kv_heads != self.n_heads else {}

    def extra_repr(self) -> str:
        extra = "".join(f", {n}={getattr(self, n)}" for n in ("softcap", "window")
                        if getattr(self, n) is not None)
        return f"d_model={self.d_model}, n_heads={self.n_heads}, causal={self.causal}{extra}"


__all__ = ["Attention"]
