"""Speed levers shared by the trainer (:mod:`splitnet.training.train`) and
``benchmarks/bench_layers.py``.

None changes the function a network computes, only how fast (and rounding):

* :func:`compile_regions` -- regional compilation. ``torch.compile`` of a whole network unrolls
  every stage of every layer into one graph, so its compile time grows with the number of
  stages (Yoshida4 at GPT-2 size: over 80 s). Compiling each distinct field module in place
  instead gives one graph per *kind* of sub-layer (attention, feed-forward, each width and gate
  variant): dynamo keys its cache on the code of ``forward`` and, with built-in modules inlined
  (torch's default), the parameters are graph inputs, so every stage of every layer reuses the
  same compiled code. Compile time is then that of one attention and one feed-forward, whatever
  the scheme. The price: no fusion across a field boundary (the residual adds run eagerly).
* :func:`sdpa_backend` -- force one scaled-dot-product-attention kernel (flash, cuDNN, ...).
* :class:`MasterWeights` -- forward and backward on a bf16 copy of the weights, AdamW on the
  float32 originals.
* :func:`compile_kwargs`, :func:`mark_step` -- compile modes, CUDA graphs among them.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from functools import partial

import torch
from torch import nn

from ..configs.config import COMPILE_MODES, CUDAGRAPH_MODES, SDPA_BACKENDS

_SDPA = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
         "cudnn": "CUDNN_ATTENTION", "math": "MATH"}


def compile_kwargs(mode: str = "default", **extra) -> dict:
    """Keyword arguments of ``torch.compile`` for ``mode`` (one of ``COMPILE_MODES``)."""
    if mode not in COMPILE_MODES:
        raise ValueError(f"compile mode must be one of {', '.join(COMPILE_MODES)}; got {mode!r}")
    return extra if mode == "default" else {"mode": mode, **extra}


def uses_cudagraphs(mode: str) -> bool:
    return mode in CUDAGRAPH_MODES


def mark_step(mode: str) -> None:
    """Before each training step under a CUDA-graph mode: the previous step's graph outputs
    may be overwritten from here on (``torch.compiler.cudagraph_mark_step_begin``)."""
    if uses_cudagraphs(mode):
        torch.compiler.cudagraph_mark_step_begin()


def field_regions(model) -> list[nn.Module]:
    """The distinct field modules of a SplitTransformer, in order: what regional compilation
    compiles (a shared module once; a gated field as the whole ``Gated`` module)."""
    seen, out = set(), []
    for layer in model.layers:
        for f in [m for name in layer.field_names for m in layer.field_modules(name)]:
            if isinstance(f, nn.Module) and id(f) not in seen:
                seen.add(id(f))
                out.append(f)
    return out


def compile_regions(modules, mode: str = "default", **extra) -> int:
    """Compile each module of ``modules`` in place (``nn.Module.compile``: state-dict keys and
    parameters unchanged), with static shapes. Modules of one class and shape share one compiled
    graph. Returns how many modules were wrapped."""
    kw = compile_kwargs(mode, dynamic=False, **extra)
    n = 0
    for m in modules:
        m.compile(**kw)
        n += 1
    return n


def regional_default(model) -> bool:
    """``compile_scope="auto"``: regional compilation when a layer has more than 3 stages and
    the network more than one layer (where one whole graph is large: Yoshida, Suzuki, ...).
    Lie–Trotter and Strang, and patterns (one long layer, as many stage calls as the plain
    stack), compile as one graph with their loss."""
    return len(model.scheme.stages) > 3 and model.n_layers > 1


def eager():
    """A context where compiled code is bypassed (``torch.compiler.set_stance``): evaluation
    then runs the modules eagerly instead of compiling them again for another batch shape and
    grad mode."""
    return torch.compiler.set_stance("force_eager")


def check_sdpa(name: str, device: torch.device, head_dim: int, dtype: torch.dtype) -> None:
    """ValueError, before any work, when the SDPA kernel ``name`` cannot run attention of this
    head width and dtype on ``device`` (cuDNN or memory-efficient attention on a CPU): one tiny
    call under :func:`sdpa_backend` tells, where the run would stop at its first step."""
    if name == "auto":
        return
    q = torch.zeros(1, 1, 2, head_dim, device=device, dtype=dtype)
    try:
        with sdpa_backend(name):
            torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    except RuntimeError as e:
        raise ValueError(f"--sdpa {name} cannot run here ({device.type}, {dtype}, head width "
                         f"{head_dim}: {str(e).splitlines()[0]}); choose another kernel or "
                         f"--sdpa auto") from None


def sdpa_backend(name: str = "auto"):
    """A context that restricts ``F.scaled_dot_product_attention`` to one kernel (``"flash"``,
    ``"efficient"``, ``"cudnn"``, ``"math"``); ``"auto"``: torch's own choice (no context).
    A kernel that cannot run the inputs makes SDPA raise (no silent fallback)."""
    if name not in SDPA_BACKENDS:
        raise ValueError(f"sdpa backend must be one of {', '.join(SDPA_BACKENDS)}; got {name!r}")
    if name == "auto":
        return nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, _SDPA[name])])


def adamw_kwargs(impl: str, device: torch.device) -> dict:
    """``torch.optim.AdamW`` keywords of an implementation (``config.ADAMW_IMPLS``)."""
    if impl == "auto":
        return {"fused": True} if device.type == "cuda" else {}
    return {"fused": {"fused": True}, "foreach": {"foreach": True},
            "for-loop": {"foreach": False}}[impl]


class MasterWeights:
    """Compute on a copy of ``model`` stored in ``dtype`` (bf16); keep ``model`` (float32) as
    the master copy that the optimiser updates.

    ``copy`` runs forward and backward. A post-accumulate hook adds each of its gradients, in
    float32, into the master parameter's ``.grad`` and frees it, so gradient clipping, the
    optimiser, checkpoints and evaluation see float32 parameters and gradients as without this
    lever (gradient accumulation included). After every optimiser step the master values are
    rounded into ``copy`` (one ``_foreach_copy_``). Against bf16 autocast on float32 weights it
    saves the per-forward cast of every weight; the optimiser arithmetic stays float32."""

    def __init__(self, model: nn.Module, dtype: torch.dtype, optimizer: torch.optim.Optimizer):
        self.copy = copy.deepcopy(model).to(dtype)
        self._master = list(model.parameters())
        self._low = list(self.copy.parameters())
        if [p.shape for p in self._master] != [q.shape for q in self._low]:
            raise RuntimeError("MasterWeights: the copy's parameters do not match the model's")
        for master, low in zip(self._master, self._low):
            if low.requires_grad:
                low.register_post_accumulate_grad_hook(partial(self._to_master, master))
        optimizer.register_step_post_hook(lambda *_: self.sync())

    @staticmethod
    def _to_master(master: torch.Tensor, low: torch.Tensor) -> None:
        g = low.grad.to(master.dtype)
        master.grad = g if master.grad is None else master.grad.add_(g)
        low.grad = None

    @torch.no_grad()
    def sync(self) -> None:
        """Round the master weights into the compute copy."""
        torch._foreach_copy_(self._low, self._master)


__all__ = ["MasterWeights", "adamw_kwargs", "check_sdpa", "compile_kwargs", "compile_regions",
           "eager", "field_regions", "mark_step", "regional_default", "sdpa_backend",
           "uses_cudagraphs"]
