"""``splitnet train``: every option comes from
:class:`~splitnet.training.config.TrainConfig` and its
model's :class:`~splitnet.configs.config.SplitConfig` (names, defaults, help, resume behaviour)."""

from __future__ import annotations

import sys

from ...configs.config import SplitConfig, cli_fields
from ...configs.seq2seq import Seq2SeqConfig
from ...tasks.task import TASKS, check_task_options, get_task, task_of
from ...training.config import SECTIONS, TrainConfig
from .._args import add_config_options, given_options

RANK = 40   # place in `splitnet --help`
VERDICT = "training cannot go on: the loss is not finite (TrainingError)"
HELP = ("train a byte-level language model, (--task mlm) a masked language model, or (--task "
        "translate) an encoder–decoder")
_MODEL_SKIP = ("max_len",)           # set from --context
_LM = {f.name for f in cli_fields(SplitConfig)} - set(_MODEL_SKIP)
_S2S = {f.name for f in cli_fields(Seq2SeqConfig)}


def configure(p) -> None:
    tasks = "; ".join(f"{t.name}: {t.help}" for t in TASKS.values())
    p.description = (
        f"Train a splitting network on a task (--task; {tasks}). Default: a byte-level "
        "SplitTransformer language model of the Python standard "
        "library's .py files, d_model 128, 4 heads, 4 layers, context 128, batch 16, 600 steps "
        "= 1.2M training bytes (about 3 minutes on 2 CPU cores busy with other jobs, where the "
        "default takes 1 thread; about 1 minute on 2 idle ones). Writes checkpoint.pt, "
        "metrics.jsonl and loss.png to --out. "
        "On --resume every option not given is restored from the checkpoint; options marked "
        "[may change on --resume] can be changed, the others must match. Several processes: "
        "torchrun --nproc_per_node=N -m splitnet train ...")
    add_config_options(p.add_argument_group("model"), SplitConfig, skip=_MODEL_SKIP)
    add_config_options(p.add_argument_group("encoder–decoder model (--task translate; the "
                                            "options above that it shares apply too)"),
                       Seq2SeqConfig, skip=sorted(_S2S & _LM))
    for name, fields in SECTIONS.items():          # one group per section of the run's options
        others = [f.name for f in cli_fields(TrainConfig) if f.name not in fields]
        add_config_options(p.add_argument_group(name), TrainConfig, skip=others)
    p.add_argument("--dry-run", action="store_true",
                   help="check every option (and the checkpoint on --resume), print the "
                        "configuration and the memory estimate, and stop")


def config_from_args(args) -> tuple[TrainConfig, set[str]]:
    """The TrainConfig the command line describes and the option names it gave explicitly.

    The task is ``--task`` (default lm): an option of the other task is refused, one line
    (:func:`~splitnet.tasks.task.check_task_options`), never a silent switch of task. On
    ``--resume`` without ``--task`` the task is the checkpoint's, which only the trainer reads:
    the config is built for the task the given options point to, ``task`` is not counted as
    given, and :func:`splitnet.training.setup.resume_config` checks them against the
    checkpoint's task."""
    run = given_options(args, TrainConfig)
    names = [*run, *(n for n in vars(args) if n not in run and getattr(args, n) is not None)]
    if "task" in run or not args.resume:
        task = run.get("task", "lm")
        check_task_options(task, [n for n in names if n != "task"])
    else:
        task = task_of(names)
    cls = get_task(task).model_config
    model = given_options(args, cls, skip=_MODEL_SKIP)
    cfg = TrainConfig(model=cls(**model), **{**run, "task": task})
    return cfg, set(run) | {f"model.{k}" for k in model}


def run(args) -> int:
    from ...training import train as T

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

    from ...training import train as T

    cfg, corpus = T.plan(cfg, explicit)
    print(json.dumps(cfg.to_dict(), indent=1, default=str))
    print(f"corpus: {corpus.describe()}")
    print(f"memory estimate: {T.estimate_memory(cfg) / 2**30:.2f} GiB per process")
    return 0


__all__ = ["HELP", "RANK", "VERDICT", "config_from_args", "configure", "run"]
