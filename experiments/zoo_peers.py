"""Published coefficient sets of peer projects, transcribed as they apply them, for the table
of docs/zoo.md that measures which do not have their claimed order as general splittings
(experiments/zoo.py measures them; see the doc's table for the sources)."""

from __future__ import annotations

from splitnet import zoo
from splitnet.stagelists.stages import Stage, merge

ODEJL = ("SciML/OrdinaryDiffEq.jl, lib/OrdinaryDiffEqSymplecticRK/src/symplectic_tableaus.jl "
         "at 044194e01b78; perform_step: drift with b_i, then kick with a_i")
GI = "JuliaGNI/GeometricIntegrators.jl, src/integrators/splitting/splitting_methods.jl"
_ODEJL_MCATE42 = ("0.40518861839525227722", "-0.28714404081652408900")


def _odejl(a, b):
    """OrdinaryDiffEq's symplectic tableau: for each i, drift (diffusion) b_i, kick
    (convection) a_i."""
    seq = [st for ai, bi in zip(a, b) for st in ((zoo.D, bi), (zoo.C, ai))]
    return tuple(Stage(f, c) for f, c in seq if c != 0)


def _gi_nonsymmetric(a, b):
    """GeometricIntegrators' SplittingCoefficientsNonSymmetric, applied in list order:
    (v1, a_i), (v2, a_i), (v2, b_i), (v1, b_i) for each i (v1 = convection)."""
    seq = [st for ai, bi in zip(a, b) for st in ((zoo.C, ai), (zoo.D, ai), (zoo.D, bi),
                                                 (zoo.C, bi))]
    return merge([Stage(f, c) for f, c in seq])


SWAPPED = ("a and b swapped: drift with b, kick with a; in McLachlan & Atela's arrangement "
           "(kick b first, drift a) it is a Runge–Kutta–Nyström method")
ADJOINT = "the method and its adjoint composed in the wrong order (phi before phi*)"
BROKEN = ("no arrangement of a and b (drift or kick first, either list as kicks) reaches "
          "order 2; marked 'Broken' upstream")


def peer_sets() -> list[dict]:
    f = [float(x) for x in zoo._MCATE4]
    c = [float(x) for x in zoo._CALVO_SANZ4]
    m5 = [float(x) for x in zoo._MCATE5]
    a1, a2 = (float(x) for x in _ODEJL_MCATE42)
    b1, b2 = -3 / 73, 17 / 59
    gi = list(zoo.BY_NAME["mclachlan4"].closed_form(1.0))
    return [
        {"name": "McAte4", "source": ODEJL, "claimed": 4, "fixed": "mclachlan-atela4-rkn",
         "cause": SWAPPED, "stages": _odejl(f[:4], f[4:])},
        {"name": "CalvoSanz4", "source": ODEJL, "claimed": 4, "fixed": "calvo-sanz4-rkn",
         "cause": SWAPPED, "stages": _odejl(c[:5], c[5:])},
        {"name": "McAte5", "source": ODEJL, "claimed": 5, "fixed": "mclachlan-atela5-rkn",
         "cause": SWAPPED, "stages": _odejl(m5[:6], m5[6:])},
        {"name": "McAte42", "source": ODEJL, "claimed": 4, "fixed": None, "cause": BROKEN,
         "stages": _odejl([a1, a2, 1 - 2 * a1 - 2 * a2, a2, a1],
                          [b1, b2, 1 - 2 * b1 - 2 * b2, b2, b1])},
        {"name": "McLachlan4 (a, b = a reversed), until 2026-07", "claimed": 4,
         "source": GI + " before f97eb05e", "fixed": "mclachlan4", "cause": ADJOINT,
         "stages": _gi_nonsymmetric(gi, gi[::-1])},
        {"name": "McLachlan4 as fixed upstream (f97eb05e)", "source": GI, "claimed": 4,
         "fixed": "mclachlan4", "cause": "none: it has its order",
         "stages": _gi_nonsymmetric(gi[::-1], gi)},
    ]
