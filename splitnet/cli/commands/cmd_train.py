"""``splitnet train``: every option comes from the run's sections (:mod:`splitnet.configs.run`),
the registered tasks' own options (:attr:`splitnet.tasks.task.Task.options`) and their
networks' configs (names, defaults, help, resume behaviour). ``--task MODULE:NAME`` imports a
task of the user's own before the parser is built (:func:`prepare`), so its options are flags
too; tasks that installed packages offer (entry-point group ``splitnet.tasks``) are loaded
then as well."""

from __future__ import annotations

import argparse
import sys

from ...configs.config import cli_fields
from ...configs.run import SECTIONS
from ...configs.stacks import NETWORKS
from ...tasks.task import (
    TASKS,
    check_task_options,
    entry_point_tasks,
    get_task,
    load_task,
    task_of,
)
from ...training.config import TrainConfig
from .._args import add_config_options, given_options

RANK = 40   # place in `splitnet --help`
VERDICT = "training cannot go on: the loss is not finite (TrainingError)"
HELP = ("train a byte-level language model, (--task mlm) a masked language model, (--task "
        "translate) an encoder–decoder, or a task of your own (--task MODULE:NAME)")
_MODEL_SKIP = ("max_len",)           # set from --context


def prepare(argv) -> None:
    """Before the parser: a ``--task MODULE:NAME`` of the command line is imported and
    registered, and so are the tasks installed packages offer (a package that fails to load
    is named in one line and left out)."""
    for i, a in enumerate(argv):
        spec = argv[i + 1] if a == "--task" and i + 1 < len(argv) else \
            a.partition("=")[2] if a.startswith("--task=") else None
        if spec and ":" in spec:
            load_task(spec)
    for name, value in entry_point_tasks().items():
        if name not in TASKS:
            try:
                load_task(value, expect=name)
            except ValueError as e:
                print(f"splitnet train: warning: the installed task {name!r} is left out: {e}",
                      file=sys.stderr)


def _task(text: str) -> str:
    try:
        get_task(text)              # a registered name, or MODULE:NAME (already loaded)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def configure(p) -> None:
    tasks = "; ".join(f"{t.name}: {t.help}" for t in TASKS.values())
    p.description = (
        f"Train a splitting network on a task (--task; {tasks}; or MODULE:NAME, a Task in a "
        "module of your own or a .py file, and the tasks installed packages offer). Default: a "
        "byte-level SplitTransformer language model of the Python standard library's .py files, "
        "d_model 128, 4 heads, 4 layers, context 128, batch 16, 600 steps = 1.2M training bytes "
        "(about 3 minutes on 2 CPU cores busy with other jobs, where the default takes 1 "
        "thread; about 1 minute on 2 idle ones). Writes checkpoint.pt, metrics.jsonl and "
        "loss.png to --out. On --resume every option not given is restored from the "
        "checkpoint; options marked [may change on --resume] can be changed, the others must "
        "match. Several processes: torchrun --nproc_per_node=N -m splitnet train ...")
    p.add_argument("--task", type=_task, default=None, metavar="TASK",
                   help=f"what the run learns: {', '.join(TASKS)} or MODULE:NAME (default lm; "
                        f"on --resume the checkpoint's)")
    seen: set[str] = {"task"}
    for kind in _networks():        # one group per kind of network the tasks train
        cls = kind.config_class()
        names = [t.name for t in TASKS.values() if t.network == kind.name]
        title = "model" if kind.name == "lm" else f"{kind.name} model (--task " \
            f"{', '.join(names)}; the options above that it shares apply too)"
        skip = [*_MODEL_SKIP, *(f.name for f in cli_fields(cls) if f.name in seen)]
        add_config_options(p.add_argument_group(title), cls, skip=skip)
        seen |= {f.name for f in cli_fields(cls)}
    for cls in SECTIONS.values():   # one group per section of the run's options
        add_config_options(p.add_argument_group(cls.TITLE), cls)
    _task_groups(p, seen | {f.name for c in SECTIONS.values() for f in cli_fields(c)})
    p.add_argument("--dry-run", action="store_true",
                   help="check every option (and the checkpoint on --resume), print the "
                        "configuration and the memory estimate, and stop")


def _networks():
    used = {t.network for t in TASKS.values()}
    return [k for k in NETWORKS.values() if k.name in used]


def _task_groups(p, seen: set[str]) -> None:
    """One group per task with options of its own; an option two tasks read is one flag, in
    the first one's group."""
    for t in TASKS.values():
        fields = [f for f in cli_fields(t.options) if f.name not in seen]
        if fields:
            add_config_options(p.add_argument_group(f"--task {t.name}"), t.options,
                               skip=[f.name for f in cli_fields(t.options) if f.name in seen])
            seen |= {f.name for f in fields}


def _run_options() -> list[type]:
    return [*SECTIONS.values(), *(t.options for t in TASKS.values())]


def config_from_args(args) -> tuple[TrainConfig, set[str]]:
    """The TrainConfig the command line describes and the option names it gave explicitly.

    The task is ``--task`` (default lm): an option of another task is refused, one line
    (:func:`~splitnet.tasks.task.check_task_options`), never a silent switch of task. On
    ``--resume`` without ``--task`` the task is the checkpoint's, which only the trainer reads:
    the config is built for the task the given options point to, ``task`` is not counted as
    given, and :func:`splitnet.training.setup.resume_config` checks them against the
    checkpoint's task."""
    run: dict = {}
    for cls in _run_options():
        run.update(given_options(args, cls))
    names = [*run, *(n for n in vars(args) if n not in run and n != "task"
                     and getattr(args, n) is not None)]
    if args.task is not None or not args.resume:
        task = args.task or "lm"
        check_task_options(task, names)
    else:
        task = task_of(names)
    cls = get_task(task).model_config
    model = given_options(args, cls, skip=_MODEL_SKIP)
    cfg = TrainConfig(task=task, model_options=model, **run)
    given = set(run) | ({"task"} if args.task is not None else set())
    return cfg, given | {f"model.{k}" for k in model}


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

    from ...training import setup as S

    cfg, corpus = S.plan(cfg, explicit)
    print(json.dumps(cfg.to_dict(), indent=1, default=str))
    print(f"corpus: {corpus.describe()}")
    print(f"memory estimate: {S.estimate_memory(cfg) / 2**30:.2f} GiB per process")
    return 0


__all__ = ["HELP", "RANK", "VERDICT", "config_from_args", "configure", "prepare", "run"]
