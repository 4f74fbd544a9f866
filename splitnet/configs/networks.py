"""The kinds of network, one registry: a name (what a checkpoint stores as ``model_kind``) ->
the config class and the network class, both named by path and looked up when asked (a patched
``SplitConfig`` is the one used; the configs stay free of torch).

    ========  ==================================  ==========================================
    kind      config                              network
    ========  ==================================  ==========================================
    lm        splitnet.configs.config.SplitConfig  splitnet.nets.models.SplitTransformer
    seq2seq   splitnet.configs.seq2seq.Seq2SeqConfig  splitnet.nets.seq2seq.SplitSeq2Seq
    ========  ==================================  ==========================================

A run's task names the kind it trains (:attr:`splitnet.tasks.task.Task.network`); checkpoints,
``splitnet describe`` and the loaders rebuild a network by the kind stored with it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..names import check_identifier, unknown_name


def _load(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


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


KINDS: dict[str, NetworkKind] = {}


def register(kind: NetworkKind, replace: bool = False) -> NetworkKind:
    """Add ``kind``; a taken name is a ValueError unless ``replace``."""
    check_identifier("a network kind", kind.name)
    if kind.name in KINDS and KINDS[kind.name] != kind and not replace:
        raise ValueError(f"a network kind named {kind.name!r} is registered already")
    KINDS[kind.name] = kind
    return kind


def get(name: str) -> NetworkKind:
    """The kind ``name``; an unknown one is a ValueError naming the kinds there are."""
    if isinstance(name, str) and name in KINDS:
        return KINDS[name]
    raise ValueError(unknown_name("network kind", name, KINDS,
                                  listed_by="splitnet.configs.networks.KINDS"))


def kind_of(model) -> str:
    """The name of the kind ``model`` (a network) is: the one whose network class it is an
    instance of (its most derived)."""
    for kind in KINDS.values():
        if type(model) is kind.network_class():
            return kind.name
    for kind in KINDS.values():
        if isinstance(model, kind.network_class()):
            return kind.name
    raise ValueError(f"{type(model).__name__} is no registered kind of network "
                     f"({', '.join(KINDS)})")


LM = register(NetworkKind("lm", "splitnet.configs.config:SplitConfig",
                          "splitnet.nets.models:SplitTransformer"))
SEQ2SEQ = register(NetworkKind("seq2seq", "splitnet.configs.seq2seq:Seq2SeqConfig",
                               "splitnet.nets.seq2seq:SplitSeq2Seq"))

__all__ = ["KINDS", "LM", "SEQ2SEQ", "NetworkKind", "get", "kind_of", "register"]
