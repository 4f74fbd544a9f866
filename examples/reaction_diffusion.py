"""A reaction–diffusion equation (Fisher–KPP) split into diffusion and reaction, the diffusion
advanced by an implicit (Crank–Nicolson) flow, on splitnet's schemes.

    u_t = D u_xx + u (1 - u)     on [0, L), periodic, n points; u_xx by central differences

* diffusion, implicit: Crank–Nicolson ``(I - dt/2 D L) u+ = (I + dt/2 D L) u`` (a linear
  solve, second order, symmetric, stable for any dt) or backward Euler ``(I - dt D L) u+ = u``
  (first order, not symmetric); or exact: ``exp(dt D L) u`` by the eigenvectors of L
* reaction, exact: the logistic flow ``u e^dt / (1 - u + u e^dt)``

With the exact diffusion flow Lie–Trotter, Strang and Yoshida4 reach orders 1, 2 and 4. With
Crank–Nicolson, Strang's step is still symmetric and of order 2, so Yoshida's composition
(symmetric steps of order 2 composed) still reaches 4; backward Euler is neither, and caps
every scheme at order 1: a user's flow sets the ceiling (the reference: Blanes–Moan 6 with
exact flows, h = 1/512).

    python3 examples/reaction_diffusion.py    # the measured orders with both diffusion flows
"""

from __future__ import annotations

import numpy as np

N, LENGTH, DIFFUSIVITY = 64, 10.0, 0.1


def laplacian(n: int = N, length: float = LENGTH):
    dx = length / n
    lap = -2 * np.eye(n) + np.eye(n, k=1) + np.eye(n, k=-1)
    lap[0, -1] = lap[-1, 0] = 1
    return lap / dx ** 2


def initial(n: int = N, length: float = LENGTH):
    x = np.arange(n) * (length / n)
    return 0.5 + 0.4 * np.sin(2 * np.pi * x / length) * np.cos(4 * np.pi * x / length)


DIFFUSION_FLOWS = ("exact", "crank-nicolson", "backward-euler")


def flows(diffusion: str = "crank-nicolson"):
    """``{"diffusion": phi, "reaction": phi}``, the diffusion's flow one of
    :data:`DIFFUSION_FLOWS`."""
    a = DIFFUSIVITY * laplacian()
    eye = np.eye(len(a))
    lam, v = np.linalg.eigh(a)
    solves = {}

    def crank_nicolson(t, u, dt):
        if dt not in solves:             # one factorisation per stage length
            solves[dt] = (np.linalg.inv(eye - dt / 2 * a) @ (eye + dt / 2 * a))
        return solves[dt] @ u

    def backward_euler(t, u, dt):
        if -dt not in solves:
            solves[-dt] = np.linalg.inv(eye - dt * a)
        return solves[-dt] @ u

    def exact(t, u, dt):
        return v @ (np.exp(dt * lam) * (v.T @ u))

    def reaction(t, u, dt):
        e = np.exp(dt)
        return u * e / (1 - u + u * e)

    chosen = {"exact": exact, "crank-nicolson": crank_nicolson,
              "backward-euler": backward_euler}[diffusion]
    return {"diffusion": chosen, "reaction": reaction}


def reference(t1: float = 1.0):
    import splitnet as sn

    s = sn.schemes.get("blanes-moan6", fields=("diffusion", "reaction"))
    return s.integrate(flows=flows("exact"), x0=initial(), t1=t1, step_size=1 / 512)[-1]


STEP_SIZES = [1 / 4, 1 / 8, 1 / 16, 1 / 32]


def orders(diffusion: str, names=("lie-trotter", "strang", "yoshida4")):
    import splitnet as sn
    from splitnet.analyses.convergence import convergence_study

    end = reference()
    out = {}
    for name in names:
        s = sn.schemes.get(name, fields=("diffusion", "reaction"))
        out[name] = convergence_study(s, x0=initial(), step_sizes=STEP_SIZES, kind="global",
                                      flows=flows(diffusion), reference=lambda t: end)
    return out


if __name__ == "__main__":
    for diffusion in DIFFUSION_FLOWS:
        print("diffusion flow:", diffusion)
        for name, r in orders(diffusion).items():
            print(f"  {name:12s} slope {r.order:.2f}  errors {np.array2string(r.errors)}")
