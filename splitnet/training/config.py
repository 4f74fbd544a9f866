"""A training run's configuration: :class:`TrainConfig` (``from splitnet.train import
TrainConfig``): its network, its task, one object per section of the run's options
(:mod:`splitnet.configs.run`: run, data, optimisation, the integrator in training, evaluation,
parallelism, acceleration, logging) and the task's own options (:attr:`Task.options
<splitnet.tasks.task.Task.options>`).

Each section and the task's options check their own fields; this class checks only what spans
them (a speed lever against the model, growth against the steps). An option is reached by its
name whatever its section (``cfg.lr``, ``TrainConfig(lr=1e-3)``, ``cfg.replace(beam=8)``), and a
checkpoint stores the options flat, so every flag, every stored run and every caller of 0.3
reads as before. Pure Python: no torch, so ``splitnet train --help`` starts fast.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from ..configs.config import CUDAGRAPH_MODES, SplitConfig
from ..configs.options import FIXED, FREE, check_applicable, only_with
from ..configs.run import SECTIONS
from ..configs.stacks import get as get_stack
from ..tasks.task import check_task_options, get_task

# option name -> the attribute of its section (the one table of where an option lives)
WHERE = {f.name: attr for attr, cls in SECTIONS.items() for f in dataclasses.fields(cls)}


def option_fields(task) -> list[tuple[str, dataclasses.Field]]:
    """``(section attribute or "task_options", field)`` of every run option of a run of
    ``task`` (a name or a Task), in the command line's order."""
    t = get_task(task) if isinstance(task, str) else task
    out = [(attr, f) for attr, cls in SECTIONS.items() for f in dataclasses.fields(cls)]
    return out + [("task_options", f) for f in dataclasses.fields(t.options)]


@dataclass(frozen=True, init=False)
class TrainConfig:
    """A training run (``splitnet train``; ``train(cfg)``): ``model`` the network's config (a
    :class:`SplitConfig` for a language model, a :class:`~splitnet.configs.seq2seq.Seq2SeqConfig`
    for translation; its ``max_len`` is set to ``context``), ``task`` its task's name (or
    ``"MODULE:NAME"``), a section object per attribute of :data:`~splitnet.configs.run.SECTIONS`
    and ``task_options``. Options may be given flat (``TrainConfig(lr=1e-3, beam=8)``) or as
    whole sections (``optim=OptimOptions(...)``); ``model_options`` is the network's options as
    a partial dict, from which its config is built once. Options marked ``free`` may change on
    ``--resume``; the rest define the run."""

    model: Any
    task: str
    run: Any
    data: Any
    optim: Any
    integrator: Any
    evaluation: Any
    parallelism: Any
    accel: Any
    logging: Any
    task_options: Any

    def __init__(self, model=None, task: str = "lm", *, model_options: dict | None = None,
                 task_options=None, **options):
        set_ = object.__setattr__
        t = get_task(task)
        set_(self, "task", task)
        flat = {k: v for k, v in options.items() if k not in SECTIONS}
        own = {f.name for f in dataclasses.fields(t.options)}
        check_task_options(task, [k for k, v in flat.items() if k not in WHERE
                                  and k not in own and not _at_other_default(k, v)])
        unknown = sorted(k for k in flat if k not in WHERE and k not in own
                         and not _known_elsewhere(k))
        if unknown:
            raise TypeError(f"unknown TrainConfig option(s) {unknown}")
        for attr, cls in SECTIONS.items():
            given = {k: v for k, v in flat.items() if WHERE.get(k) == attr}
            set_(self, attr, _section(cls, options.get(attr), given))
        given = {k: v for k, v in flat.items() if k in own}
        set_(self, "task_options", _section(t.options, task_options, given))
        # a run option the task does not read, given at a value of its own
        check_applicable(self, {k for k, v in flat.items() if k in WHERE and v != getattr(
            SECTIONS[WHERE[k]](), k)}, t.ONLY_WITH)
        set_(self, "model", self._network(t, model, model_options))
        self._check_across()
        t.check(self)

    def _network(self, t, model, model_options):
        """The network's config, built once from ``model_options`` and the task's rule
        (:meth:`~splitnet.tasks.task.Task.model_options`), or ``model`` adjusted by it."""
        want = t.model_config
        if model_options is not None:
            if model is not None:
                raise TypeError("give model or model_options, not both")
            return want(**t.model_options(self, model_options))
        if model is None or (type(model) is not want and model == SplitConfig()):
            return want(**t.model_options(self, {}))
        if isinstance(model, dict):
            model = want.from_dict(model)
        if not isinstance(model, want):
            raise TypeError(f"task {t.name} trains a {want.__name__} model, got "
                            f"{type(model).__name__}")
        d = model.to_dict()
        changes = {k: v for k, v in t.model_options(self, d).items() if d.get(k) != v}
        return model.replace(**changes) if changes else model

    def _check_across(self) -> None:
        """What spans sections: learned coefficients, growth, sharding, CUDA graphs."""
        m, s = self.model, self.integrator
        learned = getattr(m, "learn_coefficients", None)
        if s.order_penalty > 0 and not learned:
            raise ValueError("order_penalty needs learned coefficients, which encoder–decoder "
                             "models do not have" if learned is None else "order_penalty "
                             "needs learned coefficients: add --learn-coefficients")
        if s.refine_prob > 0 and learned:
            raise ValueError("refine_prob with learned coefficients: the refined layers would "
                             "hold the coefficients fixed; choose one of the two")
        self._check_growth()
        self._check_fsdp()
        self._check_depths()
        self._check_drop_exit()
        if self.accel.compile_mode in CUDAGRAPH_MODES and self.optim.grad_accum > 1:
            raise ValueError(f"compile_mode {self.accel.compile_mode} captures CUDA graphs, "
                             f"whose outputs (the gradients) a second micro-batch's replay may "
                             f"overwrite before they are accumulated: it needs grad_accum 1, "
                             f"got {self.optim.grad_accum}")

    def _check_growth(self) -> None:
        g = self.integrator.grow_at
        if not g:
            return
        if g[0] < 1 or g[-1] >= self.steps:
            raise ValueError(f"--grow-at steps must lie in 1..{self.steps - 1} (below --steps "
                             f"{self.steps}, so the grown network trains), got "
                             f"{','.join(map(str, g))}")
        clash = [n for n, v in (("--parallel fsdp", self.parallel == "fsdp"),
                                ("--tp", self.tp > 1),
                                ("--param-dtype bfloat16", self.param_dtype == "bfloat16")) if v]
        if clash:
            raise ValueError(f"--grow-at does not take {', '.join(clash)} yet (the grown model's "
                             f"shards or bf16 copy would be rebuilt mid-run); use --parallel "
                             f"ddp and --param-dtype float32")

    def _check_depths(self) -> None:
        """--train-depths: the finest is the network's depth (every stack's), a layered
        network's others divide it (coarsened views), and what the views cannot share is
        refused."""
        d, m = self.integrator.train_depths, self.model
        if not d:
            return
        own = [m.n_layers] if hasattr(m, "n_layers") else [m.n_encoder_layers,
                                                          m.n_decoder_layers]
        if any(n != d[-1] for n in own):
            raise ValueError(f"--train-depths {','.join(map(str, d))}: the finest must be the "
                             f"network's depth ({'/'.join(map(str, own))} layers), got {d[-1]}")
        if m.depth_basis is None and any(d[-1] % n for n in d):
            raise ValueError(f"--train-depths {','.join(map(str, d))} on a layered network: "
                             f"each depth must divide {d[-1]} (coarsened views); with "
                             f"--depth-basis any depths")
        clash = [n for n, v in (("--parallel fsdp", self.parallel == "fsdp"), ("--tp", self.tp > 1),
                                ("--grow-at", bool(self.grow_at)),
                                ("--refine-prob", self.refine_prob > 0),
                                ("--param-dtype bfloat16", self.param_dtype == "bfloat16"),
                                ("--compile", self.compile),
                                ("--learn-coefficients", getattr(m, "learn_coefficients", False)))
                 if v]
        if clash:
            raise ValueError(f"--train-depths does not take {', '.join(clash)} yet (the views "
                             f"at other depths share the model's own modules)")
        if self.integrator.depth_distill and self.task != "lm":
            raise ValueError(f"--depth-distill distils next-token distributions: --task lm "
                             f"only, got --task {self.task}")

    def _check_drop_exit(self) -> None:
        """--layer-drop and --early-exit (splitnet.training.elastic): a layered language
        model, one of them at a time, the early exit's last exit its depth, a plain stack."""
        s, m = self.integrator, self.model
        names = [n for n, v in (("--layer-drop", s.layer_drop > 0),
                                ("--early-exit", bool(s.early_exit))) if v]
        if not names:
            return
        what = " and ".join(names)
        if len(names) > 1 or s.train_depths:
            raise ValueError(f"{what}{' with --train-depths' * bool(s.train_depths)}: one way "
                             f"of training at several depths at a time (not supported yet)")
        if self.task != "lm" or getattr(m, "depth_basis", None) is not None:
            raise ValueError(f"{what} keeps some layers of a layered language model: --task lm "
                             f"without --depth-basis (a basis runs at any depth by its clock: "
                             f"--train-depths)")
        e = s.early_exit
        if e and e[-1] != m.n_layers:
            raise ValueError(f"--early-exit {','.join(map(str, e))}: the last exit must be the "
                             f"network's depth ({m.n_layers} layers), got {e[-1]}")
        if e and m.stack != "plain":
            raise ValueError(f"--early-exit reads the state between layers: a plain stack, not "
                             f"--stack {m.stack} (not supported yet)")
        clash = [n for n, v in (("--parallel fsdp", self.parallel == "fsdp"), ("--tp", self.tp > 1),
                                ("--grow-at", bool(self.grow_at)),
                                ("--refine-prob", self.refine_prob > 0),
                                ("--param-dtype bfloat16", self.param_dtype == "bfloat16"),
                                ("--compile", self.compile), ("--gate", bool(m.gate)),
                                ("--learn-coefficients", m.learn_coefficients)) if v]
        if clash:
            raise ValueError(f"{what} does not take {', '.join(clash)} yet (its views share "
                             f"the model's own layers)")

    def _check_fsdp(self) -> None:
        """What FSDP (splitnet.training.sharding) does not take yet."""
        if self.parallel != "fsdp":
            return
        kind = get_stack(self.model.stack)
        clash = [n for n, v in (
            ("--refine-prob", self.refine_prob > 0), ("--order-penalty", self.order_penalty > 0),
            (kind.flag, not kind.sharded),
            ("--project-coefficients", getattr(self.model, "project_coefficients", False)),
            ("--param-dtype bfloat16", self.param_dtype == "bfloat16"),
            ("--compile", self.compile)) if v]
        if clash:
            # the advice must be one that works: ddp takes all of these but a bf16 compute
            # copy, which runs on one process only (splitnet.training.setup)
            bf16 = "--param-dtype bfloat16" in clash
            advice = ("run it in one process, without torchrun" if clash == [
                "--param-dtype bfloat16"] else "use --parallel ddp" + (
                " (and --param-dtype bfloat16 runs in one process only)" if bf16 else ""))
            raise ValueError(f"--parallel fsdp does not take {', '.join(clash)} yet (they read "
                             f"or swap whole layers outside the sharded forward); {advice}")

    def __getattr__(self, name: str):
        d = self.__dict__
        attr = WHERE.get(name)
        if attr is not None and attr in d:
            return getattr(d[attr], name)
        opts = d.get("task_options")
        if opts is not None and name in getattr(opts, "__dataclass_fields__", ()):
            return getattr(opts, name)
        raise AttributeError(f"TrainConfig has no option {name!r}" + (
            f" (a run of --task {d['task']} does not read it)" if "task" in d else ""))

    def check_given(self, given) -> None:
        """The options ``given`` (their names; ``model.x`` for the network's) that this run
        would not read, each only applying alongside another (each section's, the task's and
        the network config's ``ONLY_WITH``): a ValueError naming them, before any work.
        ``self`` is the run's whole config (on ``--resume``, the checkpoint's with the given
        ones applied), so ``--resume --loss-chunk N`` of a chunked run is taken."""
        given = set(given)
        for attr, cls in SECTIONS.items():
            check_applicable(getattr(self, attr), given, getattr(cls, "ONLY_WITH", {}))
        check_applicable(self, given, get_task(self.task).ONLY_WITH)
        check_applicable(self.model, {n[6:] for n in given if n.startswith("model.")},
                         {**getattr(self.model, "ONLY_WITH", {}), **only_with(self.model)})

    def section(self, name: str) -> dict:
        """The options of section ``name`` (its attribute or its title) and their values."""
        for attr, cls in SECTIONS.items():
            if name in (attr, cls.TITLE):
                return dataclasses.asdict(getattr(self, attr))
        raise ValueError(f"section must be one of {', '.join(SECTIONS)}; got {name!r}")

    def options(self) -> dict:
        """Every run option of this run by name (sections and the task's), flat."""
        return {f.name: getattr(getattr(self, attr), f.name)
                for attr, f in option_fields(self.task)}

    def tensorboard_dir(self) -> str | None:
        """Where TensorBoard events go: None (off), OUT/tensorboard (True) or the directory."""
        return os.path.join(self.out, "tensorboard") if self.tensorboard is True else \
            self.tensorboard

    def to_dict(self) -> dict:
        """Plain data, flat (``{"model": ..., "task": ..., "lr": ..., ...}``): what a
        checkpoint stores, read by every version."""
        return {"model": self.model.to_dict(), "task": self.task, **self.options()}

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        """The config :meth:`to_dict` wrote (or an earlier version: another task's options at
        their defaults, which 0.3 stored, are dropped); an unknown key is a ValueError."""
        if not isinstance(d, dict):
            raise TypeError(f"a TrainConfig is read from a dict, got {type(d).__name__}")
        unknown = sorted(k for k in d if k not in WHERE and k not in ("model", "task")
                         and not _known_elsewhere(k))
        if unknown:
            raise ValueError(f"unknown TrainConfig option(s) {unknown}")
        return cls(**d)

    def replace(self, **changes) -> TrainConfig:
        """A copy with ``changes`` (options by name, sections, ``model``, ``task``), checked
        again. A new task keeps only the options it reads."""
        task = changes.pop("task", self.task)
        keep = {"task_options": self.task_options} if task == self.task else {}
        kw = {attr: getattr(self, attr) for attr in SECTIONS}
        return TrainConfig(changes.pop("model", self.model), task, **keep, **kw, **changes)


def _section(cls, whole, given: dict):
    """A section object: ``whole`` (an object, a dict, or None: the defaults) with ``given``."""
    if whole is None:
        return cls(**given)
    if isinstance(whole, dict):
        return cls(**{**whole, **given})
    if not isinstance(whole, cls):
        raise TypeError(f"expected a {cls.__name__}, got {type(whole).__name__}")
    return dataclasses.replace(whole, **given) if given else whole


def _other_fields():
    from ..tasks.task import TASKS

    return {f.name: f for t in TASKS.values() for f in dataclasses.fields(t.options)}


def _known_elsewhere(name: str) -> bool:
    return name in _other_fields()


def _at_other_default(name: str, value) -> bool:
    """An option of another task at its default: not given (an earlier version stored every
    task's options)."""
    f = _other_fields().get(name)
    return f is not None and value == f.default


def stored_options(cfg: TrainConfig) -> dict:
    """The run options a checkpoint keeps: :meth:`TrainConfig.to_dict` without the session
    options."""
    d = cfg.to_dict()
    for _, f in option_fields(cfg.task):
        if f.metadata.get("resume", FIXED) not in (FIXED, FREE):
            d.pop(f.name, None)
    return d


__all__ = ["WHERE", "TrainConfig", "option_fields", "stored_options"]
