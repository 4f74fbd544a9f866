"""A local Hugging Face folder read for :func:`splitnet.interop.convert.from_hf`: its
``config.json`` checked, its model built and its weights loaded, every fault one ``ValueError``
naming the file and the problem (never a traceback from transformers, never a default in place
of what the file lacks, never random weights in place of a missing tensor).

* :data:`REQUIRED` -- the keys a family's ``config.json`` must hold itself (the sizes that shape
  the model): transformers fills a missing one with its class default (Llama: 4096 wide),
  which would only show later as a misleading mismatch.
* the config's own validation (huggingface_hub's strict dataclasses, transformers' checks: a
  string for an int, heads that do not divide the width) is one line naming ``config.json``.
* a config transformers cannot build a model from (GPT-2's heads not dividing its width) is
  said to be the config's fault, not the weights file's.
"""

from __future__ import annotations

import json
import numbers
from pathlib import Path

from ..configs.config import require
from .llama import FAMILIES, llama_options

# model_type -> the keys its config.json must hold itself (transformers' attribute_map aliases,
# such as GPT-2's hidden_size for n_embd, count as present). Everything else may default: the
# default is the one transformers' model uses, so the import stays equal to it.
_SIZES = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
          "intermediate_size")
REQUIRED = {"gpt2": ("vocab_size", "n_embd", "n_layer", "n_head", "n_positions"),
            "gpt_neox": _SIZES, **dict.fromkeys(FAMILIES, _SIZES),
            "splitnet": ("split_config",)}
# sizes that may be absent or null (a default or "as many as the heads") but are positive ints
# when given
_OPTIONAL_SIZES = ("max_position_embeddings", "n_positions", "num_key_value_heads", "head_dim",
                   "sliding_window", "n_inner")


# multimodal models of a family splitnet imports, refused by name (class or model type) with the
# reason and what to import instead
MULTIMODAL = dict.fromkeys(("Gemma3ForConditionalGeneration", "gemma3"), (
    "Gemma 3 with its vision tower (multimodal: images enter the token sequence); splitnet "
    "imports text models only: save and import its language model as a Gemma3ForCausalLM "
    "(model_type gemma3_text)"))


def require_hf():
    """The optional modules, or one clear line saying what to install."""
    require("transformers", "safetensors", extra="hf", feature="splitnet.interop")
    import transformers

    from . import hf

    return transformers, hf


def llama_classes(transformers) -> tuple:
    """The model classes of :data:`splitnet.interop.llama.FAMILIES`, in its order."""
    return (transformers.LlamaForCausalLM, transformers.Qwen2ForCausalLM,
            transformers.MistralForCausalLM, transformers.Qwen3ForCausalLM,
            transformers.Olmo2ForCausalLM, transformers.Phi3ForCausalLM,
            transformers.Gemma2ForCausalLM, transformers.Gemma3ForCausalLM)


def check_directory(path) -> Path:
    p = Path(path).expanduser()
    if not p.is_dir():
        raise ValueError(f"{p} is not a directory (a Hugging Face model directory written by "
                         f"save_pretrained is expected; nothing is downloaded)")
    if not (p / "config.json").is_file():
        raise ValueError(f"{p} has no config.json: not a Hugging Face model directory")
    return p


def first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def _config_error(e: BaseException) -> str:
    """The problem a config's validation names: huggingface_hub's strict-dataclass errors say
    "Validation error for field 'x':" on their first line and the reason in their cause."""
    cause = e.__cause__
    if cause is not None and type(e).__module__.startswith("huggingface_hub"):
        return first_line(cause)
    return first_line(e)


def _check_keys(p: Path, transformers) -> None:
    """The sizes :data:`REQUIRED` names are in ``config.json`` itself, each a positive int;
    ValueError naming the first that is not. A folder of another or no model type is left to
    transformers (its own message)."""
    f = p / "config.json"
    try:
        raw = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{f} cannot be read ({first_line(e)})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{f} cannot be read (it holds a JSON {type(raw).__name__}, not an "
                         f"object of settings)")
    family = raw.get("model_type")
    if family not in REQUIRED:
        return
    cls = transformers.CONFIG_MAPPING[family] if family != "splitnet" else None
    aliases = dict(getattr(cls, "attribute_map", None) or {})
    for key in REQUIRED[family]:
        names = [key, *(a for a, k in aliases.items() if k == key)]
        present = [n for n in names if n in raw]
        if not present:
            raise ValueError(f"{f} has no {key!r}: a {family} config.json states "
                             f"{', '.join(REQUIRED[family])} (transformers would put its own "
                             f"default in place of a missing one)")
        if key == "split_config" and not isinstance(raw[key], dict):
            raise ValueError(f"{f}: split_config is {raw[key]!r}; an object is expected")
    sizes = [k for k in REQUIRED[family] if k != "split_config"]
    for key in [*sizes, *(a for a, k in aliases.items() if k in sizes), *_OPTIONAL_SIZES]:
        value = raw.get(key)
        if (key in raw and (value is not None or key in sizes)) and (
                not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1):
            raise ValueError(f"{f}: {key} is {value!r}; a positive integer is expected")


def read_config(p: Path):
    """The transformers config of the folder ``p`` (checked by :func:`check_directory`)."""
    transformers, _ = require_hf()
    _check_keys(p, transformers)
    try:
        with quiet():      # its remarks on the values it reads, before a one-line refusal
            return transformers.AutoConfig.from_pretrained(p, local_files_only=True)
    except OSError as e:
        raise ValueError(f"{p / 'config.json'} cannot be read ({first_line(e)})") from None
    except Exception as e:   # only config.json is read: huggingface_hub's StrictDataclass*Error,
        # transformers' ValueError / TypeError, a ZeroDivisionError... all say a value is bad
        raise ValueError(f"{p / 'config.json'} has a bad value: {_config_error(e)}") from None


def load_pretrained(path):
    """The model of a local directory (GPT-2, GPT-NeoX, the Llama family or splitnet, nothing
    else, nothing downloaded), the tensors of its file that its config does not use (dropped
    by transformers; :func:`splitnet.interop.agree.warn_unused` names them) and the file's
    name."""
    transformers, hf = require_hf()
    p = check_directory(path)
    cfg = read_config(p)
    kinds = {"gpt2": transformers.GPT2LMHeadModel, "gpt_neox": transformers.GPTNeoXForCausalLM,
             **dict(zip(FAMILIES, llama_classes(transformers))),
             hf.MODEL_TYPE: hf.SplitTransformerForCausalLM}
    if cfg.model_type in MULTIMODAL:
        raise ValueError(f"{p} holds a {cfg.model_type!r} model: {MULTIMODAL[cfg.model_type]}")
    if cfg.model_type not in kinds:
        raise ValueError(f"{p} holds a {cfg.model_type!r} model; splitnet imports "
                         f"{', '.join(repr(k) for k in kinds)} models")
    if cfg.model_type in FAMILIES:
        llama_options(cfg)                 # an option it cannot map: refused before loading
    _check_buildable(kinds[cfg.model_type], cfg, p)
    model, info = _from_pretrained_quietly(kinds[cfg.model_type], p)
    problem = _loading_problem(info)
    if problem:
        raise ValueError(f"{p}: the weights do not fit its config.json ({problem}); nothing "
                         f"was imported")
    return model, sorted(info.get("unexpected_keys") or ()), _weights_file(p)


def _check_buildable(cls, cfg, p: Path) -> None:
    """transformers can build ``cls`` from ``cfg`` (on the meta device: no memory, no
    weights read); ValueError naming config.json when it cannot, so that such a config is
    not reported as a damaged weights file."""
    import torch

    try:
        with quiet(), torch.device("meta"):
            cls(cfg)
    except Exception as e:   # the model's own checks raise ValueError, AssertionError, ...
        raise ValueError(f"{p / 'config.json'} describes a model transformers cannot build "
                         f"({_config_error(e)})") from None


class quiet:
    """transformers' notes and progress bars off inside (restored after)."""

    def __enter__(self):
        from transformers.utils import logging as hf_logging

        self.log = hf_logging
        self.level, self.bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        return self

    def __exit__(self, *exc):
        self.log.set_verbosity(self.level)
        if self.bars:
            self.log.enable_progress_bar()
        return False


def _weights_file(p: Path) -> str:
    """The name of the weights file(s) in ``p``, for messages."""
    names = [n for n in ("model.safetensors", "model.safetensors.index.json",
                         "pytorch_model.bin", "pytorch_model.bin.index.json") if (p / n).exists()]
    return f"{p / names[0]}" if names else f"{p}"


def _from_pretrained_quietly(cls, p: Path):
    """``cls.from_pretrained(p)`` and its loading report, without its printed notes (which say
    "newly initialized" for a missing tensor and carry on with random weights) or its bar; a
    weights file that cannot be read (cut short, damaged, absent) is one ValueError saying so."""
    try:
        with quiet():
            return cls.from_pretrained(p, local_files_only=True, output_loading_info=True,
                                       ignore_mismatched_sizes=True)
    except OSError as e:
        raise ValueError(f"{p}: the weights cannot be read ({first_line(e)})") from None
    except Exception as e:   # safetensors' and torch's readers raise their own classes
        raise ValueError(f"{_weights_file(p)} is damaged or cut short: its tensors cannot be "
                         f"read ({first_line(e)})") from None


def _loading_problem(info: dict) -> str | None:
    """What in ``from_pretrained``'s loading report changes the model: a tensor the file does
    not hold (transformers would initialise it at random) or one of another shape. Tensors
    the model does not use (``unexpected_keys``) are dropped as transformers does, by the
    caller with a warning naming them (:func:`splitnet.interop.agree.warn_unused`)."""
    missing = sorted(info.get("missing_keys") or ())
    mismatched = sorted(info.get("mismatched_keys") or ())
    parts = []
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        parts.append(f"the file has no {', '.join(missing[:3])}{more}: transformers would "
                     f"initialise {'it' if len(missing) == 1 else 'them'} at random")
    if mismatched:
        k, got, want = mismatched[0]
        more = f" and {len(mismatched) - 1} more" if len(mismatched) > 1 else ""
        parts.append(f"{k} has shape {tuple(got)}, the config needs {tuple(want)}{more}")
    if info.get("error_msgs"):
        parts.append(first_line(Exception(str(next(iter(info["error_msgs"]))))))
    return "; ".join(parts) or None


__all__ = ["MULTIMODAL", "REQUIRED", "check_directory", "first_line", "llama_classes",
           "load_pretrained", "quiet", "read_config", "require_hf"]
