"""BERT's masking, on bytes.

Of each window of ``x`` (B, T), ``k = max(1, round(p T))`` positions are chosen (``p`` = 0.15),
uniformly without replacement -- a fixed count per sequence, as BERT's own data preparation
does (``num_to_predict``), so every row, micro-batch and rank weighs the same in a mean and the
loss of any world size or gradient accumulation is the single process's. A chosen position's
label is its byte; of the chosen, 80 % are replaced by ``MASK_ID``, 10 % by a uniformly random
byte, 10 % kept. Unchosen labels are ``IGNORE`` (-100, what ``F.cross_entropy`` skips), so the
loss is the mean cross-entropy over chosen positions::

    loss = -(1/|M|) sum_{i in M} log softmax(f(x~))_{i, x_i}

Every draw comes from a generator seeded by (seed, step) for training -- drawn for the whole
global batch, each rank keeping its rows, so any world size trains on the same masks -- and by
(seed, window start) for validation, so the held-out score is computed on the same masks at
every evaluation and by every run of a seed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..configs.config import MLM_MASK_ID
from ..runs import data as D
from .tokens import mask_id_of

MASK_ID = MLM_MASK_ID
IGNORE = -100
P_MASK = 0.15
SPLIT = (0.8, 0.1, 0.1)          # of the chosen: mask token, random byte, kept


def mask_tokens(x: torch.Tensor, generator: torch.Generator, p: float = P_MASK,
                mask_id: int = MASK_ID):
    """``(inputs, labels)`` of ids ``x`` (B, T) int64, as the module docstring says; the random
    replacements are ids below ``mask_id`` (bytes: 0..255; a BPE's: its vocabulary)."""
    if x.dim() != 2 or x.dtype != torch.long:
        raise ValueError(f"mask_tokens needs int64 ids of shape (B, T), got {x.dtype} "
                         f"{tuple(x.shape)}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        raise ValueError(f"mask_tokens: p is the share of tokens masked, in (0, 1], got {p!r}")
    if isinstance(mask_id, bool) or not isinstance(mask_id, int) or mask_id < 1:
        raise ValueError(f"mask_tokens: mask_id is the mask token's id, after the vocabulary "
                         f"(replacements are drawn below it), an int >= 1; got {mask_id!r}")
    u = torch.rand(x.shape, generator=generator)
    action = torch.rand(x.shape, generator=generator)
    noise = torch.randint(0, mask_id, x.shape, generator=generator)
    k = max(1, round(p * x.shape[1]))
    chosen = torch.zeros_like(x, dtype=torch.bool)
    chosen.scatter_(1, u.topk(k, dim=1, largest=False).indices, True)
    inputs = x.clone()
    inputs[chosen & (action < SPLIT[0])] = mask_id
    swap = chosen & (action >= SPLIT[0]) & (action < SPLIT[0] + SPLIT[1])
    inputs[swap] = noise[swap]
    labels = torch.where(chosen, x, torch.full_like(x, IGNORE))
    return inputs, labels


def train_batch(corpus, step: int, global_batch: int, context: int, seed: int, rank: int = 0,
                world: int = 1):
    """This rank's ``(inputs, labels)`` at ``step``: the language model's windows
    (:func:`splitnet.runs.data.train_batch`), masked for the whole global batch."""
    if global_batch % world:
        raise ValueError(f"global batch {global_batch} is not divisible by world size {world}")
    x, _ = D.train_batch(corpus, step, global_batch, context, seed)      # the global batch
    inputs, labels = mask_tokens(x, D.step_generator(seed + 1, step), mask_id=mask_id_of(corpus))
    b = global_batch // world
    return inputs[rank * b:(rank + 1) * b], labels[rank * b:(rank + 1) * b]


def masked_windows(corpus, starts: torch.Tensor, context: int, seed: int):
    """``(inputs, labels)`` of the validation windows at ``starts``, each masked by the
    generator of (seed, its start): the same at every evaluation and in every tool."""
    pairs = [mask_tokens(x, D.step_generator(seed + 2, int(s)), mask_id=mask_id_of(corpus))
             for s in starts for x, _ in D.val_batches(corpus, s.view(1), 1, context)]
    if not pairs:
        empty = torch.zeros(0, context, dtype=torch.long)
        return empty, empty
    return torch.cat([a for a, _ in pairs]), torch.cat([b for _, b in pairs])


@torch.no_grad()
def validation(model, corpus, starts: torch.Tensor, context: int, seed: int, batch_size: int,
               device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Summed cross-entropy (float64), correct predictions and count over the masked positions
    of the validation windows at ``starts`` (each masked by its own start's generator)."""
    inputs, labels = masked_windows(corpus, starts, context, seed)
    loss = torch.zeros((), dtype=torch.float64, device=device)
    right = torch.zeros((), dtype=torch.float64, device=device)
    for i in range(0, len(inputs), batch_size):
        x = inputs[i:i + batch_size].to(device)
        y = labels[i:i + batch_size].to(device)
        logits = model(x).float()
        keep = y != IGNORE
        loss += F.cross_entropy(logits[keep], y[keep], reduction="sum").double()
        right += (logits[keep].argmax(-1) == y[keep]).sum().double()
    n = (labels != IGNORE).sum().to(device=device, dtype=torch.float64)
    return loss, right, n


__all__ = ["IGNORE", "MASK_ID", "P_MASK", "SPLIT", "mask_tokens", "masked_windows",
           "train_batch", "validation"]
