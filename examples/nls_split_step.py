"""The cubic nonlinear Schrödinger equation by split-step Fourier, on splitnet's schemes.

    i psi_t + 1/2 psi_xx + |psi|^2 psi = 0     on x in [-L/2, L/2), periodic, n points

split into its two exact flows (the state is ``(Re psi, Im psi)``, shape ``(2, n)``, float64):

* linear:    ``psi_t = i/2 psi_xx``      -> ``F^-1 exp(-i k^2 dt / 2) F psi`` (two FFTs)
* nonlinear: ``psi_t = i |psi|^2 psi``   -> ``exp(i |psi|^2 dt) psi`` (|psi| is constant)

The exact solution is the travelling soliton
``a sech(a (x - c t)) exp(i (c x + (a^2 - c^2) t / 2))`` (its tails, ``sech(a L / 2)``, and
its spectrum, at n = 512 on L = 60 below 1e-13). Lie–Trotter converges at order 1, Strang at 2,
Yoshida4 at 4.

    python3 examples/nls_split_step.py        # the measured orders of three schemes
"""

from __future__ import annotations

import numpy as np


def soliton(x, t: float, a: float = 1.0, c: float = 1.0):
    """``(Re psi, Im psi)`` of the travelling soliton at time t."""
    psi = a / np.cosh(a * (x - c * t)) * np.exp(1j * (c * x + (a * a - c * c) * t / 2))
    return np.stack([psi.real, psi.imag])


def nls_flows(n: int = 512, length: float = 60.0, backend: str = "numpy"):
    """``(linear, nonlinear, x0, exact)``: the two flows ``phi(t, x, dt)``, the soliton at
    t = 0 and ``exact(t)``, on numpy arrays or (``backend="torch"``) torch tensors."""
    x = (np.arange(n) - n // 2) * (length / n)
    k = 2 * np.pi * np.fft.fftfreq(n, d=length / n)
    if backend == "torch":
        import torch

        kk = torch.tensor(k * k)

        def linear(t, u, dt):
            psi = torch.fft.fft(torch.complex(u[0], u[1]))
            psi = torch.fft.ifft(torch.exp(-0.5j * kk * dt) * psi)
            return torch.stack([psi.real, psi.imag])

        def nonlinear(t, u, dt):
            psi = torch.complex(u[0], u[1])
            psi = torch.exp(1j * dt * (u[0] ** 2 + u[1] ** 2)) * psi
            return torch.stack([psi.real, psi.imag])

        return linear, nonlinear, torch.tensor(soliton(x, 0.0)), \
            (lambda t: torch.tensor(soliton(x, t)))
    kk = k * k

    def linear(t, u, dt):
        psi = np.fft.ifft(np.exp(-0.5j * kk * dt) * np.fft.fft(u[0] + 1j * u[1]))
        return np.stack([psi.real, psi.imag])

    def nonlinear(t, u, dt):
        psi = np.exp(1j * dt * (u[0] ** 2 + u[1] ** 2)) * (u[0] + 1j * u[1])
        return np.stack([psi.real, psi.imag])

    return linear, nonlinear, soliton(x, 0.0), (lambda t: soliton(x, t))


# the step sizes (over [0, 1]) in each scheme's asymptotic range, above the 1e-13 floor
STEP_SIZES = {"lie-trotter": [1 / 16, 1 / 32, 1 / 64, 1 / 128],
              "strang": [1 / 8, 1 / 16, 1 / 32, 1 / 64],
              "yoshida4": [1 / 8, 1 / 16, 1 / 32, 1 / 64]}


def orders(backend: str = "numpy", names=tuple(STEP_SIZES)):
    """The global convergence study of each scheme on the soliton over [0, 1]."""
    import splitnet as sn
    from splitnet.analyses.convergence import convergence_study

    linear, nonlinear, x0, exact = nls_flows(backend=backend)
    out = {}
    for name in names:
        s = sn.schemes.get(name, fields=("linear", "nonlinear"))
        out[name] = convergence_study(s, x0=x0, step_sizes=STEP_SIZES[name], kind="global",
                                      flows={"linear": linear, "nonlinear": nonlinear},
                                      reference=exact)
    return out


if __name__ == "__main__":
    for r in orders().values():
        print(r.table(), "\n")
