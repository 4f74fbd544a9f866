"""Splitting schemes as data.

A splitting scheme for ``dx/dt = D(t, x) + C(t, x)`` (D = diffusion = attention, C = convection =
feed-forward) is a finite sequence of stages ``(field, coeff)``. One step of size ``h`` applies the
sub-flows in order, first stage first::

    x_{n+1} = phi^{X_s}_{c_s h} o ... o phi^{X_1}_{c_1 h} (x_n)

so Lie–Trotter is ``exp(h C) exp(h D)`` (D applied first) and Strang–Marchuk is
``exp(h/2 C) exp(h D) exp(h/2 C)``.

Conventions (see ``docs/theory.md``):

* The coefficients of each field sum to 1 (a scheme is normalised on construction).
* Stages are **never merged implicitly**. ``yoshida4`` is the triple jump written out as three
  Strang steps, ``C g1/2 D g1 C g1/2 | C g0/2 D g0 C g0/2 | C g1/2 D g1 C g1/2``: nine stages.
  With exact sub-flows merging adjacent stages of the same field changes nothing; with
  approximate sub-flows (Euler, midpoint, RK4) it changes the method and sometimes its order.
  ``scheme.merged()`` returns the merged variant explicitly.
* Each field keeps its own clock: a stage of field X in a step from t starts at
  ``t + h * (sum of X's earlier coefficients in the step)``.

Sources of the coefficients: H. Yoshida, Phys. Lett. A 150 (1990) 262–268 (triple jump, order 6
solution A, order 8 solution D); E. Forest & R. Ruth, Physica D 43 (1990) (triple jump);
M. Suzuki, Phys. Lett. A 146 (1990) 319–323 (5-stage fractal); S. Blanes & P. C. Moan,
J. Comput. Appl. Math. 142 (2002) 313–330 (method S6, order 4); G. Strang (1968), G. I. Marchuk
(1968); H. F. Trotter (1959). These seven are the core (``available("core")``); the zoo of
further published methods is data in :mod:`splitnet.zoo`, registered here as :class:`ZooScheme`
subclasses. Every set is re-verified by :func:`check_order` in the test suite.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from . import stages as _st
from . import zoo
from .names import LISTED_BY, unknown_name
from .stages import CONVECTION, DIFFUSION, FIELDS, Stage, second_order_defect

if TYPE_CHECKING:  # pragma: no cover
    import torch


class SplittingScheme(ABC):
    """A splitting integrator for ``dx/dt = D(t, x) + C(t, x)``: an immutable sequence of stages.

    Subclasses set ``name`` and ``order`` and implement ``_stages()`` (the stage list, first
    applied first); stepping, integration, the network layer
    and the order bookkeeping are written once here. Construction validates the stages:
    unknown field, non-finite coefficient, a field missing, or per-field sums that differ or are
    zero raise ``ValueError`` naming the problem. Sums are normalised to 1.

    Attributes
    ----------
    name : str
    order : int
        Classical global order with exact sub-flows.
    stages : tuple[Stage, ...]
    """

    name: str = "scheme"
    order: int = 1
    citation: str = ""
    problem_class: str = zoo.GENERAL      # "rkn": order ``class_order`` only for q'' = f(q)
    class_order: int | None = None

    def __init__(self) -> None:
        raw = _st.as_stages(self._stages())
        stages = _validated(raw, self.name)
        object.__setattr__(self, "_stage_tuple", stages)
        if not isinstance(self.order, int) or isinstance(self.order, bool) or self.order < 1:
            raise ValueError(f"scheme {self.name!r}: order must be a positive int, got "
                             f"{self.order!r}")
        if self.order >= 2 and abs(second_order_defect(stages)) > 1e-9:
            raise ValueError(
                f"scheme {self.name!r} declares order {self.order} but fails the second-order "
                f"condition (sum of d_i c_j over diffusion-before-convection pairs must be 1/2; "
                f"defect {second_order_defect(stages):.3g})"
            )
        object.__setattr__(self, "_frozen", True)

    @abstractmethod
    def _stages(self) -> Iterable[Stage | tuple[str, float]]:
        """The stage sequence, first applied first."""

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

    @classmethod
    def from_stages(
        cls, stages: Iterable[Stage | tuple[str, float]], order: int = 1, name: str = "custom"
    ) -> SplittingScheme:
        """A scheme from an explicit stage list, e.g. ``[("convection", .5), ("diffusion", 1),
        ("convection", .5)]``. Coefficients are normalised so each field sums to 1 (with a
        warning when a sum was off by more than 1e-12: a list summing to 2 is a different
        method). The declared ``order`` is checked: order 2 by its exact condition, order 3 and
        above by :func:`check_order` on random non-commuting matrices (milliseconds); a declared
        order the stages do not reach, or one the check cannot confirm, is a ``ValueError``."""
        scheme = CustomScheme(stages, order=order, name=name)
        if scheme.order >= 3:
            res = check_order(scheme)
            if res.verdict == "undetermined":
                raise ValueError(f"scheme {name!r} declares order {scheme.order} but the check "
                                 f"cannot confirm it: {res.reason}")
            if not res.ok:
                raise ValueError(f"scheme {name!r} declares order {scheme.order} but its stages "
                                 f"measure {res.measured:.2f} (smallest h: {res.tail:.2f}) on "
                                 f"random non-commuting matrices; see splitnet.check_order")
        return scheme

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
        return _st.field_coeffs(self.stages, field)

    def n_stages(self, field: str | None = None) -> int:
        return len(self.stages) if field is None else len(self.field_coeffs(field))

    def diagram(self) -> str:
        """Short picture for display, e.g. ``f/2 s f/2`` for Strang (s = diffusion,
        f = convection). :meth:`stage_string` gives the form that parses back."""
        return _st.diagram(self.stages)

    def stage_string(self) -> str:
        """``c:0.5,d:1.0,c:0.5``: the stages exactly, readable by :func:`resolve` and by
        ``splitnet schemes --check``."""
        return _st.format_stages(self.stages)

    def to_dict(self) -> dict:
        """Plain data (JSON-able) that :func:`resolve` turns back into an equal scheme."""
        return {"name": self.name, "order": self.order,
                "stages": [[st.field, st.coeff] for st in self.stages]}

    def clocks(self) -> tuple[float, ...]:
        """Start time of every stage, as a fraction of h, on its own field's clock."""
        return _st.clocks(self.stages)

    def stage_times(self) -> tuple[float, ...]:
        """Progress after each stage, as a fraction of h: the mean of the two fields' clocks
        (Lie–Trotter: 0.5, 1; Strang: 0.25, 0.75, 1). Negative coefficients move it back."""
        return _st.progress(self.stages)

    def effective_order(self, method: str = "exact") -> int:
        """Global order when every sub-flow is advanced by ``method``.

        ``exact``: the classical order p. A one-step method of order q for the sub-flows
        (euler 1, midpoint 2, rk4 4) leaves ``(c h)^(q+1) E(x)`` behind per stage; these add up to
        ``h^(q+1) (sum c^(q+1)) E`` per field, so the order is ``min(p, q)`` unless the stages'
        coefficients cancel that term for both fields (sum of c^(q+1) = 0, possible only for odd
        q+1 and some negative c, e.g. the unmerged triple jump with midpoint), in which case it
        is ``min(p, q + 1)``. With Euler (q = 1) the weights c^2 are positive: every real splitting
        is first order, Macaron included.
        """
        from .flows import get_method

        m = get_method(method)
        if m.order is None:
            return self.order
        q = m.order
        if self.order <= q:
            return self.order
        cancels = all(
            abs(sum(c ** (q + 1) for c in self.field_coeffs(f))) < 1e-10 for f in FIELDS
        )
        return min(self.order, q + 1) if cancels else q

    # -- numerics: the verbs; the machinery (flows, layers) works on the stages ------------
    def step(self, diffusion, convection, x, t=0.0, step_size=None, method="exact", **options):
        """One step ``x(t) -> x(t + h)``. ``diffusion`` / ``convection``: callables ``f(t, x)``,
        or one callable per stage of that field. A negative step size runs the adjoint
        direction (used to test symmetry); zero is an error."""
        from . import flows

        return flows.step(self.stages, diffusion, convection, x, t, step_size, method,
                          clocks=self.clocks(), name=self.name, **options)

    def integrate(self, diffusion, convection, x0, t_span, step_size, method="exact",
                  progress=False, **options) -> torch.Tensor:
        """States at ``t0 + k h``, shape ``(n_steps + 1, *x0.shape)``."""
        from . import flows

        return flows.integrate(self.stages, diffusion, convection, x0, t_span, step_size,
                               method, clocks=self.clocks(), progress=progress, name=self.name,
                               **options)

    def layer(self, diffusion, convection, step_size=1.0, method="euler"):
        """A ``torch.nn.Module`` computing one step: the network layer of this scheme."""
        from .layers import SplitLayer

        return SplitLayer(self, diffusion, convection, step_size=step_size, method=method)

    # -- display ------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return (f"{type(self).__name__}(name={self.name!r}, order={self.order}, "
                f"stages={len(self.stages)}, symmetric={self.is_symmetric})")


def _validated(stages: tuple[Stage, ...], name: str) -> tuple[Stage, ...]:
    if len(stages) == 0:
        raise ValueError(f"scheme {name!r} has no stages")
    sums = {f: sum(s.coeff for s in stages if s.field == f) for f in FIELDS}
    for f in FIELDS:
        if not any(s.field == f for s in stages):
            raise ValueError(f"scheme {name!r} has no {f} stage: both fields must appear")
        if abs(sums[f]) < 1e-12:
            raise ValueError(f"scheme {name!r}: {f} coefficients sum to zero; the scheme is not "
                             f"consistent")
    d, c = sums[DIFFUSION], sums[CONVECTION]
    if abs(d - c) > 1e-9 * max(abs(d), abs(c)):
        raise ValueError(
            f"scheme {name!r}: diffusion coefficients sum to {d:.12g} but convection ones to "
            f"{c:.12g}; each field must advance by the same total time"
        )
    off = [f"{f} sums to {sums[f]:.15g}" for f in FIELDS if abs(sums[f] - 1.0) > 1e-12]
    if off:
        warnings.warn(f"scheme {name!r}: {' and '.join(off)}; each field's coefficients are "
                      f"divided by its sum so that it sums to 1 (as written the stages are a "
                      f"different, inconsistent method)", UserWarning, stacklevel=5)
    # Normalise so each field's coefficients sum to 1 step. Sums already 1 to rounding are left
    # alone: dividing by 1 +- 1 ulp would change the last bits on every round trip (to_dict).
    scale = {f: 1.0 if abs(sums[f] - 1.0) <= 1e-15 else sums[f] for f in FIELDS}
    return tuple(Stage(s.field, s.coeff / scale[s.field]) for s in stages)


class CustomScheme(SplittingScheme):
    """A scheme from a user's stage list (see :meth:`SplittingScheme.from_stages`)."""

    def __init__(self, stages, order: int = 1, name: str = "custom"):
        object.__setattr__(self, "_user_stages", tuple(stages))
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "order", order)
        super().__init__()

    def _stages(self):
        return self._user_stages


class LieTrotter(SplittingScheme):
    """Lie–Trotter: ``exp(h C) exp(h D)`` (diffusion first). Order 1; with Euler sub-steps and
    h = 1 it is the pre-norm Transformer layer ``x += attn(x); x += ffn(x)``."""

    name = "lie-trotter"
    order = 1
    citation = ("H. F. Trotter, On the product of semi-groups of operators, Proc. Amer. Math. "
                "Soc. 10 (1959) 545-551")

    def _stages(self):
        return [(DIFFUSION, 1.0), (CONVECTION, 1.0)]


class Strang(SplittingScheme):
    """Strang–Marchuk: ``exp(h/2 C) exp(h D) exp(h/2 C)``. Order 2; with Euler sub-steps it is the
    Macaron layer (half FFN, attention, half FFN)."""

    name = "strang"
    order = 2
    citation = ("G. Strang, On the construction and comparison of difference schemes, SIAM J. "
                "Numer. Anal. 5 (1968) 506-517; G. I. Marchuk, Aplikace Matematiky 13 (1968) "
                "103-132")

    def _stages(self):
        return [(CONVECTION, 0.5), (DIFFUSION, 1.0), (CONVECTION, 0.5)]


class StrangComposition(SplittingScheme):
    """Composition of Strang steps ``S(g_k h) ... S(g_1 h)``, ``S(h) = exp(h/2 C) exp(h D)
    exp(h/2 C)``, unmerged (3 stages per Strang step). ``weights`` are listed outer -> centre and
    mirrored, the centre weight being ``1 - 2 * sum(weights)``."""

    weights: tuple[float, ...] = ()

    def gammas(self) -> tuple[float, ...]:
        w = tuple(self.weights)
        return w + (1.0 - 2.0 * sum(w),) + tuple(reversed(w))

    def _stages(self):
        out = []
        for g in self.gammas():
            out += [(CONVECTION, g / 2), (DIFFUSION, g), (CONVECTION, g / 2)]
        return out


class Yoshida4(StrangComposition):
    """Triple jump (Yoshida 1990; Forest & Ruth 1990), order 4:
    ``g1 = 1 / (2 - 2^(1/3))``, ``g0 = -2^(1/3) / (2 - 2^(1/3))``, composition S(g1) S(g0) S(g1)."""

    name = "yoshida4"
    order = 4
    citation = f"{zoo.YOSHIDA}; {zoo.FOREST_RUTH}"
    weights = (1.35120719195965763404768780897,)


class Suzuki4(StrangComposition):
    """Suzuki's 5-stage fractal (Suzuki 1990), order 4: ``p = 1 / (4 - 4^(1/3))``,
    S(p) S(p) S(1 - 4p) S(p) S(p)."""

    name = "suzuki4"
    order = 4
    citation = zoo.SUZUKI
    weights = (0.414490771794375737142354062861, 0.414490771794375737142354062861)


class Yoshida6(StrangComposition):
    """Yoshida 1990, order 6, solution A: seven Strang steps."""

    name = "yoshida6"
    order = 6
    citation = zoo.YOSHIDA
    weights = (0.78451361047755726381949763, 0.23557321335935813368479318,
               -1.17767998417887100694641568)


class Yoshida8(StrangComposition):
    """Yoshida 1990, order 8, solution D: fifteen Strang steps. The weights are the root of the
    order conditions re-derived in 40-digit arithmetic from Yoshida's printed 15-digit values
    (experiments/zoo_coefficients.py), which are off by up to 2e-13. This is *not* McLachlan's
    15-stage order-8 set (``mclachlan8``), which some libraries label "Yoshida8"."""

    name = "yoshida8"
    order = 8
    citation = zoo.YOSHIDA
    weights = (0.9148442462297915667487935, 0.2536933365662113541461460,
               -1.444852236860605157694731, -0.1582406353680501752040668,
               1.938139137622525986579186, -1.960610232975310807607633,
               0.1027998493917964406981151)


class BlanesMoan4(SplittingScheme):
    """Blanes & Moan 2002, method S6 (order 4, general splittings), 13 stages:
    ``C a1 D b1 C a2 D b2 C a3 D b3 C a4 D b3 C a3 D b2 C a2 D b1 C a1`` with
    ``a4 = 1 - 2 (a1 + a2 + a3)``, ``b3 = 1/2 - (b1 + b2)``."""

    name = "blanes-moan4"
    order = 4
    citation = zoo.BLANES_MOAN
    a = (0.0792036964311957, 0.353172906049774, -0.0420650803577195)
    b = (0.209515106613362, -0.143851773179818)

    def _stages(self):
        a1, a2, a3 = self.a
        b1, b2 = self.b
        a4 = 1.0 - 2.0 * (a1 + a2 + a3)
        b3 = 0.5 - (b1 + b2)
        a_seq = [a1, a2, a3, a4, a3, a2, a1]
        b_seq = [b1, b2, b3, b3, b2, b1]
        out = []
        for i, ai in enumerate(a_seq):
            out.append((CONVECTION, ai))
            if i < len(b_seq):
                out.append((DIFFUSION, b_seq[i]))
        return out


class ZooScheme(SplittingScheme):
    """A published method of :mod:`splitnet.zoo`. Each entry gets its own subclass (see
    :func:`zoo_class`) whose docstring carries the citation, the formula and the problem
    class; ``method`` is the zoo record (coefficient strings, closed form, printed digits)."""

    method: zoo.Method

    def _stages(self):
        return self.method.stages


def zoo_class(method: zoo.Method) -> type[ZooScheme]:
    """The :class:`ZooScheme` subclass of one zoo entry (name, order, citation in the
    docstring, problem class)."""
    restricted = method.problem_class != zoo.GENERAL
    doc = (f"{method.name}: order {method.order} as a general splitting"
           + (f" (order {method.class_order} for {zoo.PROBLEM_CLASSES[method.problem_class]})"
              if restricted else "")
           + f", {'symmetric' if method.symmetric else 'not symmetric'}, "
           f"{len(method.stages)} stages.\n\n{method.formula}.\n\n{method.note}\n\n"
           f"Source: {method.citation}.")
    cls_name = "".join(w.capitalize() for w in method.name.replace("-", " ").split())
    return type(cls_name, (ZooScheme,), {
        "__doc__": doc, "name": method.name, "order": method.order, "method": method,
        "citation": method.citation, "problem_class": method.problem_class,
        "class_order": method.class_order, "__module__": __name__})


CORE = ("lie-trotter", "strang", "yoshida4", "suzuki4", "yoshida6", "yoshida8", "blanes-moan4")
_REGISTRY: dict[str, Callable[[], SplittingScheme]] = {
    "lie-trotter": LieTrotter,
    "strang": Strang,
    "yoshida4": Yoshida4,
    "suzuki4": Suzuki4,
    "yoshida6": Yoshida6,
    "yoshida8": Yoshida8,
    "blanes-moan4": BlanesMoan4,
}
_PROBLEM_CLASS: dict[str, str] = dict.fromkeys(_REGISTRY, zoo.GENERAL)
for _m in zoo.METHODS:
    _REGISTRY[_m.name] = zoo_class(_m)
    _PROBLEM_CLASS[_m.name] = _m.problem_class
_ALIASES = {"macaron": "strang", "strang-marchuk": "strang", "lie": "lie-trotter",
            "transformer": "lie-trotter", "triple-jump": "yoshida4", "yoshida6a": "yoshida6",
            "yoshida8d": "yoshida8", "candy-rozmus4": "forest-ruth4",
            "s9odr6a": "kahan-li6", "s9odr6b": "kahan-li6b", "s15odr8": "mclachlan8",
            "s17odr8a": "kahan-li8", "s17odr8b": "kahan-li8b", "s33odr10a": "kahan-li10",
            "s33odr10c": "kahan-li10c"}
KINDS = ("general", "core", "restricted", "all")


def available(kind: str = "general") -> list[str]:
    """Names of the registered schemes. ``kind``: ``"general"`` (default: every scheme with its
    order for any two fields, the core and the zoo), ``"core"`` (the seven the theory
    documents: lie-trotter ... blanes-moan4), ``"restricted"`` (zoo methods whose order holds
    only in a problem class, e.g. Runge–Kutta–Nyström methods), ``"all"``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "core":
        return list(CORE)
    if kind == "all":
        return list(_REGISTRY)
    want_general = kind == "general"
    return [n for n in _REGISTRY if (_PROBLEM_CLASS[n] == zoo.GENERAL) == want_general]


def _registry_key(name: str) -> str | None:
    key = _ALIASES.get(name.lower(), name.lower())
    return key if key in _REGISTRY else None


def _instance(key: str) -> SplittingScheme:
    """The registered scheme; a restricted one warns that its class order is not general."""
    s = _REGISTRY[key]()
    if s.problem_class != zoo.GENERAL:
        warnings.warn(f"scheme {key!r} has order {s.class_order} only for "
                      f"{zoo.PROBLEM_CLASSES[s.problem_class]}; as a general splitting (which "
                      f"is how it is used here) its order is {s.order}", UserWarning,
                      stacklevel=3)
    return s


def get(name: str) -> SplittingScheme:
    """The registered scheme ``name`` (case-insensitive; aliases such as macaron, transformer,
    triple-jump, s17odr8a). Only registry names: :func:`resolve` also takes patterns, stage
    strings and scheme objects. A restricted-class method (``available("restricted")``) comes
    with a warning: its ``order`` is its general-splitting order, ``class_order`` the other."""
    if not isinstance(name, str):
        raise TypeError(f"scheme name must be a str, got {type(name).__name__}")
    key = _registry_key(name)
    if key is None:
        raise ValueError(unknown_name("scheme", name, available("all"), _ALIASES))
    return _instance(key)


def register(name: str, factory: Callable[[], SplittingScheme]) -> None:
    """Add a scheme to the registry (``factory()`` must return a SplittingScheme)."""
    name = name.lower()   # get() is case-insensitive
    if name in _REGISTRY or name in _ALIASES:
        raise ValueError(f"scheme {name!r} is already registered")
    s = factory()
    if not isinstance(s, SplittingScheme):
        raise TypeError("factory must return a SplittingScheme")
    _REGISTRY[name] = factory
    _PROBLEM_CLASS[name] = s.problem_class


def from_pattern(pattern: str, name: str | None = None) -> SplittingScheme:
    """A whole-network composition from a sublayer string (Press et al. 2020): ``s`` =
    self-attention (diffusion), ``f`` = feed-forward (convection); e.g. ``"sssfsfsfff"``.

    Each of the n letters of a field gets coefficient 1/n, so one step of size T runs the whole
    network over [0, T]. Adjacent equal letters stay separate stages (they are separate sublayers).
    All coefficients are positive, so the order is at most 2 (Sheng 1989, Suzuki 1991): it is 2
    when the second-order condition holds (e.g. palindromes such as ``fsf``), else 1.
    """
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
    p = pattern.replace(" ", "").lower()
    bad = sorted(set(p) - {"s", "f"})
    if bad:
        raise ValueError(f"pattern {pattern!r} has letters {bad}; use only 's' (self-attention, "
                         f"diffusion) and 'f' (feed-forward, convection)")
    if "s" not in p or "f" not in p:
        raise ValueError(f"pattern {pattern!r} must contain both 's' and 'f'")
    ns, nf = p.count("s"), p.count("f")
    st = tuple(Stage(DIFFUSION, 1.0 / ns) if ch == "s" else Stage(CONVECTION, 1.0 / nf)
               for ch in p)
    order = 2 if abs(second_order_defect(st)) < 1e-12 else 1
    return CustomScheme(st, order=order, name=name or p)


def resolve(scheme) -> SplittingScheme:
    """Any description of a scheme, as a SplittingScheme: a registered name, an s/f pattern
    (``"sfsf"``), a stage string (``"c:0.5,d:1,c:0.5"``, order 1 declared), the dict of
    :meth:`SplittingScheme.to_dict` (as stored in a model config), or a scheme (returned as is).
    """
    if isinstance(scheme, SplittingScheme):
        return scheme
    if isinstance(scheme, dict):
        missing = {"name", "order", "stages"} - set(scheme)
        if missing:
            raise ValueError(f"a scheme dict needs keys name, order, stages; missing "
                             f"{sorted(missing)}")
        return SplittingScheme.from_stages(scheme["stages"], order=scheme["order"],
                                           name=scheme["name"])
    if isinstance(scheme, str):
        text = scheme.strip()
        if not text:
            raise ValueError(f"empty scheme name; give a registered name ({LISTED_BY['scheme']} "
                             f"lists them) or a pattern of 's'/'f' letters such as 'sfsf'")
        key = _registry_key(text)
        if key is not None:
            return _instance(key)
        if set(text.lower()) <= {"s", "f"}:
            return from_pattern(text)
        if ":" in text:
            return CustomScheme(_st.parse(text), order=1, name="custom")
        raise ValueError(f"{unknown_name('scheme', scheme, available('all'), _ALIASES)}; "
                         f"a pattern has only the letters 's' and 'f', such as 'sfsf'")
    raise TypeError(f"scheme must be a name, a pattern or a SplittingScheme, got "
                    f"{type(scheme).__name__}")


def _raw_stages(scheme) -> tuple[tuple[Stage, ...], str, int | None]:
    """(stages as written, name, declared order) of any description of a scheme: stage strings,
    lists and dicts are not normalised (their sums are part of what is checked)."""
    if isinstance(scheme, SplittingScheme):
        return scheme.stages, scheme.name, scheme.order
    if isinstance(scheme, dict):
        missing = {"name", "order", "stages"} - set(scheme)
        if missing:
            raise ValueError(f"a scheme dict needs keys name, order, stages; missing "
                             f"{sorted(missing)}")
        return _st.as_stages(scheme["stages"]), str(scheme["name"]), scheme["order"]
    if isinstance(scheme, str):
        text = scheme.strip()
        if ":" in text and _registry_key(text) is None:
            return _st.parse(text), "custom", None
        s = resolve(text)
        return s.stages, s.name, s.order
    return _st.as_stages(scheme), "custom", None


def check_order(scheme, order: int | None = None, normalize: bool = False, **options):
    """Measure the classical order of ``scheme`` on random non-commuting matrices with exact
    exponentials (:func:`splitnet.check.measure_order`) and compare it with ``order``.

    ``scheme``: a SplittingScheme, a registered name, a pattern, a stage string, a scheme dict,
    or a list of ``(field, coeff)`` stages. ``order`` defaults to the scheme's declared order
    (none for a bare stage list: then the verdict compares with the nearest integer).

    Consistency comes first: coefficients as written (a stage string, list or dict) must sum to
    1 per field (to 1e-12), else the verdict is ``"inconsistent"`` (``"not consistent:
    convection sums to 2.0"``); ``normalize=True`` rescales them first, as
    :meth:`SplittingScheme.from_stages` does. The step sizes adapt to the order (orders 1 to
    10); too few usable errors give ``"undetermined"`` with the reason. ``options``:
    ``seed``, ``dim``, ``step_sizes``, ``floor``, ``ceiling``, ``tolerance``.

    >>> check_order("yoshida4").ok
    True
    """
    from .check import measure_order

    stages, name, declared = _raw_stages(scheme)
    declared = order if order is not None else declared
    return measure_order(stages, declared, name=name, normalize=normalize, **options)


__all__ = [
    "CONVECTION",
    "CORE",
    "DIFFUSION",
    "FIELDS",
    "BlanesMoan4",
    "CustomScheme",
    "LieTrotter",
    "SplittingScheme",
    "Stage",
    "Strang",
    "StrangComposition",
    "Suzuki4",
    "Yoshida4",
    "Yoshida6",
    "Yoshida8",
    "ZooScheme",
    "available",
    "check_order",
    "from_pattern",
    "get",
    "register",
    "resolve",
    "second_order_defect",
    "zoo_class",
]
