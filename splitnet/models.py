"""Networks built from any splitting scheme or sublayer pattern.

``SplitTransformer``: token embedding + learned absolute positions, ``n_layers`` steps of the
scheme (each a :class:`~splitnet.layers.SplitLayer` over attention and feed-forward fields),
final LayerNorm, output head tied to the embedding. Layer k integrates ``[k h, (k + 1) h]``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .fields import Attention, FeedForward, Gated
from .flows import check_step_size
from .layers import SplitLayer
from .schemes import CONVECTION, DIFFUSION, SplittingScheme, resolve

WEIGHTS = ("shared", "per-stage")


class SplitTransformer(nn.Module):
    """A Transformer whose layers are steps of ``scheme``.

    Parameters
    ----------
    scheme : name, pattern (e.g. ``"sfsf"``) or SplittingScheme
    weights : ``"shared"`` -- one attention and one feed-forward per layer used by all stages of
        that field (parameters equal for every scheme); ``"per-stage"`` -- one sub-layer per
        stage, feed-forward width scaled by (diffusion stages / convection stages) so Strang has
        the parameters of a Transformer layer (Macaron matching).
    step_size : h; 1.0 is the usual residual ``x + f(x)``.
    gate, gate_layers : add a self-dependency unit (``"sigmoid"`` or ``"tanh"``) to the fields
        of exactly the listed layers (0-based; default all): ``f(t, x) + SDU(x)``.
    gate_fields : which fields get the gate: ``"both"`` (default, as the Highway Transformer),
        ``"diffusion"`` or ``"convection"``.
    method : sub-flow method of every stage (``"euler"`` = residual sub-layers).
    """

    def __init__(self, vocab_size: int, d_model: int, n_heads: int, n_layers: int,
                 scheme="lie-trotter", causal: bool = True, weights: str = "shared",
                 step_size: float = 1.0, d_ff: int | None = None, max_len: int = 1024,
                 dropout: float = 0.0, gate: str | None = None, gate_layers=None,
                 method: str = "euler", activation: str = "gelu", gate_fields: str = "both"):
        super().__init__()
        sch = scheme
        if isinstance(sch, SplittingScheme):   # stored as data so a checkpoint rebuilds it
            sch = {"name": sch.name, "order": sch.order,
                   "stages": [(st.field, st.coeff) for st in sch.stages]}
        self._config = dict(
            vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
            scheme=sch, causal=causal, weights=weights, step_size=step_size, d_ff=d_ff,
            max_len=max_len, dropout=dropout, gate=gate,
            gate_layers=None if gate_layers is None else list(gate_layers), method=method,
            activation=activation, gate_fields=gate_fields)
        for name, v in (("vocab_size", vocab_size), ("d_model", d_model), ("n_heads", n_heads),
                        ("n_layers", n_layers), ("max_len", max_len)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if weights not in WEIGHTS:
            raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
        if gate not in (None, "sigmoid", "tanh"):
            raise ValueError(f"gate must be None, 'sigmoid' or 'tanh', got {gate!r}")
        if gate_fields not in ("both", DIFFUSION, CONVECTION):
            raise ValueError(f"gate_fields must be 'both', 'diffusion' or 'convection', got "
                             f"{gate_fields!r}")
        self.gate_fields = gate_fields
        self.scheme: SplittingScheme = resolve(scheme)
        self.step_size = check_step_size(step_size)
        self.vocab_size, self.d_model, self.n_layers, self.max_len = (
            vocab_size, d_model, n_layers, max_len)
        self.weights, self.causal = weights, causal
        d_ff = 4 * d_model if d_ff is None else d_ff
        if gate_layers is None:
            gate_layers = range(n_layers) if gate else ()
        gate_layers = sorted(set(int(i) for i in gate_layers))
        if gate_layers and gate is None:
            raise ValueError("gate_layers given without gate='sigmoid' or 'tanh'")
        bad = [i for i in gate_layers if not 0 <= i < n_layers]
        if bad:
            raise ValueError(f"gate_layers {bad} outside 0..{n_layers - 1}")
        self.gate, self.gate_layers = gate, tuple(gate_layers)

        n_d, n_c = self.scheme.n_stages(DIFFUSION), self.scheme.n_stages(CONVECTION)

        def attn():
            f = Attention(d_model, n_heads, causal=causal, dropout=dropout)
            return Gated(f, d_model, gate) if gated and gate_fields != CONVECTION else f

        def ffn(width):
            f = FeedForward(d_model, width, activation=activation, dropout=dropout)
            return Gated(f, d_model, gate) if gated and gate_fields != DIFFUSION else f

        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.drop = nn.Dropout(dropout)
        layers = []
        for k in range(n_layers):
            gated = k in self.gate_layers
            if weights == "shared":
                dif, con = attn(), ffn(d_ff)
            else:
                width = max(1, round(d_ff * n_d / n_c))
                dif = [attn() for _ in range(n_d)]
                con = [ffn(width) for _ in range(n_c)]
            layers.append(SplitLayer(self.scheme, dif, con, step_size=self.step_size,
                                     method=method))
        self.layers = nn.ModuleList(layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight   # tied
        self._init_weights()

    def _init_weights(self) -> None:
        # GPT-2 style: N(0, 0.02), residual output projections scaled by the number of residual
        # sub-layers so the initial residual stream does not grow with depth.
        n_res = max(1, self.n_layers * len(self.scheme.stages))
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(n_res) if name.endswith(("proj.weight", "fc2.weight")) \
                    else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def n_params(self, embeddings: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n if embeddings else n - self.tok_emb.weight.numel() - self.pos_emb.weight.numel()

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        if idx.dtype != torch.long:
            raise TypeError(f"idx must be int64 token ids, got {idx.dtype}")
        if idx.dim() != 2:
            raise ValueError(f"idx must have shape (batch, seq), got {tuple(idx.shape)}")
        T = idx.shape[1]
        if T > self.max_len:
            raise ValueError(f"sequence length {T} exceeds the model's max_len {self.max_len}")
        pos = torch.arange(T, device=idx.device)
        return self.drop(self.tok_emb(idx) + self.pos_emb(pos))    # (B, T, D)

    def forward(self, idx: torch.Tensor, return_states: bool = False):
        """``idx`` (B, T) int64 -> logits (B, T, V). With ``return_states`` also a tensor
        ``(1 + n_layers * n_stages, B, T, D)``: the embedding, then the state after every stage
        of every layer (times: :meth:`state_times`)."""
        x = self.embed(idx)
        h = self.step_size
        if return_states:
            states = [x]
            for k, layer in enumerate(self.layers):
                x, st = layer(x, k * h, return_states=True)
                states += st
        else:
            for k, layer in enumerate(self.layers):
                x = layer(x, k * h)
        logits = self.head(self.norm(x))
        return (logits, torch.stack(states)) if return_states else logits

    def state_times(self) -> torch.Tensor:
        """Time of each state returned by ``forward(..., return_states=True)``: 0 for the
        embedding, then ``k h + h * stage_times`` (mean of the two fields' clocks)."""
        st = self.scheme.stage_times()
        times = [0.0] + [(k + s) * self.step_size for k in range(self.n_layers) for s in st]
        return torch.tensor(times, dtype=torch.float64)

    def config(self) -> dict:
        """Constructor arguments, enough to rebuild the model from a checkpoint."""
        return dict(self._config)

def from_config(cfg: dict) -> SplitTransformer:
    """Rebuild a model from :meth:`SplitTransformer.config`."""
    cfg = dict(cfg)
    s = cfg.get("scheme")
    if isinstance(s, dict):
        cfg["scheme"] = SplittingScheme.from_stages(s["stages"], order=s["order"], name=s["name"])
    return SplitTransformer(**cfg)
