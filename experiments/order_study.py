"""Regenerate every table and figure of docs/theory.md.

    python3 -m splitnet.dev regen theory           # the same
    python3 experiments/order_study.py            # all of it (~3 min on 2 CPU cores)
    python3 experiments/order_study.py --only lie_bracket,sandwich

Tables are written into docs/theory.md between ``<!-- order_study:NAME -->`` and
``<!-- /order_study:NAME -->`` markers (and nowhere else); figures go to
docs/figures/order_*.png and docs/figures/work_precision.png. Everything is float64 on the
built-in random attention + feed-forward particle system (``sn.particle_system()``, 6 particles
in R^8, seed 0) unless a table says otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from tqdm.auto import tqdm

import splitnet as sn
from splitnet.analyses.problems import (
    ClosedFormFlow,
    WrongClock,
    local_errors,
    time_dependent_linear,
)
from splitnet.dev.docblocks import write_blocks
from splitnet.order.fit import fit_slope
from splitnet.plots import plot_convergence, plot_work_precision, readable_log_ticks, save_figure

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "theory.md"
FIG = ROOT / "docs" / "figures"


def _save(fig, name: str) -> None:
    """Lay out, write atomically under docs/figures, close."""
    fig.tight_layout()
    save_figure(fig, FIG / name)


METHODS = ["exact", "euler", "midpoint", "rk4"]
REGISTRY = sn.schemes.available("core")     # the zoo has its own study: experiments/zoo.py
LOCAL_H = [0.2, 0.1, 0.05, 0.025]
GLOBAL_H = [0.5, 0.25, 0.125, 0.0625]
# Orders 6 and 8 reach the reference's floor (~1e-12) by h ~ 0.1: larger steps for them.
LOCAL_H_HIGH = {6: [0.4, 0.28, 0.2, 0.14], 8: [0.8, 0.56, 0.4, 0.28]}


# Yoshida 8's global error with exact sub-flows reaches the floor of 45 x 16 torchdiffeq
# sub-flow solves (~1e-11) by h = 1/16: larger steps for it.
GLOBAL_H_HIGH = {8: [1 / 4, 1 / 5, 1 / 6, 1 / 8]}


def local_hs(s, method):
    return LOCAL_H_HIGH.get(s.order, LOCAL_H) if method in ("exact", "rk4") else LOCAL_H


def global_hs(s, method):
    return GLOBAL_H_HIGH.get(s.order, GLOBAL_H) if method == "exact" else GLOBAL_H


def cell(r) -> str:
    """``measured (theory)``, bold when off by more than 0.3."""
    if not np.isfinite(r.order):
        return f"n/a ({r.expected_order})"
    txt = f"{r.order:.2f} ({r.expected_order})"
    return txt if r.ok else f"**{txt}**"


# ---------------------------------------------------------------------------------------------

def orders(system) -> dict[str, str]:
    """Local and global slopes: every registry scheme x method; one figure per method."""
    F, G, x0 = system
    res = {}
    combos = [(n, m, k) for k in ("local", "global") for m in METHODS for n in REGISTRY]
    for n, m, k in tqdm(combos, desc="orders", unit="study"):
        s = sn.schemes.get(n)
        hs = local_hs(s, m) if k == "local" else global_hs(s, m)
        res[n, m, k] = sn.convergence_study(s, F, G, x0, hs, kind=k, method=m)
    tables = {}
    for k in ("local", "global"):
        rows = ["| scheme | stages | " + " | ".join(METHODS) + " |",
                "|---|---|" + "---|" * len(METHODS)]
        for n in REGISTRY:
            rows.append(f"| {n} | {len(sn.schemes.get(n).stages)} | "
                        + " | ".join(cell(res[n, m, k]) for m in METHODS) + " |")
        tables[f"{k}_orders"] = "\n".join(rows)
    for m in METHODS:
        for k in ("local", "global"):
            plot_convergence([res[n, m, k] for n in REGISTRY], FIG / f"order_{k}_{m}.png",
                             title=f"{k} error, {m} sub-flows, particle system "
                                   f"(dotted: theory slope)")
    # Euler constants: C = median(error / h^2) of the local error.
    rows = ["| scheme | local slope | C = error / h^2 | C / C(lie-trotter) | sub-layer calls |",
            "|---|---|---|---|---|"]
    c_lt = np.median(res["lie-trotter", "euler", "local"].errors / np.asarray(LOCAL_H) ** 2)
    for n in REGISTRY:
        r = res[n, "euler", "local"]
        c = np.median(r.errors / r.step_sizes ** 2)
        rows.append(f"| {n} | {r.order:.2f} | {c:.4f} | {c / c_lt:.2f} | "
                    f"{len(sn.schemes.get(n).stages)} |")
    tables["euler_constants"] = "\n".join(rows)
    return tables


def merged(system) -> dict[str, str]:
    F, G, x0 = system
    y = sn.schemes.get("yoshida4")
    hs = {"local": [0.2, 0.1, 0.05, 0.025, 0.0125, 0.00625],
          "global": [1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128]}
    rows = [("| scheme | stages | sum c^3 (D, C) | method | kind | measured | theory | "
            "slopes between successive h |"), "|---|---|---|---|---|---|---|---|"]
    results = []
    for s in (y, y.merged()):
        c3 = [sum(c ** 3 for c in s.field_coeffs(f)) for f in ("diffusion", "convection")]
        for k in ("local", "global"):
            for m in ("midpoint", "exact") if k == "local" else ("midpoint",):
                r = sn.convergence_study(s, F, G, x0, hs[k], kind=k, method=m)
                # Fit on the smallest four step sizes: the asymptotic range.
                sl, _ = fit_slope(r.step_sizes[-4:], r.errors[-4:], r.floor)
                pair = np.diff(np.log(r.errors)) / np.diff(np.log(r.step_sizes))
                rows.append(f"| {s.name} | {len(s.stages)} | {c3[0]:.2g}, {c3[1]:.2g} | {m} | {k} "
                            f"| {sl:.2f} | {r.expected_order} | "
                            + ", ".join(f"{p:.2f}" for p in pair) + " |")
                if m == "midpoint":
                    results.append(r)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), dpi=120)
    for ax, k in zip(axes, ("local", "global")):
        for i, r in enumerate([r for r in results if r.kind == k]):
            ax.loglog(r.step_sizes, r.errors, "o-", color=f"C{i}",
                      label=f"{r.scheme}: theory slope {r.expected_order}")
            h = r.step_sizes
            ax.loglog(h, r.errors[-1] * (h / h[-1]) ** r.expected_order, ":", color=f"C{i}")
        readable_log_ticks(ax.xaxis)
        ax.set_xlabel("step size h")
        ax.set_ylabel(f"{k} error")
        ax.set_title(f"triple jump with midpoint sub-steps, {k} error")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    _save(fig, "order_merged.png")
    return {"merged": "\n".join(rows)}


def lie_bracket(system) -> dict[str, str]:
    """exact - scheme against (h^2/2)[X, Y](x0) for Lie–Trotter, X first."""
    F, G, x0 = system
    hs = [0.2, 0.1, 0.05, 0.025, 1 / 80, 1 / 160]
    rows = [("| first | h | measured error | (h^2/2) ||[X,Y]|| | rel. deviation | "
            "rel. deviation, opposite sign |"), "|---|---|---|---|---|---|"]
    curves = {}
    for first, X, Y in (("diffusion", F, G), ("convection", G, F)):
        other = "convection" if first == "diffusion" else "diffusion"
        s = sn.SplittingScheme.from_stages([(first, 1.0), (other, 1.0)], name=f"{first}-first")
        br = sn.lie_bracket(X, Y, x0)
        meas, dev = [], []
        for h in hs:
            with torch.no_grad():
                err = (sn.reference_solution(F, G, x0, torch.tensor([0.0, h]))[-1]
                       - s.step(F, G, x0, step_size=h, method="exact"))
            pred = h ** 2 / 2 * br
            rel = float((err - pred).norm() / pred.norm())
            opp = float((err + pred).norm() / pred.norm())
            meas.append(float(err.norm()))
            dev.append(rel)
            rows.append(f"| {first[0].upper()} | {h:.5g} | {float(err.norm()):.4e} | "
                        f"{float(pred.norm()):.4e} | {rel:.4f} | {opp:.3f} |")
        curves[first] = (np.array(meas), h ** 2 / 2 * float(br.norm()), np.array(dev))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), dpi=120)
    h = np.array(hs)
    for i, (first, (meas, _, dev)) in enumerate(curves.items()):
        pred = h ** 2 / 2 * float(sn.lie_bracket(*((F, G) if first == "diffusion" else (G, F)),
                                                 x0).norm())
        axes[0].loglog(h, meas, "o", color=f"C{i}", label=f"measured, {first} first")
        axes[0].loglog(h, pred, "-", color=f"C{i}", label=f"(h²/2)‖[X,Y](x0)‖, {first} first")
        axes[1].loglog(h, dev, "o-", color=f"C{i}", label=f"{first} first")
    axes[1].loglog(h, dev[0] * h / h[0], "k:", label="slope 1 (the O(h³) remainder)")
    axes[1].axhline(0.05, color="r", lw=0.8, ls="--", label="5 %")
    axes[0].set_xlabel("step size h")
    axes[0].set_ylabel("local error of Lie–Trotter (exact sub-flows)")
    axes[0].legend(fontsize=8, loc="lower right")
    axes[1].set_xlabel("step size h")
    axes[1].set_ylabel("‖err − (h²/2)[X,Y]‖ / ‖(h²/2)[X,Y]‖")
    axes[1].legend(fontsize=8, loc="lower right")
    for ax in axes:
        readable_log_ticks(ax.xaxis)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("Lie–Trotter local error against the Lie bracket prediction")
    _save(fig, "order_lie_bracket.png")
    return {"lie_bracket": "\n".join(rows)}


def matrices() -> dict[str, str]:
    rows = [("| scheme | declared | seed 0 | seed 1 | seed 2 | smallest-h slope (seed 0) | "
            "points fitted | verdict |"), "|---|---|---|---|---|---|---|---|"]
    for n in REGISTRY:
        rs = [sn.check_order(sn.schemes.get(n), seed=k) for k in range(3)]
        rows.append(f"| {n} | {rs[0].declared} | " + " | ".join(f"{r.measured:.2f}" for r in rs)
                    + f" | {rs[0].tail:.2f} | {int(rs[0].used.sum())} | "
                    + ("OK" if all(r.ok for r in rs) else "MISMATCH") + " |")
    # Wrong sets, for contrast.
    from splitnet.integrators.schemes import BlanesMoan4, StrangComposition

    class Typo(BlanesMoan4):
        name, a = "blanes-moan4, a1 digits swapped", (0.0729036964311957, 0.353172906049774,
                                                      -0.0420650803577195)

    class Trunc(StrangComposition):
        name, order, weights = "triple jump, weight 1.3512", 4, (1.3512,)

    for s in (Typo(), Trunc()):
        r = sn.check_order(s)
        rows.append(f"| {s.name} | {r.declared} | {r.measured:.2f} | | | {r.tail:.2f} | "
                    f"{int(r.used.sum())} | {'OK' if r.ok else 'MISMATCH'} |")
    return {"matrices": "\n".join(rows)}


def clocks() -> dict[str, str]:
    """Time-dependent linear fields with closed-form sub-flows: own clocks vs wrong clocks."""
    p = time_dependent_linear()
    rows = [("| scheme | own clocks | frozen (all stages at t) | shared (overall progress) | "
            "theory |"), "|---|---|---|---|---|"]
    for n in ("lie-trotter", "strang", "yoshida4", "suzuki4", "blanes-moan4", "yoshida6"):
        s = sn.schemes.get(n)
        hs = LOCAL_H_HIGH.get(s.order, LOCAL_H)
        sl = [fit_slope(hs, local_errors(x, p, hs, ClosedFormFlow()), 1e-12)[0]
              for x in (s, WrongClock(s, "frozen"), WrongClock(s, "shared"))]
        rows.append(f"| {n} | {sl[0]:.2f} | {sl[1]:.2f} | {sl[2]:.2f} | {s.order + 1} |")
    return {"clocks": "\n".join(rows)}


def sandwich(system) -> dict[str, str]:
    """s^k (sf)^(n-k) f^k, one step of size T = 1 against the coupled flow."""
    F, G, x0 = system
    ref = sn.reference_solution(F, G, x0, torch.tensor([0.0, 1.0]))[-1]
    ns = [2, 4, 8, 12, 16, 24, 32]
    out = {}
    for label, kf in (("k = n/4", lambda n: n // 4), ("k = 0 (interleaved)", lambda n: 0),
                      ("k = n/2", lambda n: n // 2)):
        for m in ("exact", "euler"):
            errs = []
            for n in ns:
                s = sn.schemes.from_pattern("s" * kf(n) + "sf" * (n - kf(n)) + "f" * kf(n))
                with torch.no_grad():
                    x = s.step(F, G, x0, step_size=1.0, method=m)
                errs.append(float((x - ref).norm()))
            out[label, m] = errs
    rows = ["| n | " + " | ".join(f"{lab}, {m}" for lab, m in out) + " |",
            "|---|" + "---|" * len(out)]
    for i, n in enumerate(ns):
        rows.append(f"| {n} | " + " | ".join(f"{v[i]:.3e}" for v in out.values()) + " |")
    fig, ax = plt.subplots(figsize=(7.5, 5), dpi=120)
    for i, ((lab, m), errs) in enumerate(out.items()):
        ax.loglog(ns, errs, "o-" if m == "exact" else "s--", color=f"C{i // 2}",
                  label=f"{lab}, {m} sub-flows")
    n = np.array(ns, dtype=float)
    ax.loglog(n, out["k = 0 (interleaved)", "exact"][0] * n[0] / n, "k:", lw=1,
              label="slope −1")
    readable_log_ticks(ax.xaxis)
    readable_log_ticks(ax.yaxis)
    ax.set_xlabel("depth n (sublayers of each kind), each 1/n of T = 1")
    ax.set_ylabel("‖network(x0) − coupled flow(x0, T)‖")
    ax.set_title("Sandwich s^k (sf)^(n−k) f^k: error against depth")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    _save(fig, "order_sandwich.png")
    return {"sandwich": "\n".join(rows)}


def work_precision(system) -> dict[str, str]:
    F, G, x0 = system
    hs = [0.5, 0.25, 0.125, 0.0625, 0.03125]
    pts = sn.work_precision(REGISTRY, ["euler", "midpoint", "rk4"], F, G, x0, hs)
    plot_work_precision(pts, FIG / "work_precision.png",
                        title="work–precision on the particle system, T = 1 (lower left is "
                              "better)")
    # Cheapest run reaching each target accuracy.
    rows = ["| target error | cheapest scheme / method | field evaluations | h |",
            "|---|---|---|---|"]
    for tgt in (1e-2, 1e-4, 1e-6, 1e-8):
        ok = [p for p in pts if p.error <= tgt]
        if ok:
            b = min(ok, key=lambda p: p.evaluations)
            rows.append(f"| {tgt:.0e} | {b.scheme} / {b.method} | {b.evaluations} | "
                        f"{b.step_size:g} |")
        else:
            rows.append(f"| {tgt:.0e} | none in the sweep | | |")
    return {"work_precision": "\n".join(rows)}


# ---------------------------------------------------------------------------------------------

def write_tables(tables: dict[str, str]) -> None:
    """Into docs/theory.md's ``order_study`` blocks; the date only when a table changed."""
    write_blocks(DOC, "order_study", tables, stamp=True)


PARTS = ["orders", "merged", "lie_bracket", "matrices", "clocks", "sandwich", "work_precision"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(PARTS),
                    help=f"comma-separated parts to run (default all: {', '.join(PARTS)})")
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.only.split(",") if p.strip()]
    bad = set(parts) - set(PARTS)
    if bad:
        ap.error(f"unknown part(s) {sorted(bad)}; choose from {PARTS}")
    torch.set_num_threads(1)   # tiny tensors: threads only add overhead
    FIG.mkdir(parents=True, exist_ok=True)
    system = sn.particle_system()
    tables: dict[str, str] = {}
    t0 = time.perf_counter()
    for part in parts:
        t = time.perf_counter()
        fn = globals()[part]
        tables.update(fn(system) if fn.__code__.co_argcount else fn())
        print(f"{part}: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    write_tables(tables)
    print(f"tables written to {DOC.relative_to(ROOT)}; figures in "
          f"{FIG.relative_to(ROOT)} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

