"""Stack kinds: how a network runs its layers, chosen by a config's ``stack`` option
(``sn.stacks``). Pure Python: the classes are named by path and imported on first use, so the
configs and the command line's ``--help`` stay free of torch.

A :class:`StackKind` names its stack class (a subclass of
:class:`splitnet.integrators.stack.Stack`), its layer class, the stack options it reads and its
own checks. The stack options are the config options that only some kinds read
(:data:`STACK_OPTIONS`); one given to a kind that does not read it is refused, naming what it
needs, so the kinds exclude each other by construction rather than by a check per pair::

    ============  ==========================================  ==================================
    kind          stack / layer                               reads
    ============  ==========================================  ==================================
    plain         Stack / SplitLayer (LearnedSplitLayer)      learn_coefficients,
                                                              project_coefficients
    checkpointed  CheckpointedStack / the same                the same
    reversible    ReversibleStack / ReversibleLayer           reversible_grid
    ============  ==========================================  ==================================

``reversible=True``, the contract's older spelling, means ``stack="reversible"`` (both are
stored, so a checkpoint of either version rebuilds its network). A user's kind::

    class Mine(sn.integrators.stack.Stack): ...      # overrides what it changes (run, ...)
    sn.stacks.register("mine", Mine)                 # then SplitConfig(stack="mine")

builds, trains, saves and loads like a built-in one (its checkpoint needs it registered again
before loading, as a user's task does).

The kinds of network are the other registry of what a config builds (:data:`NETWORKS`: ``lm``
-> SplitConfig, SplitTransformer; ``seq2seq`` -> Seq2SeqConfig, SplitSeq2Seq), the one that
checkpoints (``model_kind``), the loaders and the tasks read.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..names import check_identifier, unknown_name
from ..stagelists.stages import reversible_unsupported
from . import kinds as _kinds
from .options import check_int, kind_option_fields, option

# The options only some kinds read: option -> (its default, why it is refused elsewhere, with
# {kind} the kind asked for).
STACK_OPTIONS = {
    "learn_coefficients": (False, "{kind} networks with learned coefficients are not supported "
                                  "yet: choose one of the two"),
    "project_coefficients": (False, "project_coefficients needs learned coefficients, which "
                                    "{kind} networks do not take"),
    "reversible_grid": (None, "reversible_grid needs reversible=True (--reversible)"),
}
_LEARNED = ("learn_coefficients", "project_coefficients")


HELP = ("how the layers are run (sn.stacks): plain (every activation kept for backward), "
        "checkpointed (each layer's activations recomputed in backward) or reversible (= "
        "--reversible), or a kind registered with sn.stacks.register")


def stack_option():
    """The ``stack`` field of a network config (every network config declares it so)."""
    return option("plain", HELP, choices=Names())


def _load(path):
    """``"package.module:Class"`` imported, or a class given as it is."""
    if not isinstance(path, str):
        return path
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class StackKind:
    """A kind of stack: ``name``, the ``stack`` class and ``layer`` class (paths or classes),
    the :data:`STACK_OPTIONS` it reads (``reads``) and :meth:`check` of a config."""

    reversible = False            # its layers step a partitioned pair (splitnet.reversible)
    sharded = True                # it runs inside FSDP's sharded forward (--parallel fsdp)

    @property
    def flag(self) -> str:
        """How the command line asks for this kind."""
        return "--reversible" if self.reversible else f"--stack {self.name}"

    def __init__(self, name: str, stack, layer="splitnet.integrators.layers:SplitLayer",
                 reads: Sequence[str] = _LEARNED, help: str = ""):
        self.name, self.stack, self.layer = name, stack, layer
        self.reads, self.help = tuple(reads), help

    def stack_class(self) -> type:
        return _load(self.stack)

    def layer_class(self, config) -> type:
        """The class of each layer (learned coefficients: the learned layer)."""
        if getattr(config, "learn_coefficients", False):
            return _load("splitnet.nets.learned:LearnedSplitLayer")
        return _load(self.layer)

    def layer_options(self, config) -> dict:
        """Keyword arguments of each layer beyond scheme, step, method and fields."""
        if getattr(config, "learn_coefficients", False):
            return {"float64": config.project_coefficients}
        return {}

    def check(self, config, stacks) -> None:
        """This kind's own checks of ``config`` (``stacks``: ``(option name, scheme)`` of each
        stack it builds)."""

    def __repr__(self) -> str:
        return f"StackKind({self.name!r})"


class ReversibleKind(StackKind):
    """The reversible stack: every stage a shear of the pair ``(x1, x2)`` (its Euler step is its
    exact flow), so both fields that write the two halves are needed, the stages may not sum
    fields, and the sub-flow method is Euler."""

    reversible = True
    sharded = False               # its backward reconstructs whole layers outside FSDP's

    def layer_class(self, config) -> type:
        return _load(self.layer)

    def layer_options(self, config) -> dict:
        return {"grid": config.reversible_grid}

    def check(self, config, stacks) -> None:
        check_reversible(config, stacks)


def check_reversible(cfg, stacks) -> None:
    """A reversible network config checked, ``reversible_grid`` normalised in place: the grid an
    int in [1, 20]; every stage of every stack a shear
    (:func:`splitnet.stagelists.stages.reversible_unsupported`) and Euler sub-steps. ``stacks``:
    ``(option name, scheme)`` pairs, the option naming the scheme in errors."""
    if cfg.reversible_grid is not None:
        object.__setattr__(cfg, "reversible_grid", check_int("reversible_grid",
                                                             cfg.reversible_grid))
    kinds = {f: _kinds.KINDS.get(getattr(cfg, f"{f}_field")) for f in kind_option_fields(cfg)}
    absent = [f"{f}_field" for f, k in kinds.items() if getattr(k, "absent", False)]
    if absent:
        raise ValueError(f"a reversible network writes its two halves with attention and the "
                         f"feed-forward, so it needs both; {', '.join(absent)} is none")
    odd = [f"{f}_field={k.name}" for f, k in kinds.items() if not getattr(k, "reversible", True)]
    if odd:
        raise ValueError(f"a reversible network does not take {', '.join(odd)} (its pair "
                         f"carries only the state and the memory)")
    for option_name, scheme in stacks:
        reason = reversible_unsupported(scheme.stages)
        if reason:
            raise ValueError(f"{option_name} {scheme.name!r} ({scheme.diagram()}) cannot be "
                             f"reversible: {reason}")
    if cfg.method != "euler":
        raise ValueError(f"reversible networks take method='euler' (the Euler step of a shear "
                         f"is its exact flow), got {cfg.method!r}")


KINDS: dict[str, StackKind] = {}


def register(name: str, cls, *, layer=None, reads: Sequence[str] | None = None,
             help: str = "", replace: bool = False) -> StackKind:
    """Register the stack kind ``name`` for ``cls`` (a :class:`~splitnet.integrators.stack.Stack`
    subclass, or a :class:`StackKind`): ``SplitConfig(stack=name)`` then builds it. Its layers
    are SplitLayers (``layer``: another class) and it reads the learned-coefficient options
    unless ``reads`` says otherwise. A taken name is a ValueError unless ``replace``."""
    check_identifier("a stack kind", name)
    if isinstance(cls, StackKind):
        kind = cls
    else:
        _check_stack_class(cls)
        kind = StackKind(name, cls, layer or "splitnet.integrators.layers:SplitLayer",
                         _LEARNED if reads is None else reads, help)
    bad = [r for r in kind.reads if r not in STACK_OPTIONS]
    if bad:
        raise ValueError(f"stack kind {name!r} reads {bad}, which are not stack options "
                         f"({', '.join(STACK_OPTIONS)})")
    if name in KINDS and KINDS[name] is not kind and not replace:
        raise ValueError(f"a stack kind named {name!r} is registered already; pass "
                         f"replace=True to replace it")
    kind.name = name
    KINDS[name] = kind
    return kind


def _check_stack_class(cls) -> None:
    from ..integrators.stack import Stack  # torch: only when a user registers a class

    if not (isinstance(cls, type) and issubclass(cls, Stack)):
        raise TypeError(f"a stack kind is a subclass of splitnet.integrators.stack.Stack, got "
                        f"{cls!r}")


def get(name: str) -> StackKind:
    """The registered kind ``name``; an unknown one is a ValueError listing the others."""
    if isinstance(name, str) and name in KINDS:
        return KINDS[name]
    raise ValueError(unknown_name("stack kind", name, KINDS) + "; a kind of your own is "
                     "registered first: sn.stacks.register(name, cls)")


def available() -> list[str]:
    return list(KINDS)


class Names(Sequence):
    """The registered names, live (the ``stack`` option's choices: a kind registered later is
    one too)."""

    def __getitem__(self, i):
        return list(KINDS)[i]

    def __len__(self) -> int:
        return len(KINDS)

    def __contains__(self, name) -> bool:
        return name in KINDS

    def __repr__(self) -> str:
        return repr(list(KINDS))


def resolve_stack(config) -> StackKind:
    """The kind ``config`` asks for, normalised in place: ``reversible=True`` means
    ``stack="reversible"`` (and the reverse), and a stack option given to a kind that does not
    read it is a ValueError naming what it needs."""
    set_ = object.__setattr__
    if not isinstance(config.stack, str):
        raise ValueError(f"stack must be a kind's name ({', '.join(KINDS)}), got "
                         f"{config.stack!r}")
    kind = get(config.stack)
    if config.reversible and not kind.reversible:
        if config.stack != "plain":
            raise ValueError(f"reversible=True means stack='reversible', not "
                             f"stack={config.stack!r}: give one of the two")
        kind = KINDS["reversible"]
    set_(config, "stack", kind.name)
    set_(config, "reversible", kind.reversible)
    for name, (default, refusal) in STACK_OPTIONS.items():
        if name not in kind.reads and getattr(config, name, default) != default:
            raise ValueError(refusal.format(kind=kind.name))
    return kind


def stack_changes(config, changes: dict) -> dict:
    """``changes`` of a ``config.replace``: ``reversible`` changed alone carries ``stack`` with it
    (``reversible=False`` of a reversible config is the plain stack)."""
    if "reversible" in changes and "stack" not in changes and \
            bool(changes["reversible"]) != bool(config.reversible):
        return {**changes, "stack": "reversible" if changes["reversible"] else "plain"}
    return changes


register("plain", StackKind("plain", "splitnet.integrators.stack:Stack",
                            help="the layers in order, every activation kept for backward"))
register("checkpointed", StackKind(
    "checkpointed", "splitnet.integrators.checkpointed:CheckpointedStack",
    help="activation checkpointing per layer: each layer's input kept, its activations "
         "recomputed in backward"))
register("reversible", ReversibleKind(
    "reversible", "splitnet.reversible.stack:ReversibleStack",
    "splitnet.reversible.layer:ReversibleLayer", reads=("reversible_grid",),
    help="a partitioned state (x1, x2), exactly invertible: nothing stored per layer"))

# ---------------------------------------------------------------------------------------------
# the kinds of network: a name (what a checkpoint stores as ``model_kind``) -> the config class
# and the network class, named by path and looked up when asked (a patched SplitConfig is the one
# used); a run's task names the kind it trains (splitnet.tasks.task.Task.network)


@dataclass(frozen=True)
class NetworkKind:
    """A kind of network: its ``name``, and the ``config`` and ``network`` classes as
    ``"package.module:Class"`` paths."""

    name: str
    config: str
    network: str

    def config_class(self) -> type:
        return _load(self.config)

    def network_class(self) -> type:
        return _load(self.network)

    def build(self, config):
        """The network of ``config`` (a config of :meth:`config_class` or its dict)."""
        return self.network_class().from_config(config)


NETWORKS: dict[str, NetworkKind] = {}


def register_network(kind: NetworkKind, replace: bool = False) -> NetworkKind:
    """Add ``kind``; a taken name is a ValueError unless ``replace``."""
    check_identifier("a network kind", kind.name)
    if kind.name in NETWORKS and NETWORKS[kind.name] != kind and not replace:
        raise ValueError(f"a network kind named {kind.name!r} is registered already")
    NETWORKS[kind.name] = kind
    return kind


def get_network(name: str) -> NetworkKind:
    """The kind ``name``; an unknown one is a ValueError naming the kinds there are."""
    if isinstance(name, str) and name in NETWORKS:
        return NETWORKS[name]
    raise ValueError(unknown_name("network kind", name, NETWORKS,
                                  listed_by="splitnet.configs.stacks.NETWORKS"))


def kind_of(model) -> str:
    """The name of the kind ``model`` (a network) is: the one whose network class it is an
    instance of (its most derived)."""
    for kind in NETWORKS.values():
        if type(model) is kind.network_class():
            return kind.name
    for kind in NETWORKS.values():
        if isinstance(model, kind.network_class()):
            return kind.name
    raise ValueError(f"{type(model).__name__} is no registered kind of network "
                     f"({', '.join(NETWORKS)})")


LM = register_network(NetworkKind("lm", "splitnet.configs.config:SplitConfig",
                          "splitnet.nets.models:SplitTransformer"))
SEQ2SEQ = register_network(NetworkKind("seq2seq", "splitnet.configs.seq2seq:Seq2SeqConfig",
                               "splitnet.nets.seq2seq:SplitSeq2Seq"))

__all__ = ["HELP", "KINDS", "LM", "NETWORKS", "SEQ2SEQ", "STACK_OPTIONS", "Names", "NetworkKind",
           "ReversibleKind", "StackKind", "available", "check_reversible", "get", "get_network",
           "kind_of", "register", "register_network", "resolve_stack", "stack_changes",
           "stack_option"]
