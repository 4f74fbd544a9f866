"""The geometry of a cloud of token vectors: principal axes and clustering measures.

Plain numpy on arrays (or tensors, or anything with the ``states`` of a recorded
:class:`~splitnet.analyses.trajectories.Trajectories`), so that both the analyses and the plots
read it without either importing the other.

:func:`pca` fits principal axes jointly on all states, centred on their mean, in float64, with a
fixed sign convention: in each component the loading of largest magnitude is positive.
:func:`clustering` gives, at every recorded point, the mean pairwise cosine of the tokens, the
pairwise cosines themselves and the effective rank ``exp(H(p))`` of the token cloud, ``p`` the
normalised singular values of the unit-normalised token vectors (Roy & Vetterli 2007): 1 when
every token points the same way, the clustering Geshkovski et al. (2023) prove for
self-attention dynamics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["PCA", "Clustering", "clustering", "effective_rank", "pairwise_cosines", "pca"]

# ---------------------------------------------------------------------------------------------
# PCA


@dataclass
class PCA:
    """Principal axes: ``transform(x) = (x - mean) @ components.T``.

    ``components`` (k, D) are orthonormal, sorted by explained variance, and signed so that the
    loading of largest magnitude in each is positive (ties: the first such entry)."""

    mean: np.ndarray
    components: np.ndarray
    explained_variance_ratio: np.ndarray

    def transform(self, x) -> np.ndarray:
        x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
        return (x - self.mean) @ self.components.T


def pca(traj, dim: int = 2) -> PCA:
    """PCA of all network states of a sequence (every token at every point), or of an array of
    vectors ``(..., D)``; deterministic: float64 SVD and a fixed sign convention."""
    if hasattr(traj, "states"):
        x = traj.states
    elif isinstance(traj, Sequence) and traj and hasattr(traj[0], "states"):
        x = torch.cat([t.states.reshape(-1, t.states.shape[-1]) for t in traj])
    else:
        x = traj
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    x = x.reshape(-1, x.shape[-1])
    D = x.shape[1]
    if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= D:
        raise ValueError(f"dim must be an int in 1..{D}, got {dim!r}")
    mean = x.mean(axis=0)
    xc = x - mean
    _, s, vt = np.linalg.svd(xc, full_matrices=False)
    comps = vt[:dim].copy()
    for c in comps:
        j = int(np.argmax(np.abs(c)))
        if c[j] < 0:
            c *= -1.0
    var = s ** 2
    ratio = var[:dim] / var.sum() if var.sum() > 0 else np.zeros(dim)
    return PCA(mean=mean, components=comps, explained_variance_ratio=ratio)


# ---------------------------------------------------------------------------------------------
# Clustering diagnostics


def pairwise_cosines(x) -> np.ndarray:
    """Cosine similarities of all pairs i < j of the rows of ``x`` (T, D): shape (T(T-1)/2,)."""
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    u = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-300)
    c = u @ u.T
    i, j = np.triu_indices(x.shape[0], k=1)
    return c[i, j]


def effective_rank(x) -> float:
    """Roy–Vetterli effective rank ``exp(-sum p log p)``, ``p`` the singular values of the
    unit-normalised rows of ``x`` (T, D) divided by their sum. 1 when all rows are parallel."""
    x = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    u = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-300)
    s = np.linalg.svd(u, compute_uv=False)
    p = s / s.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


@dataclass
class Clustering:
    """Per recorded point: mean pairwise cosine, effective rank, and all pairwise cosines."""

    times: np.ndarray
    mean_cosine: np.ndarray
    effective_rank: np.ndarray
    cosines: np.ndarray      # (n_points, T(T-1)/2)


def clustering(traj, layers_only: bool = True) -> Clustering:
    """Clustering diagnostics of the token cloud at every layer boundary (or every point).

    Needs at least 2 tokens."""
    if traj.n_tokens < 2:
        raise ValueError("clustering needs at least 2 tokens")
    if layers_only:
        xs, ts = traj.layer_states(), traj.times[torch.as_tensor(traj.layer_end)]
    else:
        xs, ts = traj.states, traj.times
    cos = np.stack([pairwise_cosines(x) for x in xs])
    return Clustering(times=np.asarray(ts, dtype=np.float64), mean_cosine=cos.mean(axis=1),
                      effective_rank=np.array([effective_rank(x) for x in xs]), cosines=cos)
