"""The splitting scheme: an immutable sequence of stages, checked on construction, with the
verbs that every scheme shares.

A splitting scheme for ``dx/dt = sum_f F_f(t, x)`` -- two fields by default, ``D`` (diffusion =
attention) and ``C`` (convection = feed-forward), or any named fields such as ``cross`` -- is a
finite sequence of stages ``(field, coeff)``. One step of size ``h`` applies the sub-flows in
order, first stage first::

    x_{n+1} = phi^{X_s}_{c_s h} o ... o phi^{X_1}_{c_1 h} (x_n)

so Lie–Trotter is ``exp(h C) exp(h D)`` (D applied first) and Strang–Marchuk is
``exp(h/2 C) exp(h D) exp(h/2 C)``.

Conventions (see ``docs/theory.md``):

* The coefficients of each field sum to 1 (a scheme is normalised on construction); a sum
  stage ``d+c`` counts for each of its fields.
* Stages are **never merged implicitly**: with approximate sub-flows (Euler, midpoint, RK4)
  merging adjacent stages of one field changes the method and sometimes its order;
  :meth:`SplittingScheme.merged` does it explicitly.
* Each field keeps its own clock: a stage of field X in a step from t starts at
  ``t + h * (sum of X's earlier coefficients in the step)``.
* Over k fields (``scheme.over(fields)``): Lie–Trotter is ``(f_1 1) ... (f_k 1)``, Strang the
  symmetric ``(f_1 1/2) ... (f_(k-1) 1/2) (f_k 1) (f_(k-1) 1/2) ... (f_1 1/2)`` (first name
  outermost), and a composition method composes that symmetric step with its weights (keeping
  its order); a method whose order conditions are those of two fields refuses other counts.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..stagelists import stages as _st
from ..stagelists.stages import EXACT_ORDER, Stage, field_name, second_order_defect

if TYPE_CHECKING:  # pragma: no cover
    pass


class SplittingScheme(ABC):
    """A splitting integrator for ``dx/dt = sum_f F_f(t, x)``: an immutable sequence of stages.

    Subclasses set ``name`` and ``order`` and implement ``_stages()`` (the stage list, first
    applied first); stepping, integration, the network layer and the order bookkeeping are
    written once here. Construction validates the stages: an invalid field name, a
    non-finite coefficient, fewer than two fields, or per-field sums that differ or are zero
    raise ``ValueError`` naming the problem. Sums are normalised to 1.

    Attributes
    ----------
    name : str
    order : int
        Classical global order with exact sub-flows.
    stages : tuple[Stage, ...]
    fields : tuple[str, ...]
        The fields it advances, first appearance first.
    """

    name: str = "scheme"
    order: int = 1
    citation: str = ""
    problem_class: str = "general"        # "rkn": order ``class_order`` only for q'' = f(q)
    class_order: int | None = None

    min_fields = 2      # a splitting splits; OneField, a network layer of one field, takes 1

    def __init__(self) -> None:
        raw = _st.as_stages(self._stages())
        stages = _validated(raw, self.name, self.min_fields)
        object.__setattr__(self, "_stage_tuple", stages)
        if not isinstance(self.order, int) or isinstance(self.order, bool) or self.order < 1:
            raise ValueError(f"scheme {self.name!r}: order must be a positive int, got "
                             f"{self.order!r}")
        if self.order >= 2 and abs(second_order_defect(stages)) > 1e-9:
            raise ValueError(
                f"scheme {self.name!r} declares order {self.order} but fails a second-order "
                f"condition (for every pair of fields a, b: the sum of a_i b_j over a-before-b "
                f"stage pairs must equal that over b-before-a; largest defect "
                f"{second_order_defect(stages):.3g})"
            )
        object.__setattr__(self, "_frozen", True)

    @abstractmethod
    def _stages(self) -> Iterable[Stage | tuple[str, float]]:
        """The stage sequence, first applied first."""

    def _stages_over(self, fields: tuple[str, ...]) -> list[tuple[str, float]]:
        """The method over ``fields`` (see :meth:`over`). Here: a two-field method relabelled,
        ``fields[0]`` for the field of its first stage; other counts are refused (its order
        conditions are those of two fields)."""
        if len(fields) != 2 or len(self.fields) != 2:
            n = len(self.fields)
            raise ValueError(
                f"scheme {self.name!r} is a {'two' if n == 2 else n}-field splitting (its order "
                f"conditions are those of {'two' if n == 2 else n} fields), so it has no "
                f"{len(fields)}-field form; over {len(fields)} fields use lie-trotter, strang "
                f"or a composition method (yoshida4, suzuki4, yoshida6, ...)")
        relabel = dict(zip(self.fields, fields))
        return [(_st.SUM.join(relabel[f] for f in st.components), st.coeff)
                for st in self.stages]

    # -- immutability ---------------------------------------------------------------------
    def __setattr__(self, key, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"SplittingScheme is immutable (tried to set {key!r})")
        object.__setattr__(self, key, value)

    def __eq__(self, other) -> bool:
        return isinstance(other, SplittingScheme) and self.stages == other.stages

    def __hash__(self) -> int:
        return hash(self.stages)

    # -- data ------------------------------------------------------------------------------
    @property
    def stages(self) -> tuple[Stage, ...]:
        return self._stage_tuple

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields the scheme advances, in order of first appearance."""
        return _st.field_names(self.stages)

    def over(self, fields: Sequence[str]) -> SplittingScheme:
        """The same method over other fields: ``strang.over(("convection", "diffusion",
        "cross"))`` is ``(c 1/2)(d 1/2)(x 1)(d 1/2)(c 1/2)``. Names may be letters (``"c"``) or
        sums (``"diffusion+cross"``); the first name is the field of the first stage (for Strang
        the outermost). Keeps ``name`` and the declared order; a two-field method refuses
        other field counts (``ValueError``). Returns ``self`` when nothing changes."""
        names = field_list(fields)
        new = tuple(_st.as_stages(self._stages_over(names)))
        if new == self.stages:
            return self
        return CustomScheme(new, order=self.order, name=self.name, citation=self.citation)

    @classmethod
    def from_stages(
        cls, stages: Iterable[Stage | tuple[str, float]], order: int = 1, name: str = "custom"
    ) -> SplittingScheme:
        """A scheme from an explicit stage list, e.g. ``[("convection", .5), ("diffusion", 1),
        ("convection", .5)]`` (any field names; sum stages such as ``("d+x", 1)``).
        Coefficients are normalised so each field sums to 1 (with a warning when a sum was off
        by more than 1e-12: a list summing to 2 is a different method).

        ``order`` is the declared order and means one thing: a lower bound the stages must
        reach. Order 2 is checked by its exact conditions; order 3 and above by
        :func:`~splitnet.order.check.measure_order` on random non-commuting matrices
        (milliseconds); a
        declared order the stages do not reach, or that the check cannot confirm, is a
        ``ValueError``. Stages of a *higher* order than declared keep the declared one (it is
        what ``effective_order`` and the studies use), with a warning naming the measured order.
        Order 1, the minimal claim, is not measured."""
        scheme = CustomScheme(stages, order=order, name=name)
        if scheme.order >= 2:
            _confirm_declared_order(scheme)
        return scheme

    @property
    def is_exact(self) -> bool:
        """True when the step is the exact flow of the sum of the fields (declared
        :data:`EXACT_ORDER`): an unsplit scheme."""
        return self.order >= EXACT_ORDER

    @property
    def is_symmetric(self) -> bool:
        """True when the scheme equals its adjoint with exact sub-flows: the merged stage
        sequence is a palindrome, so ``step(h)`` then ``step(-h)`` returns to the start."""
        return _st.is_palindrome(self.stages)

    def merged(self) -> SplittingScheme:
        """The same scheme with adjacent stages of one field merged (fewer sub-layer calls;
        identical with exact flows, a different method with approximate ones)."""
        return CustomScheme(_st.merge(self.stages), order=self.order, name=f"{self.name}-merged")

    def field_coeffs(self, field: str) -> tuple[float, ...]:
        return _st.field_coeffs(self.stages, field_name(field))

    def n_stages(self, field: str | None = None) -> int:
        return len(self.stages) if field is None else len(self.field_coeffs(field))

    def diagram(self) -> str:
        """Short picture for display, e.g. ``f/2 s f/2`` for Strang (s = diffusion,
        f = convection, x = cross). :meth:`stage_string` gives the form that parses back."""
        return _st.diagram(self.stages)

    def stage_string(self) -> str:
        """``c:0.5,d:1.0,c:0.5``: the stages exactly, readable by
        :func:`~splitnet.integrators.schemes.resolve` and by ``splitnet schemes --check``."""
        return _st.format_stages(self.stages)

    def to_dict(self) -> dict:
        """Plain data (JSON-able) that :func:`~splitnet.integrators.schemes.resolve` turns back
        into an
        equal scheme."""
        return {"name": self.name, "order": self.order,
                "stages": [[st.field, st.coeff] for st in self.stages]}

    def clocks(self) -> tuple[float, ...]:
        """Start time of every stage, as a fraction of h, on its own field's clock."""
        return _st.clocks(self.stages)

    def stage_times(self) -> tuple[float, ...]:
        """Progress after each stage, as a fraction of h: the mean of the fields' clocks
        (Lie–Trotter: 0.5, 1; Strang: 0.25, 0.75, 1). Negative coefficients move it back."""
        return _st.progress(self.stages)

    def effective_order(self, method: str = "exact") -> int:
        """Global order when every sub-flow is advanced by ``method``.

        ``exact``: the classical order p. A one-step method of order q for the sub-flows
        (euler 1, midpoint 2, rk4 4) leaves ``(c h)^(q+1) E(x)`` behind per stage; these add up to
        ``h^(q+1) (sum c^(q+1)) E`` per field (per sum of fields for a sum stage), so the order is
        ``min(p, q)`` unless the stages' coefficients cancel that term for every field (sum of
        c^(q+1) = 0, possible only for odd q+1 and some negative c, e.g. the unmerged triple jump
        with midpoint), in which case it is ``min(p, q + 1)``. With Euler (q = 1) the weights
        c^2 are positive: every real splitting is first order, Macaron included.
        """
        from .subflows import get_method

        m = get_method(method)
        if m.order is None:
            return self.order
        q = m.order
        if self.order <= q:
            return self.order
        groups = {st.field for st in self.stages}
        cancels = all(abs(sum(st.coeff ** (q + 1) for st in self.stages if st.field == g))
                      < 1e-10 for g in groups)
        return min(self.order, q + 1) if cancels else q

    # -- numerics: the verbs; the machinery (flows, layers) works on the stages ------------
    def step(self, diffusion=None, convection=None, x=None, t=0.0, step_size=None,
             method="exact", *, fields=None, flows=None, **options):
        """One step ``x(t) -> x(t + h)``. The fields: ``diffusion`` / ``convection`` keywords
        (the two-field form) or ``fields={"diffusion": F, "cross": X, ...}``; each value a
        callable ``f(t, x)`` or one callable per stage of that field, advanced by ``method``.
        ``flows={"kinetic": phi, ...}``: fields given by their own flow ``phi(t, x, dt)`` (the
        state after ``dt``), mixed freely with ``fields=``; each of the scheme's fields named
        once. ``x`` a torch tensor or another array (numpy, JAX): the result is of its kind.
        A negative step size runs the adjoint direction (used to test symmetry); zero is an
        error."""
        from . import flows as _flows

        given = _flows.field_map(self.fields, diffusion, convection, fields, self.name, flows)
        return _flows.step(self.stages, given, x, t, step_size, method,
                           clocks=self.clocks(), name=self.name, **options)

    def integrate(self, diffusion=None, convection=None, x0=None, t_span=None, step_size=None,
                  method="exact", progress=False, *, fields=None, flows=None, t0=None,
                  t1=None, **options):
        """States at ``t0 + k h``, shape ``(n_steps + 1, *x0.shape)``, in ``x0``'s array type;
        fields and flows as in :meth:`step`. The interval: ``t_span=(t0, t1)`` or the keywords
        ``t0=`` (default 0) and ``t1=``."""
        from . import flows as _flows

        if t1 is not None or t0 is not None:
            if t_span is not None:
                raise ValueError("give the interval once: t_span=(t0, t1) or t0= and t1=")
            if t1 is None:
                raise TypeError("integrate() needs t1 with t0 (or t_span=(t0, t1))")
            t_span = (0.0 if t0 is None else t0, t1)
        given = _flows.field_map(self.fields, diffusion, convection, fields, self.name, flows)
        return _flows.integrate(self.stages, given, x0, t_span, step_size, method,
                                clocks=self.clocks(), progress=progress, name=self.name,
                                **options)

    def layer(self, diffusion=None, convection=None, step_size=1.0, method="euler", *,
              fields=None):
        """A ``torch.nn.Module`` computing one step: the network layer of this scheme."""
        from .layers import SplitLayer

        return SplitLayer(self, diffusion, convection, step_size=step_size, method=method,
                          fields=fields)

    # -- display ------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return (f"{type(self).__name__}(name={self.name!r}, order={self.order}, "
                f"stages={len(self.stages)}, symmetric={self.is_symmetric})")


class CustomScheme(SplittingScheme):
    """A scheme from a user's stage list (see :meth:`SplittingScheme.from_stages`)."""

    def __init__(self, stages, order: int = 1, name: str = "custom", citation: str = ""):
        if isinstance(stages, (str, bytes)):
            raise TypeError(f"from_stages takes a list of (field, coeff) pairs, got the string "
                            f"{stages!r}; for a stage string use sn.schemes.resolve({stages!r})")
        if not isinstance(stages, Iterable):
            raise TypeError(f"from_stages takes a list of (field, coeff) pairs, got "
                            f"{type(stages).__name__}")
        object.__setattr__(self, "_user_stages", tuple(stages))
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "citation", citation)
        super().__init__()

    def _stages(self):
        return self._user_stages


class OneField(SplittingScheme):
    """The step of a network layer that has one field ``f``: ``x + h f(x)`` (the stage
    ``(f 1)``), what every scheme name means over one field. With one field there is nothing to
    split: any consistent stage list merges to ``(f 1)``, its splitting error is zero (with exact
    sub-flows the step is the exact flow: declared :data:`EXACT_ORDER`, ``is_exact``), and the
    layer's order as an integrator of ``dx/dt = f(x)`` is its sub-flow method's
    (:meth:`effective_order`: 1 with Euler, a plain residual step). ConvS2S's encoder layer."""

    min_fields = 1

    def __init__(self, field: str, name: str = "one-field", steps: int = 1):
        object.__setattr__(self, "_field", field_name(field))
        object.__setattr__(self, "_steps", int(steps))   # > 1: a refinement, steps of h/steps
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "order", EXACT_ORDER)
        super().__init__()

    def _stages(self):
        return [(self._field, 1.0 / self._steps)] * self._steps

    def to_dict(self) -> dict:
        return {**super().to_dict(), "one_field": True}


# ---------------------------------------------------------------------------------------------
# building blocks over k fields


def field_list(fields: Sequence[str]) -> tuple[str, ...]:
    """Canonical field names for :meth:`SplittingScheme.over`: at least two, none twice."""
    if isinstance(fields, str) or not isinstance(fields, Sequence):
        raise TypeError(f"fields must be a sequence of field names such as ('convection', "
                        f"'diffusion', 'cross'), got {fields!r}")
    names = tuple(field_name(f) for f in fields)
    if len(names) < 2:
        raise ValueError(f"a splitting needs at least two fields, got {names}")
    parts = [p for n in names for p in n.split(_st.SUM)]
    if len(set(parts)) != len(parts):
        raise ValueError(f"fields {names} name a field twice")
    return names


def lie_trotter_stages(fields: Sequence[str]) -> list[tuple[str, float]]:
    """``(f_1 1) (f_2 1) ... (f_k 1)``: f_1 first."""
    return [(f, 1.0) for f in fields]


def symmetric_step(fields: Sequence[str], g: float = 1.0) -> list[tuple[str, float]]:
    """The generalised Strang step of weight g, first name outermost:
    ``(f_1 g/2) ... (f_(k-1) g/2) (f_k g) (f_(k-1) g/2) ... (f_1 g/2)``; symmetric, order 2."""
    half = [(f, g / 2) for f in fields[:-1]]
    return half + [(fields[-1], g)] + half[::-1]


def composition_stages(gammas: Sequence[float], fields: Sequence[str]
                       ) -> list[tuple[str, float]]:
    """``S(g_m h) ... S(g_1 h)`` with S the symmetric step over ``fields``, unmerged."""
    return [st for g in gammas for st in symmetric_step(fields, g)]


def strang_weights(stages: Sequence[Stage]) -> tuple[float, ...] | None:
    """The weights g_i when ``stages`` are Strang steps ``(C g/2)(D g)(C g/2)`` written out
    one after another (a two-field composition method), else None."""
    if len(stages) % 3:
        return None
    out = []
    for i in range(0, len(stages), 3):
        a, b, c = stages[i:i + 3]
        if not (a.field == c.field != b.field and abs(a.coeff - c.coeff) <= 1e-14
                and abs(2 * a.coeff - b.coeff) <= 1e-12 * max(1.0, abs(b.coeff))):
            return None
        out.append(b.coeff)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# checks


def _confirm_declared_order(scheme: SplittingScheme) -> None:
    """``scheme.order`` is reached by its stages (raise otherwise); warn when they go higher."""
    from ..order.check import measure_order

    res = measure_order(scheme.stages, scheme.order, name=scheme.name)
    p = scheme.order
    if res.verdict == "undetermined":
        if p >= 3:    # order 2 is settled by its exact conditions on construction
            raise ValueError(f"scheme {scheme.name!r} declares order {p} but the check cannot "
                             f"confirm it: {res.reason}")
        return
    if res.tail == float("inf") and p >= EXACT_ORDER:    # declared and measured: the exact flow
        return
    if p >= 3 and res.tail < p - res.tolerance:
        raise ValueError(f"scheme {scheme.name!r} declares order {p} but its stages measure "
                         f"{res.measured:.2f} (smallest h: {res.tail:.2f}) on random "
                         f"non-commuting matrices; see splitnet.check_order")
    if res.tail >= p + 1 - res.tolerance and res.measured >= p + 1 - 2 * res.tolerance:
        warnings.warn(f"scheme {scheme.name!r}: its stages measure order {res.tail:.2f} (smallest "
                      f"h), higher than the declared {p}; the declared order is kept (declare "
                      f"order={round(res.tail)} to use it)", UserWarning, stacklevel=3)


def _validated(stages: tuple[Stage, ...], name: str, min_fields: int = 2
               ) -> tuple[Stage, ...]:
    if len(stages) == 0:
        raise ValueError(f"scheme {name!r} has no stages")
    names = _st.field_names(stages)
    if len(names) < min_fields:
        raise ValueError(f"scheme {name!r} has only the field {names[0]!r}: a splitting needs "
                         f"at least two fields (e.g. diffusion and convection)")
    sums = _st.coefficient_sums(stages)
    for f in names:
        if abs(sums[f]) < 1e-12:
            raise ValueError(f"scheme {name!r}: {f} coefficients sum to zero; the scheme is not "
                             f"consistent")
    lo, hi = min(sums.values()), max(sums.values())
    if abs(hi - lo) > 1e-9 * max(abs(lo), abs(hi)):
        listed = ", ".join(f"{f} to {v:.12g}" for f, v in sums.items())
        raise ValueError(f"scheme {name!r}: the coefficients sum to different totals ({listed});"
                         f" each field must advance by the same total time")
    off = [f"{f} sums to {sums[f]:.15g}" for f in names if abs(sums[f] - 1.0) > 1e-12]
    if off:
        warnings.warn(f"scheme {name!r}: {' and '.join(off)}; each field's coefficients are "
                      f"divided by its sum so that it sums to 1 (as written the stages are a "
                      f"different, inconsistent method)", UserWarning, stacklevel=5)
    # Normalise so each field's coefficients sum to 1 step. Sums already 1 to rounding are left
    # alone: dividing by 1 +- 1 ulp would change the last bits on every round trip (to_dict).
    # A sum stage takes the mean of its fields' sums (they agree to 1e-9).
    scale = {f: 1.0 if abs(sums[f] - 1.0) <= 1e-15 else sums[f] for f in names}
    return tuple(Stage(s.field, s.coeff / (sum(scale[f] for f in s.components)
                                           / len(s.components))) for s in stages)


__all__ = ["EXACT_ORDER", "CustomScheme", "OneField", "SplittingScheme", "composition_stages",
           "field_list", "lie_trotter_stages", "strang_weights", "symmetric_step"]
