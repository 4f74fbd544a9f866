"""The language-model loss: mean cross-entropy of ``head(h)`` against the next tokens.

For states ``h`` (N, D) after the final norm, a head ``W`` (V, D) and targets ``y`` (N,)::

    loss = (1/N) sum_i [ logsumexp_v (h_i . W_v) - h_i . W_{y_i} ]
    dloss/dh_i = (1/N) (softmax(h_i W^T) - e_{y_i}) W          (1 x D)
    dloss/dW   = (1/N) sum_i (softmax(h_i W^T) - e_{y_i})^T h_i  (V x D)

Two implementations of the same function (``LOSSES``):

* ``"plain"`` -- ``F.cross_entropy`` of the full float32 logits (N x V). At GPT-2 size
  (N = 16 x 1024, V = 50304) those logits are 3.3 GB in float32, written and read several times.
* ``"chunked"`` -- :func:`linear_cross_entropy`: rows in chunks of ``chunk_size``; each chunk's
  logits, its share of the loss and both gradients are computed at once in the forward pass (the
  loss is the network's last operation, so its backward is the saved gradient times the incoming
  scalar), so no more than ``chunk_size x V`` logits exist at any time and nothing is
  recomputed. Matrix products run in the input dtype (bf16 under autocast, as the plain head);
  the softmax and the sums in float32.

:class:`LMLoss` puts model and loss in one module, ``forward(idx, targets) -> loss``: the unit the
trainer and the benchmark compile (one graph holds the network and the loss, so the float32
upcast of the logits fuses into it) and wrap in DDP.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..configs.config import LOSSES


def _check(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk_size: int):
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(f"linear_cross_entropy needs hidden (N, D) and weight (V, D), got "
                         f"{tuple(hidden.shape)} and {tuple(weight.shape)}")
    if targets.shape != hidden.shape[:1] or targets.dtype != torch.long:
        raise ValueError(f"targets must be int64 of shape ({hidden.shape[0]},), got "
                         f"{targets.dtype} {tuple(targets.shape)}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size!r}")


def _upcast(x: torch.Tensor) -> torch.Tensor:
    """float32 for half types and float32, float64 stays float64 (the tests' exact checks)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _chunk_loss(h: torch.Tensor, w: torch.Tensor, t: torch.Tensor, cap: float | None = None):
    """Float32 logits of one chunk (soft-capped, ``cap tanh(z / cap)``, with a ``cap``), their
    log-sum-exp and the summed loss of its rows."""
    logits = _upcast(h @ w.t())                                          # (c, V)
    if cap is not None:
        logits = cap * torch.tanh(logits / cap)
    lse = torch.logsumexp(logits, dim=-1)                               # (c,)
    return logits, lse, (lse - logits.gather(1, t[:, None]).squeeze(1)).sum()


class _LinearCrossEntropy(torch.autograd.Function):
    """Loss and both gradients chunk by chunk in the forward pass; backward scales them."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, chunk_size, cap=None):
        n = hidden.shape[0]
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        acc = torch.promote_types(weight.dtype, torch.float32)
        total = torch.zeros((), dtype=acc, device=hidden.device)
        grad_h = torch.empty_like(hidden) if need_h else None
        grad_w = torch.zeros(weight.shape, dtype=acc, device=weight.device) if need_w else None
        for s in range(0, n, chunk_size):
            h, t = hidden[s:s + chunk_size], targets[s:s + chunk_size]
            logits, lse, part = _chunk_loss(h, weight, t, cap)
            total = total + part
            # softmax - one-hot, scaled by 1/N: d(mean loss)/d(logits) of these rows
            g = (logits - lse[:, None]).exp()
            g.scatter_add_(1, t[:, None], torch.full_like(t[:, None], -1, dtype=g.dtype))
            if cap is not None:              # through the cap: d(c tanh(z/c))/dz = 1 - (y/c)^2
                g = g * (1 - (logits / cap).square())
            g = (g / n).to(hidden.dtype)
            if need_h:
                grad_h[s:s + chunk_size] = (g @ weight.to(hidden.dtype)).to(hidden.dtype)
            if need_w:
                grad_w += (g.t() @ h).to(acc)
        ctx.save_for_backward(grad_h, grad_w)
        ctx.weight_dtype = weight.dtype
        return total / n

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        gh = None if grad_h is None else grad_h * grad_out.to(grad_h.dtype)
        gw = None if grad_w is None else (grad_w * grad_out.to(grad_w.dtype)).to(ctx.weight_dtype)
        return gh, gw, None, None, None


def linear_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                         chunk_size: int = 4096, softcap: float | None = None) -> torch.Tensor:
    """Mean cross-entropy of ``hidden @ weight.T`` (logits; with ``softcap`` ``c`` the capped
    ``c tanh(z / c)``, as :meth:`~splitnet.nets.models.SplitTransformer.to_logits`) against
    ``targets``, without the full
    logits: rows in chunks of ``chunk_size``, gradients computed alongside (see the module).

    ``hidden`` (..., D), ``weight`` (V, D), ``targets`` (...) int64 -> scalar (float32; float64
    for float64 inputs). Equal to ``F.cross_entropy((hidden @ weight.T).float(), targets)`` up
    to rounding, in value and in both gradients."""
    hidden = hidden.reshape(-1, hidden.shape[-1])
    targets = targets.reshape(-1)
    _check(hidden, weight, targets, chunk_size)
    if torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad):
        return _LinearCrossEntropy.apply(hidden, weight, targets, chunk_size, softcap)
    total = sum(_chunk_loss(hidden[s:s + chunk_size], weight, targets[s:s + chunk_size],
                            softcap)[2] for s in range(0, hidden.shape[0], chunk_size))
    return total / hidden.shape[0]


def plain_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` (..., V) against ``targets`` (...), in float32 (float64
    logits stay float64)."""
    return F.cross_entropy(_upcast(logits).reshape(-1, logits.size(-1)), targets.reshape(-1))


class LMLoss(nn.Module):
    """``forward(idx, targets)``: the model's mean next-token cross-entropy (a scalar).

    ``impl="plain"``: ``plain_cross_entropy(model(idx), targets)``; ``"chunked"``:
    :func:`linear_cross_entropy` of ``model.features(idx)`` and ``model.head.weight``.
    ``head_fn``: a (compiled) replacement for the head + loss, ``head_fn(h, weight, targets)``,
    applied to ``model.features(idx)``: regional compilation's last region. The wrapped model is
    a submodule, so its parameters (and state-dict keys, under the ``model.`` prefix) are this
    module's; checkpoints keep saving the model itself."""

    def __init__(self, model: nn.Module, impl: str = "plain", chunk_size: int = 4096,
                 head_fn=None):
        super().__init__()
        if impl not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}; got {impl!r}")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
        self.model, self.impl, self.chunk_size, self.head_fn = model, impl, chunk_size, head_fn
        # the model's final-logit soft-cap (Gemma 2), applied wherever the head is
        self.softcap = getattr(getattr(model, "config", None), "logit_softcap", None)

    def head_loss(self, h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor):
        """The loss of final states ``h`` under head ``weight`` (this module's ``impl``), the
        logits soft-capped as the model's."""
        if self.impl == "chunked":
            return linear_cross_entropy(h, weight, targets, self.chunk_size, self.softcap)
        z = F.linear(h, weight)
        return plain_cross_entropy(z if self.softcap is None else
                                   self.softcap * torch.tanh(z / self.softcap), targets)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if self.head_fn is not None:
            return self.head_fn(self.model.features(idx), self.model.head.weight, targets)
        if self.impl == "plain":
            return plain_cross_entropy(self.model(idx), targets)
        return self.head_loss(self.model.features(idx), self.model.head.weight, targets)


__all__ = ["LOSSES", "LMLoss", "linear_cross_entropy", "plain_cross_entropy"]
