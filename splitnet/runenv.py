"""The processes, device and signals of a training run (:mod:`splitnet.training.train`).

* :class:`RunEnv` / :func:`run_env`: world size, rank and device, from torchrun's environment
  variables and ``--device``;
* :class:`Signals`: SIGINT/SIGTERM honoured at the next step boundary, or at once (as
  :class:`Interrupted`) inside forward/backward/evaluation; :func:`setup_phase` turns a signal
  during set-up into a KeyboardInterrupt.
"""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from dataclasses import dataclass

import torch


def draws_progress(asked: bool = True) -> bool:
    """Whether a progress bar is drawn: when asked and stderr is a terminal (or a notebook's
    kernel, where tqdm draws a widget). A log file gets no bar updates."""
    import sys

    return bool(asked) and (sys.stderr.isatty() or "ipykernel" in sys.modules)

__all__ = [
    "Interrupted",
    "RunEnv",
    "Signals",
    "available_memory",
    "default_threads",
    "draws_progress",
    "require_memory",
    "run_env",
    "setup_phase",
]

# ----------------------------------------------------------------------------------------------
# processes and devices


@dataclass
class RunEnv:
    """Where this process runs: ``world`` processes, this one ``rank`` (``local_rank`` on its
    node), on ``device``; ``tp`` consecutive ranks split each field (``--tp``) and so take the
    same data: the batch is split over ``replicas`` = world / tp, this rank in ``replica``."""

    world: int
    rank: int
    local_rank: int
    device: torch.device
    tp: int = 1

    @property
    def replicas(self) -> int:
        return self.world // self.tp

    @property
    def replica(self) -> int:
        return self.rank // self.tp

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def run_env(device_name: str) -> RunEnv:
    """The environment from torchrun's variables (one process without them) and ``--device``
    (``auto``: CUDA when available)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device_name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    if device_name == "auto":
        device_name = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(f"cuda:{local}") if device_name == "cuda" else torch.device("cpu")
    return RunEnv(world, rank, local, dev)


def available_memory(device=None) -> float | None:
    """Bytes free on ``device`` (CUDA: free device memory; otherwise available RAM), or None
    when the system does not say."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:     # MemAvailable counts reclaimable page cache
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def require_memory(need: float, what: str, hint: str, device=None) -> None:
    """ValueError before any work when ``what`` needs (an estimate of) ``need`` bytes and more
    than 90% of the free memory of ``device``: one line with both numbers and ``hint`` (what to
    lower)."""
    have = available_memory(device)
    if have is not None and need > 0.9 * have:
        dev = "cpu" if device is None else str(device)
        raise ValueError(f"{what} needs about {need / 2**30:.1f} GiB but {dev} has "
                         f"{have / 2**30:.1f} GiB free; {hint}")


def default_threads() -> int:
    """CPU threads for a command that was not given ``--threads``: torch's own choice (one per
    core, or ``OMP_NUM_THREADS``) when the machine is idle, but no more than the cores that
    other processes leave free (the 1-minute load average), and at least 1. On a small machine
    shared with other jobs, threads that wait for a busy core make every step slower
    (benchmarks/bench_threads.py measures it: docs/benchmarks.md)."""
    n = torch.get_num_threads()
    if os.environ.get("OMP_NUM_THREADS"):
        return n                        # the user's own choice
    try:
        cores = len(os.sched_getaffinity(0))
        load = os.getloadavg()[0]
    except (AttributeError, OSError):   # not Linux: torch's default
        return n
    return max(1, min(n, cores, int(cores - load + 0.5)))


# ----------------------------------------------------------------------------------------------
# signals: honoured at the next step boundary, or at once inside forward/backward/evaluation


class Interrupted(Exception):
    """A signal received inside an interruptible section; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class Signals:
    """SIGINT/SIGTERM handlers for a run. Outside :meth:`interruptible` sections a signal only
    sets :attr:`received` (the loop saves at the next step boundary); inside (forward, backward,
    evaluation: nothing there changes the weights) it raises at once, so even a long step
    stops within seconds."""

    def __init__(self):
        self.received: int | None = None
        self._armed = False
        self._old: dict = {}

    def __enter__(self) -> Signals:
        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[s] = signal.signal(s, self._handle)
            except ValueError:   # not the main thread: the default behaviour stays
                pass
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)

    def _handle(self, signum, frame) -> None:
        self.received = signum
        if self._armed:
            self._armed = False
            raise Interrupted(signum)

    def interruptible(self):
        sig = self

        class _Section:
            def __enter__(self):
                if sig.received is not None:
                    raise Interrupted(sig.received)
                sig._armed = True

            def __exit__(self, *exc):
                sig._armed = False

        return _Section()


@contextmanager
def setup_phase(signals: Signals):
    """Set-up work (reading the corpus, building and compiling the model): a signal stops it at
    once as a KeyboardInterrupt (the command line prints one line, exit 130)."""
    try:
        with signals.interruptible():
            yield
    except Interrupted:
        raise KeyboardInterrupt from None
