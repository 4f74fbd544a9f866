"""Token ids in: the one check every network runs on its input before anything is embedded."""

from __future__ import annotations

import torch


def check_ids(idx, vocab: int, max_len: int, what: str = "idx", start: int = 0) -> None:
    """``idx`` must be a (B, T) int64 tensor, B, T >= 1, of ids in ``[0, vocab)`` with
    ``start + T <= max_len``. The id range is checked on the CPU only: on CUDA it would cost a
    host sync per forward (an id out of range is a device-side assert there)."""
    if not isinstance(idx, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor of int64 token ids, got "
                        f"{type(idx).__name__}")
    if idx.dtype != torch.long:
        raise TypeError(f"{what} must be a tensor of dtype torch.int64 (token ids), got "
                        f"{idx.dtype}")
    if idx.dim() != 2:
        raise ValueError(f"{what} must have shape (batch, seq), got {tuple(idx.shape)}")
    if idx.shape[1] == 0:
        raise ValueError(f"{what} is an empty sequence: give at least one token")
    if idx.shape[0] == 0:
        raise ValueError(f"{what} is an empty batch: give at least one sequence")
    if start + idx.shape[1] > max_len:
        raise ValueError(f"{what}: sequence length {start + idx.shape[1]} exceeds the model's "
                         f"max_len {max_len}")
    if idx.device.type == "cpu" and not torch.compiler.is_compiling():
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= vocab:
            raise ValueError(f"token ids must lie in [0, {vocab}), got [{lo}, {hi}] ({what})")


__all__ = ["check_ids"]
