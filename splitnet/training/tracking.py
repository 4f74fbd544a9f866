"""Experiment tracking: a training run's metrics as TensorBoard events (``--tensorboard DIR``).

Needs the optional extra ``pip install 'splitnet[tensorboard]'``; written with
``torch.utils.tensorboard``. One scalar per metric of each step's record (the same numbers as
``metrics.jsonl``), at the step the record belongs to:

    train/loss (nats per byte), train/bpb, train/lr, train/grad_norm,
    speed/tokens_per_s, speed/step_s, speed/mfu (when the peak is known),
    val/loss, val/bpb (at evaluation steps).

Resumable like the run: a writer opened at step S purges every event at a step > S that an
earlier session left behind (``purge_step``), so after ``--resume`` (even after ``kill -9``) and
after ``--overwrite`` each step appears once.
"""

from __future__ import annotations

from pathlib import Path

from ..configs.config import require

TAGS = {"loss": "train/loss", "bpb": "train/bpb", "lr": "train/lr",
        "grad_norm": "train/grad_norm", "tok_per_s": "speed/tokens_per_s",
        "step_s": "speed/step_s", "mfu": "speed/mfu", "val_loss": "val/loss",
        "val_bpb": "val/bpb"}


def check_available() -> None:
    """One clear line when tensorboard is not installed."""
    require("tensorboard", extra="tensorboard", feature="--tensorboard")


def check(log_dir) -> None:
    """Before a run writes anything: tensorboard installed, ``log_dir`` creatable (tried)."""
    from .._io import nearest_existing, probe_writable

    check_available()
    probe = nearest_existing(Path(log_dir))
    if not probe.is_dir():
        raise ValueError(f"--tensorboard {log_dir}: {probe} is not a directory")
    try:
        probe_writable(probe)
    except OSError as e:
        raise ValueError(f"--tensorboard {log_dir}: cannot write to {probe} "
                         f"({e.strerror})") from None


class TensorBoardLog:
    """Scalars of the training records into ``log_dir``, continuing after ``step``."""

    def __init__(self, log_dir, step: int):
        check_available()
        from torch.utils.tensorboard import SummaryWriter

        Path(log_dir).mkdir(parents=True, exist_ok=True)
        self.log_dir = Path(log_dir)
        self.writer = SummaryWriter(str(log_dir), purge_step=step + 1)

    def write(self, rec: dict) -> None:
        for key, tag in TAGS.items():
            if key in rec:
                self.writer.add_scalar(tag, rec[key], rec["step"])

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


def read_scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in ``log_dir`` as ``{tag: [(step, value), ...]}`` (TensorBoard's own
    reader, purges applied)."""
    check_available()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


__all__ = ["TAGS", "TensorBoardLog", "check", "check_available", "read_scalars"]
