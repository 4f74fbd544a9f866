"""What a SplitTransformer costs: parameters, field evaluations and FLOPs per token.

``splitnet describe --scheme strang`` (command line) or :func:`describe` (API).

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

import argparse
from dataclasses import asdict, dataclass

import torch

from .flows import get_method
from .schemes import CONVECTION, DIFFUSION, available, resolve


@dataclass
class Cost:
    scheme: str
    pattern: str
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


def describe(scheme="lie-trotter", weights: str = "shared", d_model: int = 512, n_heads: int = 8,
             n_layers: int = 6, vocab_size: int = 256, seq_len: int = 256, d_ff: int | None = None,
             method: str = "euler", gate: str | None = None, batch: int = 1,
             backward: bool = True) -> Cost:
    """Cost of ``SplitTransformer(vocab_size, d_model, n_heads, n_layers, scheme=scheme,
    weights=weights, d_ff=d_ff, gate=gate, method=method)`` on sequences of ``seq_len`` tokens.

    The model is built on the ``meta`` device, so even large sizes cost nothing to describe.
    """
    from .models import SplitTransformer

    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
    sch = resolve(scheme)
    m = get_method(method)
    if m.evals is None:
        raise ValueError(f"method {m.name!r} has no fixed number of field evaluations; "
                         f"use euler, midpoint or rk4")
    with torch.device("meta"):
        model = SplitTransformer(vocab_size, d_model, n_heads, n_layers, scheme=sch,
                                 weights=weights, d_ff=d_ff, max_len=seq_len, gate=gate,
                                 method=method)
    idx = torch.zeros(batch, seq_len, dtype=torch.long, device="meta")
    ntok = batch * seq_len
    fwd = _count_flops(model, idx, backward=False)
    train = _count_flops(model, idx, backward=True) if backward else float("nan")
    return Cost(
        scheme=sch.name, pattern=sch.pattern(), weights=weights, method=m.name, d_model=d_model,
        n_heads=n_heads, n_layers=n_layers, d_ff=4 * d_model if d_ff is None else d_ff,
        vocab_size=vocab_size, seq_len=seq_len, params=model.n_params(),
        params_non_embedding=model.n_params(embeddings=False),
        attn_evals=n_layers * sch.n_stages(DIFFUSION) * m.evals,
        ffn_evals=n_layers * sch.n_stages(CONVECTION) * m.evals,
        flops_forward=fwd / ntok, flops_train=train / ntok)


def table(schemes=None, weights=("shared", "per-stage"), progress: bool = False,
          **size) -> list[Cost]:
    """:func:`describe` for every scheme (default: the registry) and weights mode."""
    schemes = list(available() if schemes is None else schemes)
    combos = [(s, w) for s in schemes for w in weights]
    it = combos
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(combos, desc="cost", unit="model")
    return [describe(s, weights=w, **size) for s, w in it]


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


# ---------------------------------------------------------------------------------------------
# Command line: splitnet describe

def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scheme", default="lie-trotter",
                   help="scheme name, s/f pattern, comma-separated list, or 'all' for the "
                        "registry (default lie-trotter)")
    p.add_argument("--weights", choices=["shared", "per-stage", "both"], default="both",
                   help="weights mode (default both)")
    p.add_argument("--d-model", type=int, default=512, help="model width (default 512)")
    p.add_argument("--n-heads", type=int, default=8, help="attention heads (default 8)")
    p.add_argument("--n-layers", type=int, default=6, help="scheme steps (default 6)")
    p.add_argument("--d-ff", type=int, default=None, help="feed-forward width (default 4 d_model)")
    p.add_argument("--vocab-size", type=int, default=256, help="vocabulary (default 256, bytes)")
    p.add_argument("--seq-len", type=int, default=256, help="tokens per sequence (default 256)")
    p.add_argument("--method", default="euler", help="sub-flow method: euler|midpoint|rk4")
    p.add_argument("--gate", choices=["sigmoid", "tanh"], default=None,
                   help="add SDU gates to every layer")
    p.add_argument("--markdown", action="store_true", help="print a markdown table")
    p.add_argument("--json", action="store_true", help="print one JSON object per row")


def run_cli(args) -> int:
    import json
    import sys

    names = available() if args.scheme == "all" else [s.strip() for s in args.scheme.split(",")
                                                      if s.strip()]
    weights = ("shared", "per-stage") if args.weights == "both" else (args.weights,)
    try:
        rows = table(names, weights=weights, progress=len(names) * len(weights) > 2,
                     d_model=args.d_model, n_heads=args.n_heads, n_layers=args.n_layers,
                     d_ff=args.d_ff, vocab_size=args.vocab_size, seq_len=args.seq_len,
                     method=args.method, gate=args.gate)
    except (ValueError, TypeError) as e:
        print(f"splitnet describe: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        for r in rows:
            print(json.dumps(r.as_dict()))
        return 0
    r0 = rows[0]
    print(f"d_model={r0.d_model} n_heads={r0.n_heads} n_layers={r0.n_layers} d_ff={r0.d_ff} "
          f"vocab={r0.vocab_size} seq_len={r0.seq_len} method={r0.method}; FLOPs = matmul "
          f"FLOPs per token (FlopCounterMode), dense attention")
    print(format_table(rows, markdown=args.markdown))
    print()
    for s in dict.fromkeys(r.scheme for r in rows):
        r = next(x for x in rows if x.scheme == s)
        diag = r.pattern if len(r.pattern) <= 90 else r.pattern[:87] + "..."
        print(f"{s:<14} {diag}")
    return 0
