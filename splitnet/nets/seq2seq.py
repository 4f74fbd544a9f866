"""Encoder–decoder networks from any splitting schemes: :class:`SplitSeq2Seq`.

The encoder integrates the source particles under two fields, the decoder the target particles
under three, the third pulling them toward the encoder's output (the fixed memory)::

    m = src_emb(src) + src_pos(s)                  # (B, S, D)
    for k, layer in enumerate(encoder_layers):     # steps of encoder_scheme over
        m = layer(m, k h, padding_mask=pad)        #   diffusion (self-attention) + convection
    m = encoder_norm(m)                            # the memory
    x = tgt_emb(tgt_in) + tgt_pos(t)               # (B, T, D)
    for k, layer in enumerate(decoder_layers):     # steps of decoder_scheme over diffusion
        x = layer(x, k h, memory=m, memory_mask=pad)   # (causal), cross (to m), convection
    logits = head(decoder_norm(x))                 # (B, T, V)

**ConvS2S** (Gehring et al. 2017): ``diffusion_field="conv"`` (a GLU convolution, non-causal
in the encoder, causal in the decoder), ``convection_field="none"``, ``cross_field="multistep"``
(an attention in every decoder layer whose query adds the target embedding and whose values
add the source embedding: the memory is then ``[m | e]``, the encoder's output beside the
source embedding, (B, S, 2 D), and the decoder passes its embedded inputs to the field),
``init="convs2s"``, ``norm="none"``: with ``lie-trotter`` each decoder layer is
``x <- sqrt(1/2)(x + conv(x)); x <- sqrt(1/2)(x + attend(x))``, the paper's block
(``tests/test_convs2s.py`` checks it equal in float64 to one written from the paper's
equations). Under ``init="convs2s"`` the encoder's output passes its gradient scaled by
``1 / (2 n)``, n the decoder's attention modules (the paper's and fairseq's correction for the
n attentions that read it).

With ``lie-trotter`` on both sides this is ``torch.nn.Transformer(norm_first=True)`` (pre-norm
sub-layers, final norms on both stacks; ``tests/test_seq2seq.py`` checks it equal in float64 with
mapped weights). Every option lives once, in :class:`~splitnet.configs.seq2seq.Seq2SeqConfig`.

**Reversible** (``reversible=True``, :mod:`splitnet.reversible`): each stack runs on a pair
started at its embedding, ``x1 = x2 = e``, and reads out the mean ``(x1 + x2) / 2``;
self-attention writes ``x1`` reading ``x2``, cross-attention writes ``x1`` reading ``x2`` and
the memory, the feed-forward writes ``x2`` reading ``x1``. A decoder ``lie-trotter`` layer
(``d x c``) is therefore::

    x1 <- x1 + h SA(x2)          self-attention (causal)
    x1 <- x1 + h CA(x2; m)       cross-attention: reads the same x2
    x2 <- x2 + h FF(x1)          the feed-forward reads the updated x1

Under gradients each stack is one autograd Function that stores its final pair only
(:func:`~splitnet.reversible.run_stack`); the decoder's returns the memory's gradient, which
flows back into the encoder's.
"""

from __future__ import annotations

import torch
from torch import nn

from ..configs.seq2seq import Seq2SeqConfig, StackConfig
from ..configs.signature import ConfigBuilt, config_from_call, config_signature
from ..fields.norms import make_norm
from ..integrators.stack import Stack
from ..reversible.backprop import PLAIN
from .init import embed_scale, initialise, residual_outputs
from .models import check_ids
from .stack import build_stack


class _ScaleGrad(torch.autograd.Function):
    """The identity forward; the gradient times ``scale`` backward (ConvS2S's encoder)."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


def _stack(stack: StackConfig) -> Stack:
    """The layers of one side: each field built by its kind, one module per field (shared) or
    one per stage (per-stage, the convection width scaled: the Macaron matching)."""
    def fields_of(k: int) -> dict:
        fields = {}
        for f in stack.layer_fields(k):
            fields[f.field] = f.kind.build(stack, f.width) if f.shared else \
                [f.kind.build(stack, f.width) for _ in range(f.calls)]
        return fields
    return build_stack(stack, stack.scheme, stack.n_layers, fields_of)


class SplitSeq2Seq(ConfigBuilt, nn.Module):
    """An encoder–decoder Transformer whose layers are steps of splitting schemes.

    Parameters (the fields of :class:`~splitnet.configs.seq2seq.Seq2SeqConfig`)
    ----------
    src_vocab, tgt_vocab, d_model, n_heads : sizes (the first four may be given by position).
    n_encoder_layers, n_decoder_layers : steps of each stack.
    encoder_scheme : over diffusion (non-causal self-attention) and convection (feed-forward).
    decoder_scheme : over diffusion (causal self-attention), cross (attention to the encoder's
        output) and convection; ``lie-trotter`` is the standard decoder layer (self, cross,
        feed-forward), ``"c:0.5,d:1,x:1,c:0.5"`` with ``weights="per-stage"`` the Macaron
        decoder (two half-width feed-forwards: the parameters of the standard layer).
    weights : ``"shared"`` (one module per field per layer) or ``"per-stage"``.
    shared_embeddings, tie_head : one embedding for source and target; head tied to it.
    pad_id, bos_id, eos_id : special ids; decoder inputs start with bos, targets end with eos.
    init : ``"xavier"`` (default: torch.nn.Transformer's rule, token embeddings scaled by
        ``sqrt(d_model)`` in forward) or ``"gpt2"`` (:mod:`splitnet.nets.init`; a config dict
        without ``init``, written before the option, loads as ``"gpt2"``).
    """

    N_POSITIONAL = 4   # src_vocab, tgt_vocab, d_model, n_heads may be given by position

    def __init__(self, *args, **options):
        super().__init__()
        self._config = c = config_from_call(Seq2SeqConfig, args, options, self.N_POSITIONAL)
        self.encoder_stack = c.stack_config("encoder")
        self.decoder_stack = c.stack_config("decoder")
        self.encoder_scheme = self.encoder_stack.scheme
        self.decoder_scheme = self.decoder_stack.scheme
        d = c.d_model
        self.src_emb = nn.Embedding(c.src_vocab, d)
        self.tgt_emb = self.src_emb if c.shared_embeddings else nn.Embedding(c.tgt_vocab, d)
        self.src_pos = nn.Embedding(c.max_len, d)
        self.tgt_pos = nn.Embedding(c.max_len, d)
        self.drop = nn.Dropout(c.dropout)
        self.encoder_layers = _stack(self.encoder_stack)
        self.encoder_norm = make_norm(c.norm, d, c.norm_eps)
        self.decoder_layers = _stack(self.decoder_stack)
        self.decoder_norm = make_norm(c.norm, d, c.norm_eps)
        self.head = nn.Linear(d, c.tgt_vocab, bias=False)
        if c.tie_head:
            self.head.weight = self.tgt_emb.weight
        self.embed_scale = embed_scale(c)            # sqrt(d) under init="xavier", else 1
        plan = self.decoder_stack.layer_fields(0)
        self.memory_parts = max((f.kind.memory_parts for f in plan), default=1)
        self.reads_embedding = any(f.kind.reads_embedding for f in plan)
        n_attn = self.decoder_stack.n_layers * sum(f.n_modules for f in plan if f.kind.uses_memory)
        self.memory_grad = 1.0 / (2 * n_attn) if c.init == "convs2s" and n_attn else 1.0
        self._init_weights()

    @staticmethod
    def config_class() -> type:
        return Seq2SeqConfig         # looked up at call time (the module's name, not a copy)

    __init__.__signature__ = config_signature(Seq2SeqConfig, N_POSITIONAL)

    def _init_weights(self) -> None:
        """``config.init``'s rule (:mod:`splitnet.nets.init`); as in SplitTransformer, the
        residual outputs are those the kinds declare, their scale counted over both stacks."""
        stacks = ((self.encoder_stack, self.encoder_layers),
                  (self.decoder_stack, self.decoder_layers))
        residual = [p for s, layers in stacks for p in residual_outputs(
            layers, [s.layer_fields(k) for k in range(s.n_layers)])]
        initialise(self, self.config.init,
                   n_residual=sum(s.n_layers * len(s.scheme.stages) for s, _ in stacks),
                   residual=residual, embeddings=(self.src_emb, self.tgt_emb, self.head),
                   positions=(self.src_pos, self.tgt_pos), dropout=self.config.dropout)

    # -- use ---------------------------------------------------------------------------------
    def n_params(self, embeddings: bool = True) -> int:
        """All parameters (shared and tied matrices once); ``embeddings=False``: without token
        and position embeddings and an untied head."""
        n = sum(p.numel() for p in self.parameters())
        if embeddings:
            return n
        mods = {id(m): m for m in (self.src_emb, self.tgt_emb, self.src_pos, self.tgt_pos)}
        if not self.config.tie_head:
            mods[id(self.head)] = self.head
        return n - sum(m.weight.numel() for m in mods.values())

    def embed_source(self, src: torch.Tensor) -> torch.Tensor:
        check_ids(src, self.config.src_vocab, self.config.max_len, "src")
        pos = torch.arange(src.shape[1], device=src.device)
        return self.drop(self._tokens(self.src_emb, src) + self.src_pos(pos))

    def embed_target(self, tgt: torch.Tensor, start: int = 0) -> torch.Tensor:
        check_ids(tgt, self.config.tgt_vocab, self.config.max_len, "tgt", start)
        pos = torch.arange(start, start + tgt.shape[1], device=tgt.device)
        return self.drop(self._tokens(self.tgt_emb, tgt) + self.tgt_pos(pos))

    def _tokens(self, table: nn.Embedding, idx: torch.Tensor) -> torch.Tensor:
        """``table(idx)``, times ``sqrt(d)`` under ``init="xavier"`` (fairseq's embed_scale)."""
        x = table(idx)
        return x * self.embed_scale if self.embed_scale != 1.0 else x

    def source_mask(self, src: torch.Tensor, src_key_padding_mask=None):
        """The padding mask (B, S) bool, True = padding: the one given, else the positions
        holding ``pad_id``; ``None`` when nothing is padded (the faster unmasked attention)."""
        if not isinstance(src, torch.Tensor) or src.dim() != 2:
            shape = tuple(src.shape) if isinstance(src, torch.Tensor) else type(src).__name__
            raise ValueError(f"src must be a tensor of token ids of shape (batch, seq), got "
                             f"{shape}; one sentence is src[None]")
        if src_key_padding_mask is None:
            mask = src.eq(self.config.pad_id)
        else:
            mask = torch.as_tensor(src_key_padding_mask, device=src.device)
            if mask.shape != src.shape:
                raise ValueError(f"src_key_padding_mask must have the shape of src "
                                 f"{tuple(src.shape)}, got {tuple(mask.shape)}")
            mask = mask.bool()
        if src.device.type == "cpu" and not torch.compiler.is_compiling():
            if bool(mask.all(dim=1).any()):
                raise ValueError("a source row is all padding: every source needs a token")
            if not bool(mask.any()):
                return None
        return mask

    def encode(self, src: torch.Tensor, src_key_padding_mask=None, return_states: bool = False):
        """``src`` (B, S) -> ``(memory (B, S, D), mask)``: the encoder's particles at time
        ``n_encoder_layers h`` after the final norm, and the padding mask used
        (:meth:`source_mask`). With ``return_states`` also every stage's state (a tensor
        ``(1 + layers * stages, B, S, D)``) before the norm."""
        mask = self.source_mask(src, src_key_padding_mask)
        e = self.embed_source(src)
        x, states = self._integrate(self.encoder_layers, e, return_states, padding_mask=mask)
        memory = self.encoder_norm(x)
        if self.memory_grad != 1.0 and memory.requires_grad:
            memory = _ScaleGrad.apply(memory, self.memory_grad)
        if self.memory_parts == 2:                   # ConvS2S's: [output | source embedding]
            memory = torch.cat([memory, e], dim=-1)
        out = (memory, mask)
        return out + (torch.stack(states),) if return_states else out

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, memory_mask=None,
               return_states: bool = False):
        """Logits (B, T, V) of the tokens after each of ``tgt_in`` (B, T), reading ``memory``
        (:meth:`encode`). Each cross-attention module projects the memory once per call
        (``memory_cache``), however many stages use it (a reversible decoder under gradients:
        once per stage, and again in the backward's recomputation). ``return_states``: also
        the decoder's states, ``(1 + layers * stages, B, T, D)``."""
        x = self.embed_target(tgt_in)
        x, states = self._integrate(self.decoder_layers, x, return_states, memory=memory,
                                    memory_mask=memory_mask, memory_cache={},
                                    **self.embedding_context(x))
        logits = self.head(self.decoder_norm(x))
        return (logits, torch.stack(states)) if return_states else logits

    def embedding_context(self, x: torch.Tensor) -> dict:
        """``{"target_embedding": x}`` when a decoder field reads the embedded inputs ``x``
        (ConvS2S's multi-step attention), else nothing."""
        return {"target_embedding": x} if self.reads_embedding else {}

    def _integrate(self, layers: Stack, x: torch.Tensor, return_states: bool, **context):
        """``x`` (B, L, D) through the stack ``layers`` with ``context`` (a padding mask, the
        memory) -> ``(final state, states or None)``, as the stack's kind runs them."""
        if return_states:
            out, states = layers.states(x, **context)
            return out, [x] + states
        return layers.run(x, plain=getattr(self, PLAIN, False), **context), None

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, src_key_padding_mask=None):
        """``src`` (B, S), ``tgt_in`` (B, T) int64 -> logits (B, T, tgt_vocab). The mask (B, S)
        bool, True = padding (torch's convention); ``None``: the positions holding ``pad_id``."""
        memory, mask = self.encode(src, src_key_padding_mask)
        return self.decode(tgt_in, memory, mask)

    def generate(self, src: torch.Tensor, max_new_tokens: int, beam: int = 1,
                 length_penalty: float = 1.0, src_key_padding_mask=None,
                 use_cache: bool | None = None) -> torch.Tensor:
        """Translations of ``src`` (B, S): (B, <= N) int64, the tokens after bos, each row
        ending at ``eos_id`` (kept) or at N tokens, shorter rows padded with ``pad_id``.
        ``beam`` 1 is greedy; beam search ranks finished hypotheses by
        ``log p / length ** length_penalty`` (fairseq's convention). Eval mode, no gradients;
        a key/value cache per self-attention evaluation and the memory's keys and values once
        per cross-attention module. Details: :mod:`splitnet.nets.decoding`."""
        from .decoding import generate
        return generate(self, src, max_new_tokens, beam=beam, length_penalty=length_penalty,
                        src_key_padding_mask=src_key_padding_mask, use_cache=use_cache)


__all__ = ["SplitSeq2Seq"]
