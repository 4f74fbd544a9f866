"""Token embeddings as particles: their paths through a network, and the ODE the network steps.

A :class:`~splitnet.nets.models.SplitTransformer` with step size ``h`` maps the embedding ``x(0)``
of
a sequence through ``n_layers`` steps of its splitting scheme; layer ``k`` integrates
``[k h, (k + 1) h]``. :func:`collect` records every token's state after every layer (and after
every stage), with times ``t = k h + h * scheme.stage_times()`` (the mean of the two fields'
clocks), and, with ``continuous=True``, the dense path of the ODE the layers approximate.

The model's own ODE
-------------------
Layer ``k`` has one callable ``X_{k,i}`` per stage ``i`` with coefficient ``c_i`` (each field's
coefficients sum to 1). To first order in ``h`` the composition of sub-flows
``exp(c_s h X_s) ... exp(c_1 h X_1)`` equals the flow of ``sum_i c_i X_i`` (BCH), so the ODE a
layer is consistent with is

    dx/dt = sum_i c_i X_{k,i}(t, x)          for t in [k h, (k + 1) h].

With ``weights="shared"`` all stages of a field call the same module, the coefficients of each
field add up to 1 and this is ``dx/dt = D_k(t, x) + C_k(t, x)``. With ``weights="per-stage"`` it
is ``Dbar_k + Cbar_k``, the coefficient-weighted mean of the stage modules of each field (negative
coefficients, e.g. the triple jump's, enter with their sign). Every field is evaluated at the
ODE time ``t`` (both clocks equal ``t``). The path starts from the embedding and runs through all
layers (``restart=False``: the *global* comparison, drift accumulates); with ``restart=True``
each layer's piece starts from the network's state at the start of that layer (the *local*
comparison: one step's error per layer).

Projection and diagnostics
--------------------------
:func:`~splitnet.geometry.pca` fits principal axes jointly on all network states of the sequence
(every token at every recorded point), centred on their mean, in float64, with a fixed sign
convention: in each component the loading of largest magnitude is positive. The ODE path is
projected on the same axes (it does not enter the fit, so the picture of the network does not
change when it is drawn).

:func:`~splitnet.geometry.clustering` gives, at every recorded point, the mean pairwise cosine
similarity of the tokens (off-diagonal pairs), the pairwise cosines themselves (for per-layer
histograms) and the effective rank ``exp(H(p))`` of the token cloud, ``p`` the normalised
singular values of the matrix of unit-normalised token vectors (Roy & Vetterli 2007): it is
``n_tokens``-ish when the directions are spread and 1 when every token points the same way, the
clustering that Geshkovski et al. (2023) prove for self-attention dynamics.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import torch

from ..configs.options import check_flag, check_int
from ..nets.models import SplitTransformer

DEFAULT_TEXT = "for i in range(n):"   # 18 bytes of the kind the default run was trained on
EMBEDDING = "embedding"

# ---------------------------------------------------------------------------------------------
# Tokens


def encode(text: str) -> torch.Tensor:
    """UTF-8 bytes of ``text`` as token ids (the byte tokenizer, vocabulary 256), shape (T,)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text:
        raise ValueError("text is empty: give at least one character")
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)


_VISIBLE = {" ": "\u2423", "\n": "\u23ce", "\t": "\u21e5"}   # glyphs DejaVu Sans has


def token_label(token_id: int) -> str:
    """A printable label for a byte token: the character, ``␣`` for a space, ``⏎`` for a newline,
    ``\\xNN`` for a byte that is not printable on its own (e.g. half of a UTF-8 character)."""
    if isinstance(token_id, torch.Tensor) and token_id.numel() == 1:
        token_id = token_id.item()
    if isinstance(token_id, bool) or not isinstance(token_id, numbers.Integral):
        raise TypeError(f"a token id must be an int, got {token_id!r}")
    token_id = int(token_id)
    if not 0 <= token_id < 256:
        return f"#{token_id}"
    ch = bytes([token_id]).decode("utf-8", "replace")
    if ch in _VISIBLE:
        return _VISIBLE[ch]
    if ch == "\ufffd" or not ch.isprintable():
        return f"\\x{token_id:02x}"
    return ch


def token_labels(ids, tokenizer=None) -> tuple[str, ...]:
    """Printable labels of token ids: bytes (:func:`token_label`) without a tokenizer; with one
    (e.g. a ``transformers`` tokenizer: ``decode``, ``convert_ids_to_tokens``) each token decoded
    on its own (its token string when that is part of a character), spaces made visible."""
    if tokenizer is None:
        return tuple(token_label(i) for i in ids)
    out = []
    specials = {getattr(tokenizer, n, None): tag for n, tag in
                (("pad_id", "<pad>"), ("bos_id", "<s>"), ("eos_id", "</s>"))}  # splitnet's
    tokens_of = getattr(tokenizer, "convert_ids_to_tokens", None)             # transformers'
    for i in map(int, ids):
        if i in specials:
            out.append(specials[i])
            continue
        s = tokenizer.decode([i])
        if not s or "\ufffd" in s:
            s = str(tokens_of(i)) if tokens_of is not None else token_label(i)
        out.append("".join(_VISIBLE.get(c) or _printable(c) for c in s))
    return tuple(out)


def _printable(c: str) -> str:
    """``c``, or its escape when a font has no glyph for it (a control character)."""
    return c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"


# ---------------------------------------------------------------------------------------------
# Collection


@dataclass
class Trajectories:
    """Every token's state at every recorded point of one sequence.

    Attributes
    ----------
    states : (n_points, T, D) tensor -- point 0 is the embedding, then the state after every
        stage of every layer (``per_stage=True``) or after every layer.
    times : (n_points,) float64 -- ``0``, then ``k h + h * stage_times`` (layer end: ``(k+1) h``).
    layer : (n_points,) int -- 0-based index of the layer that produced the point, -1 for the
        embedding.
    stage : (n_points,) int -- stage index inside that layer, -1 for the embedding.
    fields : names per point: ``"embedding"``, ``"diffusion"`` or ``"convection"``.
    layer_end : (n_points,) bool -- the point is the embedding or the output of a whole layer.
    tokens : token ids (T,); labels : printable token labels (T,).
    path, path_times : the ODE path ``(n_path, T, D)`` at ``path_times`` (``continuous=True``),
        else None; ``path_restart`` says whether each layer's piece restarts from the network.
    """

    states: torch.Tensor
    times: torch.Tensor
    layer: np.ndarray
    stage: np.ndarray
    fields: tuple[str, ...]
    layer_end: np.ndarray
    tokens: tuple[int, ...]
    labels: tuple[str, ...]
    step_size: float
    n_layers: int
    scheme: str
    weights: str
    method: str
    path: torch.Tensor | None = None
    path_times: torch.Tensor | None = None
    path_restart: bool = False
    memory: torch.Tensor | None = None        # an encoder–decoder's memory (S, D): fixed
    memory_labels: tuple[str, ...] = ()       # particles the decoder's tokens are pulled by

    @property
    def n_points(self) -> int:
        return self.states.shape[0]

    @property
    def n_tokens(self) -> int:
        return self.states.shape[1]

    def layer_states(self) -> torch.Tensor:
        """States at the layer boundaries ``t = k h``, k = 0..n_layers: (n_layers + 1, T, D)."""
        return self.states[torch.as_tensor(self.layer_end)]

    @property
    def first_layer(self) -> int:
        """Layer boundary of the first point: 0 (the embedding) unless cut by :meth:`since`."""
        return int(self.layer[0]) + 1

    def since(self, k: int) -> Trajectories:
        """The part from the layer boundary ``t = k h`` on (``k = 0``: everything), e.g. to look
        at the later layers once a first layer's large jump would dominate the picture."""
        n_bound = int(self.layer_end.sum())
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < n_bound - 1:
            raise ValueError(f"layer boundary must be an int in 0..{n_bound - 2}, got {k!r}")
        i0 = int(np.flatnonzero(self.layer_end)[k])
        path = path_times = None
        if self.path is not None:
            n = (self.path.shape[0] - 1) // self.n_layers
            j0 = (k - self.first_layer) * n
            path, path_times = self.path[j0:], self.path_times[j0:]
        return Trajectories(
            states=self.states[i0:], times=self.times[i0:], layer=self.layer[i0:],
            stage=self.stage[i0:], fields=self.fields[i0:], layer_end=self.layer_end[i0:],
            tokens=self.tokens, labels=self.labels, step_size=self.step_size,
            n_layers=self.n_layers - (k - self.first_layer), scheme=self.scheme,
            weights=self.weights, method=self.method, path=path, path_times=path_times,
            path_restart=self.path_restart, memory=self.memory,
            memory_labels=self.memory_labels)

    def path_at_layers(self) -> torch.Tensor:
        """The ODE path at ``t = k h``: (n_layers + 1, T, D)."""
        if self.path is None:
            raise ValueError("no continuous path: collect(..., continuous=True)")
        n = (self.path.shape[0] - 1) // self.n_layers
        return self.path[::n]

    def gap(self, relative: bool = False) -> np.ndarray:
        """Distance between the network and its ODE at every layer boundary ``t = k h``:
        root-mean-square over tokens of ``||x_net(k h) - x_ode(k h)||``, shape (n_layers + 1,).

        ``relative=True`` divides by the RMS over tokens of the ODE's net displacement
        ``||x_ode(L h) - x_ode(0)||``, so the number reads as "fraction of how far the tokens
        travel". With ``restart=True`` each entry is the one-layer (local) error."""
        net = self.layer_states().double()
        ode = self.path_at_layers().double()
        g = (net - ode).norm(dim=-1).pow(2).mean(dim=-1).sqrt().numpy()
        if relative:
            disp = (self.path[-1].double() - self.path[0].double()).norm(dim=-1)
            g = g / float(disp.pow(2).mean().sqrt())
        return g


def _as_sequence(model: SplitTransformer, idx, tokenizer=None, vocab: int | None = None,
                 what: str = "text") -> torch.Tensor:
    vocab = model.vocab_size if vocab is None else vocab
    if isinstance(idx, str) and tokenizer is not None:
        idx = torch.tensor(tokenizer.encode(idx), dtype=torch.long)
    elif isinstance(idx, str):
        if vocab < 256:
            raise ValueError(f"text needs the byte vocabulary (256); the model has "
                             f"vocab_size {vocab}: pass token ids instead")
        idx = encode(idx)
    if not isinstance(idx, torch.Tensor):
        try:
            idx = torch.as_tensor(idx)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"the {what} must be a str or token ids (a tensor or list of ints), "
                            f"got {type(idx).__name__}") from None
    if idx.dtype != torch.long:
        raise TypeError(f"token ids must be int64, got {idx.dtype}")
    if idx.dim() == 2:
        if idx.shape[0] != 1:
            raise ValueError(f"collect takes one sequence, shape (T,) or (1, T); got a batch of "
                             f"{idx.shape[0]} (call it once per sequence)")
        idx = idx[0]
    if idx.dim() != 1 or idx.numel() == 0:
        raise ValueError(f"token ids must have shape (T,) with T >= 1, got {tuple(idx.shape)}")
    ctx = model.max_len
    if idx.numel() > ctx:
        raise ValueError(f"the {what} has {idx.numel()} tokens but the model's context is "
                         f"{ctx}: shorten the {what}")
    if int(idx.min()) < 0 or int(idx.max()) >= vocab:
        raise ValueError(f"token ids must lie in [0, {vocab}), got "
                         f"[{int(idx.min())}, {int(idx.max())}]")
    return idx


def _point_labels(sch, L: int, per_stage: bool):
    """Per recorded point (the embedding, then every stage of every layer): layer, stage,
    field, layer end; and the indices kept (all, or the layer ends only)."""
    n_st = len(sch.stages)
    layer = np.array([-1] + [k for k in range(L) for _ in range(n_st)])
    stage = np.array([-1] + [i for _ in range(L) for i in range(n_st)])
    fields = (EMBEDDING,) + tuple(st.field for _ in range(L) for st in sch.stages)
    layer_end = np.array([True] + [i == n_st - 1 for _ in range(L) for i in range(n_st)])
    keep = np.arange(len(layer)) if per_stage else np.flatnonzero(layer_end)
    return layer[keep], stage[keep], tuple(fields[i] for i in keep), layer_end[keep], keep


def _ode_path(model, x0, layer_starts, points_per_layer, solver, rtol, atol, restart,
              layers=None, context=None):
    import functools

    from .convergence import ADAPTIVE_SOLVERS, odeint_bounded

    h = model.step_size
    kwargs = {"solver": solver}
    if solver in ADAPTIVE_SOLVERS:
        kwargs.update(rtol=rtol, atol=atol)
    else:
        # Fixed-grid solver: 8 sub-steps between output points, fine against the layer's h.
        kwargs["options"] = {"step_size": h / (8 * points_per_layer)}
    pieces = [x0.unsqueeze(0)]
    times = [torch.zeros(1, dtype=torch.float64)]
    stack = model.layers if layers is None else layers    # its kind says what the ODE is of
    x = stack.ode_start(x0)
    for k, f in enumerate(stack.ode_fields()):
        if restart:
            x = layer_starts[k]
        ts = torch.linspace(k * h, (k + 1) * h, points_per_layer + 1, dtype=torch.float64)
        f = functools.partial(f, **context) if context else f     # a decoder's memory
        sol = odeint_bounded(f, x, ts.to(x.dtype), **kwargs)
        pieces.append(stack.ode_read(sol[1:]))
        times.append(ts[1:])
        x = sol[-1]
    return torch.cat(pieces), torch.cat(times)


MAX_POINTS_PER_LAYER = 4096   # ODE path points per layer at most (each a state of every token)


def _check_path(model, points_per_layer, restart: bool) -> None:
    if isinstance(points_per_layer, bool) or not isinstance(points_per_layer, int) \
            or points_per_layer < 1:
        raise ValueError(f"points_per_layer must be a positive int, got {points_per_layer!r}")
    if points_per_layer > MAX_POINTS_PER_LAYER:
        raise ValueError(f"points_per_layer must be <= {MAX_POINTS_PER_LAYER:,}, got "
                         f"{points_per_layer:,}")
    stack = model.decoder_layers if hasattr(model, "decoder_layers") else model.layers
    if restart and not stack.restartable:
        raise ValueError("restart=True restarts the ODE from each layer's input state; a "
                         "reversible network's states are the means of its pairs, not its "
                         "pairs: use restart=False (the ODE of the pair from the embedding)")


def _check_collect(model, source, per_stage, continuous, points_per_layer, restart, solver,
                   rtol, atol) -> tuple[bool, bool, bool]:
    """:func:`collect`'s arguments checked before any work; its three switches as bools."""
    seq2seq = hasattr(model, "decoder_layers")
    if not isinstance(model, SplitTransformer) and not seq2seq:
        raise TypeError(f"model must be a SplitTransformer or a SplitSeq2Seq, got "
                        f"{type(model).__name__}")
    per_stage, continuous, restart = (check_flag(k, v) for k, v in (
        ("per_stage", per_stage), ("continuous", continuous), ("restart", restart)))
    _check_path(model, points_per_layer, continuous and restart)
    if continuous:
        from .convergence import check_solver

        check_solver(solver, rtol, atol, adaptive=False)
    if seq2seq != (source is not None):
        raise ValueError("an encoder–decoder model needs source= (the sentence its decoder "
                         "tokens read)" if seq2seq else "source= is for encoder–decoder models")
    return per_stage, continuous, restart


@torch.no_grad()
def _decoder_context(model, memory, mask, idx) -> dict:
    """What the decoder's fields read besides the state on the ODE path: the memory, its mask,
    and for ConvS2S's attention the embedded target tokens (T, D)."""
    context = {"memory": memory, "memory_mask": mask}
    if getattr(model, "reads_embedding", False):
        context["target_embedding"] = model.embed_target(idx[None])[0]
    return context


def collect(model: SplitTransformer, idx, per_stage: bool = True, continuous: bool = False,
            points_per_layer: int = 16, restart: bool = False, solver: str = "dopri5",
            rtol: float | None = None, atol: float | None = None,
            tokenizer=None, source=None) -> Trajectories:
    """Every token's state after every layer (and every stage) of one sequence.

    Parameters
    ----------
    model : SplitTransformer (run in eval mode here; its mode is restored), e.g. one imported
        by :func:`splitnet.interop.from_hf`.
    idx : token ids of ONE sequence, shape (T,) or (1, T), or a str (encoded by ``tokenizer``,
        else as UTF-8 bytes).
    tokenizer : encodes a str and labels the tokens (:func:`token_labels`); default: bytes.
    source : for a :class:`~splitnet.nets.seq2seq.SplitSeq2Seq`, the source sentence (ids or a
        str); ``idx`` is then the decoder's input (bos first) and the trajectories are the
        decoder's tokens, the encoder's output kept as ``memory`` (the fixed particles the
        cross field pulls toward; the ODE path integrates the decoder's fields with it).
    per_stage : record the state after every stage, not only after every layer.
    continuous : also integrate the model's own ODE (module docstring) with torchdiffeq, at
        ``points_per_layer`` points per layer, from the embedding (``restart=False``) or from the
        network state at the start of every layer (``restart=True``).
    solver, rtol, atol : torchdiffeq solver (adaptive ``dopri5`` by default at
        :func:`~splitnet.integrators.flows.default_tolerances` of the model's dtype; a fixed-grid
        solver
        such as ``"rk4"`` takes 8 sub-steps per output point).

    Returns
    -------
    Trajectories, with ``states`` of shape ``(n_points, T, D)``; the times are the model's
    :meth:`~splitnet.nets.models.SplitTransformer.state_times`.
    """
    per_stage, continuous, restart = _check_collect(model, source, per_stage, continuous,
                                                    points_per_layer, restart, solver, rtol,
                                                    atol)
    seq2seq = hasattr(model, "decoder_layers")
    vocab = model.tgt_vocab if seq2seq else None
    idx = _as_sequence(model, idx, tokenizer, vocab, "target" if seq2seq else "text")
    dev = next(model.parameters()).device
    was_training = model.training
    model.eval()
    memory = context = None
    try:
        if seq2seq:
            src = _as_sequence(model, source, tokenizer, model.src_vocab, "source")
            memory, mask = model.encode(src.to(dev)[None])
            context = _decoder_context(model, memory, mask, idx.to(dev))
            _, states = model.decode(idx.to(dev)[None], memory, mask, return_states=True)
            sch, layers = model.decoder_scheme, model.decoder_layers
        else:
            _, states = model(idx.to(dev)[None], return_states=True)
            sch, layers = model.scheme, model.layers
        L, h = len(layers), model.step_size
        states = states[:, 0].detach()                     # (n_all, T, D)
        times = torch.tensor([0.0] + [(k + s) * h for k in range(L) for s in sch.stage_times()],
                             dtype=torch.float64)
        layer, stage, fields, layer_end, keep = _point_labels(sch, L, per_stage)
        states, times = states[keep], times[keep]
        path = path_times = None
        if continuous:
            starts = states[torch.as_tensor(layer_end)]
            path, path_times = _ode_path(model, states[0], starts, points_per_layer, solver,
                                         rtol, atol, restart, layers, context)
            path = path.detach().cpu()
    finally:
        model.train(was_training)
    ids = tuple(int(i) for i in idx)
    return Trajectories(
        states=states.cpu(), times=times, layer=layer, stage=stage, fields=fields,
        layer_end=layer_end, tokens=ids, labels=token_labels(ids, tokenizer),
        step_size=h, n_layers=L, scheme=sch.name, weights=model.weights,
        method=layers[0].method.name, path=path, path_times=path_times,
        path_restart=restart, memory=None if memory is None else
        memory[0, :, :model.config.d_model].detach().cpu(),     # ConvS2S's [z | e]: z
        memory_labels=() if memory is None else token_labels(tuple(int(i) for i in src),
                                                             tokenizer))


# ---------------------------------------------------------------------------------------------
# Models: checkpoints and fresh ones


def with_scheme(model: SplitTransformer, scheme) -> SplitTransformer:
    """The same trained fields run by another scheme (``weights="shared"`` only: then every
    scheme has the same parameters). Returns a new model on the same device."""
    from .refine import one_field_schemes

    one_field_schemes(model, [scheme], "scheme", "draw the model as it is")
    if model.weights != "shared":
        raise ValueError(f"cannot change the scheme of a model with weights={model.weights!r}: "
                         f"its stages have their own sub-layers; only shared-weight models can "
                         f"be re-run with another scheme")
    new = SplitTransformer.from_config(model.config.replace(scheme=scheme))
    new.load_state_dict(model.state_dict())
    return new.to(next(model.parameters()).device).eval()


def fresh_model(scheme="lie-trotter", d_model: int = 64, n_heads: int = 4, n_layers: int = 6,
                step_size: float = 1.0, weights: str = "shared", causal: bool = True,
                seed: int = 0, vocab_size: int = 256) -> SplitTransformer:
    """A freshly initialised byte-level model (seeded: the same seed gives the same fields for
    every scheme when ``weights="shared"``)."""
    torch.manual_seed(check_int("seed", seed, lo=0))
    return SplitTransformer(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
                            n_layers=n_layers, scheme=scheme, causal=causal, weights=weights,
                            step_size=step_size).eval()


__all__ = ["DEFAULT_TEXT", "EMBEDDING", "MAX_POINTS_PER_LAYER", "Trajectories", "collect",
           "encode", "fresh_model", "token_label", "token_labels", "with_scheme"]


def __getattr__(name: str):
    """The names this public module also serves, defined elsewhere (``splitnet.ALSO_SERVED``:
    the token cloud's measures, :mod:`splitnet.geometry`), looked up on first use."""
    from .. import served

    return served(__name__, name)
