"""Reference solutions, convergence studies, the Lie bracket, and work–precision studies;
serves :func:`~splitnet.analyses.gap.discretization_gap` (a network against the flow of its own
fields)
and :func:`~splitnet.analyses.refine.rediscretize` (a network's own fields under another
integrator).

Conventions (see ``docs/theory.md``):

* local error = ``||exact(t0 + h) - scheme.step(x0, h)||`` after one step from the same state
  (as in the Macaron paper); global error = the same at a fixed final time after T/h steps.
  Norm: the Euclidean norm of the whole state tensor.
* Lie–Trotter with D applied first: ``exact - scheme = (h^2/2) [D, C](x) + O(h^3)`` with the
  vector-field bracket ``[D, C] = D'C - C'D`` (:func:`lie_bracket`).
* "Order" is the classical order p of a method. A fitted slope = least-squares slope of
  log(error) against log(h) over the points above the round-off / tolerance floor whose errors
  still decrease (largest h first): the *local slope* (theory p + 1) or *global slope* (p).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torchdiffeq._impl.odeint import SOLVERS as _TORCHDIFFEQ
from torchdiffeq._impl.solvers import FixedGridODESolver as _Fixed

from ..configs.options import check_flag, check_real
from ..integrators import arrays
from ..integrators.flows import Flow, is_flow, n_steps_for
from ..integrators.schemes import resolve
from ..integrators.subflows import default_tolerances, get_method
from ..integrators.validate import (
    CheckedField,
    CountingField,
    check_callable,
    check_state,
    check_step_size,
    check_time,
    small_problem_threads,
)
from ..order.fit import fit_slope
from ..stagelists.stages import CONVECTION, DIFFUSION, EXACT_ORDER, STRING_LETTER, pair_defects

# ---------------------------------------------------------------------------------------------
# Reference

def _check_times(times, like: torch.Tensor) -> torch.Tensor:
    if not isinstance(times, torch.Tensor):
        raise TypeError(f"times must be a 1-D floating torch.Tensor, got {type(times).__name__}")
    if not times.is_floating_point():
        raise TypeError(f"times must be a floating tensor, got dtype {times.dtype} "
                        f"(use e.g. torch.tensor([0.0, h]))")
    if times.dim() != 1 or times.numel() < 2:
        raise ValueError(f"times must be 1-D with at least 2 entries, got shape "
                         f"{tuple(times.shape)}")
    if not torch.isfinite(times).all():
        raise ValueError(f"times must be finite, got {times.tolist()}")
    d = torch.diff(times)
    if not ((d > 0).all() or (d < 0).all()):
        raise ValueError("times must be strictly increasing (or strictly decreasing)")
    return times.to(dtype=like.dtype, device=like.device)


def _given_fields(diffusion, convection, fields, flows=None) -> dict:
    """field name -> callable from the two-field keywords and/or ``fields`` (each once), and
    the fields given by their flow (``flows``: field name -> ``phi(t, x, dt)``, each a
    :class:`~splitnet.integrators.flows.Flow`)."""
    given = {} if fields is None else dict(fields)
    if fields is not None and not isinstance(fields, dict):
        raise TypeError(f"fields must be a dict of field name -> callable f(t, x), got "
                        f"{type(fields).__name__}")
    for name, f in ((DIFFUSION, diffusion), (CONVECTION, convection)):
        if f is not None:
            if name in given:
                raise ValueError(f"the {name} field is given twice ({name}= and fields=)")
            given[name] = f
    if flows is not None:
        if not isinstance(flows, dict):
            raise TypeError(f"flows must be a dict of field name -> callable phi(t, x, dt), "
                            f"got {type(flows).__name__}")
        for name, phi in flows.items():
            if name in given:
                raise ValueError(f"the {name} field is given twice (in fields= and flows=); "
                                 f"give its vector field or its flow")
            given[name] = Flow(phi, name)
    if not given:
        raise TypeError("give the fields: diffusion= and convection=, or fields={name: f}")
    for name, f in given.items():
        check_callable(f, name)
    return given


# torchdiffeq's solvers, from the registry its odeint reads (fixed-grid: a step size; adaptive:
# tolerances; scipy_solver needs scipy's own method name, so it is not offered)
FIXED_SOLVERS = tuple(n for n, c in _TORCHDIFFEQ.items() if issubclass(c, _Fixed))
ADAPTIVE_SOLVERS = tuple(n for n, c in _TORCHDIFFEQ.items()
                         if not issubclass(c, _Fixed) and n != "scipy_solver")
# adaptive steps between two output times at most: more (1e9 time units, a tolerance below
# round-off) is refused, not waited for; the particle system takes ~80 per unit at rtol 1e-13
MAX_SOLVER_STEPS = 20_000


def check_solver(solver, rtol=None, atol=None, adaptive: bool = True) -> None:
    """``solver`` one of torchdiffeq's (an adaptive one when ``adaptive``), ``rtol`` and
    ``atol`` None or positive finite numbers (the ``exact`` method's own check); ValueError
    naming the one that is not (a zero tolerance is not 'the default')."""
    get_method("exact", rtol=rtol, atol=atol)
    names = ADAPTIVE_SOLVERS if adaptive else ADAPTIVE_SOLVERS + FIXED_SOLVERS
    if not isinstance(solver, str) or solver not in names:
        raise ValueError(f"solver must be one of {', '.join(names)}, got {solver!r}")


def odeint_bounded(f, x0: torch.Tensor, times: torch.Tensor, solver: str = "dopri5",
                   rtol: float | None = None, atol: float | None = None, **kwargs):
    """torchdiffeq's ``odeint`` with at most :data:`MAX_SOLVER_STEPS` adaptive steps between
    output times, its own failures (too many steps, a step size that underflowed) as one
    ValueError saying what happened instead of a bare AssertionError or an endless loop."""
    from torchdiffeq import odeint

    if solver in ADAPTIVE_SOLVERS:
        r, a = default_tolerances(x0.dtype)
        kwargs.update(rtol=rtol or r, atol=atol or a,
                      options={**kwargs.get("options", {}), "max_num_steps": MAX_SOLVER_STEPS})
    try:
        return odeint(f, x0, times, method=solver, **kwargs)
    except AssertionError as e:
        span = f"[{float(times[0]):g}, {float(times[-1]):g}]"
        if "max_num_steps" in str(e):
            raise ValueError(f"the ODE solver ({solver}) needs more than {MAX_SOLVER_STEPS:,} "
                             f"steps over {span}: shorten the interval, ask for times in "
                             f"between or loosen the tolerances") from None
        if "underflow" in str(e):
            raise ValueError(f"the ODE solver's ({solver}) step size underflowed over {span}: "
                             f"the solution blows up or the fields are not smooth there") \
                from None
        raise


def reference_solution(diffusion=None, convection=None, x0=None, times=None,
                       rtol: float | None = None, atol: float | None = None,
                       solver: str = "dopri5", *, fields=None) -> torch.Tensor:
    """The unsplit ODE ``dx/dt = sum_f F_f(t, x)`` (two-field form ``D(t, x) + C(t, x)``, or
    ``fields={"diffusion": D, "cross": X, "convection": C}``) solved by torchdiffeq at tight
    tolerances (float64: rtol 1e-13, atol 1e-15 by default) with an adaptive ``solver``, in
    at most :data:`MAX_SOLVER_STEPS` steps between two times. Returns
    ``(len(times), *x0.shape)``."""
    if x0 is None or times is None:
        raise TypeError("reference_solution() needs x0 and times")
    check_state(x0, "x0")
    times = _check_times(times, x0)
    check_solver(solver, rtol, atol)
    checked = [CheckedField(f, name) for name, f in
               _given_fields(diffusion, convection, fields).items()]

    def rhs(t, x):
        out = checked[0](t, x)
        for f in checked[1:]:
            out = out + f(t, x)
        return out

    with small_problem_threads(x0):
        return odeint_bounded(rhs, x0, times, solver, rtol, atol)


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
    t = check_time(t)
    for name, f in (("F", F), ("G", G)):
        if not callable(f):
            raise TypeError(f"{name} must be a callable field f(t, x), got {type(f).__name__}")
    with small_problem_threads(x):
        f_x, g_x = CheckedField(F, "F")(t, x), CheckedField(G, "G")(t, x)
        fg = _jvp(lambda y: F(t, y), x, g_x)
        gf = _jvp(lambda y: G(t, y), x, f_x)
    return fg - gf


def leading_term(scheme, x: torch.Tensor, t: float = 0.0, *, fields) -> torch.Tensor:
    """The ``h^2`` term of the local error of a consistent scheme with exact sub-flows:
    ``exact(h) - step(h) = h^2 E(x) + O(h^3)`` with

        E = -1/2 sum_(a<b) w_ab [F_a, F_b](x),   w_ab = S_ba - S_ab

    (:func:`splitnet.stagelists.stages.pair_defects`; ``S_ab`` = sum of ``a_i b_j`` over a-stages
    before b-stages) and the vector-field bracket of :func:`lie_bracket`. Zero for a second-order
    scheme. Lie–Trotter with D first: ``E = 1/2 [D, C]``; the seed's Macaron decoder ``(c/2, d,
    x, c/2)``: ``E = 1/2 [D, X]`` -- its self- and cross-attention are a Lie–Trotter pair."""
    scheme = resolve(scheme)
    check_state(x, "x")
    t = check_time(t)
    given = _given_fields(None, None, fields)
    out = torch.zeros_like(x)
    for (a, b), w in pair_defects(scheme.stages).items():
        if w != 0.0:
            out = out - 0.5 * w * lie_bracket(given[a], given[b], x, t)
    return out


# ---------------------------------------------------------------------------------------------
# Convergence study

MAX_STEPS = 100_000     # steps of one global run at most (each a pass over every stage)


def step_size_list(step_sizes, what: str = "step_sizes", least: int = 2) -> np.ndarray:
    """At least ``least`` distinct step sizes (none twice), each a finite number > 0 (a list,
    tuple or array; not a string), as a float array in the given order; ValueError naming the
    problem."""
    if isinstance(step_sizes, (str, bytes)) or not hasattr(step_sizes, "__len__"):
        raise TypeError(f"{what} must be a list of step sizes, got {step_sizes!r}")
    hs = np.asarray([check_step_size(h) for h in step_sizes], dtype=float)
    if len(hs) < least or len(set(hs.tolist())) != len(hs):
        raise ValueError(f"{what} needs at least {'two' if least == 2 else least} distinct "
                         f"values" if least > 1 else f"{what} needs distinct values, at least "
                         f"one")
    return hs

@dataclass
class ConvergenceResult:
    """Errors against step size and the fitted log-log slope.

    Words (one meaning each): ``method_order`` is the classical order p of the scheme with these
    sub-flows; :attr:`order` is the *fitted slope* of the requested kind (``local slope``, theory
    p + 1; ``global slope``, theory p) and :attr:`expected_order` that slope in theory; the name
    ``order`` for the slope is the public API's (design.md)."""

    scheme: str
    method: str
    kind: str
    step_sizes: np.ndarray
    errors: np.ndarray
    order: float                # the fitted slope of `kind` (see slope_name)
    expected_order: int         # its theoretical value
    used: np.ndarray
    floor: float
    evaluations: dict = field(default_factory=dict)   # field -> array of evaluations per h
    method_order: int = 0       # classical order p with these sub-flows

    @property
    def ok(self) -> bool:
        """The fitted slope within 0.3 of theory; for a scheme whose step is the exact flow
        (an unsplit scheme with exact sub-flows), every error at the reference's floor."""
        if self.method_order >= EXACT_ORDER:
            return bool(np.all(self.errors <= self.floor))
        return bool(np.isfinite(self.order) and abs(self.order - self.expected_order) <= 0.3)

    def table(self) -> str:
        lines = [(f"{self.scheme} | method={self.method} | order p = {self.method_order} | "
                  f"{self.kind} error: {self.slope_name} {self.order:.2f}, theory "
                  f"{self.expected_order}"),
                 f"{'h':>10} {'error':>12} {'ratio':>8} {'slope':>7}  {self._evals_head():>10}  "
                 f"fitted"]
        prev = None
        for i, (h, e) in enumerate(zip(self.step_sizes, self.errors)):
            ratio = slope = ""
            if prev is not None and e > 0 and prev[1] > 0:
                ratio = f"{prev[1] / e:8.2f}"
                slope = f"{math.log(prev[1] / e) / math.log(prev[0] / h):7.2f}"
            ev = ",".join(str(int(v[i])) for v in self.evaluations.values())
            lines.append(f"{h:10.5g} {e:12.4e} {ratio:>8} {slope:>7}  {ev:>10}  "
                         f"{'yes' if self.used[i] else 'no'}")
            prev = (h, e)
        return "\n".join(lines)

    def _evals_head(self) -> str:
        """``evals(D,C)``: the fields' letters, in the order of :attr:`evaluations`."""
        return f"evals({','.join(STRING_LETTER.get(f, f).upper() for f in self.evaluations)})"

    @property
    def slope_name(self) -> str:
        """What :attr:`order` is: ``"local slope"`` (order + 1) or ``"global slope"`` (order)."""
        return f"{self.kind} slope"

    def plot(self, path):
        """Write a log-log PNG of error against h with the fitted and the theoretical slope."""
        from ..plots import plot_convergence

        return plot_convergence([self], path)


def method_order(scheme, method: str, fields: dict) -> int:
    """The classical order of ``scheme`` with its sub-flows advanced by ``method`` on these
    ``fields``: :meth:`~splitnet.integrators.splitting.SplittingScheme.effective_order`, except
    when every stage advances a shear (fields with ``is_shear``, e.g.
    :func:`~splitnet.analyses.problems.partitioned_system`'s; a sum stage only when its fields
    write the same block), or is a field given by its flow (``flows=``): there each sub-step
    is the exact sub-flow (see :class:`~splitnet.analyses.problems.Shear`) and the order is the
    scheme's own."""
    def shear(stage) -> bool:
        parts = [fields.get(c) for c in stage.components]
        if all(is_flow(f) for f in parts):      # the user's flow: the exact sub-flow
            return True
        return (all(getattr(f, "is_shear", False) for f in parts)
                and len({f.write for f in parts}) == 1)   # d~ + c~ writes both: no shear

    if all(shear(st) for st in scheme.stages):
        return scheme.order
    return scheme.effective_order(method)


def _torch_dtype(x) -> torch.dtype:
    """The torch dtype of a state's precision (numpy's float64 -> torch.float64)."""
    if arrays.is_torch(x):
        return x.dtype
    return torch.float64 if np.dtype(x.dtype) == np.float64 else torch.float32


def _reference_at(given: dict, x0, t0: float, reference, ref_opts: dict):
    """``t1 -> x(t1)``: the user's exact solution ``reference(t1)`` (checked against ``x0``),
    else :func:`reference_solution` of the vector fields (torch states only)."""
    if reference is not None:
        check_callable(reference, "reference")

        def at(t1):
            out = reference(t1)
            arrays.check_output(out, x0, "reference", "solution", t1)
            return out
        return at
    flows = [name for name, f in given.items() if is_flow(f)]
    if flows or not arrays.is_torch(x0):
        why = (f"the {', '.join(flows)} field(s) are given by their flow" if flows else
               f"x0 is a {type(x0).__name__}, and the built-in reference solves torch tensors")
        raise ValueError(f"convergence_study needs reference=x(t), the exact solution: {why}")

    def at(t1):
        return reference_solution(x0=x0, times=torch.tensor([t0, t1], dtype=x0.dtype),
                                  fields=given, **ref_opts)[-1]
    return at


def _check_global(t0: float, t_final, hs) -> float:
    t_final = t0 + 1.0 if t_final is None else check_time(t_final, "t_final")
    for h in hs:            # every h must divide the interval, in few enough steps
        n = n_steps_for((t0, t_final), h)[2]
        if n > MAX_STEPS:
            raise ValueError(f"a global study at h={h:g} over [{t0:g}, {t_final:g}] takes "
                             f"{n:,} steps, more than {MAX_STEPS:,}: use larger step sizes "
                             f"or a shorter interval")
    return t_final


def convergence_study(scheme, diffusion=None, convection=None, x0=None,
                      step_sizes: Sequence[float] | None = None, kind: str = "local",
                      method: str = "exact", t0: float = 0.0, t_final: float | None = None,
                      floor: float | None = None, progress: bool = False, *, fields=None,
                      flows=None, reference=None, **options) -> ConvergenceResult:
    """Errors of ``scheme`` against the exact solution for each step size, and the fitted
    log-log slope. The fields: ``diffusion`` / ``convection`` or ``fields={name: f}``, and
    ``flows={name: phi(t, x, dt)}`` for fields given by their own flow (mixed freely).

    The exact solution: ``reference(t1)`` when given (a callable returning ``x(t1)`` from
    ``x0`` at ``t0``; needed when a field is given by its flow or ``x0`` is not a torch tensor),
    else :func:`reference_solution` of the vector fields. ``x0`` a torch tensor or another
    array (numpy, JAX): the scheme runs on it as it is.

    kind="local": one step from ``x0`` at ``t0``; expected slope ``p + 1`` with ``p``
    :func:`method_order` (``scheme.effective_order(method)``; the scheme's own order on shear
    fields and flows). kind="global": ``(t_final - t0) / h`` steps (``t_final`` default
    ``t0 + 1``); expected slope ``p``. ``floor`` (default ``10 * rtol * max(1, ||x0||)`` with
    the reference's rtol, float64: 1e-13) excludes points that round-off or solver tolerance
    dominate.
    """
    scheme = resolve(scheme)
    if kind not in ("local", "global"):
        raise ValueError(f"kind must be 'local' or 'global', got {kind!r}")
    if x0 is None or step_sizes is None:
        raise TypeError("convergence_study() needs x0 and step_sizes")
    get_method(method, **options)
    check_state(x0, "x0")
    hs = step_size_list(step_sizes)
    t0 = check_time(t0, "t0")
    progress = check_flag("progress", progress)
    given = _given_fields(diffusion, convection, fields, flows)
    ref_opts = {k: options[k] for k in ("rtol", "atol") if k in options}
    rtol = ref_opts.get("rtol") or default_tolerances(_torch_dtype(x0))[0]
    floor = 10.0 * rtol * max(1.0, arrays.norm(x0)) if floor is None else \
        check_real("floor", floor, lo=0.0)
    counting = {name: CountingField(f, name) for name, f in given.items()}
    errors, evals = [], {name: [] for name in given}
    reference_at = _reference_at(given, x0, t0, reference, ref_opts)
    if kind == "global":
        t_final = _check_global(t0, t_final, hs)
        ref_end = reference_at(t_final)
    it = hs
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(hs, desc=f"{scheme.name}/{method}/{kind}", unit="h", leave=False)
    with torch.no_grad(), small_problem_threads(x0):
        for h in it:
            for c in counting.values():
                c.count = 0
            if kind == "local":
                ref = reference_at(t0 + h)
                x = scheme.step(x=x0, t=t0, step_size=h, method=method, fields=counting,
                                **options)
            else:
                ref = ref_end
                x = scheme.integrate(x0=x0, t_span=(t0, t_final), step_size=h, method=method,
                                     fields=counting, **options)[-1]
            errors.append(arrays.norm(x - ref))
            for name, c in counting.items():
                evals[name].append(c.count)
    errs = np.asarray(errors)
    slope, used = fit_slope(hs, errs, floor)
    eff = method_order(scheme, method, given)
    return ConvergenceResult(scheme.name, method, kind, hs, errs, slope,
                             eff + 1 if kind == "local" else eff, used, floor,
                             {k: np.asarray(v) for k, v in evals.items()}, eff)


# ---------------------------------------------------------------------------------------------
# Work–precision

@dataclass
class WorkPrecisionPoint:
    scheme: str
    method: str
    step_size: float
    evaluations: int          # field evaluations (D + C) over the whole interval
    error: float              # global error at t_final


def _names(what: str, items) -> list:
    """A non-empty list of names (a single string is taken as one name, not as letters)."""
    items = [items] if isinstance(items, str) else list(items)
    if not items:
        raise ValueError(f"{what} is empty: give at least one")
    return items


def work_precision(schemes, methods, diffusion, convection, x0, step_sizes, t0: float = 0.0,
                   t_final: float = 1.0, progress: bool = True) -> list[WorkPrecisionPoint]:
    """Global error against the number of field evaluations, for every scheme x method.
    ``exact`` is excluded (its cost is the adaptive solver's, not the scheme's)."""
    points = []
    progress = check_flag("progress", progress)
    combos = [(resolve(s), m) for s in _names("schemes", schemes)
              for m in _names("methods", methods)]
    for _, m in combos:
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
            ev = int(sum(v[i] for v in r.evaluations.values()))
            points.append(WorkPrecisionPoint(sch.name, m, float(h), ev, float(r.errors[i])))
    return points


__all__ = ["ADAPTIVE_SOLVERS", "FIXED_SOLVERS", "MAX_SOLVER_STEPS", "MAX_STEPS",
           "ConvergenceResult", "WorkPrecisionPoint", "check_solver", "convergence_study",
           "leading_term", "lie_bracket", "method_order", "odeint_bounded", "reference_solution",
           "step_size_list", "work_precision"]


def __getattr__(name: str):
    """The names this public module also serves, defined elsewhere (``splitnet.ALSO_SERVED``),
    looked up on first use: no module imports them through here."""
    from .. import served

    return served(__name__, name)

