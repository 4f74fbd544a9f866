"""The core schemes: Lie–Trotter, Strang–Marchuk, the Strang compositions of Yoshida and
Suzuki, Blanes–Moan S6, and the class of every zoo entry.

Sources of the coefficients: H. Yoshida, Phys. Lett. A 150 (1990) 262–268 (triple jump, order 6
solution A, order 8 solution D); E. Forest & R. Ruth, Physica D 43 (1990) (triple jump);
M. Suzuki, Phys. Lett. A 146 (1990) 319–323 (5-stage fractal); S. Blanes & P. C. Moan,
J. Comput. Appl. Math. 142 (2002) 313–330 (method S6, order 4); G. Strang (1968), G. I. Marchuk
(1968); H. F. Trotter (1959). These seven are the core (``available("core")``); the zoo of
further published methods is data in :mod:`splitnet.stagelists.zoo`, each registered as a
:class:`ZooScheme` subclass. Every set is re-verified by ``check_order`` in the test suite.

Over k fields (``scheme.over(fields)``): Lie–Trotter and Strang have their k-field forms,
Strang compositions (the core ones and every zoo entry of the composition family) compose the
symmetric k-field step, and the two-field splittings (Blanes–Moan and the zoo's splitting
family) refuse other field counts.
"""

from __future__ import annotations

from ..stagelists import zoo
from ..stagelists.stages import CONVECTION, DIFFUSION, EXACT_ORDER
from .splitting import (
    SplittingScheme,
    composition_stages,
    lie_trotter_stages,
    strang_weights,
    symmetric_step,
)


class LieTrotter(SplittingScheme):
    """Lie–Trotter: ``exp(h C) exp(h D)`` (diffusion first). Order 1; with Euler sub-steps and
    h = 1 it is the pre-norm Transformer layer ``x += attn(x); x += ffn(x)``."""

    name = "lie-trotter"
    order = 1
    citation = ("H. F. Trotter, On the product of semi-groups of operators, Proc. Amer. Math. "
                "Soc. 10 (1959) 545-551")

    def _stages(self):
        return [(DIFFUSION, 1.0), (CONVECTION, 1.0)]

    def _stages_over(self, fields):
        return lie_trotter_stages(fields)


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

    def _stages_over(self, fields):
        return symmetric_step(fields)


class StrangComposition(SplittingScheme):
    """Composition of Strang steps ``S(g_k h) ... S(g_1 h)``, ``S(h) = exp(h/2 C) exp(h D)
    exp(h/2 C)``, unmerged (3 stages per Strang step). ``weights`` are listed outer -> centre and
    mirrored, the centre weight being ``1 - 2 * sum(weights)``. Over k fields S is the symmetric
    generalised Strang step (:func:`~splitnet.integrators.splitting.symmetric_step`) and the order
    is the
    same: the conditions are on the weights of a symmetric second-order basic method."""

    weights: tuple[float, ...] = ()

    def gammas(self) -> tuple[float, ...]:
        w = tuple(self.weights)
        return w + (1.0 - 2.0 * sum(w),) + tuple(reversed(w))

    def _stages(self):
        return composition_stages(self.gammas(), (CONVECTION, DIFFUSION))

    def _stages_over(self, fields):
        return composition_stages(self.gammas(), fields)


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


class Parallel(SplittingScheme):
    """The unsplit scheme: one stage advancing the sum of all fields, ``exp(h (D + C))``.

    Not a splitting: with exact sub-flows its step is the exact flow (declared
    :data:`~splitnet.stagelists.stages.EXACT_ORDER`; ``check_order`` reports "exact flow"), and its
    order is
    that of the sub-flow method: with ``euler`` it is the parallel residual block of GPT-J, PaLM
    and GPT-NeoX, ``x + D(x) + C(x)`` (one explicit Euler step of the whole ODE); with
    ``midpoint`` / ``rk4`` a Runge–Kutta block of the whole layer. Over k fields, one stage of
    their sum (``d+x+c:1``)."""

    name = "parallel"
    order = EXACT_ORDER
    citation = ("B. Wang and A. Komatsuzaki, GPT-J-6B (2021); A. Chowdhery et al., PaLM, JMLR 24 "
                "(2023); S. Black et al., GPT-NeoX-20B, BigScience workshop (2022)")

    def _stages(self):
        return [(f"{DIFFUSION}+{CONVECTION}", 1.0)]

    def _stages_over(self, fields):
        return [("+".join(fields), 1.0)]


class ZooScheme(SplittingScheme):
    """A published method of :mod:`splitnet.stagelists.zoo`. Each entry gets its own subclass (see
    :func:`zoo_class`) whose docstring carries the citation, the formula and the problem
    class; ``method`` is the zoo record (coefficient strings, closed form, printed digits)."""

    method: zoo.Published

    def _stages(self):
        return self.method.stages

    def _stages_over(self, fields):
        # A composition of Strang steps keeps its order over any number of fields when each
        # step becomes the symmetric k-field step (its order conditions are on the weights).
        gammas = strang_weights(self.stages) if self.method.family == "composition" else None
        if gammas is None:
            return super()._stages_over(fields)
        return composition_stages(gammas, fields)


def zoo_class(method: zoo.Published) -> type[ZooScheme]:
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


__all__ = ["BlanesMoan4", "LieTrotter", "Parallel", "Strang", "StrangComposition", "Suzuki4",
           "Yoshida4", "Yoshida6", "Yoshida8", "ZooScheme", "zoo_class"]
