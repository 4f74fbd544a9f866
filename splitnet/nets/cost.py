"""What a SplitTransformer costs: parameters, field evaluations and FLOPs per token, in closed
form from its field kinds (:mod:`splitnet.configs.kinds`) and its sub-flow method. Nothing is built
and
torch is not imported: ``splitnet describe --schemes all`` (every registry scheme, both weights
modes) takes well under a second (``benchmarks/bench_describe.py``).

``splitnet describe --scheme strang`` (command line, :mod:`splitnet.cli.commands.cmd_describe`) or
:func:`describe` (API).

* **Parameters**: token and position embeddings ``V d + max_len d`` (no position table with
  ``positions="none"``), the final norm (``2 d`` LayerNorm, ``d`` RMSNorm), the head when it
  is not tied to the embedding (``V d``, counted with the embeddings), and every module of
  every layer (``kind.params``: one per field per layer, or one per stage with
  ``weights="per-stage"``). Rotary position embeddings have no parameters;
  ``learn_coefficients`` adds one per stage and layer. With ``depth_basis="legendre:K"`` or
  ``"linear:K"`` the layers share one set of fields whose every weight has K coefficients:
  K x one layer's field parameters, whatever the depth.
* **Field evaluations per token**, per field: each stage of each layer calls its field
  ``evals(method)`` times (euler 1, midpoint 2, rk4 4; a reversible network with weights that
  change with depth: the quadrature's points per stage,
  :func:`splitnet.configs.depth.quadrature_points`); a field call processes every token once,
  so per token ``n_layers * stages advancing the field * evals`` (a sum stage ``d+c`` counts for
  each of its fields).
* **FLOPs per token**: matmul FLOPs, in ``torch.utils.flop_counter.FlopCounterMode``'s
  convention (2 per multiply-add; attention's ``QK^T`` and ``AV`` counted dense, no 1/2 for the
  causal mask; element-wise work -- norms, GELU, GLU, softmax, residual adds -- not counted): each
  evaluation's ``kind.flops`` at ``seq_len`` tokens, plus the head ``2 d V`` (a depth field's
  weights at t, ``sum_j phi_j W_j``, are element-wise work once per evaluation: not counted).
  ``train`` =
  forward + backward = 3 x forward (each matmul's backward is two matmuls of its size: the
  gradients of its input and of its weight; the embedding lookup is no matmul).
  ``tests/test_cost.py`` checks every closed form against FlopCounterMode on a model built on
  the ``meta`` device, for every registry scheme.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass

from ..configs.config import SplitConfig
from ..configs.depth import parse_depth_basis, stage_evaluations
from ..configs.fieldkind import norm_params
from ..configs.options import WEIGHTS
from ..integrators.schemes import available
from ..integrators.subflows import METHODS, get_method


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
    params: int                 # all parameters (a tied head counted once)
    params_non_embedding: int   # without token and position embeddings and an untied head
    kinds: dict                 # field -> the kind that serves it ({'diffusion': 'attention', ..})
    evals: dict                 # field -> its evaluations per token (whole network)
    flops_forward: float        # per token
    flops_train: float          # forward + backward, per token

    @property
    def n_evals(self) -> int:
        """Field evaluations per token, all fields together."""
        return sum(self.evals.values())

    def as_dict(self) -> dict:
        d = asdict(self)
        d["n_evals"] = self.n_evals
        return d


def _evals(config: SplitConfig) -> int:
    m = get_method(config.method)
    if config.depth_basis:              # a reversible stage's quadrature points, or the method's
        e = stage_evaluations(config, config.resolved_scheme())
        if e is not None:
            return e
    if m.evals is None:
        fixed = [k for k, v in METHODS.items() if v.evals is not None]
        raise ValueError(f"method {m.name!r} has no fixed number of field evaluations; "
                         f"use {', '.join(fixed)}")
    return m.evals


def _layers(config: SplitConfig) -> list:
    """What every layer is made of: the config's plan (planned once per gated / plain layer)."""
    return config.plan.layers()


def _params(config: SplitConfig, layers: list) -> tuple[int, int]:
    d = config.d_model
    basis = parse_depth_basis(config.depth_basis)
    if basis:          # one set of depth fields for every layer, K coefficients per weight
        layers = [[lf for lf in layers[0] for _ in range(basis[1])]]
    n = sum(f.n_modules * f.kind.params(config, f.width) for fields in layers for f in fields)
    if config.learn_coefficients:
        n += config.n_layers * len(config.resolved_scheme().stages)
    non_embedding = n + norm_params(config, config.d_model)   # + the final norm (one)
    tables = config.vocab_size * (1 if config.tie_head else 2) + \
        (config.max_len if config.positions == "learned" else 0)
    return non_embedding + tables * d, non_embedding


def _field_evals(config: SplitConfig, layers: list) -> dict[str, int]:
    e = _evals(config)
    out: dict[str, int] = {}
    for fields in layers:
        for f in fields:
            out[f.field] = out.get(f.field, 0) + f.calls * e
    return out


def _forward(config: SplitConfig, layers: list, seq_len: int, evals: int | None) -> float:
    if isinstance(seq_len, bool) or not isinstance(seq_len, numbers.Integral) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
    e = _evals(config) if evals is None else evals
    fields = sum(f.calls * e * f.kind.flops(config, f.width, seq_len)
                 for layer in layers for f in layer)
    return fields + 2.0 * config.d_model * config.vocab_size     # + the head


def count_params(config: SplitConfig) -> tuple[int, int]:
    """``(all parameters, without the token and position embeddings)`` of
    ``SplitTransformer.from_config(config)``, equal to its ``n_params()``."""
    return _params(config, _layers(config))


def field_evals(config: SplitConfig) -> dict[str, int]:
    """Evaluations per token of each field of the network (``method.evals`` per stage)."""
    return _field_evals(config, _layers(config))


def forward_flops(config: SplitConfig, seq_len: int, evals: int | None = None) -> float:
    """Forward matmul FLOPs per token on sequences of ``seq_len`` tokens (module docstring).
    ``evals``: field evaluations per stage (default: the method's; required for ``exact``)."""
    return _forward(config, _layers(config), seq_len, evals)


# float32 bytes per parameter that training holds: the weight, its gradient, AdamW's two moments
TRAIN_BYTES = 4 * (1 + 1 + 2)


def memory_per_rank(config: SplitConfig, world: int, parallel: str) -> dict:
    """Bytes per rank of the weights, gradients and AdamW state (float32) of training
    ``SplitTransformer.from_config(config)`` on ``world`` ranks (activations aside): ``ddp``
    every rank all of them; ``fsdp`` (splitnet.training.sharding: a unit per layer and the
    root) each rank ``1/world`` of them, plus what is gathered whole at once: the root's
    weights and gradients (embeddings, tied head, final norm; the root stays gathered through a
    step) and one layer's, ``in_flight``."""
    if parallel not in ("ddp", "fsdp"):
        raise ValueError(f"parallel must be ddp or fsdp, got {parallel!r}")
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise ValueError(f"world must be a positive int, got {world!r}")
    layers = _layers(config)
    n_all, n_stack = _params(config, layers)
    per_layer = max(sum(f.n_modules * f.kind.params(config, f.width) for f in fields)
                    for fields in layers)
    root = n_all - (n_stack - 2 * config.d_model)
    if parallel == "ddp":
        return {"sharded": 0, "replicated": TRAIN_BYTES * n_all, "in_flight": 0,
                "total": TRAIN_BYTES * n_all}
    sharded = TRAIN_BYTES * n_all / world
    flight = 2 * 4 * (root + per_layer) * (1 - 1 / world)   # gathered weights and gradients
    return {"sharded": sharded, "replicated": 0, "in_flight": flight, "total": sharded + flight}


# The size `splitnet describe` reports when none is given (a mid-size model, so FLOPs compare).
REFERENCE_SIZE = {"d_model": 512, "n_heads": 8, "n_layers": 6, "vocab_size": 256}


def describe(config: SplitConfig | None = None, seq_len: int = 256, **options) -> Cost:
    """Cost of ``SplitTransformer.from_config(config)`` on sequences of ``seq_len`` tokens.

    ``config``: a :class:`~splitnet.configs.config.SplitConfig`; or leave it out and give its
    fields as
    keywords (``describe(scheme="strang", weights="per-stage")``), on top of
    :data:`REFERENCE_SIZE`. Closed forms: nothing is built, any size costs nothing to describe.
    """
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
    layers = _layers(config)
    fwd = _forward(config, layers, seq_len, None)
    n_all, n_layers_only = _params(config, layers)
    return Cost(
        scheme=sch.name, pattern=sch.diagram(), weights=config.weights,
        method=get_method(config.method).name, d_model=config.d_model, n_heads=config.n_heads,
        n_layers=config.n_layers, d_ff=config.d_ff, vocab_size=config.vocab_size,
        seq_len=seq_len, params=n_all, params_non_embedding=n_layers_only,
        kinds={f.field: f.kind.name for f in layers[0]}, evals=_field_evals(config, layers),
        flops_forward=fwd, flops_train=3.0 * fwd)


def table(schemes=None, weights=WEIGHTS, **size) -> list[Cost]:
    """:func:`describe` for every scheme (default: the registry) and weights mode."""
    schemes = list(available() if schemes is None else schemes)
    return [describe(scheme=s, weights=w, **size) for s in schemes for w in weights]


def format_table(rows: list[Cost], markdown: bool = False) -> str:
    """Rows as a plain-text or markdown table, one evaluations column per field present.
    ``fwd x B``: forward FLOPs relative to the row of scheme B with the same weights mode,
    B = lie-trotter when listed, else the first row."""
    base = {}
    for r in rows:
        if r.scheme == "lie-trotter":
            base[r.weights] = r
    for r in rows:
        base.setdefault(r.weights, r)
    names = {b.scheme for b in base.values()}
    fields = list(dict.fromkeys(f for r in rows for f in r.evals))
    head = ["scheme", "weights", "params", "non-emb params",
            *(f"{f} evals/tok" for f in fields), "fwd GFLOP/tok", "train GFLOP/tok",
            f"fwd x {names.pop() if len(names) == 1 else 'first'}"]
    body = []
    for r in rows:
        b = base[r.weights]
        body.append([r.scheme, r.weights, f"{r.params / 1e6:.3f}M",
                     f"{r.params_non_embedding / 1e6:.3f}M",
                     *(str(r.evals.get(f, 0)) for f in fields), f"{r.flops_forward / 1e9:.4f}",
                     f"{r.flops_train / 1e9:.4f}", f"{r.flops_forward / b.flops_forward:.2f}"])
    if markdown:
        lines = ["| " + " | ".join(head) + " |",
                 "|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    w = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w[i]}}}" if i < 2 else f"{{:>{w[i]}}}" for i in range(len(head)))
    return "\n".join([fmt.format(*head)] + [fmt.format(*row) for row in body])



def seq2seq_costs(config, seq_len: int) -> list[dict]:
    """An encoder–decoder config (:class:`~splitnet.configs.seq2seq.Seq2SeqConfig`) stack by
    stack, in closed form from the field kinds: ``{"stack", "scheme", "layers", "evals",
    "flops"}`` with each field's evaluations per token (stages x the method's evaluations,
    every layer) and the forward matmul FLOPs per token at ``seq_len`` tokens, source and
    target alike, the memory read by cross-attention as long (FlopCounterMode's convention,
    dense attention; the head ``2 d V`` counted with the decoder). Forward FLOPs of a pair of
    ``seq_len``-token sequences: ``seq_len`` x the sum of both."""
    out = []
    for side in ("encoder", "decoder"):
        st = config.stack_config(side)
        evals = stage_evaluations(st, st.scheme) or 1   # exact: adaptive, one per stage (a bound)
        plan = st.layer_fields(0)                # a stack's layers are alike (no gates)
        fwd = st.n_layers * sum(f.calls * evals * f.kind.flops(st, f.width, seq_len, seq_len)
                                for f in plan)
        out.append({"stack": side, "scheme": st.scheme, "layers": st.n_layers,
                    "evals": {f.field: st.n_layers * f.calls * evals for f in plan},
                    "flops": fwd + (2.0 * config.d_model * config.tgt_vocab
                                    if side == "decoder" else 0)})
    return out


__all__ = ["REFERENCE_SIZE", "TRAIN_BYTES", "Cost", "count_params", "describe", "field_evals",
           "format_table", "forward_flops", "memory_per_rank", "seq2seq_costs", "table"]
