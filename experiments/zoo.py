"""Regenerate docs/zoo.md and docs/figures/zoo_efficiency.png: every registered splitting method
measured, ranked by efficiency, and the peer coefficient sets that fail their claims.

    python3 -m splitnet.dev regen zoo        # the same: render from the cache (seconds), measuring
                                             # only methods whose entry is missing or stale
    python3 experiments/zoo.py               # render from the cache, measuring what it lacks
    python3 experiments/zoo.py --only NAME   # re-measure NAME (minutes), render the rest cached
    python3 experiments/zoo.py --refresh     # re-measure everything (~1 h on 2 CPU cores)

The measurements are cached per method in experiments/cache/zoo/methods/NAME.json (committed),
keyed by a fingerprint of the method's stages, orders and coefficient strings
(``splitnet.dev.zoocache``): a changed coefficient set invalidates only its own entry.

Float64. Matrices: ``sn.check_order`` (random 6x6, exact exponentials, adaptive step sizes),
seeds 0-2. Particle system: ``sn.particle_system()`` (6 particles in R^8, attention +
feed-forward, seed 0) with exact sub-flows (torchdiffeq dopri5, rtol 1e-13): local errors at
adaptive step sizes for the order and error constant, global errors at T = 1 for the
efficiency ranking. Coefficients: 40-digit order conditions (experiments/zoo_coefficients.py).
Runge–Kutta–Nyström orders: ``splitnet.analyses.problems.NystromProblem`` (nonlinear q'' = f(q)).
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

import splitnet as sn
from splitnet import zoo
from splitnet.analyses.problems import NystromProblem, particle_problem
from splitnet.dev import zoocache
from splitnet.dev.docblocks import write_counts
from splitnet.names import unknown_name
from splitnet.order.check import random_matrices
from splitnet.order.fit import adaptive_errors, window_fit
from splitnet.plots import plot_zoo_efficiency
from splitnet.stagelists.stages import format_stages, merge

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "experiments") not in sys.path:    # zoo_peers, zoo_coefficients beside this file
    sys.path.insert(0, str(ROOT / "experiments"))
from zoo_peers import peer_sets  # noqa: E402

DOC = ROOT / "docs" / "zoo.md"
COUNTED = (ROOT / "README.md", ROOT / "docs" / "theory.md")     # prose that quotes the counts
FIG = ROOT / "docs" / "figures" / "zoo_efficiency.png"
BANDS = (1e-3, 1e-5, 1e-7, 1e-9)
PARTICLE_FLOOR, PARTICLE_CEILING = 3e-12, 1e-5     # dopri5 reference floor ~3e-13
COST_CAP = 600                                      # sub-flows per global run
STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def _get(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sn.schemes.get(name)


def _short(citation: str) -> str:
    """'Yoshida 1990' from a full citation."""
    author = citation.split(",")[0].split(" and ")[0].split()[-1]
    year = next((w.strip("();") for w in citation.replace(")", " ").split()
                 if w.strip("(;").isdigit() and len(w.strip("(;")) == 4), "")
    return f"{author} {year}"


def subflows_per_step(stages) -> int:
    """Sub-flows an implementation runs per step: adjacent stages of one field merged, and the
    last stage merged into the next step's first when they share a field (FSAL)."""
    m = merge(stages)
    return len(m) - (1 if len(m) > 1 and m[0].field == m[-1].field else 0)


# ---------------------------------------------------------------------------------------------
# Measurements

def matrix_row(s) -> dict:
    rs = [sn.check_order(s, seed=k) for k in range(3)]
    return {"measured": [r.measured for r in rs], "tail": rs[0].tail,
            "ok": all(r.ok for r in rs), "detectable": rs[0].detectable,
            "points": int(rs[0].used.sum())}


def particle_local(s, prob) -> dict:
    """Local errors (relative to |x0|) at adaptive step sizes, exact sub-flows, merged stages."""
    merged = s.merged()
    norm = float(prob.x0.norm())

    def err(h):
        with torch.no_grad():
            x = merged.step(prob.diffusion, prob.convection, prob.x0, step_size=h, method="exact")
            return float((x - prob.exact(h)).norm()) / norm

    # 6 points: the grid is refined down to the floor, where the tail is most asymptotic
    hs, errs = adaptive_errors(err, PARTICLE_FLOOR, PARTICLE_CEILING, h_start=2.0, min_points=6)
    return {"h": hs.tolist(), "err": errs.tolist()}


def particle_global(s, prob, ref_end) -> dict:
    """Global error at T = 1 (relative to |x0|) against sub-flows over [0, 1], until the error
    is under the floor or the cost over COST_CAP."""
    merged = s.merged()
    per_step, first = subflows_per_step(s.stages), len(merge(s.stages)) - subflows_per_step(
        s.stages)
    out = {"cost": [], "err": []}
    for n in STEPS:
        cost = n * per_step + first
        if cost > COST_CAP and out["cost"]:
            break
        with torch.no_grad():
            x = merged.integrate(prob.diffusion, prob.convection, prob.x0, (0.0, 1.0), 1.0 / n,
                                 method="exact")[-1]
        e = float((x - ref_end).norm()) / float(prob.x0.norm())
        out["cost"].append(cost)
        out["err"].append(e)
        if e < 1e-11:
            break
    return out


def fitted(hs, errs, floor, ceiling, order) -> dict:
    """Window order, tail order, points, and the local error constant err / h^(p+1) at the
    smallest fitted h (p the declared order)."""
    hs, errs = np.asarray(hs), np.asarray(errs)
    slope, used = window_fit(hs, errs, floor, ceiling)
    n = int(used.sum())
    if n < 3:
        return {"measured": float("nan"), "tail": float("nan"), "points": n,
                "constant": float("nan")}
    idx = np.flatnonzero(used)[np.argsort(hs[used])[:3]]
    tail = float(np.polyfit(np.log(hs[idx]), np.log(errs[idx]), 1)[0]) - 1
    h0 = hs[idx[0]]
    return {"measured": slope - 1, "tail": tail, "points": n,
            "constant": float(errs[idx[0]] / h0 ** (order + 1))}


def nystrom_order(stages) -> float:
    prob = NystromProblem()
    hs, errs = adaptive_errors(lambda h: prob.local_error(stages, h), 1e-13, 1e-5, h_start=2.0)
    return fitted(hs, errs, 1e-13, 1e-5, 0)["tail"]


def coefficient_row(n) -> dict:
    """40-digit order-condition defects: of the float64 stages every scheme runs with, and for
    zoo entries of the stored strings and of the printed digits."""
    import mpmath as mp
    import zoo_coefficients as zc

    from splitnet.order.algebra import condition_defects

    s = _get(n)
    pairs = [(st.field, mp.mpf(repr(st.coeff))) for st in s.stages]
    row = {"float_defect": float(max(condition_defects(pairs, s.order, zc.ONE)))}
    m = zoo.BY_NAME.get(n)
    if m is not None:
        row["defect"] = float(zc.defect(m, [zoo.number(p, zc.ONE) for p in m.params]))
    if m is not None and m.published:
        printed = [zoo.number(p, zc.ONE) for p in m.published]
        stored = [zoo.number(p, zc.ONE) for p in m.params]
        row["printed_defect"] = float(zc.defect(m, printed))
        row["printed_off"] = float(max(abs(a - b) for a, b in zip(printed, stored)))
    if m is not None and m.closed_form is not None:
        stored = [zoo.number(p, zc.ONE) for p in m.params]
        row["closed"] = float(max(abs(a - b) for a, b in zip(m.closed_form(zc.ONE), stored)))
    return row


# ---------------------------------------------------------------------------------------------
# Peers: coefficient sets as other projects publish them (transcribed in zoo_peers.py)

def peer_rows() -> list[dict]:
    rows = []
    for p in peer_sets():
        row = {**p, "general": sn.check_order(p["stages"]).tail,
               "rkn": nystrom_order(p["stages"])}
        if p["fixed"]:
            fixed = _get(p["fixed"])
            row["fixed_general"] = sn.check_order(fixed).tail
            row["fixed_rkn"] = nystrom_order(fixed.stages)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# The check's window, measured (why not [1e-12, 1e-2] relative)

WINDOWS = {
    "relative error, [1e-12, 1e-2] (as first proposed)": ("rel", 1e-12, 1e-2),
    "unit-state error, [1e-12, 1e-2]": ("abs", 1e-12, 1e-2),
    "unit-state error, [1e-13, 1e-6] (adopted)": ("abs", 1e-13, 1e-6),
}


WINDOW_SEEDS = range(6)


def window_entry(s, seeds=WINDOW_SEEDS) -> dict:
    """Worst deviation from the declared order of scheme ``s`` over ``seeds``, of the window fit
    and the tail (3 smallest h), on a grid h = 8 * 2^(-k/4), and the number of wrong verdicts:
    ``{window: [worst window fit, worst tail, failures]}``."""
    from splitnet.order.check import expm, matrix_step

    hs = 8.0 * 2.0 ** (-np.arange(0, 160) / 4)
    worst = {k: [0.0, 0.0, 0] for k in WINDOWS}
    for seed in seeds:
        a, b = random_matrices(6, seed)
        ab, rel = [], []
        for h in hs:
            e = expm(h * (a + b))
            d = float(np.linalg.norm(matrix_step(s.stages, a, b, h) - e, 2))
            ab.append(d)
            rel.append(d / float(np.linalg.norm(e, 2)))
            if d < 1e-15:
                break
        for key, (kind, lo, hi) in WINDOWS.items():
            f = fitted(hs[:len(ab)], ab if kind == "abs" else rel, lo, hi, s.order)
            w = worst[key]
            w[0] = max(w[0], abs(f["measured"] - s.order))
            w[1] = max(w[1], abs(f["tail"] - s.order))
            w[2] += not (abs(f["tail"] - s.order) <= 0.3
                         and abs(f["measured"] - s.order) <= 0.6)
    return {k: [float(v[0]), float(v[1]), int(v[2])] for k, v in worst.items()}


def window_rows(entries: dict) -> dict:
    """The calibration over every registered scheme: the worst of their window entries."""
    out = {}
    for k in WINDOWS:
        per = [e["window"][k] for e in entries.values()]
        out[k] = {"window": max(w[0] for w in per), "tail": max(w[1] for w in per),
                  "failures": sum(w[2] for w in per), "cases": len(per) * len(WINDOW_SEEDS)}
    return out


# ---------------------------------------------------------------------------------------------
# Efficiency ranking

def cost_to_reach(costs, errors, target: float) -> float:
    """Sub-flows needed for ``target``, interpolated log-log along the measured curve; NaN when
    the curve does not reach it."""
    c, e = np.log(np.asarray(costs, float)), np.log(np.maximum(errors, 1e-300))
    for i in range(len(e) - 1):
        if e[i] >= math.log(target) >= e[i + 1]:
            t = (math.log(target) - e[i]) / (e[i + 1] - e[i])
            return float(math.exp(c[i] + t * (c[i + 1] - c[i])))
    if len(e) and e[0] <= math.log(target):
        return float(math.exp(c[0]))
    return float("nan")


def ranking(curves: dict) -> list[tuple[float, list[tuple[str, float]]]]:
    out = []
    for band in BANDS:
        costs = [(n, cost_to_reach(c[1], c[2], band)) for n, c in curves.items()]
        costs = sorted((x for x in costs if np.isfinite(x[1])), key=lambda x: x[1])
        out.append((band, costs))
    return out


# ---------------------------------------------------------------------------------------------
# Running: every measurement of one method is one cache entry (splitnet.dev.zoocache)

def measure(name, prob, ref_end) -> dict:
    """Every measurement of method ``name`` that the doc shows: plain data with the fingerprint
    of the scheme it was measured on."""
    s = _get(name)
    entry = {"fingerprint": zoocache.fingerprint(s), "matrices": matrix_row(s),
             "coefficients": coefficient_row(name), "window": window_entry(s),
             "particle": {"local": particle_local(s, prob)}}
    if s.problem_class == zoo.GENERAL:
        entry["particle"]["global"] = particle_global(s, prob, ref_end)
    else:
        entry["rkn"] = {"nystrom": nystrom_order(s.stages), "general": sn.check_order(s).tail}
    return entry


def measure_into(names, cache, progress=True) -> None:
    """Measure ``names`` and write each entry as soon as it is done (an interrupted run keeps
    what it finished)."""
    if not names:
        return
    prob = particle_problem()
    with torch.no_grad():
        ref_end = prob.exact(1.0)
    bar = tqdm(names, desc="measuring (exact sub-flows)", disable=not progress)
    for name in bar:
        bar.set_postfix_str(name)
        zoocache.save(name, measure(name, prob, ref_end), cache)


def _peer_key(p) -> dict:
    fixed = zoocache.fingerprint(_get(p["fixed"])) if p["fixed"] else None
    return {k: v for k, v in p.items() if k != "stages"} | {
        "stages": format_stages(p["stages"]), "fixed_fingerprint": fixed}


def cached_peers(cache, refresh=False) -> list[dict]:
    """The peer table's rows, from the cache unless the transcribed sets (or the methods that
    fix them) changed."""
    key = zoocache.data_fingerprint([_peer_key(p) for p in peer_sets()])
    old = zoocache.load_peers(cache)
    if refresh or old is None or old["fingerprint"] != key:
        rows = [{k: v for k, v in r.items() if k != "stages"} for r in peer_rows()]
        old = zoocache.save_peers(rows, key, cache)
    return old["rows"]


# ---------------------------------------------------------------------------------------------
# The document

def _f(x, fmt=".2f", missing="–") -> str:
    return missing if x is None or not np.isfinite(x) else format(x, fmt)


def _order_cell(s) -> str:
    if s.problem_class == zoo.GENERAL:
        return str(s.order)
    return f"{s.order} (rkn: {s.class_order})"


def method_table(names, mat, part, coef) -> list[str]:
    rows = ["| method | source | order | sym. | stages | sub-flows / step | matrices: order "
            "(seeds 0, 1, 2) | tail | particle system: order (tail; points) | local error "
            "constant | detectable coeff. error | order conditions met to |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for n in names:
        s = _get(n)
        m, p = mat[n], part[n]
        c = coef.get(n, {})
        cite = _short(s.citation) if s.citation else ""
        rows.append(
            f"| `{n}` | {cite} | {_order_cell(s)} | {'yes' if s.is_symmetric else 'no'} | "
            f"{len(s.stages)} | {subflows_per_step(s.stages)} | "
            + ", ".join(_f(x) for x in m["measured"]) + f" | {_f(m['tail'])} | "
            f"{_f(p['measured'])} ({_f(p['tail'])}; {p['points']}) | "
            f"{_f(p['constant'], '.1e')} | {_f(m['detectable'], '.0e', 'n/a')} | "
            f"{_f(c.get('float_defect'), '.0e')} |")
    return rows


def _sentence(text: str) -> str:
    text = text.strip()
    return "" if not text else text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")


def method_notes(names, coef) -> list[str]:
    out = []
    for n in names:
        s = _get(n)
        m = getattr(s, "method", None)
        if m is None:
            out.append(f"- `{n}` (core): {s.citation}.")
            continue
        c = coef.get(n, {})
        parts = [_sentence(m.formula), _sentence(m.note)]
        if m.published:
            parts.append(f"Printed to 15 digits, which meet the order conditions to "
                         f"{c['printed_defect']:.0e} and lie {c['printed_off']:.0e} from the root "
                         f"stored here (re-derived at 40 digits; stored strings meet them to "
                         f"{c['defect']:.0e}).")
        if m.closed_form is not None:
            parts.append(f"Closed form, evaluated at 40 digits (stored strings within "
                         f"{c['closed']:.0e}).")
        parts.append(f"Source: {m.citation}.")
        out.append(f"- `{n}`: " + " ".join(p for p in parts if p))
    return out


def ranking_table(rank) -> list[str]:
    rows = ["| global error at T = 1 | cheapest | sub-flows | next three |", "|---|---|---|---|"]
    for band, costs in rank:
        if not costs:
            rows.append(f"| {band:.0e} | – | – | – |")
            continue
        best, rest = costs[0], costs[1:4]
        rows.append(f"| {band:.0e} | `{best[0]}` | {best[1]:.0f} | "
                    + ", ".join(f"`{n}` ({c:.0f})" for n, c in rest) + " |")
    return rows


def peer_table(peers) -> list[str]:
    rows = ["| set | source | claimed order | measured: general (matrices) | measured: q'' = f(q) "
            "| likely cause | correct set here: general, q'' = f(q) |",
            "|---|---|---|---|---|---|---|"]
    for p in peers:
        here = "–"
        if p["fixed"]:
            here = (f"`{p['fixed']}`: {p['fixed_general']:.2f}, {p['fixed_rkn']:.2f}")
        rows.append(f"| {p['name']} | {p['source']} | {p['claimed']} | {p['general']:.2f} | "
                    f"{p['rkn']:.2f} | {p['cause']} | {here} |")
    return rows


def rkn_table(names, entries) -> list[str]:
    rows = ["| method | claimed (class) order | order on q'' = f(q), measured | general order "
            "(matrices, tail) |", "|---|---|---|---|"]
    for n in names:
        r = entries[n]["rkn"]
        rows.append(f"| `{n}` | {_get(n).class_order} | {r['nystrom']:.2f} | "
                    f"{r['general']:.2f} |")
    return rows


def window_table(win) -> list[str]:
    rows = ["| errors fitted | worst window fit − order | worst tail − order | verdicts wrong |",
            "|---|---|---|---|"]
    for k, v in win.items():
        rows.append(f"| {k} | {v['window']:.2f} | {v['tail']:.2f} | "
                    f"{v['failures']} of {v['cases']} |")
    return rows


INTRO = """# The zoo: published splitting methods, measured

<!-- Written by experiments/zoo.py (via splitnet.dev regen); edit that script, not this. -->

Every splitting and composition method registered in splitnet (`sn.schemes.available("splitting")`):
the seven core schemes of [theory.md](theory.md) and the zoo of published sets in
`splitnet/stagelists/zoo.py`, each with its primary citation (in its class docstring, and
below), its declared order as a general splitting, and what the measurements say. Regenerated by
`python3 -m splitnet.dev regen zoo` from the measurements cached per method in
`experiments/cache/zoo/` (float64, 2-core CPU: about an hour for all of them, as the particle
system uses exact sub-flows; `--only NAME` re-measures one in minutes). Methods whose order
holds only for a class of problems (Runge–Kutta–Nyström methods, correct for q'' = f(q) with
the kick as the convection field) are registered apart (`available("restricted")`, a warning
on `get`) with the order they have as general splittings; nothing here lets them pass for
general methods.

How to read the table:

- **order**: declared, as a general splitting (for restricted ones, their class order after
  "rkn:"). **stages**: as registered (compositions of Strang steps written out, three stages
  each, unmerged, like `yoshida4`): the field evaluations per step of a network with Euler
  sub-layers. **sub-flows / step**: what an integrator runs: adjacent stages of one field merged
  and the last merged into the next step's first (FSAL).
- **matrices**: `sn.check_order` on random non-commuting 6×6 matrices, exact exponentials,
  seeds 0, 1, 2 (window order), and the tail (three smallest h, seed 0), which is what the
  verdict uses; every verdict is OK. **detectable coeff. error**: the coefficient error (sums
  and symmetry kept) the check would see (`chk.detectable`).
- **particle system**: local errors of one step with exact sub-flows on `sn.particle_system()`
  (6 particles in R^8, attention + feed-forward), relative to |x0|, at adaptive step sizes
  with errors in [3e-12, 1e-5] (the reference's floor is ~3e-13): the global order from the
  window fit, the tail, and the number of points. This is as far as float64 and a dopri5
  reference go: orders up to 4 show cleanly; order 6 shows within about half an order (its
  asymptotic range starts near the floor); for orders 8 and 10 the errors run from 1e-5 to the
  floor within a factor of 2 to 3 in h, all of it before the asymptotic range, so the slopes
  there (up to ~13) are not orders: the matrices, where the floor is lower, are the measurement.
  **local error constant**: error / h^(p+1) at the smallest fitted h.
- **order conditions met to**: the largest defect of the scheme's expansion in the free algebra
  of the two fields against exp(D + C), degrees 1 to p, evaluated at 40 digits for the float64
  stage coefficients the scheme runs with: ~1e-16 is double precision (the stored strings of
  the zoo, from which they are rounded, meet the conditions to 1e-20 or better, see the notes;
  `experiments/zoo_coefficients.py`).
"""


def render(names, restricted, entries, peers) -> str:
    """docs/zoo.md from the cache entries of every registered method and the peer rows."""
    mat = {n: e["matrices"] for n, e in entries.items()}
    coef = {n: e["coefficients"] for n, e in entries.items()}
    part = particle_fits(entries)
    rank = ranking(efficiency_curves(names, entries))
    win = window_rows(entries)
    lines = [INTRO, "## The methods", ""]
    lines += method_table(names + restricted, mat, part, coef)
    lines += ["", "### Formulas, notes and sources", ""]
    lines += method_notes(names + restricted, coef)
    lines += ["", "## Efficiency: global error against sub-flows", "",
              "Global error at T = 1 on the particle system (exact sub-flows, relative to "
              "|x0|) against the sub-flows run over [0, 1] (steps × sub-flows per step, FSAL "
              f"counted), 1 to 64 steps, each run capped at {COST_CAP} sub-flows. Cheapest "
              "method per accuracy band, interpolated along each curve (a method counts for a "
              "band only if its measured curve reaches it). General methods only.", "",
              "![zoo efficiency](figures/zoo_efficiency.png)", ""]
    lines += ranking_table(rank)
    lines += ["", "## Runge–Kutta–Nyström methods: their order only for q'' = f(q)", "",
              "`splitnet.problems.NystromProblem`: a nonlinear q'' = f(q) (random cubic and "
              "quartic potential) with the drift (p, 0) as diffusion and the kick (0, f(q)) as "
              "convection, both sub-flows exact; tail of the local-error slope in [1e-13, "
              "1e-5]. On the particle system and on matrices the same coefficients have the "
              "lower general order.", ""]
    lines += rkn_table(restricted, entries)
    lines += ["", "## Published coefficient sets that do not have their claimed order as "
              "general splittings", "",
              "Transcribed from peer projects and measured here, so nobody copies them as "
              "general methods. The harmonic oscillator these projects test on cannot tell a "
              "method from its kick/drift-swapped twin; random matrices and a nonlinear "
              "q'' = f(q) can.", ""]
    lines += peer_table(peers)
    lines += ["", "Also here: the core `yoshida8` used Yoshida's solution D re-derived to about "
              "4e-13 (order conditions met to 2e-15); it now holds the 40-digit root. Yoshida's "
              "printed 15-digit sets (6 B, C; 8 A–E) are 1e-14 to 5e-11 from their roots "
              "(table above): harmless for float64 steps, visible to the 40-digit check.", "",
              "## How check_order was calibrated", "",
              "Every registered scheme × seeds 0–5, errors on h = 8 · 2^(−k/4). The error "
              "relative to |exp(h(A+B))| adds a spurious −h·log|exp(A+B)| slope at the large h "
              "where orders 8–10 reach 1e-2; a window up to 1e-2 still holds the start of the "
              "asymptotic range. Adopted: the error for a unit state in [1e-13, 1e-6], the tail "
              "within 0.3 of the order and the window fit within 0.6.", ""]
    lines += window_table(win)
    return "\n".join(lines) + "\n"


def particle_fits(entries) -> dict:
    return {n: fitted(e["particle"]["local"]["h"], e["particle"]["local"]["err"],
                      PARTICLE_FLOOR, PARTICLE_CEILING, _get(n).order)
            for n, e in entries.items()}


def efficiency_curves(names, entries) -> dict:
    """``{name: (order, costs, errors)}`` of the general methods ``names``."""
    return {n: (_get(n).order, entries[n]["particle"]["global"]["cost"],
                entries[n]["particle"]["global"]["err"]) for n in names}


def _names_arg(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected method names, got {text!r}")
    return names


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", type=_names_arg, default=[], metavar="NAME[,NAME]",
                    help="re-measure these methods (minutes each); the rest come from the cache")
    ap.add_argument("--refresh", action="store_true",
                    help="re-measure every method (about an hour on 2 CPU cores)")
    ap.add_argument("--cache", type=Path, default=zoocache.CACHE,
                    help=f"the cache folder (default {zoocache.CACHE.relative_to(ROOT)})")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    """Measure what the cache lacks (or what --only / --refresh name), then render the doc and
    the figure from the cache; exit status 2 with one line for an unknown method name."""
    args = parse_args(argv)
    names, restricted = sn.schemes.available(), sn.schemes.available("restricted")
    every = names + restricted
    for n in args.only:
        if n not in every:
            print(f"zoo.py: error: {unknown_name('zoo method', n, every)}", file=sys.stderr)
            return 2
    lacking = zoocache.stale({n: _get(n) for n in every}, args.cache)
    todo = every if args.refresh else [n for n in every if n in args.only or n in lacking]
    if lacking and not args.refresh:
        print(f"measuring {len(lacking)} method(s) not in the cache or changed: "
              f"{', '.join(lacking)}", file=sys.stderr)
    measure_into(todo, args.cache, progress=not args.no_progress)
    for gone in zoocache.prune(every, args.cache):
        print(f"removed the cache entry of {gone} (no longer registered)", file=sys.stderr)
    entries = {n: zoocache.load(n, args.cache) for n in every}
    peers = cached_peers(args.cache, refresh=args.refresh)
    plot_zoo_efficiency(efficiency_curves(names, entries), FIG, bands=BANDS)
    text = render(names, restricted, entries, peers)
    if not DOC.exists() or DOC.read_text() != text:
        DOC.write_text(text)
    # the counts the prose quotes (README, docs/theory.md): generated, never edited by hand
    write_counts(COUNTED, "zoo", {"methods": len(zoo.PUBLISHED)})
    print(f"wrote {DOC.relative_to(ROOT)} and {FIG.relative_to(ROOT)} "
          f"({len(todo)} method(s) measured, {len(every) - len(todo)} from the cache)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
