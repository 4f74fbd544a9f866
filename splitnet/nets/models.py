"""Networks built from any splitting scheme or sublayer pattern.

``SplitTransformer``: token embedding + learned absolute positions (or none:
``positions="none"``, e.g. with rotary attention, ``rotary_pct``), ``n_layers`` steps of the
scheme (each a :class:`~splitnet.integrators.layers.SplitLayer` over a diffusion field --
self-attention, or a
GLU convolution -- and the feed-forward convection field, built by their kinds,
splitnet.configs.kinds),
final LayerNorm, output head tied to the embedding (or not: ``tie_head=False``). Layer k
integrates ``[k h, (k + 1) h]``::

    x = tok_emb(idx) + pos_emb(t)            # (B, T, D), the particles at time 0
    for k, layer in enumerate(layers):       # one scheme step per layer
        x = layer(x, k h)
    logits = head(norm(x))                   # (B, T, V)

Every option lives once, in :class:`~splitnet.configs.config.SplitConfig` (``model.config``).
"""

from __future__ import annotations

import torch
from torch import nn

from ..configs.config import SplitConfig
from ..configs.options import check_flag, init_rule
from ..configs.signature import ConfigBuilt, config_from_call, config_signature
from ..fields.norms import make_norm
from ..integrators.stack import Stack
from ..reversible.backprop import PLAIN
from .init import embed_scale, initialise, residual_outputs
from .learned import coefficients, project_coefficients
from .stack import build_stack


# token ids in: the one check every network runs on its input before anything is embedded
def check_ids(idx, vocab: int, max_len: int, what: str = "idx", start: int = 0) -> None:
    """``idx`` must be a (B, T) int64 tensor, B, T >= 1, of ids in ``[0, vocab)`` with
    ``start + T <= max_len``. The id range is checked on the CPU only: on CUDA it would cost a
    host sync per forward (an id out of range is a device-side assert there)."""
    if not isinstance(idx, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor of int64 token ids, got "
                        f"{type(idx).__name__}")
    if idx.dtype != torch.long:
        raise TypeError(f"{what} must be a tensor of dtype torch.int64 (token ids), got "
                        f"{idx.dtype}")
    if idx.dim() != 2:
        raise ValueError(f"{what} must have shape (batch, seq), got {tuple(idx.shape)}")
    if idx.shape[1] == 0:
        raise ValueError(f"{what} is an empty sequence: give at least one token")
    if idx.shape[0] == 0:
        raise ValueError(f"{what} is an empty batch: give at least one sequence")
    if start + idx.shape[1] > max_len:
        raise ValueError(f"{what}: sequence length {start + idx.shape[1]} exceeds the model's "
                         f"max_len {max_len}")
    if idx.device.type == "cpu" and not torch.compiler.is_compiling():
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= vocab:
            raise ValueError(f"token ids must lie in [0, {vocab}), got [{lo}, {hi}] ({what})")


class SplitTransformer(ConfigBuilt, nn.Module):
    """A Transformer whose layers are steps of ``scheme``.

    Parameters (the fields of :class:`~splitnet.configs.config.SplitConfig`)
    ----------
    scheme : name, pattern (e.g. ``"sfsf"``), stage string, or SplittingScheme
    weights : ``"shared"`` -- one module per field per layer used by all stages of that field
        (parameters equal for every scheme); ``"per-stage"`` -- one sub-layer per stage,
        feed-forward width scaled by (diffusion stages / convection stages) so Strang has the
        parameters of a Transformer layer (Macaron matching).
    diffusion_field, conv_kernel : the diffusion field's kind (:mod:`splitnet.configs.kinds`):
        ``"attention"`` (self-attention) or ``"conv"`` (a GLU convolution over ``conv_kernel``
        positions, ConvS2S). The convection field is the feed-forward network.
    step_size : h; 1.0 is the usual residual ``x + f(x)``.
    gate, gate_layers : add a self-dependency unit (``"sigmoid"`` or ``"tanh"``) to the fields
        of exactly the listed layers (0-based; default all): ``f(t, x) + SDU(x)``.
    gate_fields : which fields get the gate: ``"both"`` (default, as the Highway Transformer),
        ``"diffusion"`` or ``"convection"``.
    method : sub-flow method of every stage (``"euler"`` = residual sub-layers).
    activation, norm_eps : feed-forward activation (``gelu_tanh`` is GPT-2's) and LayerNorm eps.
    positions, rotary_pct, rotary_base, tie_head : learned absolute positions or none; rotary
        position embeddings on that share of each attention head (GPT-NeoX); the head tied to
        the token embedding or its own matrix.
    learn_coefficients : every stage coefficient of every layer a parameter initialised from
        the scheme (:mod:`splitnet.nets.learned`; :meth:`coefficients` reports them).
    init : ``"gpt2"`` (default, nanoGPT's) or ``"xavier"`` (torch.nn.Transformer's; the token
        embedding is then scaled by ``sqrt(d_model)`` in forward): :mod:`splitnet.nets.init`.
    """

    def __init__(self, *args, **options):
        super().__init__()
        self._config = config_from_call(SplitConfig, args, options, self.N_POSITIONAL)
        c = self._config
        self.scheme = c.plan.scheme          # resolved once, when the config was validated
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_len, c.d_model) if c.positions == "learned" else None
        self.drop = nn.Dropout(c.dropout)
        self.layers: Stack = build_stack(c, self.scheme, c.n_layers, self._fields)
        self.norm = make_norm(c.norm, c.d_model, c.norm_eps)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_head:
            self.head.weight = self.tok_emb.weight   # tied
        self.embed_scale = embed_scale(c)            # sqrt(d) under init="xavier", else 1
        self._init_weights()
        # exact from the start (the scheme's, to round-off); not on the meta device, where a
        # model is only shapes (checkpoint checks, describe)
        if c.project_coefficients and self.tok_emb.weight.device.type != "meta":
            self.project_coefficients()

    N_POSITIONAL = 4   # vocab_size, d_model, n_heads, n_layers may be given by position

    @staticmethod
    def config_class() -> type:
        return SplitConfig         # looked up at call time (the module's name, not a copy)

    __init__.__signature__ = config_signature(SplitConfig, N_POSITIONAL)

    # -- construction --------------------------------------------------------------------
    def _fields(self, k: int) -> dict:
        """Layer ``k``'s fields, each built by its kind (the config's plan,
        :class:`splitnet.configs.plan.Plan`):
        one module per field (shared) or one per stage (per-stage)."""
        c, fields = self.config, {}
        for f in c.plan.layer(k):
            fields[f.field] = f.kind.build(c, f.width, k) if f.shared else \
                [f.kind.build(c, f.width, k) for _ in range(f.calls)]
        return fields

    def _init_weights(self) -> None:
        """``config.init``'s rule (:mod:`splitnet.nets.init`): the residual outputs are those
        the kinds declare, scaled by the stage count of the whole network."""
        c = self.config
        plans = c.plan.layers()
        initialise(self, init_rule(c), n_residual=c.n_layers * len(self.scheme.stages),
                   residual=residual_outputs(self.layers, plans),
                   embeddings=(self.tok_emb, self.head), positions=(self.pos_emb,),
                   dropout=c.dropout)

    # -- use ---------------------------------------------------------------------------------
    def coefficients(self) -> tuple:
        """Per layer, a tuple of :class:`~splitnet.stagelists.stages.Stage` ``(field, coeff)`` with
        the coefficients as they are now: learned ones (``learn_coefficients``) or the scheme's."""
        return coefficients(self)

    def project_coefficients(self) -> dict:
        """Learned coefficients (``project_coefficients=True``) moved onto the order conditions
        of the scheme's order: :func:`splitnet.nets.learned.project_coefficients`."""
        return project_coefficients(self)

    def n_params(self, embeddings: bool = True) -> int:
        """All parameters (a tied head counted once); ``embeddings=False``: without the token
        and position embeddings and an untied head (Kaplan et al.'s non-embedding count)."""
        n = sum(p.numel() for p in self.parameters())
        if check_flag("embeddings", embeddings):
            return n
        emb = [self.tok_emb, self.pos_emb] + ([] if self.config.tie_head else [self.head])
        return n - sum(m.weight.numel() for m in emb if m is not None)

    def embed(self, idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token + position embedding of ``idx`` (B, T) int64 at positions ``start..start+T-1``."""
        c = self.config
        check_ids(idx, c.vocab_size, c.max_len, "idx", start)
        T = idx.shape[1]
        x = self.tok_emb(idx)
        if self.embed_scale != 1.0:
            x = x * self.embed_scale
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(start, start + T, device=idx.device))
        return self.drop(x)                                         # (B, T, D)

    def forward(self, idx: torch.Tensor, return_states: bool = False):
        """``idx`` (B, T) int64 -> logits (B, T, V). With ``return_states`` also a tensor
        ``(1 + n_layers * n_stages, B, T, D)``: the embedding, then the state after every stage
        of every layer (times: :meth:`state_times`; a reversible network's state is the mean
        of its pair)."""
        x = self.embed(idx)
        if check_flag("return_states", return_states):
            x, states = self._states(x)
            return self.to_logits(self.norm(x)), states
        return self.to_logits(self.norm(self.run_layers(x)))

    def to_logits(self, h: torch.Tensor) -> torch.Tensor:
        """The logits of final states ``h`` (after the norm): ``head(h)``, soft-capped to
        ``c tanh(head(h) / c)`` with ``logit_softcap`` ``c`` (Gemma 2)."""
        z = self.head(h)
        cap = self.config.logit_softcap
        return z if cap is None else cap * torch.tanh(z / cap)

    def run_layers(self, x: torch.Tensor) -> torch.Tensor:
        """The embedded tokens ``x`` (B, T, D) through every layer (layer k at time ``k h``),
        as the stack's kind runs them (:mod:`splitnet.integrators.stack`; reversible: the pair
        ``x1 = x2 = x``, nothing stored per layer for backward, read out as its mean)."""
        return self.layers.run(x, plain=getattr(self, PLAIN, False))

    def run_layers_cached(self, x: torch.Tensor, caches) -> torch.Tensor:
        """:meth:`run_layers` for new tokens ``x`` whose earlier tokens' keys and values sit in
        ``caches`` (one entry per layer: :class:`splitnet.nets.generation.GenerationCache`)."""
        return self.layers.run_cached(x, caches)

    def _states(self, x: torch.Tensor):
        out, states = self.layers.states(x)
        return out, torch.stack([x] + states)

    def generate(self, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, *, generator: torch.Generator | None = None,
                 use_cache: bool | None = None) -> torch.Tensor:
        """``idx`` (B, T) int64 continued by ``max_new_tokens`` sampled tokens -> (B, T + N)
        int64, in eval mode (restored after) without gradients.

        ``temperature`` 0 is greedy; ``top_k`` keeps the k largest logits; ``generator`` (a
        ``torch.Generator`` on the model's device) or torch's global RNG draws. The next token
        after L tokens is predicted from the last ``min(L, max_len)`` of them (learned positions
        end at ``max_len``; a model with ``context_slides=False`` refuses a request that would
        slide). A key/value cache per attention evaluation (every stage, every
        sub-step of ``midpoint`` / ``rk4``) makes a token one pass of one token while
        ``L <= max_len``; ``method="exact"`` (adaptive evaluations), non-causal models and fields
        that mix tokens without a cache generate without one, recomputing the window per
        token (the conv field of ``diffusion_field="conv"`` caches its window's inputs).
        ``use_cache``: ``None`` automatic, ``True`` required, ``False`` never. Details:
        :mod:`splitnet.nets.generation`."""
        from .generation import generate

        return generate(self, idx, max_new_tokens, temperature, top_k, generator=generator,
                        use_cache=use_cache)

    def features(self, idx: torch.Tensor) -> torch.Tensor:
        """The final states after the last norm, ``norm(x_L)`` (B, T, D): ``forward(idx)`` is
        ``to_logits(features(idx))``. A loss that never forms the full logits multiplies them
        by ``head.weight`` itself, soft-capping each chunk as :meth:`to_logits` does
        (:func:`splitnet.tasks.losses.linear_cross_entropy`)."""
        return self.norm(self.run_layers(self.embed(idx)))

    def state_times(self) -> torch.Tensor:
        """Time of each state returned by ``forward(..., return_states=True)``: 0 for the
        embedding, then ``k h + h * stage_times`` (mean of the two fields' clocks)."""
        st = self.scheme.stage_times()
        c = self.config
        times = [0.0] + [(k + s) * c.step_size for k in range(c.n_layers) for s in st]
        return torch.tensor(times, dtype=torch.float64)


__all__ = ["SplitTransformer", "check_ids"]


def __getattr__(name: str):
    """The names this public module also serves, defined elsewhere (``splitnet.ALSO_SERVED``),
    looked up on first use: no module imports them through here."""
    from .. import served

    return served(__name__, name)

