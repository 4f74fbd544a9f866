"""Re-derive every coefficient set of the zoo (splitnet/stagelists/zoo.py) in 40-digit arithmetic.

    python3 experiments/zoo_coefficients.py              # check all (~3 min on 2 CPU cores)
    python3 experiments/zoo_coefficients.py --only yoshida8a,kahan-li10 --refine

For each method: the order conditions up to its declared order, exactly (the scheme's series in
the free algebra of the two fields against exp(D + C), word by word: splitnet.order.check.
condition_defects with mpmath numbers), evaluated at the stored strings and, where the source
printed fewer digits (``published``), at the printed values; closed forms are evaluated at 40
digits and compared with the stored strings. ``--refine`` runs Gauss-Newton from the stored
(or printed) values on the order conditions: the minimum-norm correction that satisfies them
to 40 digits (for an optimised method with free parameters it moves only across the family),
and prints the corrected strings to 25 significant digits, ready for splitnet/stagelists/zoo.py.

Output: one table row per method (the size of the largest defect, the correction size) —
docs/zoo.md quotes the "digits" column via experiments/zoo.py.
"""

from __future__ import annotations

import argparse
import sys

import mpmath as mp

from splitnet import zoo
from splitnet.order.algebra import word_series

mp.mp.dps = 40
ONE = mp.mpf(1)


def residual(method: zoo.Published, values, degree: int) -> list:
    """Every word coefficient of the scheme minus that of exp(D + C), degrees 1..degree."""
    v = word_series(method.build(*values), degree, ONE)
    return [x - ONE / mp.factorial(d) for d in range(1, degree + 1) for x in v[d]]


def defect(method: zoo.Published, values, degree: int | None = None) -> mp.mpf:
    return max(abs(x) for x in residual(method, values, degree or method.order))


def refine(method: zoo.Published, values, iters: int = 6) -> list:
    """Minimum-norm Gauss-Newton on the order conditions (finite-difference Jacobian at
    40 digits, step 1e-18; singular values below 1e-20 of the largest dropped)."""
    x = [mp.mpf(v) for v in values]
    for _ in range(iters):
        r = mp.matrix(residual(method, x, method.order))
        if max(abs(v) for v in r) < mp.mpf(10) ** -34:
            break
        eps = mp.mpf(10) ** -18
        cols = []
        for j in range(len(x)):
            y = list(x)
            y[j] += eps
            cols.append((mp.matrix(residual(method, y, method.order)) - r) / eps)
        jac = mp.matrix(len(r), len(x))
        for j, col in enumerate(cols):
            for i in range(len(r)):
                jac[i, j] = col[i]
        u, s, vt = mp.svd_r(jac)
        smax = max(s)
        step = mp.matrix(len(x), 1)
        for k in range(len(s)):
            if s[k] > smax * mp.mpf(10) ** -20:
                coef = sum(u[i, k] * r[i] for i in range(len(r))) / s[k]
                for j in range(len(x)):
                    step[j] -= coef * vt[k, j]
        x = [x[j] + step[j] for j in range(len(x))]
    return x


def row(method: zoo.Published, do_refine: bool) -> tuple[str, list[str]]:
    stored = [zoo.number(p, ONE) for p in method.params]
    d_stored = defect(method, stored)
    cells = [method.name, str(method.order), mp.nstr(d_stored, 2)]
    if method.published:
        cells.append(mp.nstr(defect(method, [zoo.number(p, ONE) for p in method.published]), 2))
    else:
        cells.append("as stored")
    if method.closed_form is not None:
        exact = method.closed_form(ONE)
        cells.append(mp.nstr(max(abs(a - b) for a, b in zip(exact, stored)), 2))
    else:
        cells.append("-")
    new = []
    if do_refine:
        start = [zoo.number(p, ONE) for p in (method.published or method.params)]
        x = refine(method, start)
        cells.append(mp.nstr(max(abs(a - b) for a, b in zip(x, start)), 2))
        cells.append(mp.nstr(defect(method, x), 2))
        new = [mp.nstr(v, 25, strip_zeros=False) for v in x]
    return "| " + " | ".join(cells) + " |", new


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated zoo names")
    ap.add_argument("--refine", action="store_true", help="re-derive from the order conditions")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or [m.name for m in zoo.PUBLISHED]
    unknown = sorted(set(names) - set(zoo.BY_NAME))
    if unknown:
        ap.error(f"unknown zoo names {unknown}")
    head = ["method", "order", "defect (stored)", "defect (printed)", "vs closed form"]
    if args.refine:
        head += ["correction", "defect (refined)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for n in names:
        line, new = row(zoo.BY_NAME[n], args.refine)
        print(line, flush=True)
        if new:
            print("    params: " + ", ".join(f'"{v}"' for v in new), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
