"""Any splitnet scheme as a diffrax solver (the ``jax`` extra: ``pip install -e ".[jax]"``).

    from splitnet.interop.diffrax import SplittingSolver
    solver = SplittingSolver(sn.schemes.get("yoshida4"), method="rk4",
                             flows={"convection": phi})      # phi(t, y, dt): the exact flow
    terms = diffrax.MultiTerm(diffrax.ODETerm(f_c), diffrax.ODETerm(f_d))  # the scheme's fields,
                                                                           # in scheme.fields order
    sol = diffrax.diffeqsolve(terms, solver, t0, t1, dt0, y0)

One step ``y(t0) -> y(t0 + h)`` is the scheme's step: stage i advances its field by ``c_i h``
from the field's own clock ``t0 + h clock_i``, by the user's flow where one is given and by the
sub-flow ``method`` (an explicit Runge–Kutta method of
:data:`~splitnet.integrators.subflows.METHODS`, applied to ``term.vf(t, y, args)``) otherwise.
The term of a field given by its flow is not evaluated by the step (``func`` still sums every
term's vector field, for diffrax's initial step size). ``order(terms)`` is the scheme's declared
order when every field has its flow, else
:meth:`~splitnet.integrators.splitting.SplittingScheme.effective_order` of the method. States are
arrays (not PyTrees of several leaves); the solver is fixed-step (no error estimate), and
``jax.jit`` and ``jax.vmap`` of ``diffeqsolve`` with it work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from ..configs.config import require

require("jax", "diffrax", extra="jax", feature="splitnet.interop.diffrax")

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402

from ..integrators.schemes import resolve  # noqa: E402
from ..integrators.subflows import get_method  # noqa: E402
from ..stagelists.stages import clocks as stage_clocks  # noqa: E402


class SplittingSolver(diffrax.AbstractSolver):
    """A splitting scheme's step as a diffrax solver over a ``MultiTerm`` of its fields (one
    term per name of ``scheme.fields``, in that order).

    ``scheme``: a scheme or anything :func:`~splitnet.integrators.schemes.resolve` takes (a
    name, a stage string). ``method``: the sub-flow method of the fields without a flow (an
    explicit one: ``exact`` is torchdiffeq's). ``flows``: field name -> ``phi(t, y, dt)``, the
    state after ``dt`` of that field's own ODE (exact, closed form, an FFT step)."""

    term_structure: ClassVar = diffrax.MultiTerm
    interpolation_cls: ClassVar[Callable[..., diffrax.LocalLinearInterpolation]] = \
        diffrax.LocalLinearInterpolation

    scheme: object = eqx.field(static=True)
    method: str = eqx.field(static=True)
    flows: tuple = eqx.field(static=True)
    plan: tuple = eqx.field(static=True)

    def __init__(self, scheme, method: str = "euler", flows: dict | None = None):
        scheme = resolve(scheme)
        m = get_method(method)
        if m.order is None:
            raise ValueError(f"method {method!r} is not an explicit Runge–Kutta method; "
                             f"give an explicit one or the fields' flows")
        flows = {} if flows is None else dict(flows)
        unknown = [f for f in flows if f not in scheme.fields]
        if unknown:
            raise ValueError(f"flows given for {', '.join(unknown)}, but scheme "
                             f"{scheme.name!r} advances {', '.join(scheme.fields)}")
        for name, phi in flows.items():
            if not callable(phi):
                raise TypeError(f"{name} flow must be callable phi(t, y, dt), got "
                                f"{type(phi).__name__}")
        for st in scheme.stages:
            if len(st.components) > 1:
                raise ValueError(f"scheme {scheme.name!r} has the sum stage {st.field}; the "
                                 f"diffrax solver advances one field per stage")
        index = {f: i for i, f in enumerate(scheme.fields)}
        self.scheme, self.method = scheme, method
        self.flows = tuple(flows.get(f) for f in scheme.fields)
        self.plan = tuple((index[st.field], float(st.coeff), float(c))
                          for st, c in zip(scheme.stages, stage_clocks(scheme.stages)))

    def order(self, terms) -> int:
        if all(phi is not None for phi in self.flows):
            return self.scheme.order
        return self.scheme.effective_order(self.method)

    def init(self, terms, t0, t1, y0, args):
        self._check_terms(terms)
        return None

    def _check_terms(self, terms) -> None:
        if len(terms.terms) != len(self.flows):
            raise ValueError(f"scheme {self.scheme.name!r} advances {len(self.flows)} fields "
                             f"({', '.join(self.scheme.fields)}), but the MultiTerm has "
                             f"{len(terms.terms)} terms")

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        del solver_state, made_jump
        m = get_method(self.method)
        h = t1 - t0
        y = y0
        for j, coeff, clock in self.plan:
            if self.flows[j] is not None:
                y = self.flows[j](t0 + h * clock, y, h * coeff)
            else:
                term = terms.terms[j]
                y = m(lambda t, x, term=term: term.vf(t, x, args), t0 + h * clock, y, h * coeff)
        return y, None, {"y0": y0, "y1": y}, None, diffrax.RESULTS.successful

    def func(self, terms, t0, y0, args):
        out = None
        for term in terms.terms:
            v = term.vf(t0, y0, args)
            out = v if out is None else out + v
        return out


__all__ = ["SplittingSolver"]
