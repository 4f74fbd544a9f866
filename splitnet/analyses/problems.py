"""Problems with known answers: the built-in particle system and the exact-solution problems
that tests, experiments and benchmarks share.

* :func:`particle_system` -- random attention (diffusion) + feed-forward (convection) fields
  and random particles: nonlinear, non-commuting, the default of ``splitnet order``.
* :func:`decoder_system` -- the same plus cross-attention to fixed memory particles: the three
  fields of a decoder layer (``splitnet order --fields 3``).
* :func:`partitioned_system` -- the same two fields on a partitioned state ``(x1, x2)``, each a
  :class:`Shear` writing one block from the other (a reversible network's ODE): every explicit
  sub-step is then the exact sub-flow, so Euler keeps every scheme's order
  (``splitnet order --partitioned``).
* :func:`matrix_problem` -- ``D(x) = A x``, ``C(x) = B x`` with random dense non-commuting
  matrices; every sub-flow and the coupled flow are matrix exponentials
  (:func:`splitnet.order.check.expm`, checked against ``scipy.linalg.expm``).
* :func:`particle_problem` -- the particle system with a torchdiffeq reference at tight
  tolerances.
* :func:`time_dependent_linear` -- ``D(t, x) = (1 + 0.5 sin t) A x``,
  ``C(t, x) = (1 + 0.5 cos 3t) B x``: each sub-flow is exact in closed form
  (``expm((integral of the modulation) A)``), the coupled flow has no closed form (reference).
* :func:`time_dependent_particle` -- ``D(t, x) = (1 + 0.5 sin 2t) Attention(x)``,
  ``C(t, x) = FFN(x) + sin(3t) b``: nonlinear and non-autonomous in both fields.
* :class:`NystromProblem` -- a nonlinear ``q'' = f(q)`` split into drift and kick, exact
  sub-flows: the problem class of Runge–Kutta–Nyström methods (their class order).

Both fields depend on time in the last two, with different frequencies, so a scheme that
evaluates a stage at the wrong time (a clock other than the field's own, see ``docs/theory.md``)
loses its order; :class:`WrongClock` builds such a scheme for the negative controls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..configs.options import check_flag, check_int, check_real
from ..fields import Attention, CrossAttention, FeedForward
from ..integrators.schemes import CustomScheme
from ..integrators.schemes import get as get_scheme
from ..integrators.subflows import SubflowMethod
from ..integrators.validate import check_step_size, check_time
from ..order.check import expm, random_matrices
from ..order.fit import fit_slope
from ..stagelists.stages import CONVECTION, CROSS, DIFFUSION


def _check_dtype(dtype) -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype (torch.float64, ...), got "
                        f"{dtype!r}")


def _check_sizes(seed, gain, dtype=torch.float64, **sizes) -> None:
    """Each size an int >= 1 (None allowed for ``batch``), ``n_heads`` dividing ``d_model``, the
    seed an int >= 0, the gain finite and ``dtype`` a floating torch dtype: ValueError naming
    it (torch's own errors say only 'negative dimension' or 'manual_seed expected a long'; a
    NaN gain gave NaN weights)."""
    _check_dtype(dtype)
    for name, v in sizes.items():
        check_int(name, v, none=name == "batch")
    if sizes["d_model"] % sizes["n_heads"]:
        raise ValueError(f"n_heads {sizes['n_heads']} must divide d_model {sizes['d_model']}")
    check_int("seed", seed, lo=0)
    check_real("gain", gain)


def particle_system(n_tokens: int = 6, d_model: int = 8, n_heads: int = 2, d_ff: int = 16,
                    seed: int = 0, gain: float = 2.0, dtype: torch.dtype = torch.float64,
                    batch: int | None = None):
    """A random attention (diffusion) + feed-forward (convection) particle system.

    Returns ``(F, G, x0)``: freshly initialised :class:`~splitnet.fields.Attention` and
    :class:`~splitnet.fields.FeedForward` fields (no causal mask, so every particle interacts
    with every other) and random particles ``x0`` of shape ``(n_tokens, d_model)``.
    The two fields do not commute ([F, G] != 0), which every order test needs. ``gain``
    multiplies the output projections: stronger dynamics lift the errors of high-order schemes
    above the solver-tolerance floor over h in [0.025, 0.2]. The weights do not depend on the
    global default dtype (they are drawn in float32, then cast to ``dtype``).
    """
    _check_sizes(seed, gain, dtype, n_tokens=n_tokens, d_model=d_model, n_heads=n_heads,
                 d_ff=d_ff, batch=batch)
    g = torch.Generator().manual_seed(seed)
    default = torch.get_default_dtype()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        # Initialise in float32 whatever the global default (`splitnet order` sets float64):
        # the same seed gives the same system everywhere.
        torch.set_default_dtype(torch.float32)
        try:
            F = Attention(d_model, n_heads).to(dtype).eval()
            G = FeedForward(d_model, d_ff).to(dtype).eval()
        finally:
            torch.set_default_dtype(default)
        # Non-trivial LayerNorm affine parameters so the fields are not too symmetric.
        for m in (F.norm, G.norm):
            with torch.no_grad():
                m.weight.copy_(1 + 0.3 * torch.randn(d_model, generator=g, dtype=dtype))
                m.bias.copy_(0.3 * torch.randn(d_model, generator=g, dtype=dtype))
        with torch.no_grad():
            F.proj.weight.mul_(gain)
            G.fc2.weight.mul_(gain)
    for p in list(F.parameters()) + list(G.parameters()):
        p.requires_grad_(False)
    shape = (n_tokens, d_model) if batch is None else (batch, n_tokens, d_model)
    x0 = torch.randn(*shape, generator=g, dtype=dtype)
    return F, G, x0


def decoder_system(n_tokens: int = 6, d_model: int = 8, n_heads: int = 2, d_ff: int = 16,
                   n_memory: int = 5, causal: bool = False, seed: int = 0, gain: float = 2.0,
                   dtype: torch.dtype = torch.float64):
    """The three fields of a decoder layer as a particle system with a memory.

    Returns ``(fields, x0)``: ``fields`` maps ``"diffusion"`` (self-attention, causal or not),
    ``"cross"`` (:class:`~splitnet.fields.CrossAttention` to ``n_memory`` fixed random memory
    particles -- an encoder's output) and ``"convection"`` (feed-forward) to freshly initialised
    modules; ``x0`` holds ``n_tokens`` random particles. ``dx/dt = D(x) + X(x; m) + C(x)`` has
    three pairwise non-commuting fields. The self-attention and feed-forward fields are those
    of :func:`particle_system` with the same arguments, so a two-field study and a three-field
    one share them."""
    check_int("n_memory", n_memory)
    causal = check_flag("causal", causal)
    F, G, x0 = particle_system(n_tokens, d_model, n_heads, d_ff, seed, gain, dtype)
    if causal:
        F.causal = True
    g = torch.Generator().manual_seed(seed + 101)
    memory = torch.randn(n_memory, d_model, generator=g, dtype=dtype)
    default = torch.get_default_dtype()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 202)
        torch.set_default_dtype(torch.float32)
        try:
            X = CrossAttention(d_model, n_heads).to(dtype).eval()
        finally:
            torch.set_default_dtype(default)
        with torch.no_grad():
            X.norm.weight.copy_(1 + 0.3 * torch.randn(d_model, generator=g, dtype=dtype))
            X.norm.bias.copy_(0.3 * torch.randn(d_model, generator=g, dtype=dtype))
            X.proj.weight.mul_(gain)
    X.memory = memory
    for q in X.parameters():
        q.requires_grad_(False)
    return {DIFFUSION: F, CROSS: X, CONVECTION: G}, x0


class Shear(torch.nn.Module):
    """A field on a partitioned state ``x = stack([x1, x2])`` (shape ``(2, ...)``) that writes
    one block from the other: ``Shear(f, write, read)(t, x)`` is ``f(t, x[read])`` in block
    ``write`` and zero in the other (``write != read``).

    Along its flow ``x[read]`` does not move, so for an autonomous ``f`` the flow over ``dt`` is
    ``x[write] + dt f(x[read])``: one Euler step is exact, and so is any explicit Runge–Kutta
    step (every stage sees the same ``x[read]``; the weights sum to 1). :attr:`is_shear` tells
    :func:`~splitnet.analyses.convergence.convergence_study` so: on fields that are all shears
    the expected order of a scheme of one-field stages is the scheme's own, whatever the
    explicit sub-step method. ``f`` must not depend on ``t`` for that to hold (the fields of
    :func:`partitioned_system` do not)."""

    is_shear = True

    def __init__(self, f, write: int, read: int):
        super().__init__()
        if {write, read} != {0, 1}:
            raise ValueError(f"a shear writes one of the blocks 0, 1 and reads the other, got "
                             f"write={write!r}, read={read!r}")
        self.f, self.write, self.read = f, write, read

    def forward(self, t, x):
        out = torch.zeros_like(x)
        out[self.write] = self.f(t, x[self.read])
        return out

    def extra_repr(self) -> str:
        return f"x{self.write + 1} <- f(x{self.read + 1})"


def partitioned_system(n_tokens: int = 6, d_model: int = 8, n_heads: int = 2, d_ff: int = 16,
                       seed: int = 0, gain: float = 2.0, dtype: torch.dtype = torch.float64):
    """The attention + feed-forward particle system on a partitioned state: the ODE of a
    reversible splitting network (:mod:`splitnet.reversible`).

    The state is a pair of particle sets ``(x1, x2)``, each ``(n_tokens, d_model)``, stored as
    one tensor ``x = stack([x1, x2])`` of shape ``(2, n_tokens, d_model)``. With the attention
    ``D`` and feed-forward ``C`` of :func:`particle_system` (same arguments, same weights):

        D~(x1, x2) = (D(x2), 0)      the x2 particles' interaction, written into x1
        C~(x1, x2) = (0, C(x1))      the feed-forward of x1, written into x2
        dx/dt = D~(x) + C~(x),  i.e.  x1' = D(x2),  x2' = C(x1)

    Each field is a :class:`Shear` (its block of reads is untouched by its own flow), so its
    sub-flow over ``c h`` is exactly one Euler step ``x_w + c h f(x_r)``: a splitting scheme with
    Euler sub-steps *is* the scheme with exact sub-flows and keeps its classical order p.
    The fields do not commute: ``[D~, C~](x) = (D'(x2) C(x1), -C'(x1) D(x2))``, non-zero for
    these random weights; both are smooth (LayerNorm, softmax attention, GELU) and autonomous.

    Returns ``(D~, C~, x0)``; ``x0`` stacks :func:`particle_system`'s particles (``x1``) and
    as many further random ones (``x2``), so the blocks start apart."""
    F, G, x1 = particle_system(n_tokens, d_model, n_heads, d_ff, seed, gain, dtype)
    g = torch.Generator().manual_seed(seed + 303)
    x2 = torch.randn(n_tokens, d_model, generator=g, dtype=dtype)
    return Shear(F, write=0, read=1), Shear(G, write=1, read=0), torch.stack([x1, x2])


class LinearField(torch.nn.Module):
    """``f(t, x) = m(t) M x`` for states of shape ``(..., n)``, with ``m(t) = 1 + a sin(w t + p)``
    (``a = 0``: autonomous). :meth:`flow` is the exact sub-flow
    ``x -> expm((int_t^{t+dt} m) M) x`` (M commutes with itself at all times)."""

    def __init__(self, matrix: np.ndarray, amp: float = 0.0, freq: float = 1.0,
                 phase: float = 0.0):
        super().__init__()
        self.matrix = np.asarray(matrix, dtype=float)
        if self.matrix.ndim != 2 or self.matrix.shape[0] != self.matrix.shape[1] or \
                self.matrix.size == 0:
            raise ValueError(f"matrix must be square and non-empty, got shape "
                             f"{self.matrix.shape}")
        if not np.isfinite(self.matrix).all():
            raise ValueError("matrix has NaN or inf entries")
        amp, freq, phase = (check_real(k, v) for k, v in (("amp", amp), ("freq", freq),
                                                              ("phase", phase)))
        self.register_buffer("m", torch.as_tensor(self.matrix, dtype=torch.float64))
        self.amp, self.freq, self.phase = amp, freq, phase

    def modulation(self, t: float) -> float:
        return 1.0 + self.amp * math.sin(self.freq * float(t) + self.phase)

    def integral(self, t: float, dt: float) -> float:
        """``int_t^{t+dt} m(s) ds``."""
        if self.amp == 0.0:
            return dt
        w, p = self.freq, self.phase
        return dt - self.amp / w * (math.cos(w * (t + dt) + p) - math.cos(w * t + p))

    def forward(self, t, x):
        return self.modulation(float(t)) * (x @ self.m.T.to(x.dtype))

    def flow(self, t: float, x: torch.Tensor, dt: float) -> torch.Tensor:
        e = torch.as_tensor(expm(self.integral(t, dt) * self.matrix), dtype=x.dtype)
        return x @ e.T


class ClosedFormFlow(SubflowMethod):
    """Sub-flow method that calls the field's exact closed-form ``flow`` (for
    :class:`LinearField`); the scheme's stepping and clocks are the library's."""

    name, order, evals = "closed-form", None, None

    def __call__(self, f, t, x, dt):
        while not hasattr(f, "flow"):     # unwrap the library's checking / counting wrappers
            f = f.f
        return f.flow(t, x, dt)


@dataclass
class Problem:
    name: str
    diffusion: object
    convection: object
    x0: torch.Tensor
    t0: float = 0.0

    def exact(self, t1: float) -> torch.Tensor:
        """The coupled flow at ``t1`` (closed form where available, else torchdiffeq; cached)."""
        cache = self.__dict__.setdefault("_cache", {})
        if t1 not in cache:
            if getattr(self, "_matrix", None) is not None:
                a, b = self._matrix
                cache[t1] = self.x0 @ torch.as_tensor(expm((t1 - self.t0) * (a + b))).T
            else:
                from .convergence import reference_solution

                cache[t1] = reference_solution(
                    self.diffusion, self.convection, self.x0,
                    torch.tensor([self.t0, t1], dtype=torch.float64))[-1]
        return cache[t1]


def matrix_problem(dim: int = 6, seed: int = 0) -> Problem:
    a, b = random_matrices(dim, seed)        # checks dim and seed
    x0 = torch.as_tensor(np.random.default_rng(seed + 1000).standard_normal(dim))
    p = Problem(f"matrix{dim}-seed{seed}", LinearField(a), LinearField(b), x0)
    p._matrix = (a, b)
    return p


def particle_problem(seed: int = 0) -> Problem:
    F, G, x0 = particle_system(seed=seed)
    return Problem(f"particles-seed{seed}", F, G, x0)


def time_dependent_linear(dim: int = 5, seed: int = 3, t0: float = 0.3) -> Problem:
    t0 = check_time(t0, "t0")
    a, b = random_matrices(dim, seed)
    # A scale of 2 keeps the time-dependent part of the error well above the reference floor.
    D = LinearField(2 * a, amp=0.5, freq=1.0)
    C = LinearField(2 * b, amp=0.5, freq=3.0, phase=math.pi / 2)   # 1 + 0.5 cos 3t
    x0 = torch.as_tensor(np.random.default_rng(seed + 1000).standard_normal(dim))
    return Problem(f"td-linear{dim}", D, C, x0, t0)


class Modulated(torch.nn.Module):
    """``(1 + amp sin(freq t)) f(t, x) + sin(force_freq t) b``."""

    def __init__(self, f, amp=0.0, freq=1.0, force=None, force_freq=1.0):
        super().__init__()
        amp, freq, force_freq = (check_real(k, v) for k, v in (
            ("amp", amp), ("freq", freq), ("force_freq", force_freq)))
        self.f, self.amp, self.freq = f, amp, freq
        self.force, self.force_freq = force, force_freq

    def forward(self, t, x):
        t = float(t)
        out = (1.0 + self.amp * math.sin(self.freq * t)) * self.f(t, x)
        if self.force is not None:
            out = out + math.sin(self.force_freq * t) * self.force
        return out


def time_dependent_particle(seed: int = 0, t0: float = 0.2) -> Problem:
    t0 = check_time(t0, "t0")
    F, G, x0 = particle_system(seed=seed)
    b = torch.randn(x0.shape[-1], generator=torch.Generator().manual_seed(seed + 7),
                    dtype=torch.float64)
    D = Modulated(F, amp=0.5, freq=2.0)
    C = Modulated(G, force=2.0 * b, force_freq=3.0)
    return Problem(f"td-particles-seed{seed}", D, C, x0, t0)


class WrongClock(CustomScheme):
    """The stages of ``scheme`` evaluated on a wrong clock (negative control for the clock
    convention): ``"frozen"`` evaluates every stage at the step's start ``t``; ``"shared"`` uses
    one clock for both fields, the scheme's overall progress before each stage
    (``stage_times`` shifted by one stage)."""

    MODES = ("frozen", "shared")

    def __init__(self, scheme, mode: str):
        if mode not in self.MODES:
            raise ValueError(f"mode must be one of {', '.join(self.MODES)}, got {mode!r}")
        object.__setattr__(self, "_mode", mode)
        super().__init__(scheme.stages, order=scheme.order, name=f"{scheme.name}-{mode}-clock")

    def clocks(self):
        if self._mode == "frozen":
            return tuple(0.0 for _ in self.stages)
        if self._mode == "shared":
            return (0.0,) + self.stage_times()[:-1]
        raise ValueError(self._mode)


def local_errors(scheme, problem: Problem, step_sizes, method="exact") -> np.ndarray:
    """``||exact(t0 + h) - step(h)||`` for each h (distinct, each > 0)."""
    from .convergence import step_size_list

    step_sizes = step_size_list(step_sizes, least=1)
    out = []
    with torch.no_grad():
        for h in step_sizes:
            x = scheme.step(problem.diffusion, problem.convection, problem.x0, t=problem.t0,
                            step_size=h, method=method)
            out.append(float((problem.exact(problem.t0 + h) - x).norm()))
    return np.asarray(out)


def slope(step_sizes, errors, floor: float = 1e-12) -> float:
    """Fitted log-log slope (the library's fit: points above ``floor``, strictly decreasing);
    NaN when fewer than two points qualify (too few errors above the floor: undetermined).
    Step sizes, errors and floor are checked first (as many errors as step sizes, each a
    number, errors >= 0 or NaN, floor finite >= 0): ValueError naming the problem."""
    from .convergence import step_size_list

    hs = step_size_list(step_sizes, least=1)
    try:
        e = np.asarray(errors, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"errors must be numbers, got {errors!r:.80}") from None
    if e.shape != hs.shape:
        raise ValueError(f"errors has shape {e.shape}, step_sizes {hs.shape}: one error per "
                         f"step size")
    if (e < 0).any():
        raise ValueError("errors must be >= 0 (norms)")
    return fit_slope(hs, e, check_real("floor", floor, lo=0.0))[0]


class NystromProblem:
    """A nonlinear second-order system ``q'' = f(q)``, ``f = -grad V`` with a random
    ``V(q) = q.K q / 2 + sum T_ijk q_i q_j q_k / 3 + |q|^4 / 4`` (K positive definite), split into
    the drift ``(q, p)' = (p, 0)`` (**diffusion**) and the kick ``(q, p)' = (0, f(q))``
    (**convection**). Both sub-flows are exact in closed form (``q + t p``; ``p + t f(q)``).

    This is the problem class of Runge–Kutta–Nyström splitting methods (quadratic kinetic
    energy: ``[C, [C, [C, D]]] = 0``), where they reach their ``class_order``; unlike a harmonic
    oscillator it is nonlinear, so a method with kick and drift swapped is not mistaken for
    the right one. numpy, float64."""

    def __init__(self, dim: int = 3, seed: int = 3):
        check_int("dim", dim)
        check_int("seed", seed, lo=0)
        rng = np.random.default_rng(seed)
        k = rng.standard_normal((dim, dim))
        self.K = k @ k.T / dim + np.eye(dim)
        self.T = 0.3 * rng.standard_normal((dim, dim, dim))
        self.q0 = 0.4 * rng.standard_normal(dim)
        self.p0 = 0.4 * rng.standard_normal(dim)

    def force(self, q: np.ndarray) -> np.ndarray:
        return -(self.K @ q + np.einsum("ijk,j,k->i", self.T, q, q) + np.dot(q, q) * q)

    def step(self, stages, q: np.ndarray, p: np.ndarray, h: float):
        """One step of ``stages`` (diffusion = drift, convection = kick), exact sub-flows."""
        for st in stages:
            if st.field == CONVECTION:
                p = p + st.coeff * h * self.force(q)
            else:
                q = q + st.coeff * h * p
        return q, p

    def local_error(self, stages, h: float, reference=None, substeps: int = 64) -> float:
        """``|(q, p)(h) - reference|`` from ``(q0, p0)``; the reference is ``substeps`` steps of
        ``reference`` (default: the 10th-order ``kahan-li10``; error ~ (h/64)^11). ``h`` a
        finite nonzero number (negative: a backward step), ``substeps`` an int >= 1."""
        h = check_step_size(h, allow_negative=True)
        substeps = check_int("substeps", substeps)
        ref = (reference if reference is not None else get_scheme("kahan-li10")).stages
        q, p = self.step(stages, self.q0, self.p0, h)
        qr, pr = self.q0, self.p0
        for _ in range(substeps):
            qr, pr = self.step(ref, qr, pr, h / substeps)
        return float(np.hypot(np.linalg.norm(q - qr), np.linalg.norm(p - pr)))


__all__ = ["ClosedFormFlow", "LinearField", "Modulated", "NystromProblem", "Problem", "Shear",
           "WrongClock", "decoder_system", "local_errors", "matrix_problem", "particle_problem",
           "particle_system", "partitioned_system", "slope", "time_dependent_linear",
           "time_dependent_particle"]
