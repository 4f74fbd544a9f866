"""Reference solutions, convergence studies, the Lie bracket, and work–precision studies.

Conventions (see ``docs/theory.md``):

* local error = ``||exact(t0 + h) - scheme.step(x0, h)||`` after one step from the same state
  (as in the Macaron paper); global error = the same at a fixed final time after T/h steps.
  Norm: the Euclidean norm of the whole state tensor.
* Lie–Trotter with D applied first: ``exact - scheme = (h^2/2) [D, C](x) + O(h^3)`` with the
  vector-field bracket ``[D, C] = D'C - C'D`` (:func:`lie_bracket`).
* Fitted order = least-squares slope of log(error) against log(h) over the points above the
  round-off / tolerance floor whose errors still decrease (largest h first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from .check import fit_slope
from .flows import (
    CountingField,
    _small_problem_threads,
    check_state,
    check_step_size,
    default_tolerances,
    get_method,
    n_steps_for,
)
from .schemes import CONVECTION, DIFFUSION, resolve

# ---------------------------------------------------------------------------------------------
# Reference

def _check_times(times, like: torch.Tensor) -> torch.Tensor:
    if not isinstance(times, torch.Tensor):
        raise TypeError(f"times must be a 1-D floating torch.Tensor, got {type(times).__name__}")
    if not times.is_floating_point():
        raise TypeError(f"times must be a floating tensor, got dtype {times.dtype} "
                        f"(use e.g. torch.tensor([0.0, h]))")
    if times.dim() != 1 or times.numel() < 2:
        raise ValueError(f"times must be 1-D with at least 2 entries, got shape {tuple(times.shape)}")
    d = torch.diff(times)
    if not ((d > 0).all() or (d < 0).all()):
        raise ValueError("times must be strictly increasing (or strictly decreasing)")
    return times.to(dtype=like.dtype, device=like.device)


def reference_solution(diffusion, convection, x0, times, rtol: float | None = None,
                       atol: float | None = None, solver: str = "dopri5") -> torch.Tensor:
    """The unsplit ODE ``dx/dt = D(t, x) + C(t, x)`` solved by torchdiffeq at tight tolerances
    (float64: rtol 1e-13, atol 1e-15 by default). Returns ``(len(times), *x0.shape)``."""
    from torchdiffeq import odeint

    check_state(x0, "x0")
    times = _check_times(times, x0)
    for name, f in ((DIFFUSION, diffusion), (CONVECTION, convection)):
        if not callable(f):
            raise TypeError(f"{name} field must be callable f(t, x), got {type(f).__name__}")
    r, a = default_tolerances(x0.dtype)

    from .flows import _CheckedField

    diffusion, convection = _CheckedField(diffusion, DIFFUSION), _CheckedField(convection,
                                                                              CONVECTION)

    def rhs(t, x):
        return diffusion(t, x) + convection(t, x)

    with _small_problem_threads(x0):
        return odeint(rhs, x0, times, rtol=rtol or r, atol=atol or a, method=solver)


# ---------------------------------------------------------------------------------------------
# Lie bracket

def _jvp(f, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``f'(x) v`` by forward-mode AD. CPU scaled-dot-product attention kernels have no
    forward-mode derivative, so on NotImplementedError it retries with the math kernel (the
    same function, composed of differentiable ops), then by double backward."""
    from torch.func import jvp

    try:
        return jvp(f, (x,), (v,))[1]
    except NotImplementedError:
        pass
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel([SDPBackend.MATH]):
            return jvp(f, (x,), (v,))[1]
    except (NotImplementedError, ImportError, RuntimeError):
        return torch.autograd.functional.jvp(f, x, v)[1]


def lie_bracket(F, G, x: torch.Tensor, t: float = 0.0) -> torch.Tensor:
    """``[F, G](x) = F'(x) G(x) - G'(x) F(x)``, by two Jacobian–vector products
    (``torch.func.jvp``; no Jacobian is formed).

    Sign convention: for Lie–Trotter with F applied first,
    ``exact(h) - scheme(h) = (h^2/2) [F, G](x) + O(h^3)``."""
    check_state(x, "x")
    for name, f in (("F", F), ("G", G)):
        if not callable(f):
            raise TypeError(f"{name} must be a callable field f(t, x), got {type(f).__name__}")
    from .flows import _CheckedField

    with _small_problem_threads(x):
        f_x, g_x = _CheckedField(F, "F")(t, x), _CheckedField(G, "G")(t, x)
        fg = _jvp(lambda y: F(t, y), x, g_x)
        gf = _jvp(lambda y: G(t, y), x, f_x)
    return fg - gf


# ---------------------------------------------------------------------------------------------
# Convergence study

@dataclass
class ConvergenceResult:
    scheme: str
    method: str
    kind: str
    step_sizes: np.ndarray
    errors: np.ndarray
    order: float
    expected_order: int
    used: np.ndarray
    floor: float
    evaluations: dict = field(default_factory=dict)   # field -> array of evaluations per h

    @property
    def ok(self) -> bool:
        return bool(np.isfinite(self.order) and abs(self.order - self.expected_order) <= 0.3)

    def table(self) -> str:
        lines = [(f"{self.scheme} | method={self.method} | {self.kind} error | measured order "
                 f"{self.order:.2f}, expected {self.expected_order}"),
                 f"{'h':>10} {'error':>12} {'ratio':>8} {'slope':>7}  evals(D,C)  fitted"]
        prev = None
        for i, (h, e) in enumerate(zip(self.step_sizes, self.errors)):
            ratio = slope = ""
            if prev is not None and e > 0 and prev[1] > 0:
                ratio = f"{prev[1] / e:8.2f}"
                slope = f"{math.log(prev[1] / e) / math.log(prev[0] / h):7.2f}"
            ev = ""
            if self.evaluations:
                ev = f"{int(self.evaluations[DIFFUSION][i])},{int(self.evaluations[CONVECTION][i])}"
            lines.append(f"{h:10.5g} {e:12.4e} {ratio:>8} {slope:>7}  {ev:>10}  "
                         f"{'yes' if self.used[i] else 'no'}")
            prev = (h, e)
        return "\n".join(lines)

    def plot(self, path) -> None:
        """Write a log-log PNG of error against h with the fitted and the theoretical slope."""
        plot_convergence([self], path)


def convergence_study(scheme, diffusion, convection, x0, step_sizes: Sequence[float],
                      kind: str = "local", method: str = "exact", t0: float = 0.0,
                      t_final: float | None = None, floor: float | None = None,
                      progress: bool = False, **options) -> ConvergenceResult:
    """Errors of ``scheme`` against :func:`reference_solution` for each step size, and the fitted
    log-log slope.

    kind="local": one step from ``x0`` at ``t0``; expected slope ``effective_order(method) + 1``.
    kind="global": ``(t_final - t0) / h`` steps (``t_final`` default ``t0 + 1``); expected slope
    ``effective_order(method)``. ``floor`` (default ``10 * rtol * max(1, ||x0||)`` with the
    reference's rtol) excludes points that round-off or solver tolerance dominate.
    """
    scheme = resolve(scheme)
    if kind not in ("local", "global"):
        raise ValueError(f"kind must be 'local' or 'global', got {kind!r}")
    get_method(method, **options)
    check_state(x0, "x0")
    hs = np.asarray([check_step_size(h) for h in step_sizes], dtype=float)
    if len(hs) < 2 or len(set(hs.tolist())) != len(hs):
        raise ValueError("step_sizes needs at least two distinct values")
    ref_opts = {k: options[k] for k in ("rtol", "atol") if k in options}
    rtol = ref_opts.get("rtol") or default_tolerances(x0.dtype)[0]
    if floor is None:
        floor = 10.0 * rtol * max(1.0, float(x0.norm()))
    cd, cc = CountingField(diffusion, DIFFUSION), CountingField(convection, CONVECTION)
    errors, ev_d, ev_c = [], [], []
    if kind == "global":
        t_final = t0 + 1.0 if t_final is None else float(t_final)
        for h in hs:
            n_steps_for((t0, t_final), h)   # every h must divide the interval: fail early
        ref_end = reference_solution(diffusion, convection, x0,
                                     torch.tensor([t0, t_final], dtype=x0.dtype), **ref_opts)[-1]
    it = hs
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(hs, desc=f"{scheme.name}/{method}/{kind}", unit="h", leave=False)
    with torch.no_grad(), _small_problem_threads(x0):
        for h in it:
            cd.count = cc.count = 0
            if kind == "local":
                ref = reference_solution(diffusion, convection, x0,
                                         torch.tensor([t0, t0 + h], dtype=x0.dtype), **ref_opts)[-1]
                x = scheme.step(cd, cc, x0, t=t0, step_size=h, method=method, **options)
            else:
                ref = ref_end
                x = scheme.integrate(cd, cc, x0, (t0, t_final), h, method=method, **options)[-1]
            errors.append(float((x - ref).norm()))
            ev_d.append(cd.count)
            ev_c.append(cc.count)
    errs = np.asarray(errors)
    slope, used = fit_slope(hs, errs, floor)
    eff = scheme.effective_order(method)
    return ConvergenceResult(scheme.name, method, kind, hs, errs, slope,
                             eff + 1 if kind == "local" else eff, used, floor,
                             {DIFFUSION: np.asarray(ev_d), CONVECTION: np.asarray(ev_c)})


def plot_convergence(results: Sequence[ConvergenceResult], path, title: str | None = None) -> None:
    """Error against h for several results on one log-log plot, with dotted theory slopes."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5), dpi=120)
    for i, r in enumerate(results):
        color = f"C{i % 10}"
        ax.loglog(r.step_sizes, r.errors, "o-", color=color,
                  label=f"{r.scheme} ({r.method}): {r.order:.2f} (theory {r.expected_order})")
        ax.loglog(r.step_sizes[~r.used], r.errors[~r.used], "x", color="k", ms=8)
        # Theory slope through the first fitted point.
        if r.used.any():
            j = np.flatnonzero(r.used)[0]
            hs = r.step_sizes
            ax.loglog(hs, r.errors[j] * (hs / hs[j]) ** r.expected_order, ":", color=color,
                      lw=1)
    # Ticks at the step sizes studied (few, and the ones a reader looks for).
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    hs_all = sorted({float(h) for r in results for h in r.step_sizes})
    ax.xaxis.set_major_locator(FixedLocator(hs_all))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("step size h")
    ax.set_ylabel(f"{results[0].kind} error  ||exact - scheme||")
    ax.set_title(title or f"{results[0].kind} error; dotted: theoretical slope; x: not fitted")
    ax.grid(True, which="both", alpha=0.3)
    # Outside the axes: inside, some curve is always covered.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _readable_log_ticks(axis) -> None:
    """Labels at 1, 2, 5 x 10^k in plain numbers, no minor labels (matplotlib's default minor
    labels overlap on short log ranges)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _save(fig, path) -> None:
    """Write atomically: a crash never leaves a half-written PNG."""
    from ._io import atomic_savefig

    atomic_savefig(fig, path, close=False)


# ---------------------------------------------------------------------------------------------
# Work–precision

@dataclass
class WorkPrecisionPoint:
    scheme: str
    method: str
    step_size: float
    evaluations: int          # field evaluations (D + C) over the whole interval
    error: float              # global error at t_final


def work_precision(schemes, methods, diffusion, convection, x0, step_sizes, t0: float = 0.0,
                   t_final: float = 1.0, progress: bool = True) -> list[WorkPrecisionPoint]:
    """Global error against the number of field evaluations, for every scheme x method.
    ``exact`` is excluded (its cost is the adaptive solver's, not the scheme's)."""
    points = []
    combos = [(resolve(s), m) for s in schemes for m in methods]
    for sch, m in combos:
        if get_method(m).order is None:
            raise ValueError("work_precision compares fixed sub-step methods; 'exact' has no "
                             "fixed cost")
    it = combos
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(combos, desc="work-precision", unit="run")
    for sch, m in it:
        r = convergence_study(sch, diffusion, convection, x0, step_sizes, kind="global",
                              method=m, t0=t0, t_final=t_final)
        for i, h in enumerate(r.step_sizes):
            ev = int(r.evaluations[DIFFUSION][i] + r.evaluations[CONVECTION][i])
            points.append(WorkPrecisionPoint(sch.name, m, float(h), ev, float(r.errors[i])))
    return points


def plot_work_precision(points: Sequence[WorkPrecisionPoint], path, title: str | None = None):
    import matplotlib.pyplot as plt

    schemes = list(dict.fromkeys(p.scheme for p in points))
    methods = list(dict.fromkeys(p.method for p in points))
    markers = "os^Dv<>p*h"
    styles = ["-", "--", ":", "-."]
    fig, ax = plt.subplots(figsize=(11, 6.5), dpi=120)
    for i, s in enumerate(schemes):
        for j, m in enumerate(methods):
            pts = sorted((p for p in points if p.scheme == s and p.method == m),
                         key=lambda p: p.evaluations)
            if not pts:
                continue
            ax.loglog([p.evaluations for p in pts], [max(p.error, 1e-17) for p in pts],
                      marker=markers[j % len(markers)], ls=styles[j % len(styles)],
                      color=f"C{i % 10}", label=f"{s} / {m}", ms=4)
    _readable_log_ticks(ax.xaxis)
    ax.set_xlabel("field evaluations (attention + feed-forward) over [0, T]")
    ax.set_ylabel("global error at T")
    ax.set_title(title or "work–precision: lower-left is better")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# The built-in particle system

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
    from .fields import Attention, FeedForward

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


# ---------------------------------------------------------------------------------------------
# The network against its ODE (implemented in gap.py, next to the model code it reads)

def discretization_gap(model, idx, **options):
    """How far each layer of a SplitTransformer is from the ODE of its own fields; see
    :func:`splitnet.gap.discretization_gap`."""
    from .gap import discretization_gap as _gap

    return _gap(model, idx, **options)
