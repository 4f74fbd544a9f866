"""What a run learns, as an object: :class:`Task` and the registry :data:`TASKS`.

The trainer (:mod:`splitnet.training`), its configuration, sharding, checkpoints and the command
line ask a run's task (``TASKS[cfg.task]``) instead of comparing its name. A task declares

* its network: the kind (``network``, :data:`splitnet.configs.stacks.NETWORKS`: its config class,
  ``model_config``, and network class), the initialisation rule (``init``) and the options its
  network config is built with (:meth:`Task.model_options`: the one place a task adjusts its
  network);
* its own run options (``options``: a dataclass of them, whose fields check themselves; a run of
  another task given one is refused, one line naming the task that reads it: the options of a
  run are its sections' and its task's, nothing else) and its own checks (:meth:`Task.check`,
  and ``ONLY_WITH`` for a run option it does not read);
* its data (:meth:`Task.corpus`: an object with ``fingerprint()`` and ``describe()``), the
  batch of optimiser step ``s`` (:meth:`Task.batch`: a function of ``(seed, s)`` alone, which is
  what makes ``--resume`` exact), its loss (:meth:`Task.loss`: model and loss in one module,
  ``forward(*batch) -> mean loss``, the unit DDP wraps), its held-out score (:meth:`Task.held_out`)
  and scores after the last step (:meth:`Task.final_scores`).

A user's task subclasses :class:`Task` (or a built-in one), is registered with :func:`register`
and trains with every guarantee of the trainer: the lock on the run directory, atomic
checkpoints, exact resume, DDP and FSDP. From the command line, ``splitnet train --task
MODULE:NAME`` imports it from the user's module (a module on ``PYTHONPATH`` or a ``.py`` path),
and an installed package offers tasks through the entry-point group ``splitnet.tasks``
(:func:`get_task` loads both). ``docs/architecture.md`` shows one in a single file. Pure Python
at import (no torch): the command line's ``--help`` reads the registry.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import importlib.util
import os
import re
import sys
from typing import ClassVar

from ..configs import stacks as _stacks
from ..configs.config import cli_fields
from ..names import check_identifier

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
ENTRY_POINTS = "splitnet.tasks"       # the group an installed package offers its tasks in


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """The options of a task that reads none of its own."""


class Task(abc.ABC):
    """One kind of run. Subclasses set ``name`` and implement :meth:`corpus`, :meth:`batch` and
    :meth:`held_out`; the rest has defaults that fit a :class:`~splitnet.nets.models.
    SplitTransformer` trained on next-token cross-entropy."""

    name: str = ""
    help: str = ""
    init: str = "gpt2"                   # the initialisation rule when the model's init is None
    network: str = "lm"                  # its network kind (configs.stacks.NETWORKS)
    options: type = NoOptions            # the dataclass of its own run options
    # run options (of TrainConfig's sections) it does not read: name -> (what they need, a
    # predicate of the run's config), refused when given (configs.options.check_applicable)
    ONLY_WITH: ClassVar[dict] = {}
    family: str = "language-model"       # what its own options are called in messages
    noun: str = "a language model"       # what a run of it is, in messages
    unit: str = "bpb"                    # what the held-out loss is reported in (nats / ln 2)
    reader: str = "'splitnet sample' continues text"   # the command that takes its checkpoints

    @property
    def model_config(self) -> type:
        """The network's configuration class (of its kind ``network``); looked up when asked,
        so a patched ``SplitConfig`` is the one used."""
        return _stacks.get_network(self.network).config_class()

    def __init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"a task's name must be a short lower-case word ([a-z][a-z0-9_-]*), "
                             f"got {self.name!r}")

    # -- configuration (pure Python: TrainConfig calls these on construction) -----------------

    def model_options(self, cfg, options: dict) -> dict:
        """The options the network config of a run of ``cfg`` is built with, from those given
        (``options``: a partial dict, or a whole config's ``to_dict()``): this task's init rule
        when they name none, and ``max_len`` the run's ``context``. The only place a task
        adjusts its network (one rule for the command line and for Python)."""
        out = dict(options)
        fields = {f.name: f for f in dataclasses.fields(self.model_config)}
        if "init" in fields and out.get("init", fields["init"].default) is None:
            out["init"] = self.init
        out["max_len"] = cfg.context
        return out

    def check(self, cfg) -> None:
        """This task's own checks of ``cfg`` (a ValueError naming the option)."""
        return None

    def notes(self, cfg) -> list[str]:
        """What a run of ``cfg`` should know before it starts (said once, at step 0): known
        behaviour of this kind of run, not an error."""
        return []

    def hint(self, option: str) -> str:
        """A sentence on why ``option`` (another task's) does not apply here, or ``""``."""
        return ""

    def memory(self, cfg, world: int, cuda: bool) -> float | None:
        """Bytes a training step needs on one process; None: the trainer's rule for a
        SplitTransformer of :meth:`planned_model`."""
        return None

    def planned_model(self, cfg):
        """The model config before the data is read (the memory estimate's)."""
        return cfg.model

    # -- the run --------------------------------------------------------------------------------

    def requires(self, cfg) -> None:
        """Raise (:class:`~splitnet.configs.config.MissingDependency`) before any work when an
        optional dependency the run will need is missing."""
        return None

    @abc.abstractmethod
    def corpus(self, cfg, state: dict | None, log):
        """The run's data, with ``fingerprint()`` (a JSON-able dict stored in the checkpoint)
        and ``describe()``; ``state``: the checkpoint resumed from, or None."""

    def same_data(self, recorded, corpus) -> bool:
        """Whether the checkpoint's fingerprint ``recorded`` is the data of ``corpus``."""
        return recorded == corpus.fingerprint()

    def check_data(self, cfg, state: dict | None, corpus, log) -> None:
        """On ``--resume``: data that is not the checkpoint's (:meth:`same_data`) is refused,
        one line naming both, unless ``--allow-data-change`` (then a warning)."""
        if state is None or self.same_data(state.get("corpus"), corpus):
            return
        msg = (f"the corpus changed since the checkpoint was written (checkpoint: "
               f"{_describe(state.get('corpus'))}; now: {_describe(corpus.fingerprint())})")
        if not cfg.allow_data_change:
            raise ValueError(msg + "; pass --allow-data-change to go on with the new data")
        log(f"warning: {msg}; going on (--allow-data-change)")

    def fit(self, cfg, corpus, state: dict | None, device):
        """The config once the data is read (a tokenizer's vocabulary) and checked for
        ``device`` (memory the run will need later); default ``cfg``."""
        return cfg

    def build(self, model_cfg):
        """The network of ``model_cfg``, initialised (the seed is set by the trainer)."""
        return _stacks.get_network(self.network).build(model_cfg)

    def loss(self, model, cfg):
        """Model and loss in one module: ``forward(*batch)`` is the micro-batch's mean loss."""
        from .losses import LMLoss

        return LMLoss(model, cfg.loss, cfg.loss_chunk)

    @abc.abstractmethod
    def batch(self, cfg, corpus, step: int, replica: int, replicas: int) -> tuple[list, int]:
        """Data-parallel rank ``replica`` of ``replicas``: its rows of optimiser step
        ``step``'s global batch (a list of tensors, the arguments of :meth:`loss`'s module,
        split row-wise into micro-batches by the trainer) and the tokens the whole step trains
        on. A function of ``(cfg.seed, step)``: nothing else may decide it."""

    def validation(self, cfg, corpus):
        """What :meth:`held_out` scores, fixed once per run (windows, pairs); default None."""
        return None

    @abc.abstractmethod
    def held_out(self, model, corpus, cfg, env, val) -> tuple[float, dict]:
        """``(mean held-out loss in nats, other metrics)`` of ``model`` (in eval mode, no
        gradients) on this rank ``env`` (:class:`~splitnet.runenv.RunEnv`): every rank returns
        the same numbers (all-reduce what each scores)."""

    def scores_at_end(self, cfg) -> bool:
        """Whether :meth:`final_scores` has anything to do (the model is gathered for it)."""
        return False

    def final_scores(self, model, corpus, cfg, device, log) -> dict:
        """Scores of the trained ``model`` after the last step (rank 0 alone)."""
        return {}

    def result(self, cfg, val: str, extra: dict) -> str:
        """The summary's score: ``val <unit> <val>`` and what else :meth:`held_out` gave."""
        return f"val {self.unit} {val}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


TASKS: dict[str, Task] = {}
_LOADED: dict[str, Task] = {}        # a "MODULE:NAME" spec -> the task it loaded


def register(task: Task, replace: bool = False) -> Task:
    """Add ``task`` to :data:`TASKS` under its name; ``TrainConfig(task=task.name)`` then trains
    it. A name that is not an identifier (letters, digits, ``_`` and ``-``, not first a digit)
    is a ValueError, as is one taken by another task unless ``replace``. Returns ``task``."""
    if not isinstance(task, Task):
        raise TypeError(f"register takes a Task instance, got {type(task).__name__}")
    check_identifier("a task", task.name)
    if task.name in TASKS and TASKS[task.name] is not task and not replace:
        raise ValueError(f"a task named {task.name!r} is registered already "
                         f"({TASKS[task.name]!r}); pass replace=True to replace it")
    if not (isinstance(task.options, type) and dataclasses.is_dataclass(task.options)):
        raise TypeError(f"task {task.name!r}: options must be a dataclass of its run options, "
                        f"got {task.options!r}")
    TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    """The task ``name``: a registered one, ``"MODULE:NAME"`` (imported from a user's module or
    ``.py`` file: :func:`load_task`), or one an installed package offers (the entry-point group
    ``splitnet.tasks``). An unknown one is a ValueError naming the registered ones."""
    if isinstance(name, str):
        if name in TASKS:
            return TASKS[name]
        if ":" in name:
            return load_task(name)
        offered = entry_point_tasks()
        if name in offered:
            return load_task(offered[name], expect=name)
    raise ValueError(f"task must be one of {', '.join(TASKS)} or MODULE:NAME (a task of your "
                     f"own); got {name!r}") from None


def entry_point_tasks() -> dict[str, str]:
    """name -> ``"module:attr"`` of the tasks installed packages offer (group
    ``splitnet.tasks``), not loaded."""
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINTS)}


def load_task(spec: str, expect: str | None = None) -> Task:
    """The task ``spec`` (``"package.module:NAME"`` or ``"path/to/file.py:NAME"``) names:
    the module imported, ``NAME`` a :class:`Task` instance or subclass (instantiated), and
    registered under its name (a module that registered it itself keeps that instance). Each
    fault is one ValueError naming the spec."""
    if spec in _LOADED and TASKS.get(_LOADED[spec].name) is _LOADED[spec]:
        return _LOADED[spec]
    module, _, attr = spec.rpartition(":")
    if not module or not attr.isidentifier():
        raise ValueError(f"--task {spec!r}: a task of your own is MODULE:NAME (a module on "
                         f"PYTHONPATH or a .py file, and the name of a Task in it)")
    mod = _import(module, spec)
    obj = getattr(mod, attr, None)
    if isinstance(obj, type) and issubclass(obj, Task):
        known = TASKS.get(getattr(obj, "name", None))
        obj = known if type(known) is obj else obj()
    if not isinstance(obj, Task):
        raise ValueError(f"--task {spec!r}: {module} has no Task named {attr!r} (found "
                         f"{type(obj).__name__ if obj is not None else 'nothing'})")
    if expect is not None and obj.name != expect:
        raise ValueError(f"the entry point {expect!r} ({spec}) gives a task named {obj.name!r}")
    if TASKS.get(obj.name) is not obj:
        register(obj, replace=True)
    _LOADED[spec] = obj
    return obj


def _import(module: str, spec: str):
    """A module by dotted name, or a ``.py`` file by path (as a module of its own name)."""
    try:
        if module.endswith(".py") or os.sep in module or "/" in module:
            path = os.path.abspath(os.path.expanduser(module))
            if not os.path.isfile(path):
                raise ValueError(f"--task {spec!r}: no file {path}")
            name = os.path.splitext(os.path.basename(path))[0]
            if name in sys.modules and getattr(sys.modules[name], "__file__", None) == path:
                return sys.modules[name]
            found = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(found)
            sys.modules[name] = mod
            found.loader.exec_module(mod)
            return mod
        return importlib.import_module(module)
    except ValueError:
        raise
    except Exception as e:           # the user's code: its fault in one line, not a traceback
        raise ValueError(f"--task {spec!r}: importing {module} failed: {type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}") from None


def task_options(task: Task) -> set[str]:
    """The names of ``task``'s own run options."""
    return {f.name for f in dataclasses.fields(task.options)}


def _describe(fp) -> str:
    from ..runs.data import describe_fingerprint

    try:
        return describe_fingerprint(fp)
    except (TypeError, ValueError, AttributeError):      # a user's task's own fingerprint
        return repr(fp)[:120]


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _flags(names) -> str:
    return ", ".join("--" + n.replace("_", "-") for n in names)


def _model_options(task: Task) -> set[str]:
    return {f.name for f in cli_fields(task.model_config)}


def _readers(option: str) -> list[Task]:
    return [t for t in TASKS.values()
            if option in task_options(t) or option in _model_options(t)]


def foreign_options(task: str, names) -> list[str]:
    """The options among ``names`` that a run of ``task`` does not read: another task's own
    options and the options of another task's network only (``model.x`` or ``x``: a field of
    one model config and not of this task's). In the order given."""
    t = get_task(task)
    some_task = {o for u in TASKS.values() for o in task_options(u)}
    other_model = {o for u in TASKS.values() for o in _model_options(u)} - _model_options(t)
    out = []
    for n in names:
        bare = n[6:] if n.startswith("model.") else n
        if (bare == n and bare in some_task and bare not in task_options(t)) or \
                bare in other_model:
            out.append(bare)
    return out


def check_task_options(task: str, names, resumed: bool = False) -> None:
    """The one check of options per task: a ValueError naming every option of ``names`` that a
    run of ``task`` would not read (:func:`foreign_options`), one line, instead of recording
    and ignoring them. ``resumed``: the task is the checkpoint's (said in the message)."""
    wrong = foreign_options(task, names)
    if not wrong:
        return
    t = get_task(task)
    readers = _readers(wrong[0])
    other = [u for u in readers if u.family != t.family] or readers
    s, it = ("", "it") if len(wrong) == 1 else ("s", "them")
    by = _and([u.name for u in readers]) + (" only" if len(readers) == 1 else "")
    how = ("resumed from its checkpoint" if resumed else
           f"--task {t.name}, the default" if t.name == next(iter(TASKS)) else f"--task {t.name}")
    fix = f"drop {it}" if resumed else f"add --task {other[0].name}, or drop {it}"
    raise ValueError(f"{_flags(wrong)}: {other[0].family} option{s} (read by --task {by}), but "
                     f"this run is {t.noun} ({how}): {fix}{t.hint(wrong[0])}")


def task_of(names) -> str:
    """The task that ``names`` (options given without ``--task``) point to: the default (the
    first registered) when it reads them all, else the first that does; options no one task
    reads are a ValueError naming both sides."""
    default = next(iter(TASKS))
    fits = [t for t in TASKS if not foreign_options(t, names)]
    if default in fits or (not fits and not names):
        return default
    if fits:
        return fits[0]
    theirs = foreign_options(default, names)
    other = _readers(theirs[0])[0].name
    mine = foreign_options(other, names)
    raise ValueError(f"{_flags(mine)} ({TASKS[default].noun}'s) and {_flags(theirs)} (--task "
                     f"{other}'s): a run is one or the other")


__all__ = ["ENTRY_POINTS", "TASKS", "NoOptions", "Task", "check_task_options",
           "entry_point_tasks", "foreign_options", "get_task", "load_task", "register",
           "task_of", "task_options"]
