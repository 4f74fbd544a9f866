"""A task registered from outside splitnet, in one file: sort a line of digits.

Each sequence is ``n`` random digits, ``|``, and the same digits sorted (bytes, so a
``SplitTransformer`` of vocabulary 256 reads it); the loss counts the sorted half only. Sorting
needs attention (each output digit depends on every input digit), so a network that learns it
reads its input.

    import sort_task                                 # registers "sort"
    from splitnet.train import TrainConfig, train
    train(TrainConfig(task="sort", context=16, steps=200, out="runs/sort"))

The trainer gives it everything it gives the built-in tasks: the lock on ``out``, atomic
checkpoints, exact ``--resume`` (the batch of step ``s`` is a function of ``(seed, s)``), and
DDP / FSDP under torchrun (``torchrun --nproc_per_node=2 examples/sort_task.py OUT``).
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from splitnet.tasks import Task, register

BAR = ord("|")
DIGIT0 = ord("0")
IGNORE = -100           # targets the loss skips (torch's cross-entropy default)


class SortData:
    """Sequences of ``n`` digits: drawn, never read from disk (the fingerprint says so)."""

    def __init__(self, n: int):
        self.n = n

    def sample(self, rows: int, generator: torch.Generator):
        """Inputs and targets (rows, 2n): the digits, the bar and the sorted digits, shifted by
        one; targets of the unsorted half are ignored."""
        digits = torch.randint(0, 10, (rows, self.n), generator=generator)
        seq = torch.cat([digits + DIGIT0, torch.full((rows, 1), BAR),
                         digits.sort(dim=1).values + DIGIT0], dim=1)
        x, y = seq[:, :-1].clone(), seq[:, 1:].clone()
        y[:, :self.n - 1] = IGNORE
        return x, y

    def fingerprint(self) -> dict:
        return {"source": "sort", "digits": self.n}

    def describe(self) -> str:
        return f"sort {self.n} digits (drawn)"


class SortDigits(Task):
    """``sort``: a causal SplitTransformer sorts ``context / 2`` digits."""

    name = "sort"
    help = "sort a line of digits"

    def check(self, cfg) -> None:
        if cfg.context < 4 or cfg.context % 2:
            raise ValueError(f"--task sort needs an even --context >= 4, got {cfg.context}")

    def corpus(self, cfg, state, log):
        return SortData(cfg.context // 2)

    def batch(self, cfg, corpus, step, replica, replicas):
        g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)     # (seed, step) alone
        x, y = corpus.sample(cfg.batch_size, g)                  # the global batch, every rank
        rows = cfg.batch_size // replicas
        part = slice(replica * rows, (replica + 1) * rows)
        return [x[part], y[part]], cfg.batch_size * corpus.n

    def validation(self, cfg, corpus):
        return corpus.sample(cfg.eval_windows, torch.Generator().manual_seed(10_007))

    def held_out(self, model, corpus, cfg, env, val):
        x, y = (t.to(env.device) for t in val)        # every rank scores the same rows
        logits = model(x).float()
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        keep = y[:, corpus.n:]
        right = (logits[:, corpus.n:].argmax(-1) == keep).float().mean()
        return float(loss), {"val_acc": float(right)}

    def result(self, cfg, val, extra):
        return f"val bits per digit {val}, {extra.get('val_acc', 0.0):.1%} of digits sorted right"


SORT = register(SortDigits(), replace=True)


def small_run(out: str, steps: int = 4, **changes):
    """A small run of the task (the tests' and the command below's): 2 layers of width 32."""
    from splitnet.train import TrainConfig

    from splitnet.configs.config import SplitConfig

    model = SplitConfig(d_model=32, n_heads=2, n_layers=2, scheme="strang")
    return TrainConfig(**{"task": "sort", "model": model, "context": 16, "steps": steps,
                          "batch_size": 8, "grad_accum": 2, "warmup": 2, "eval_every": 2,
                          "eval_windows": 16, "progress": False, "plot": False, "seed": 3,
                          "device": "cpu", "out": out, **changes})


def main(argv=None) -> int:
    """``[torchrun --nproc_per_node=2] examples/sort_task.py OUT [--steps N] [--resume |
    --overwrite]``: bad input is one line and exit 2, as for ``splitnet train``."""
    import argparse

    from splitnet.train import train

    p = argparse.ArgumentParser(description="train the digit-sorting task of this file")
    p.add_argument("out", help="the run's folder")
    p.add_argument("--steps", type=int, default=4, help="optimiser steps (default 4)")
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="continue the run in OUT")
    again.add_argument("--overwrite", action="store_true",
                       help="start again (the old run is moved aside)")
    a = p.parse_args(argv)
    if not a.out.strip():
        p.error("OUT: expected a non-empty folder name")
    try:
        train(small_run(a.out, a.steps, resume=a.resume, overwrite=a.overwrite))
    except ValueError as e:
        print(f"sort_task.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
