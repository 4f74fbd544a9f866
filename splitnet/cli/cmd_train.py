"""``splitnet train``: every option comes from :class:`~splitnet.config.TrainConfig` and its
model's :class:`~splitnet.config.SplitConfig` (names, defaults, help, resume behaviour)."""

from __future__ import annotations

import sys

from ..config import SplitConfig, TrainConfig
from ._args import add_config_options, given_options

RANK = 40   # place in `splitnet --help`
HELP = "train a SplitTransformer byte-level language model"
_MODEL_SKIP = ("max_len",)           # set from --context


def configure(p) -> None:
    p.description = (
        "Train a byte-level SplitTransformer language model. Default: the Python standard "
        "library's .py files, d_model 128, 4 heads, 4 layers, context 128, batch 16, 600 steps "
        "= 1.2M training bytes (about 3 minutes on 2 CPU cores busy with other jobs, where the "
        "default takes 1 thread; about 1 minute on 2 idle ones). Writes checkpoint.pt, "
        "metrics.jsonl and loss.png to --out. "
        "On --resume every option not given is restored from the checkpoint; options marked "
        "[may change on --resume] can be changed, the others must match. Several processes: "
        "torchrun --nproc_per_node=N -m splitnet train ...")
    add_config_options(p.add_argument_group("model"), SplitConfig, skip=_MODEL_SKIP)
    add_config_options(p.add_argument_group("data, optimisation and run"), TrainConfig)
    p.add_argument("--dry-run", action="store_true",
                   help="check every option (and the checkpoint on --resume), print the "
                        "configuration and the memory estimate, and stop")


def config_from_args(args) -> tuple[TrainConfig, set[str]]:
    """The TrainConfig the command line describes and the option names it gave explicitly."""
    model = given_options(args, SplitConfig, skip=_MODEL_SKIP)
    run = given_options(args, TrainConfig)
    cfg = TrainConfig(model=SplitConfig(**model), **run)
    return cfg, set(run) | {f"model.{k}" for k in model}


def run(args) -> int:
    from .. import train as T

    cfg, explicit = config_from_args(args)
    if args.dry_run:
        return _dry_run(cfg, explicit)
    try:
        summary = T.train(cfg, explicit)
    except T.TrainingError as e:
        print(f"splitnet train: {e}", file=sys.stderr)
        return 1
    sig = summary.get("signal")
    return 128 + sig if sig else 0


def _dry_run(cfg: TrainConfig, explicit) -> int:
    import json

    from .. import train as T

    cfg, corpus = T.plan(cfg, explicit)
    print(json.dumps(cfg.to_dict(), indent=1, default=str))
    print(f"corpus: {corpus.describe()}")
    print(f"memory estimate: {T.estimate_memory(cfg) / 2**30:.2f} GiB per process")
    return 0


__all__ = ["HELP", "RANK", "config_from_args", "configure", "run"]
