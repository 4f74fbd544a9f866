"""A zoo of published splitting and composition methods, as data.

Each :class:`Published` holds a name, its primary citation, the published independent
coefficients (decimal strings, so no digit is lost on the way in), how the stage list is built
from them, the declared order as a general splitting, and whether the method is symmetric.
:mod:`splitnet.integrators.schemes` registers every entry; ``experiments/zoo.py`` measures them all
and
writes ``docs/zoo.md``; ``experiments/zoo_coefficients.py`` re-derives every coefficient set
(closed forms and order conditions in 40-digit arithmetic) and checks the strings below.

Conventions. ``C`` = convection, ``D`` = diffusion; the first stage is applied first.
A composition of Strang steps ``S(g) = exp(g/2 C) exp(g D) exp(g/2 C)`` is written out
unmerged (three stages per step), like ``yoshida4``. A splitting ``C a1 D b1 C a2 ...`` is
written as published. Where the published digits were fewer than double precision the strings
hold the coefficients re-derived from the order conditions (to 25 digits) and ``published``
keeps the printed values.

Problem classes. ``general`` methods have their order for any two non-commuting fields.
``rkn`` methods (Runge–Kutta–Nyström) reach their ``class_order`` only for second-order
systems ``q'' = f(q)`` split into a drift ``(q, p)' = (p, 0)`` (the **diffusion** field here) and
a kick ``(q, p)' = (0, f(q))`` (the **convection** field), where ``[C, [C, [C, D]]] = 0``;
their ``order`` is what they have as general splittings (measured), and the registry lists them
apart (``sn.schemes.available("restricted")``).

Imports nothing but :mod:`splitnet.stagelists.stages`: pure data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .stages import CONVECTION, DIFFUSION, Stage

C, D = CONVECTION, DIFFUSION
GENERAL = "general"
RKN = "rkn"
PROBLEM_CLASSES = {
    GENERAL: "any two non-commuting fields",
    RKN: ("second-order systems q'' = f(q): diffusion = drift (p, 0), convection = kick "
          "(0, f(q)), so that [C, [C, [C, D]]] = 0 (quadratic kinetic energy)"),
}


# ---------------------------------------------------------------------------------------------
# Builders: published independent coefficients -> (field, coeff) pairs. Plain arithmetic, so
# they run in float64 for the schemes and in mpmath for the re-derivation.

def composition(*weights):
    """Strang steps with weights ``g_1 .. g_k`` (outer -> centre) mirrored around the centre
    ``1 - 2 (g_1 + ... + g_k)``: ``S(g_1) ... S(g_k) S(g_c) S(g_k) ... S(g_1)``."""
    centre = 1 - 2 * sum(weights)
    gs = list(weights) + [centre] + list(reversed(weights))
    return [st for g in gs for st in ((C, g / 2), (D, g), (C, g / 2))]


def yoshida(*w):
    """Yoshida's numbering: ``S(w_k) ... S(w_1) S(w_0) S(w_1) ... S(w_k)``, ``w_0`` closing."""
    return composition(*reversed(w))


def full_composition(*gs):
    """Strang steps with every weight given: ``S(g_m) ... S(g_1)`` (g_1 first)."""
    return [st for g in gs for st in ((C, g / 2), (D, g), (C, g / 2))]


def palindrome(first, *outer):
    """A symmetric splitting alternating the fields, ``first`` first: ``outer`` is its outer
    half up to the centre minus one coefficient; the last outer coefficient closes its field
    (``1/2 - sum``) and the centre closes the other (``1 - 2 sum``), so each field sums to 1."""
    fields = [first if i % 2 == 0 else (D if first == C else C) for i in range(len(outer) + 2)]
    half = list(outer)
    half.append(0.5 - sum(c for f, c in zip(fields, half) if f == fields[len(outer)]))
    centre = 1 - 2 * sum(c for f, c in zip(fields, half) if f == fields[-1])
    seq = list(zip(fields, half))
    return seq + [(fields[-1], centre)] + list(reversed(seq))


def alternating(first, *coeffs):
    """A non-symmetric splitting ``first c_1, other c_2, first c_3, ...`` with every
    coefficient given (zeros dropped)."""
    other = D if first == C else C
    return [((first, other)[i % 2], c) for i, c in enumerate(coeffs) if c != 0]


def lie_adjoint(*ab):
    """McLachlan's composition of the Lie step ``phi_t = exp(t D) exp(t C)`` (C first) and its
    adjoint ``phi*_t = exp(t C) exp(t D)``: ``phi*_{b_m} phi_{a_m} ... phi*_{b_1} phi_{a_1}``,
    ``ab = (a_1..a_m, b_1..b_m)``, adjacent stages of one field merged."""
    m = len(ab) // 2
    seq = []
    for a, b in zip(ab[:m], ab[m:]):
        for f, c in ((C, a), (D, a), (D, b), (C, b)):
            if seq and seq[-1][0] == f:
                seq[-1] = (f, seq[-1][1] + c)
            else:
                seq.append((f, c))
    return seq


def number(text: str, one=1.0):
    """A coefficient string (decimal, or a fraction ``p/q``) in the number type of ``one``."""
    if "/" in text:
        p, q = text.split("/")
        return one * int(p) / int(q)
    return one * float(text) if isinstance(one, float) else type(one)(text)


@dataclass(frozen=True)
class Published:
    """One published method. ``params`` are the independent coefficients (strings) that
    ``build`` turns into the stage list; ``closed_form(one)`` (when the coefficients have one)
    returns them in the number type of ``one``."""

    name: str
    order: int
    citation: str
    build: Callable
    params: tuple[str, ...]
    symmetric: bool
    family: str = "splitting"               # or "composition" (of Strang steps)
    problem_class: str = GENERAL
    class_order: int | None = None          # order within ``problem_class`` (restricted ones)
    published: tuple[str, ...] = ()         # printed digits, where ``params`` refine them
    closed_form: Callable | None = None
    formula: str = ""
    note: str = ""
    accuracy: float = 1e-15                 # order-condition defect of the stored strings

    def pairs(self, one=1.0) -> list:
        """``(field, coeff)`` pairs in the number type of ``one``."""
        return self.build(*(number(p, one) for p in self.params))

    @property
    def stages(self) -> tuple[Stage, ...]:
        return tuple(Stage(f, float(c)) for f, c in self.pairs())


def _cf(*exprs):
    return lambda one: tuple(e(one) for e in exprs)


def _root(x, n, one):
    return (x * one) ** (one / n)


# ---------------------------------------------------------------------------------------------
# Citations

YOSHIDA = ("H. Yoshida, Construction of higher order symplectic integrators, Phys. Lett. A 150 "
           "(1990) 262-268")
SUZUKI = ("M. Suzuki, Fractal decomposition of exponential operators with applications to "
          "many-body theories and Monte Carlo simulations, Phys. Lett. A 146 (1990) 319-323")
MCLACHLAN95 = ("R. I. McLachlan, On the numerical integration of ordinary differential "
               "equations by symmetric composition methods, SIAM J. Sci. Comput. 16 (1995) "
               "151-168")
MCATE = ("R. I. McLachlan and P. Atela, The accuracy of symplectic integrators, Nonlinearity 5 "
         "(1992) 541-562")
OMF = ("I. P. Omelyan, I. M. Mryglod and R. Folk, Optimized Forest-Ruth- and Suzuki-like "
       "algorithms for integration of motion in many-body systems, Comput. Phys. Commun. 146 "
       "(2002) 188-202")
BLANES_MOAN = ("S. Blanes and P. C. Moan, Practical symplectic partitioned Runge-Kutta and "
               "Runge-Kutta-Nystrom methods, J. Comput. Appl. Math. 142 (2002) 313-330")
KAHAN_LI = ("W. Kahan and R.-C. Li, Composition constants for raising the orders of "
            "unconventional schemes for ordinary differential equations, Math. Comp. 66 (1997) "
            "1089-1099")
SOFRONIOU = ("M. Sofroniou and G. Spaletta, Derivation of symmetric composition constants for "
             "symmetric integrators, Optim. Methods Softw. 20 (2005) 597-613")
RUTH = "R. D. Ruth, A canonical integration technique, IEEE Trans. Nucl. Sci. 30 (1983) 2669-2671"
FOREST_RUTH = ("E. Forest and R. D. Ruth, Fourth-order symplectic integration, Physica D 43 "
               "(1990) 105-117; J. Candy and W. Rozmus, A symplectic integration algorithm for "
               "separable Hamiltonian functions, J. Comput. Phys. 92 (1991) 230-256")
CALVO_SANZ = ("M. P. Calvo and J. M. Sanz-Serna, The development of variable-step symplectic "
              "integrators, with application to the two-body problem, SIAM J. Sci. Comput. 14 "
              "(1993) 936-952")


# ---------------------------------------------------------------------------------------------
# The methods, by declared order. ``build`` gets the ``params`` in order.

def _omelyan2(one):
    y = _root(2 * _root(326, 2, one) - 36, 3, one)
    return ((y * y + 6 * y - 2) / (12 * y),)


def _mclachlan4(one):
    r = _root(19, 2, one)
    return ((146 + 5 * r) / 540, (-2 + 10 * r) / 135, one / 5, (-23 - 20 * r) / 270,
            (14 - r) / 108)


def _power_composition(base, outer):
    """Weights of Suzuki's / Yoshida's recursion: each Strang step of ``outer`` replaced by the
    composition ``base`` (both lists of full weights)."""
    return tuple(g * q for q in outer for g in base)


def _suzuki6(one):
    return 1 / (4 - _root(4, 3, one)), 1 / (4 - _root(4, 5, one))


def _triple_jump6(one):
    return 1 / (2 - _root(2, 3, one)), 1 / (2 - _root(2, 5, one))


def _mclachlan_atela3(a1):
    a2 = 1 / (4 * a1) - a1 / 2
    a3 = 1 - a1 - a2
    return alternating(C, a3, a1, a2, a2, a1, a3)


def _p(*xs: str) -> tuple[str, ...]:
    return tuple(xs)


_SQRT2 = _cf(lambda one: 1 / _root(2, 2, one))
_THETA = _cf(lambda one: 1 / (2 - _root(2, 3, one)) / 2, lambda one: 1 / (2 - _root(2, 3, one)))

PUBLISHED: tuple[Published, ...] = (
    # -- order 2 -------------------------------------------------------------------------------
    Published("mclachlan-atela2", 2, MCATE, lambda r: alternating(C, 1 - r, r, r, 1 - r),
           _p("0.707106781186547524400844362105"), False, closed_form=_SQRT2,
           formula="r = 1/sqrt(2): C (1 - r), D r, C r, D (1 - r)",
           note="the optimal two-stage second-order method"),
    Published("omelyan2", 2, f"{OMF}; the value 0.1932 already in {MCLACHLAN95}",
           lambda lam: palindrome(C, lam), _p("0.193183327503783573962899765027"), True,
           closed_form=_omelyan2,
           formula="C l, D 1/2, C (1 - 2l), D 1/2, C l with l = (y^2 + 6y - 2) / (12y), "
                   "y = (2 sqrt(326) - 36)^(1/3)",
           note="the minimum error norm among two-stage second-order methods"),
    # -- order 3 -------------------------------------------------------------------------------
    Published("ruth3", 3, RUTH, lambda *c: alternating(C, *c),
           _p("7/24", "2/3", "3/4", "-2/3", "-1/24", "1"), False,
           formula="C 7/24, D 2/3, C 3/4, D -2/3, C -1/24, D 1 (the kick first)"),
    Published("mclachlan-atela3", 3, MCATE, _mclachlan_atela3, _p("0.9196615230173999"), False,
           formula="a2 = 1/(4 a1) - a1/2, a3 = 1 - a1 - a2: C a3, D a1, C a2, D a2, C a1, D a3",
           note="a1 = 0.9196615230173999 as published (16 digits)"),
    # -- order 4 -------------------------------------------------------------------------------
    Published("forest-ruth4", 4, FOREST_RUTH, lambda h, t: palindrome(C, h, t),
           _p("0.675603595979828817023843904486", "1.35120719195965763404768780897"), True,
           closed_form=_THETA,
           formula="t = 1/(2 - 2^(1/3)): C t/2, D t, C (1-t)/2, D (1-2t), C (1-t)/2, D t, C t/2",
           note="the triple jump with adjacent stages merged (7 stages, yoshida4 has 9)"),
    Published("pefrl", 4, OMF, lambda xi, lam, chi: palindrome(C, xi, (1 - 2 * lam) / 2, chi),
           _p("0.1786178958448091", "-0.2123418310626054", "-0.06626458266981849"), True,
           formula="C xi, D (1-2l)/2, C chi, D l, C (1 - 2(chi + xi)), mirrored",
           note="position-extended Forest-Ruth-like; xi, l, chi minimise an error norm"),
    Published("vefrl", 4, OMF, lambda xi, lam, chi: palindrome(C, xi, (1 - 2 * lam) / 2, chi),
           _p("0.1644986515575760", "-0.02094333910398989", "1.235692651138917"), True,
           formula="as pefrl, with the velocity-version parameters",
           note="velocity-extended Forest-Ruth-like"),
    Published("mclachlan4", 4, MCLACHLAN95, lambda *b: lie_adjoint(*b[::-1], *b),
           _p("0.310730545773524755113305388739", "0.308066588410420263128665332138", "0.2",
              "-0.408066588410420263128665332138", "0.0892694542264752448866946112606"), True,
           closed_form=_mclachlan4,
           formula="phi*_{b5} phi_{a5} ... phi*_{b1} phi_{a1} with b = ((146 + 5r)/540, "
                   "(-2 + 10r)/135, 1/5, (-23 - 20r)/270, (14 - r)/108), r = sqrt(19), "
                   "a = b reversed",
           note="m = 5, minimum error; the adjoint pairs merge into 11 stages"),
    Published("blanes-moan4-srkn", 4, BLANES_MOAN, lambda *p: palindrome(C, *p),
           _p("0.0829844064174052", "0.245298957184271", "0.396309801498368",
              "0.604872665711080", "-0.0390563049223486"), True,
           formula="SRKN_6^b: C b1, D a1, C b2, D a2, C b3, D a3, C b4, mirrored",
           note="optimised for RKN problems (kick = convection); fourth order for general "
                "splittings too, as a symmetric method gets its even orders for free"),
    # -- order 6 -------------------------------------------------------------------------------
    Published("blanes-moan6", 6, BLANES_MOAN, lambda *p: palindrome(C, *p),
           _p("0.0502627644003922", "0.148816447901042", "0.413514300428344",
              "-0.132385865767784", "0.0450798897943977", "0.067307604692185",
              "-0.188054853819569", "0.432666402578175", "0.541960678450780"), True,
           formula="S10: C a1, D b1, ..., C a5, D b5, C a6, mirrored",
           note="the sixth-order partner of blanes-moan4 (S6)"),
    Published("yoshida6b", 6, YOSHIDA, yoshida,
           _p("-2.132285222001451520705993", "0.004260681870792016196083714",
              "1.439848167976783090930499"), True, family="composition",
           published=_p("-2.13228522200144", "0.00426068187079180", "1.43984816797678"),
           formula="solution B: S(w3) S(w2) S(w1) S(w0) S(w1) S(w2) S(w3)"),
    Published("yoshida6c", 6, YOSHIDA, yoshida,
           _p("0.001528862284249270252267239", "-2.144035316305389310601302",
              "1.447782562399297932897897"), True, family="composition",
           published=_p("0.00152886228424922", "-2.14403531630539", "1.44778256239930"),
           formula="solution C"),
    Published("triple-jump6", 6, f"{YOSHIDA}; M. Creutz and A. Gocksch, Higher-order hybrid Monte "
           f"Carlo algorithms, Phys. Rev. Lett. 63 (1989) 9-12",
           lambda t3, t5: full_composition(*_power_composition([t3, 1 - 2 * t3, t3],
                                                               [t5, 1 - 2 * t5, t5])),
           _p("1.35120719195965763404768780897", "1.17467175808936338449506943656"), True,
           family="composition", closed_form=_triple_jump6,
           formula="the triple jump of triple jumps, t_k = 1/(2 - 2^(1/(k+1))) for k = 2, 4: "
                   "9 Strang steps"),
    Published("suzuki6", 6, SUZUKI,
           lambda p3, p5: full_composition(*_power_composition([p3, p3, 1 - 4 * p3, p3, p3],
                                                               [p5, p5, 1 - 4 * p5, p5, p5])),
           _p("0.414490771794375737142354062861", "0.373065827733272824775863041073"), True,
           family="composition", closed_form=_suzuki6,
           formula="Suzuki's fractal of fractals, p_k = 1/(4 - 4^(1/(k+1))) for k = 2, 4: "
                   "25 Strang steps"),
    Published("kahan-li6", 6, KAHAN_LI, composition,
           _p("0.39216144400731413927925056", "0.33259913678935943859974864",
              "-0.70624617255763935980996482", "0.08221359629355080023149045"), True,
           family="composition", formula="s9odr6a: 9 Strang steps"),
    Published("kahan-li6b", 6, KAHAN_LI, composition,
           _p("0.39103020330868478817", "0.33403728961113601749", "-0.70622728118756134346",
              "0.081877549648059445768"), True, family="composition",
           formula="s9odr6b: 9 Strang steps"),
    # -- order 8 -------------------------------------------------------------------------------
    Published("mclachlan8", 8, MCLACHLAN95, composition,
           _p("0.74167036435061295344822780", "-0.40910082580003159399730010",
              "0.19075471029623837995387626", "-0.57386247111608226665638773",
              "0.29906418130365592384446354", "0.33462491824529818378495798",
              "0.31529309239676659663205666"), True, family="composition",
           formula="s15odr8: 15 Strang steps",
           note="some libraries call this set 'Yoshida8'; it is not one of Yoshida's"),
    Published("yoshida8a", 8, YOSHIDA, yoshida,
           _p("-1.615823741500653784787940", "-2.446991823704245889294691",
              "-0.007169894197095332099806129", "2.440027326166344063816896",
              "0.1577399281237083213428258", "1.820206309706980069331733",
              "1.042426208699704264348953"), True, family="composition",
           published=_p("-1.61582374150097", "-2.44699182370524", "-0.00716989419708120",
                        "2.44002732616735", "0.157739928123617", "1.82020630970714",
                        "1.04242620869991"),
           formula="solution A: 15 Strang steps"),
    Published("yoshida8b", 8, YOSHIDA, yoshida,
           _p("-0.001692485877717065591702166", "2.891957443158173912479733",
              "0.003780395883626682236870708", "-2.896882503304239868589323",
              "2.891051489721989000613590", "-2.338648151010419430977558",
              "1.488192292029213100801708"), True, family="composition",
           published=_p("-0.00169248587770116", "2.89195744315849", "0.00378039588360192",
                        "-2.89688250328827", "2.89105148970595", "-2.33864815101035",
                        "1.48819229202922"),
           formula="solution B"),
    Published("yoshida8c", 8, YOSHIDA, yoshida,
           _p("0.3117908124184667725520546", "-1.559468038214702588209395",
              "-1.678969282596738471212613", "1.663358099633505179757657",
              "-1.064587147891825070535125", "1.369349464168817700556148",
              "0.6290306502103707998984047"), True, family="composition",
           published=_p("0.311790812418427", "-1.55946803821447", "-1.67896928259640",
                        "1.66335809963315", "-1.06458714789183", "1.36934946416871",
                        "0.629030650210433"),
           formula="solution C"),
    Published("yoshida8e", 8, YOSHIDA, yoshida,
           _p("0.02277388401263122598349087", "2.527789273180283391827628",
              "-0.07191800536507050747810125", "0.005360189213752380834896529",
              "-2.048097958834902056442552", "0.1079904677180982796054063",
              "1.303001657575168384905635"), True, family="composition",
           published=_p("0.0227738840094906", "2.52778927322839", "-0.0719180053552772",
                        "0.00536018921307285", "-2.04809795887393", "0.107990467703699",
                        "1.30300165760014"),
           formula="solution E"),
    Published("kahan-li8", 8, KAHAN_LI, composition,
           _p("0.13020248308889008087881763", "0.56116298177510838456196441",
              "-0.38947496264484728640807860", "0.15884190655515560089621075",
              "-0.39590389413323757733623154", "0.18453964097831570709183254",
              "0.25837438768632204729397911", "0.29501172360931029887096624"), True,
           family="composition", formula="s17odr8a: 17 Strang steps"),
    Published("kahan-li8b", 8, KAHAN_LI, composition,
           _p("0.12713692773487857916", "0.56170253798880269972", "-0.38253471994883018888",
              "0.16007605629464743119", "-0.40181637432680696673", "0.18736671654227849724",
              "0.26070870920779240570", "0.29039738812516162389"), True,
           family="composition", formula="s17odr8b: 17 Strang steps"),
    # -- order 10 ------------------------------------------------------------------------------
    Published("kahan-li10", 10, KAHAN_LI, composition,
           _p("0.070428877682658066880", "0.87415651735353949041", "0.055414604963802442707",
              "-0.066800477898797011598", "-0.62641308958799555593", "0.23682621087528762872",
              "-0.42221063403170054210", "0.24222942201040859249", "0.047374515478601436594",
              "0.54386826052472423338", "-0.93252230928447264311", "0.16960179883676464855",
              "0.71608567578450563608", "-0.80016730247310573512", "0.23778185292256770747",
              "-0.32330301550863943389"), True, family="composition",
           formula="s33odr10a: 33 Strang steps"),
    Published("kahan-li10c", 10, KAHAN_LI, composition,
           _p("0.12313526870982994083", "0.77644981696937310520", "0.14905490079567045613",
              "-0.17250761219393744420", "-0.54871240818800177942", "0.14289765421841842100",
              "-0.31419193263986861997", "0.12670943739561041022", "0.17444734584181312998",
              "0.44318544665428572929", "-0.81948900568299084419", "0.13382545738489583020",
              "0.64509023524410605020", "-0.71936337169922060719", "0.20951381813463649682",
              "-0.26828113140636051966"), True, family="composition",
           formula="s33odr10c: 33 Strang steps"),
    Published("sofroniou-spaletta10", 10, SOFRONIOU, composition,
           _p("0.07879572252168641926390768", "0.31309610341510852776481247",
              "0.02791838323507806610952027", "-0.22959284159390709415121340",
              "0.13096206107716486317465686", "-0.26973340565451071434460973",
              "0.07497334315589143566613711", "0.11199342399981020488957508",
              "0.36613344954622675119314812", "-0.39910563013603589787862981",
              "0.10308739852747107731580277", "0.41143087395589023782070412",
              "-0.00486636058313526176219566", "-0.39203335370863990644808194",
              "0.05194250296244964703718290", "0.05066509075992449633587434",
              "0.04967437063972987905456880"), True, family="composition",
           formula="35 Strang steps"),
)

# -- restricted: Runge-Kutta-Nystrom methods (kick = convection, drift = diffusion) -----------
# Arrangement as published by McLachlan & Atela: the kick with b_1 first, then the drift with
# a_1, ... (a drift, b kick). Measured here: with it, the RKN orders are reached on a nonlinear
# q'' = f(q); with a and b swapped (as one library has them) they are not.
_MCATE4 = ("0.515352837431122936", "-0.085782019412973646", "0.441583023616466524",
           "0.128846158365384185", "0.134496199277431089", "-0.224819803079420806",
           "0.756320000515668291", "0.334003603286321425")
_CALVO_SANZ4 = ("0.205177661542290", "0.403021281604210", "-0.12092087633891", "0.512721933192410",
                "0", "0.061758858135626", "0.33897802655364", "0.61479130717558",
                "-0.14054801465937", "0.12501982279453")
_MCATE5 = ("0.339839625839110000", "-0.088601336903027329", "0.5858564768259621188",
           "-0.603039356536491888", "0.3235807965546976394", "0.4423637942197494587",
           "0.1193900292875672758", "0.6989273703824752308", "-0.1713123582716007754",
           "0.4012695022513534480", "0.0107050818482359840", "-0.0589796254980311632")


def kick_drift(*ab):
    """``C b_1, D a_1, C b_2, D a_2, ...`` from ``ab = (a_1..a_m, b_1..b_m)`` (zeros dropped)."""
    m = len(ab) // 2
    return alternating(C, *[x for pair in zip(ab[m:], ab[:m]) for x in pair])


PUBLISHED += (
    Published("mclachlan-atela4-rkn", 3, MCATE, kick_drift, _MCATE4, False, problem_class=RKN,
           class_order=4, formula="kick b1, drift a1, ..., kick b4, drift a4",
           note="fourth order for q'' = f(q) only"),
    Published("calvo-sanz4-rkn", 3, CALVO_SANZ, kick_drift, _CALVO_SANZ4, False, problem_class=RKN,
           class_order=4, formula="kick b1, drift a1, ..., kick b5 (a5 = 0)",
           note="fourth order for q'' = f(q) only; 14-15 digits as published (the kick "
                "coefficients sum to 1 + 6e-15), not re-derivable from the general conditions",
           accuracy=1e-14),
    Published("mclachlan-atela5-rkn", 3, MCATE, kick_drift, _MCATE5, False, problem_class=RKN,
           class_order=5, formula="kick b1, drift a1, ..., kick b6, drift a6",
           note="fifth order for q'' = f(q) only"),
    Published("blanes-moan6-rkn", 4, BLANES_MOAN, lambda *p: palindrome(D, *p),
           _p("0.0378593198406116", "0.09171915262446165", "0.102635633102435", "0.183983170005006",
              "-0.0258678882665587", "-0.05653436583288827", "0.314241403071447",
              "0.004914688774712854", "-0.130144459517415", "0.143761127168358",
              "0.106417700369543", "0.328567693746804", "-0.00879424312851058"), True,
           problem_class=RKN, class_order=6,
           formula="SRKN_14^a: drift b0, kick a1, drift b1, ..., kick a7, drift b7, mirrored",
           note="sixth order for q'' = f(q) only; fourth as a general splitting"),
)

BY_NAME = {m.name: m for m in PUBLISHED}


__all__ = [
    "BLANES_MOAN",
    "BY_NAME",
    "CALVO_SANZ",
    "FOREST_RUTH",
    "GENERAL",
    "KAHAN_LI",
    "MCATE",
    "MCLACHLAN95",
    "OMF",
    "PROBLEM_CLASSES",
    "PUBLISHED",
    "RKN",
    "RUTH",
    "SOFRONIOU",
    "SUZUKI",
    "YOSHIDA",
    "Published",
    "alternating",
    "composition",
    "full_composition",
    "kick_drift",
    "lie_adjoint",
    "number",
    "palindrome",
    "yoshida",
]
