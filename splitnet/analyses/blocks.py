"""Published Runge–Kutta and predictor–corrector blocks of the whole layer, as splitnet methods.

The ODE Transformer (Li et al., ACL 2022; code ``libeineu/ODE-Transformer``) and PCformer
(Li et al., NeurIPS 2024; code ``rangehow/Neurips-PCformer``) build a block from one layer
``F`` evaluated several times with shared weights and combined with (learned) stage weights. In
splitnet terms the layer is an *increment* ``F_h(y) = layer(y) - y`` of ``dy/dt = D(y) + C(y)``:

* ``parallel``:   ``F_h(y) = h D(y) + h C(y)`` (GPT-J / GPT-NeoX; with exact sub-flows, the
  exact flow's increment ``phi^{D+C}_h(y) - y``),
* ``sequential``: the pre-norm layer the papers use, ``F_h(y) = h D(y) + h C(y + h D(y))`` with
  Euler sub-steps (Lie–Trotter with exact sub-flows: ``phi^C_h(phi^D_h(y)) - y``).

Each published block is a small class with ``step(fields, x, t, h, method)`` (``method``: the
sub-flow method of the layer's stages, ``"euler"`` being the network as built): an outer
Runge–Kutta tableau on ``F`` (:class:`RKBlock`: stage weights fixed, EMA-coded, gated by the
stages, or "literal", feeding ``L = id + F`` as the released code does), a textbook
predictor–corrector (:class:`PECE`) for reference, and PCformer's coded corrector, which mixes
states across layers (:class:`HistoryCorrector`, a multistep method: ``integrate`` only).
:func:`local_order` measures a one-step block on the particle system against the exact flow of
``D + C``; :func:`matrix_order` on random non-commuting matrices with exact linear sub-flows
(adaptive step sizes, as :func:`splitnet.order.check.measure_order`); :func:`global_order` any
block, multistep included, over [0, 1]. ``docs/peers.md`` (``experiments/peers_audit.py``) has
the tables, sources and a plain reading.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..configs.options import check_int, check_real
from ..integrators import flows
from ..integrators.subflows import SubflowMethod, get_method
from ..order.check import expm, random_matrices
from ..order.fit import adaptive_errors, window_fit
from ..stagelists.stages import CONVECTION, DIFFUSION, Stage

ODE_T = "libeineu/ODE-Transformer @ bcf51e888d1f4d1d7ab6200ca468a200ca20d714"
PCFORMER = "rangehow/Neurips-PCformer @ 9fded6fa6e77b7b9b8140ef2b6000653254527de"
INNER = {"parallel": (Stage(f"{DIFFUSION}+{CONVECTION}", 1.0),),
         "sequential": (Stage(DIFFUSION, 1.0), Stage(CONVECTION, 1.0))}


def increment(inner: str, fields: dict, y, t, h, method) -> torch.Tensor:
    """``F_h(y) = layer(y) - y`` for the ``parallel`` or ``sequential`` layer, its stages
    advanced by ``method``."""
    return flows.step(INNER[inner], fields, y, t, h, method, check=False) - y


@dataclass(frozen=True)
class Gate:
    """The ODE Transformer's learned RK2 gate: ``g = sigmoid(w . [k1; k2] + b)`` per token
    (``Linear(2d -> 1)``), weights ``(g, 1 - g)``. ``w`` is drawn from ``seed``; ``bias`` 0 is
    the released initialisation (zero bias), another value a trained gate."""

    bias: float = 0.0
    scale: float = 1.0
    seed: int = 0

    def __post_init__(self):
        check_real("bias", self.bias)
        check_real("scale", self.scale)
        check_int("seed", self.seed, lo=0)

    def __call__(self, k1: torch.Tensor, k2: torch.Tensor) -> torch.Tensor:
        d = k1.shape[-1]
        gen = torch.Generator().manual_seed(self.seed)
        w = self.scale * torch.randn(2 * d, generator=gen, dtype=torch.float64) / math.sqrt(d)
        z = torch.cat([k1, k2], dim=-1) @ w.to(k1.dtype) + self.bias
        return torch.sigmoid(z)[..., None]


@dataclass(frozen=True)
class RKBlock:
    """``y+ = y + sum_i b_i k_i``, ``k_i = F(y + sum_(j<i) a_ij k_j)``: an explicit RK tableau on
    the layer increment. ``gate``: b = (g, 1 - g) from a :class:`Gate`; ``literal``: the
    released code's form, ``k_i = L(stage input)`` with ``L = id + F`` (the layer's output
    with its skip, not its increment)."""

    name: str
    label: str
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    inner: str = "sequential"
    claimed: str = ""
    source: str = ""
    gate: Gate | None = None
    literal: bool = False
    note: str = ""

    def c(self) -> tuple[float, ...]:
        return tuple(sum(row) for row in self.a)

    def step(self, fields: dict, x, t: float, h: float, method="euler") -> torch.Tensor:
        ks = []
        for i, row in enumerate(self.a):
            u = x
            for a_ij, k in zip(row, ks):
                if a_ij:
                    u = u + a_ij * k
            k = increment(self.inner, fields, u, t + self.c()[i] * h, h, method)
            ks.append(u + k if self.literal else k)
        if self.gate is not None:
            g = self.gate(ks[0], ks[1])
            return x + g * ks[0] + (1 - g) * ks[1]
        out = x
        for b_i, k in zip(self.b, ks):
            out = out + b_i * k
        return out


@dataclass(frozen=True)
class PECE:
    """A textbook predictor–corrector for reference (not a published block): predict with
    ``predictor`` (an :class:`RKBlock`), correct with the trapezoid rule (Adams–Moulton 2),
    ``y+ = y + (F(y) + F(P)) / 2``."""

    name: str
    label: str
    predictor: RKBlock
    inner: str = "parallel"
    claimed: str = ""
    source: str = ""
    note: str = ""

    def step(self, fields: dict, x, t: float, h: float, method="euler") -> torch.Tensor:
        p = self.predictor.step(fields, x, t, h, method)
        f0 = increment(self.inner, fields, x, t, h, method)
        f1 = increment(self.inner, fields, p, t + h, h, method)
        return x + 0.5 * (f0 + f1)


@dataclass(frozen=True)
class HistoryCorrector:
    """PCformer's coded corrector at its initialisation, LayerNorms left out: with states
    ``S_0 = x0`` (the embedding), ``S_1..S_(i-1)`` and the prediction ``P_i`` of layer i,
    ``z_i = mean(S_0, .., S_(i-1), P_i)``, ``S_i = z_i + F(z_i)`` and ``x_(i+1) = mean(S_0, ..,
    S_i)`` (the learned lower-triangular mixing matrices are row-normalised ones at init)."""

    name: str
    label: str
    predictor: RKBlock
    claimed: str = ""
    source: str = ""
    note: str = ""
    inner: str = "sequential"

    def integrate(self, fields: dict, x0, t0: float, h: float, n: int, method="euler"):
        states, x = [x0], x0
        for i in range(n):
            p = self.predictor.step(fields, x, t0 + i * h, h, method)
            z = (sum(states) + p) / (len(states) + 1)
            states.append(z + increment(self.inner, fields, z, t0 + i * h, h, method))
            x = sum(states) / len(states)
        return x


def _classical(name, label, a, b, inner, claimed, source, **kw) -> RKBlock:
    return RKBlock(name, label, a, b, inner, claimed, source, **kw)


HEUN = ((), (1.0,))
RK4_A = ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0))
RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)
RK3_CODE_A = ((), (0.5,), (0.0, 1.0))            # stage 3 at y + k2 (Kutta: y - k1 + 2 k2)
RK3_KUTTA_A = ((), (0.5,), (-1.0, 2.0))
RK3_B = (1 / 6, 2 / 3, 1 / 6)


def _ema(n: int, a: float = 0.5) -> tuple[float, ...]:
    return tuple(a * (1 - a) ** (n - 1 - i) for i in range(n))


ODE_T_SRC = f"{ODE_T}, fairseq/models/ode_transformer.py"
PC_SRC = f"{PCFORMER}, fairseq-NMT/models/PCformer.py"
BLOCKS = {b.name: b for b in [
    _classical("ode-t-rk2", "ODE Transformer RK2 block (paper form)", HEUN, (0.5, 0.5),
               "sequential", "RK2: second order", f"{ODE_T_SRC} lines 398-399, 414-416"),
    _classical("ode-t-rk2-gated", "ODE Transformer RK2, learned gate at init (bias 0)", HEUN,
               (0.5, 0.5), "sequential", "RK2 with learned coefficients",
               f"{ODE_T_SRC} lines 327-329, 411-413, 904-909", gate=Gate(0.0)),
    _classical("ode-t-rk2-gated-b", "ODE Transformer RK2, a trained gate (bias 0.5)", HEUN,
               (0.5, 0.5), "sequential", "RK2 with learned coefficients",
               f"{ODE_T_SRC} lines 327-329, 411-413", gate=Gate(0.5)),
    _classical("ode-t-rk4", "ODE Transformer RK4 block (paper form)", RK4_A, RK4_B,
               "sequential", "RK4: fourth order", f"{ODE_T_SRC} lines 388-392, 400-403"),
    _classical("ode-t-rk3-code", "ODE Transformer RK3 as coded (stage 3 at y + k2)",
               RK3_CODE_A, RK3_B, "sequential", "RK3: third order",
               f"{ODE_T_SRC} lines 393-397, 406-408"),
    _classical("ode-t-rk2-literal", "ODE Transformer RK2 as coded (stages store y + F)", HEUN,
               (0.5, 0.5), "sequential", "RK2: second order",
               f"{ODE_T_SRC} lines 385-387, 398-399, 414-416, 734-749", literal=True),
    _classical("ode-t-rk2-init", "ODE Transformer RK2 'initialization' (learned weights at "
               "their init 1, 1)", HEUN, (1.0, 1.0), "sequential", "RK2 with learned weights",
               f"{ODE_T_SRC} lines 330-332, 417-419"),
    _classical("pcformer-ema-rk2", "PCformer RK2-EMA predictor (a = 0.5, as initialised)",
               HEUN, _ema(2), "sequential", "high-order predictor",
               f"{PC_SRC} lines 426-432, 565-569"),
    _classical("pcformer-ema-rk4", "PCformer RK4-EMA predictor (a = 0.5)", RK4_A, _ema(4),
               "sequential", "4th-order predictor", f"{PC_SRC} lines 553-558"),
    # the same outer methods on the parallel layer: the classical orders are kept
    _classical("rk2-parallel", "Heun (RK2) on the parallel layer", HEUN, (0.5, 0.5),
               "parallel", "RK2", "splitnet"),
    _classical("rk2-gated-parallel", "RK2, learned gate at init, on the parallel layer", HEUN,
               (0.5, 0.5), "parallel", "RK2 with learned coefficients", "splitnet",
               gate=Gate(0.0)),
    _classical("rk2-gated-b-parallel", "RK2, a trained gate (bias 0.5), on the parallel layer",
               HEUN, (0.5, 0.5), "parallel", "RK2 with learned coefficients", "splitnet",
               gate=Gate(0.5)),
    _classical("rk3-code-parallel", "the coded RK3 tableau on the parallel layer", RK3_CODE_A,
               RK3_B, "parallel", "RK3", "splitnet"),
    _classical("rk3-kutta-parallel", "Kutta's RK3 on the parallel layer", RK3_KUTTA_A, RK3_B,
               "parallel", "RK3", "splitnet"),
    _classical("rk4-parallel", "classical RK4 on the parallel layer", RK4_A, RK4_B,
               "parallel", "RK4", "splitnet"),
]}
BLOCKS["pece-parallel"] = PECE("pece-parallel", "textbook PECE: Heun + trapezoid, parallel "
                               "layer (reference)", BLOCKS["rk2-parallel"], claimed="2",
                               source="textbook (not a published block)")
BLOCKS["pcformer-corrector"] = HistoryCorrector(
    "pcformer-corrector", "PCformer corrector as coded (mixing matrices at init, no LN), "
    "RK2-EMA predictor", BLOCKS["pcformer-ema-rk2"], claimed="multistep corrector",
    source=f"{PCFORMER}, pcformer_lm/layer_history.py lines 79-137")


# ---------------------------------------------------------------------------------------------
# measurement


class LinearFlow(SubflowMethod):
    """The exact sub-flow of a linear field ``f(t, x) = x M^T`` (or a sum of them):
    ``x expm(dt M)^T`` (:func:`splitnet.order.check.expm`, float64). The field carries
    ``matrix``."""

    name, order, evals = "linear-exact", None, 1

    def __call__(self, f, t, x, dt):
        parts = getattr(f, "fields", [f])
        m = sum(p.matrix for p in parts)
        e = torch.as_tensor(expm(float(dt) * m), dtype=x.dtype)
        return x @ e.T


class MatrixField:
    """``f(t, x) = x M^T``: a linear field on row states."""

    mixes_tokens = False

    def __init__(self, matrix: np.ndarray):
        self.matrix = np.asarray(matrix, dtype=np.float64)
        self._m = torch.as_tensor(self.matrix)

    def __call__(self, t, x):
        return x @ self._m.to(x.dtype).T


def _is_multistep(block) -> bool:
    return hasattr(block, "integrate") and not hasattr(block, "step")


@dataclass
class Measured:
    """Errors and the fitted order (slope, minus 1 for local errors)."""

    step_sizes: np.ndarray
    errors: np.ndarray
    order: float
    tail: float
    kind: str
    notes: list = field(default_factory=list)


def local_order(block, fields: dict, x0: torch.Tensor, step_sizes: Sequence[float] =
                (0.2, 0.1, 0.05, 0.025), method="euler", floor: float = 1e-11) -> Measured:
    """Local errors ``||block.step(h) - exact flow of D + C over h||`` from ``x0`` (torchdiffeq
    at rtol 1e-13) and the order: the log-log slope over the errors above ``floor``, minus 1
    (``tail``: over the last three)."""
    from .convergence import reference_solution, step_size_list

    hs = step_size_list(step_sizes)
    floor = check_real("floor", floor, lo=0.0)
    errs = []
    with torch.no_grad():
        for h in hs:
            ref = reference_solution(x0=x0, times=torch.tensor([0.0, h], dtype=x0.dtype),
                                     fields=fields)[-1]
            errs.append(float((block.step(fields, x0, 0.0, float(h), method) - ref).norm()))
    return _fit(hs, np.asarray(errs), floor, "local")


def _fit(hs, errs, floor, kind) -> Measured:
    ok = np.isfinite(errs) & (errs > floor)
    if ok.sum() < 2:
        return Measured(hs, errs, float("nan"), float("nan"), kind)
    lh, le = np.log(hs[ok]), np.log(errs[ok])
    slope = float(np.polyfit(lh, le, 1)[0])
    tail = float(np.polyfit(lh[-3:], le[-3:], 1)[0]) if ok.sum() >= 3 else slope
    shift = 1.0 if kind == "local" else 0.0
    return Measured(hs, errs, slope - shift, tail - shift, kind)


def matrix_fields(seed: int = 0, dim: int = 6) -> dict:
    a, b = random_matrices(dim, seed)
    return {DIFFUSION: MatrixField(a), CONVECTION: MatrixField(b)}


def matrix_order(block, method="exact", seed: int = 0) -> Measured:
    """The order of a one-step block on random non-commuting 6x6 matrices of norm 1 (the
    fields ``D x = A x``, ``C x = B x``): local error of the block applied to the unit states
    against ``expm(h (A + B))``, at adaptive step sizes whose errors lie in [1e-13, 1e-6]
    (:func:`splitnet.order.fit.adaptive_errors`); ``method="exact"`` gives the stages exact linear
    sub-flows (:class:`LinearFlow`), ``"euler"`` Euler sub-steps."""
    fields = matrix_fields(seed)
    m = LinearFlow() if method == "exact" else get_method(method)
    total = fields[DIFFUSION].matrix + fields[CONVECTION].matrix
    eye = torch.eye(total.shape[0], dtype=torch.float64)

    def error(h: float) -> float:
        got = block.step(fields, eye, 0.0, h, m).numpy()
        return float(np.linalg.norm(got - expm(h * total).T, 2))

    hs, errs = adaptive_errors(error)
    slope, used = window_fit(hs, errs)
    if used.sum() < 3:
        return Measured(hs, errs, float("nan"), float("nan"), "local",
                        ["undetermined: fewer than 3 errors in [1e-13, 1e-6]"])
    idx = np.flatnonzero(used)
    last = idx[np.argsort(hs[idx])[:3]]
    tail = float(np.polyfit(np.log(hs[last]), np.log(errs[last]), 1)[0])
    return Measured(hs, errs, slope - 1.0, tail - 1.0, "local")


def _step_counts(steps, most: int) -> tuple[int, ...]:
    """At least two distinct step counts, each an int in [1, most]."""
    if isinstance(steps, (str, bytes)) or not hasattr(steps, "__len__"):
        raise TypeError(f"steps must be a list of step counts, got {steps!r}")
    out = tuple(check_int("steps", n) for n in steps)
    if len(set(out)) < 2:
        raise ValueError(f"steps needs at least two distinct counts, got {steps!r}")
    big = [n for n in out if n > most]
    if big:
        raise ValueError(f"steps must be <= {most:,}, got {big[0]:,}")
    return out


def global_order(block, fields: dict, x0: torch.Tensor, steps: Sequence[int] = (4, 8, 16, 32),
                 method="euler", t_final: float = 1.0, floor: float = 1e-11) -> Measured:
    """Global errors at ``t_final`` after n steps of ``h = t_final / n`` (a multistep block's
    ``integrate``, else n calls of ``step``) and their slope (the order; about 0 for an
    inconsistent block: the error does not shrink)."""
    from .convergence import MAX_STEPS, reference_solution

    steps = _step_counts(steps, MAX_STEPS)
    t_final = check_real("t_final", t_final, lo=0.0, lo_open=True)
    floor = check_real("floor", floor, lo=0.0)
    with torch.no_grad():
        ref = reference_solution(x0=x0, times=torch.tensor([0.0, t_final], dtype=x0.dtype),
                                 fields=fields)[-1]
        errs = []
        for n in steps:
            h = t_final / n
            if _is_multistep(block):
                x = block.integrate(fields, x0, 0.0, h, n, method)
            else:
                x = x0
                for i in range(n):
                    x = block.step(fields, x, i * h, h, method)
            errs.append(float((x - ref).norm()))
    hs = t_final / np.asarray(steps, dtype=float)
    return _fit(hs, np.asarray(errs), floor, "global")


__all__ = ["BLOCKS", "HEUN", "INNER", "ODE_T", "ODE_T_SRC", "PCFORMER", "PC_SRC", "PECE",
           "RK3_B", "RK3_CODE_A", "RK3_KUTTA_A", "RK4_A", "RK4_B", "Gate", "HistoryCorrector",
           "LinearFlow", "MatrixField", "Measured", "RKBlock", "global_order", "increment",
           "local_order", "matrix_fields", "matrix_order"]
