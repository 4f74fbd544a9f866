"""What a run learns, as an object: :class:`Task` and the registry :data:`TASKS`.

The trainer (:mod:`splitnet.training`), its configuration, sharding, checkpoints and the command
line ask a run's task (``TASKS[cfg.task]``) instead of comparing its name. A task declares

* its network: the config class (``model_config``), the initialisation rule (``init``), the
  model config it trains (:meth:`Task.configure`: the one place a task adjusts its network) and
  how it is built (:meth:`Task.build`);
* the run options it reads (``reads``; any other task's option given to it is refused, one line
  naming it, never recorded and ignored), those every other task reads and it does not
  (``ignores``: refused when given, :meth:`~splitnet.training.config.TrainConfig.check_given`)
  and its own checks (:meth:`Task.check`);
* its data (:meth:`Task.corpus`: an object with ``fingerprint()`` and ``describe()``), the
  batch of optimiser step ``s`` (:meth:`Task.batch`: a function of ``(seed, s)`` alone, which is
  what makes ``--resume`` exact), its loss (:meth:`Task.loss`: model and loss in one module,
  ``forward(*batch) -> mean loss``, the unit DDP wraps), its held-out score (:meth:`Task.held_out`)
  and scores after the last step (:meth:`Task.final_scores`).

A user's task subclasses :class:`Task` (or a built-in one), is registered with :func:`register`
and trains with every guarantee of the trainer: the lock on the run directory, atomic
checkpoints, exact resume, DDP and FSDP. ``docs/architecture.md`` shows one in a single file.
Pure Python at import (no torch): the command line's ``--help`` reads the registry.
"""

from __future__ import annotations

import abc
import re

from ..configs.config import SplitConfig, cli_fields

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


class Task(abc.ABC):
    """One kind of run. Subclasses set ``name`` and implement :meth:`corpus`, :meth:`batch` and
    :meth:`held_out`; the rest has defaults that fit a :class:`~splitnet.nets.models.
    SplitTransformer` trained on next-token cross-entropy."""

    name: str = ""
    help: str = ""
    init: str = "gpt2"                   # the initialisation rule when the model's init is None
    reads: tuple[str, ...] = ()          # run options (TrainConfig fields) only some tasks read
    ignores: tuple[str, ...] = ()        # run options the others read and this one does not
    family: str = "language-model"       # what its own options are called in messages
    noun: str = "a language model"       # what a run of it is, in messages
    unit: str = "bpb"                    # what the held-out loss is reported in (nats / ln 2)
    reader: str = "'splitnet sample' continues text"   # the command that takes its checkpoints

    @property
    def model_config(self) -> type:
        """The network's configuration class (a subclass may set a class attribute); looked up
        when asked, so a patched ``SplitConfig`` is the one used."""
        return SplitConfig

    def __init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"a task's name must be a short lower-case word ([a-z][a-z0-9_-]*), "
                             f"got {self.name!r}")

    # -- configuration (pure Python: TrainConfig calls these on construction) -----------------

    def configure(self, cfg):
        """The model config a run of ``cfg`` trains: ``cfg.model`` with this task's init rule
        when it names none. The only place a task adjusts its network (one rule for the command
        line and for Python)."""
        if getattr(cfg.model, "init", "") is None:
            return cfg.model.replace(init=self.init)
        return cfg.model

    def check(self, cfg) -> None:
        """This task's own checks of ``cfg`` (a ValueError naming the option)."""
        return None

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
        from ..nets.models import SplitTransformer

        return SplitTransformer.from_config(model_cfg)

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


def register(task: Task, replace: bool = False) -> Task:
    """Add ``task`` to :data:`TASKS` under its name; ``TrainConfig(task=task.name)`` then trains
    it. A name taken by another task is a ValueError unless ``replace``. Returns ``task``."""
    if not isinstance(task, Task):
        raise TypeError(f"register takes a Task instance, got {type(task).__name__}")
    if task.name in TASKS and TASKS[task.name] is not task and not replace:
        raise ValueError(f"a task named {task.name!r} is registered already "
                         f"({TASKS[task.name]!r}); pass replace=True to replace it")
    TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    """The registered task ``name``; an unknown one is a ValueError listing the others."""
    try:
        return TASKS[name]
    except (KeyError, TypeError):
        raise ValueError(f"task must be one of {', '.join(TASKS)}; got {name!r}") from None


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
    return [t for t in TASKS.values() if option in t.reads or option in _model_options(t)]


def foreign_options(task: str, names) -> list[str]:
    """The options among ``names`` that a run of ``task`` does not read: another task's run
    options (its ``reads``) and the options of another task's network only (``model.x`` or
    ``x``: a field of one model config and not of this task's). In the order given."""
    t = get_task(task)
    some_task = {o for u in TASKS.values() for o in u.reads}
    other_model = {o for u in TASKS.values() for o in _model_options(u)} - _model_options(t)
    out = []
    for n in names:
        bare = n[6:] if n.startswith("model.") else n
        if (bare == n and bare in some_task and bare not in t.reads) or bare in other_model:
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


__all__ = ["TASKS", "Task", "check_task_options", "foreign_options", "get_task", "register",
           "task_of"]
