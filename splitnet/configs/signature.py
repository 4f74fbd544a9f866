"""Constructors whose keyword signature is a config dataclass's fields: what ``help()`` and IDEs
show for :class:`~splitnet.nets.models.SplitTransformer` and
:class:`~splitnet.nets.seq2seq.SplitSeq2Seq`, derived from
:class:`~splitnet.configs.config.SplitConfig` /
:class:`~splitnet.configs.seq2seq.Seq2SeqConfig` so that adding an option to a config adds it
here too. Pure Python."""

from __future__ import annotations

import dataclasses
import inspect


def config_signature(cls, n_positional: int) -> inspect.Signature:
    """The signature of a constructor that takes the fields of the config dataclass ``cls`` as
    keywords (the first ``n_positional`` also by position, and required), or ``config=`` a
    whole ``cls``: what ``help()`` and IDEs show, derived from the fields so that adding an
    option to the config adds it here too."""
    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_OR_KEYWORD)]
    for i, f in enumerate(dataclasses.fields(cls)):
        if i < n_positional:
            params.append(P(f.name, P.POSITIONAL_OR_KEYWORD, annotation=f.type))
        else:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            params.append(P(f.name, P.KEYWORD_ONLY, default=default, annotation=f.type))
    params.append(P("config", P.KEYWORD_ONLY, default=None, annotation=cls.__name__))
    return inspect.Signature(params)


def config_from_call(cls, args: tuple, options: dict, n_positional: int):
    """The ``cls`` instance a constructor of :func:`config_signature` was called with: either
    ``config=`` alone, or the fields (the first ``n_positional`` required, by position or
    name). Unknown or repeated options are a ``TypeError`` naming them."""
    config = options.pop("config", None)
    if config is not None:
        if args or options:
            raise TypeError(f"give either config= or the options of {cls.__name__}, not both")
        if not isinstance(config, cls):
            raise TypeError(f"config must be a {cls.__name__}, got {type(config).__name__}")
        return config
    names = [f.name for f in dataclasses.fields(cls)]
    if len(args) > n_positional:
        first = ", ".join(names[:n_positional])
        raise TypeError(f"at most {n_positional} options by position ({first}); give the "
                        f"others by name")
    given = dict(zip(names, args))
    twice = sorted(set(given) & set(options))
    unknown = sorted(set(options) - set(names))
    if twice or unknown:
        raise TypeError(f"{'repeated' if twice else 'unknown'} option(s) {twice or unknown}; the "
                        f"options are the fields of {cls.__name__}")
    missing = [n for n in names[:n_positional] if n not in given and n not in options]
    if missing:
        raise TypeError(f"missing required option(s) {missing}")
    return cls(**given, **options)


class ConfigBuilt:
    """What every network built from a config shares (mixed in before ``nn.Module``): the
    frozen config as :attr:`config`, :meth:`from_config`, and every config field read as an
    attribute (``model.max_len``), never copied onto the model. Subclasses give
    :meth:`config_class`."""

    @staticmethod
    def config_class() -> type:
        raise NotImplementedError

    @classmethod
    def from_config(cls, cfg):
        """A model from a config (or its ``to_dict()``)."""
        config_cls = cls.config_class()
        if isinstance(cfg, dict):
            cfg = config_cls.from_dict(cfg)
        if not isinstance(cfg, config_cls):
            raise TypeError(f"from_config needs a {config_cls.__name__}, got "
                            f"{type(cfg).__name__}")
        return cls(config=cfg)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            cfg = self.__dict__.get("_config")
            if cfg is not None and name in getattr(cfg, "__dataclass_fields__", ()):
                return getattr(cfg, name)
            raise

    @property
    def config(self):
        """The model's config (frozen; stored in checkpoints)."""
        return self._config


__all__ = ["ConfigBuilt", "config_from_call", "config_signature"]
