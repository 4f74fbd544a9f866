"""What a SplitTransformer costs: parameters, field evaluations and FLOPs per token.

``splitnet describe --scheme strang`` (command line, :mod:`splitnet.cli.cmd_describe`) or
:func:`describe` (API).

* **Field evaluations per token**: each stage of each layer calls its field ``evals(method)``
  times (euler 1, midpoint 2, rk4 4); a field call processes every token once, so per token
  ``n_layers * n_stages * evals`` (attention and feed-forward counted apart).
* **FLOPs per token**: counted by ``torch.utils.flop_counter.FlopCounterMode`` on a model built
  on the ``meta`` device (no memory, no arithmetic), divided by ``batch * seq_len``. The counter
  counts matrix products (linear layers, attention's ``QK^T`` and ``AV``), not element-wise
  work (norms, GELU, softmax, residual adds), and counts causal attention as dense (no 1/2 for
  the mask), the usual convention. On ``meta`` SDPA runs its math decomposition, whose two
  batched products the counter sees; the CPU flash kernel would be invisible to it.
  ``train`` = forward + backward (about 3x forward).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .config import WEIGHTS, SplitConfig
from .schemes import available
from .stages import CONVECTION, DIFFUSION
from .subflows import METHODS, get_method


@dataclass
class Cost:
    scheme: str
    pattern: str                # the scheme's diagram, e.g. 'f/2 s f/2'
    weights: str
    method: str
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int
    vocab_size: int
    seq_len: int
    params: int                 # all parameters (embedding tied with the head, counted once)
    params_non_embedding: int   # without token and position embeddings
    attn_evals: int             # attention field evaluations per token (whole network)
    ffn_evals: int              # feed-forward field evaluations per token
    flops_forward: float        # per token
    flops_train: float          # forward + backward, per token

    @property
    def evals(self) -> int:
        return self.attn_evals + self.ffn_evals

    def as_dict(self) -> dict:
        d = asdict(self)
        d["evals"] = self.evals
        return d


def _count_flops(model, idx, backward: bool) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    fc = FlopCounterMode(display=False)
    with fc:
        out = model(idx)
        if backward:
            out.float().sum().backward()
    return fc.get_total_flops()


# The size `splitnet describe` reports when none is given (a mid-size model, so FLOPs compare).
REFERENCE_SIZE = {"d_model": 512, "n_heads": 8, "n_layers": 6, "vocab_size": 256}


def describe(config: SplitConfig | None = None, seq_len: int = 256, batch: int = 1,
             backward: bool = True, **options) -> Cost:
    """Cost of ``SplitTransformer.from_config(config)`` on sequences of ``seq_len`` tokens.

    ``config``: a :class:`~splitnet.config.SplitConfig`; or leave it out and give its fields as
    keywords (``describe(scheme="strang", weights="per-stage")``), on top of
    :data:`REFERENCE_SIZE`. The model is built on the ``meta`` device, so even large sizes cost
    nothing to describe.
    """
    from .models import SplitTransformer

    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
    if config is not None and not isinstance(config, SplitConfig):   # describe("strang")
        config, options = None, {"scheme": config, **options}
    if config is None:
        config = SplitConfig(**{**REFERENCE_SIZE, "max_len": seq_len, **options})
    elif options:
        config = config.replace(**options)
    if config.max_len < seq_len:
        config = config.replace(max_len=seq_len)
    sch = config.resolved_scheme()
    m = get_method(config.method)
    if m.evals is None:
        fixed = [k for k, v in METHODS.items() if v.evals is not None]
        raise ValueError(f"method {m.name!r} has no fixed number of field evaluations; "
                         f"use {', '.join(fixed)}")
    with torch.device("meta"):
        model = SplitTransformer.from_config(config)
    idx = torch.zeros(batch, seq_len, dtype=torch.long, device="meta")
    ntok = batch * seq_len
    fwd = _count_flops(model, idx, backward=False)
    train = _count_flops(model, idx, backward=True) if backward else float("nan")
    n = config.n_layers
    return Cost(
        scheme=sch.name, pattern=sch.diagram(), weights=config.weights, method=m.name,
        d_model=config.d_model, n_heads=config.n_heads, n_layers=n, d_ff=config.d_ff,
        vocab_size=config.vocab_size, seq_len=seq_len, params=model.n_params(),
        params_non_embedding=model.n_params(embeddings=False),
        attn_evals=n * sch.n_stages(DIFFUSION) * m.evals,
        ffn_evals=n * sch.n_stages(CONVECTION) * m.evals,
        flops_forward=fwd / ntok, flops_train=train / ntok)


def table(schemes=None, weights=WEIGHTS, progress: bool = False,
          **size) -> list[Cost]:
    """:func:`describe` for every scheme (default: the registry) and weights mode."""
    schemes = list(available() if schemes is None else schemes)
    combos = [(s, w) for s in schemes for w in weights]
    it = combos
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(combos, desc="cost", unit="model")
    return [describe(scheme=s, weights=w, **size) for s, w in it]


def format_table(rows: list[Cost], markdown: bool = False) -> str:
    """Rows as a plain-text or markdown table. ``fwd x B``: forward FLOPs relative to the row of
    scheme B with the same weights mode, B = lie-trotter when listed, else the first row."""
    base = {}
    for r in rows:
        if r.scheme == "lie-trotter":
            base[r.weights] = r
    for r in rows:
        base.setdefault(r.weights, r)
    names = {b.scheme for b in base.values()}
    head = ["scheme", "weights", "params", "non-emb params", "attn evals/tok",
            "ffn evals/tok", "fwd GFLOP/tok", "train GFLOP/tok",
            f"fwd x {names.pop() if len(names) == 1 else 'first'}"]
    body = []
    for r in rows:
        b = base[r.weights]
        body.append([r.scheme, r.weights, f"{r.params / 1e6:.3f}M",
                     f"{r.params_non_embedding / 1e6:.3f}M", str(r.attn_evals),
                     str(r.ffn_evals), f"{r.flops_forward / 1e9:.4f}",
                     f"{r.flops_train / 1e9:.4f}", f"{r.flops_forward / b.flops_forward:.2f}"])
    if markdown:
        lines = ["| " + " | ".join(head) + " |",
                 "|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    w = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w[i]}}}" if i < 2 else f"{{:>{w[i]}}}" for i in range(len(head)))
    return "\n".join([fmt.format(*head)] + [fmt.format(*row) for row in body])


__all__ = ["REFERENCE_SIZE", "Cost", "describe", "format_table", "table"]
