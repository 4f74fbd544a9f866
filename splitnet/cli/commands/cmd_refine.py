"""``splitnet refine``: is a trained network an ODE solver of its own fields?

Model sources: ``--checkpoint DIR`` (a ``splitnet train`` run; loss = validation bits per
byte on the run's own validation windows). A source is a function ``args -> (model, evaluate,
description, unit, scale)`` in :data:`SOURCES`'s order of precedence; the study itself
(:func:`splitnet.analyses.refine.refinement_study`) only sees a model and ``evaluate(model) ->
loss``.
An importer of Hugging Face GPT-2 models (``--hf DIR``, :mod:`splitnet.interop`) plugs in as
one more source: an option in :func:`configure` and a function beside :func:`_from_checkpoint`.
"""

from __future__ import annotations

import math
import sys

from ...integrators.subflows import METHODS, STUDY_METHODS
from ...names import unknown_name
from .._args import (
    SCHEME_LIST_HELP,
    add_device_option,
    add_model_source,
    add_output_option,
    add_png_option,
    add_progress_option,
    add_singular,
    add_threads_option,
    check_only_with,
    csv,
    nonempty,
    one_method,
    one_scheme,
    positive_int,
    scheme_list,
    set_threads,
    shows_progress,
    torch_device,
)
from .._depth import add_at_depth_option, at_depth_of

RANK = 80   # place in `splitnet --help`
HELP = "re-integrate a trained model's own fields with other schemes, substeps and methods"
DEFAULT_SCHEMES = "lie-trotter,strang,yoshida4"     # = splitnet.analyses.refine.DEFAULT_SCHEMES
OWN = "own"
MAX_SUBSTEPS = 4096      # substeps of a scheme per layer (each one more pass over the fields)
# options that only apply alongside another (splitnet.cli._args.check_only_with)
ONLY_WITH = {"exact_substeps": ("with the exact method in --methods",
                                lambda a: "exact" in a.methods)}


def substeps_list(text: str) -> list[int]:
    """Comma-separated substep counts, each in [1, MAX_SUBSTEPS]."""
    import argparse

    out = []
    for x in csv(text):
        k = positive_int(x)
        if k > MAX_SUBSTEPS:
            raise argparse.ArgumentTypeError(f"expected at most {MAX_SUBSTEPS} substeps, got "
                                             f"{x!r}")
        out.append(k)
    return out


def factor_list(text: str) -> list[int]:
    """Comma-separated depth factors, each in [2, 64], or ``none``."""
    import argparse

    if text.strip().lower() == "none":
        return []
    out = [positive_int(x) for x in csv(text)]
    bad = [f for f in out if not 2 <= f <= 64]
    if bad:
        raise argparse.ArgumentTypeError(f"depth factors lie in 2..64, got {bad[0]}")
    return out


def configure(p) -> None:
    import argparse

    p.description = (
        "Keep every weight of a trained model and integrate each layer's own fields (attention "
        "= diffusion, feed-forward = convection; per-stage weights: their coefficient-weighted "
        "sum) over the layer's time interval with other splitting schemes, more substeps, "
        "other sub-flow methods or exact flows (torchdiffeq). Prints the validation loss of "
        "every combination and writes a figure of loss against field evaluations per layer. "
        "A network whose loss stays put under refinement behaves as an ODE solver of its "
        "fields; one whose loss degrades relies on its own discretisation.")
    add_model_source(p, what="; loss: validation bits per byte",
                     hf="; loss: nats per token on --text")
    p.add_argument("--text", metavar="FILE", type=nonempty, default=None,
                   help="with --hf: UTF-8 text file to evaluate on (default: the Python "
                        "standard library's validation split)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--schemes", type=scheme_list, action="extend", default=None,
                       help=f"schemes that integrate the layers' fields: {SCHEME_LIST_HELP}; "
                            f"'{OWN}' = the layers' own stages with their own sub-layers (added "
                            f"by default for per-stage models) (default {DEFAULT_SCHEMES}; a "
                            f"network of one field per layer: {OWN}, the one there is)")
    add_singular(which, "--scheme", "schemes", one_scheme, "scheme")
    p.add_argument("--substeps", type=substeps_list, default=[1, 2, 4, 8],
                   metavar="K,K,...", help="steps of the scheme per layer (default 1,2,4,8)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--methods", type=csv, default=list(STUDY_METHODS),
                       help=f"sub-flow methods, of {', '.join(METHODS)} (default "
                            f"{','.join(STUDY_METHODS)})")
    add_singular(which, "--method", "methods", one_method, "sub-flow method")
    p.add_argument("--exact-substeps", type=substeps_list, default=None, metavar="K,K,...",
                   help="substeps for the exact method, which costs ~30-150 field evaluations "
                        "per sub-flow (default: --substeps)")
    p.add_argument("--windows", type=positive_int, default=None, metavar="N",
                   help="validation windows (default: the run's own eval_windows, those its "
                        "training evaluated; fewer = the first of the same draw; with --hf: "
                        "16 windows of the model's context)")
    p.add_argument("--batch-size", type=positive_int, default=32,
                   help="windows per forward pass (default 32)")
    p.add_argument("--coarsen", type=factor_list, default=[2, 4], metavar="F,F,...|none",
                   help="also evaluate the model with 1/F of its layers at step F h (each layer "
                        "restricted from F: their mean, and the first of them; "
                        "splitnet.nets.depth) (default 2,4)")
    p.add_argument("--prolong", type=factor_list, default=[2], metavar="F,F,...|none",
                   help="also evaluate the model with F times its layers at step h / F (each "
                        "layer copied) (default 2)")
    p.add_argument("--layer-costs", action=argparse.BooleanOptionalAction, default=True,
                   help="also measure each layer dropped and each adjacent pair run as one "
                        "step of 2 h (mean, first), ranked beside ShortGPT's block influence "
                        "(splitnet.analyses.redundancy; figure: --out's name + '_layers') "
                        "(default on)")
    add_png_option(p, "refine.png")
    add_output_option(p, "--json", "also write the results as JSON")
    add_at_depth_option(p)
    add_device_option(p)
    add_threads_option(p)
    add_progress_option(p)


def _grid(args) -> list:
    """The schemes, substeps and methods checked before any work (ValueError naming the
    problem)."""
    from ...analyses.refine import study_grid

    bad = [m for m in args.methods if m not in METHODS]
    if bad:
        raise ValueError(unknown_name("method", bad[0], METHODS))
    check_only_with(args, ONLY_WITH)
    grid = study_grid(args.schemes or scheme_list(DEFAULT_SCHEMES), args.substeps, args.methods,
                      args.exact_substeps)
    for s in dict.fromkeys(s for s, _, _ in grid if s is not None and args.hf):
        # a Hugging Face model is a language model, over these two; a checkpoint's stacks are
        # read before its data (_peek) and each scheme checked against them (_check_stacks)
        if set(s.fields) != {"diffusion", "convection"}:
            raise ValueError(f"scheme {_name(s)!r} advances {', '.join(s.fields)} "
                             f"({len(s.fields)} field{'s' if len(s.fields) > 1 else ''}), but "
                             f"refine integrates a model's layers over their own fields, "
                             f"diffusion and convection (a language model's, an encoder's; a "
                             f"decoder takes the scheme over its three): give two-field schemes")
    return grid


def _fields(names) -> str:
    return f"{', '.join(names)} ({len(names)} field{'s' if len(names) > 1 else ''})"


def _name(scheme) -> str:
    return scheme.diagram() if scheme.name == "custom" else scheme.name


def _check_stacks(model, grid) -> None:
    """Each scheme over the fields of each of the model's stacks, checked before the study
    starts: a registry name is taken over them (a decoder's three: a method with a k-field
    form, :meth:`~splitnet.integrators.splitting.SplittingScheme.over`); a stage string or
    pattern names its fields and must name the stack's (ConvS2S's decoder: diffusion and
    cross), never be relabelled onto others."""
    from ...analyses.refine import stacks
    from ...integrators.schemes import registry_name

    for attr in stacks(model):
        own = getattr(model, attr.replace("layers", "scheme"))
        whose = {"layers": "model"}.get(attr, attr.replace("_layers", ""))
        if len(own.fields) == 1:             # nothing to split: refined as plain sub-steps
            continue
        for s in dict.fromkeys(s for s, _, _ in grid if s is not None):
            if set(s.fields) == set(own.fields):
                continue
            head = (f"scheme {_name(s)!r} advances {_fields(s.fields)}, but the {whose}'s "
                    f"layers advance {_fields(own.fields)}")
            if registry_name(s.name) is None and len(s.fields) == len(own.fields):
                raise ValueError(f"{head}: a stage string or pattern names its fields, so give "
                                 f"one over those (a registry name such as strang is taken "
                                 f"over any fields)")
            try:
                s.over(own.fields)
            except ValueError as e:
                raise ValueError(f"{head}: {e}") from None


def _peek(args):
    """The checkpoint's state and its network built on the meta device (no weight allocated,
    no data read): what refine asks of the model before it loads anything else. None for the
    network when the config is not valid (loading the model then says what is wrong)."""
    import torch

    from ...runs.checkpoint import checkpoint_file, load, model_classes

    state = load(args.checkpoint, trust=args.trust_checkpoint)
    config_cls, model_cls = model_classes(state, checkpoint_file(args.checkpoint))
    try:
        cfg = config_cls.from_dict(state["model_config"])
        with torch.device("meta"):
            return state, model_cls.from_config(cfg)
    except (ValueError, TypeError):
        return state, None


def _schemes(args, model) -> list:
    """The schemes of the study: --schemes, or the default (a network of one field per layer:
    its own step only, the one scheme there is; a per-stage one: its own stages too). Named
    schemes for a one-field network are refused (``one_field_schemes``)."""
    from ...analyses.refine import one_field, one_field_schemes

    if args.schemes is not None:
        one_field_schemes(model, args.schemes, "--schemes")
        return list(args.schemes)
    if one_field(model):
        return [OWN]
    schemes = scheme_list(DEFAULT_SCHEMES)
    return schemes + [OWN] if model.config.weights == "per-stage" else schemes


def _from_checkpoint(args, device, state=None):
    """The checkpoint's model and its validation loss; loss shown in bits per byte."""
    from ...analyses.sources import checkpoint_source
    from ...runs.checkpoint import load

    state = state or load(args.checkpoint, trust=args.trust_checkpoint)
    if state.get("model_kind") == "seq2seq":
        return _from_translation(args, device, state)
    model, evaluate, info = checkpoint_source(
        args.checkpoint, windows=args.windows, device=device, batch_size=args.batch_size,
        trust=args.trust_checkpoint, check_memory=True,
        warn=lambda msg: print(f"splitnet refine: warning: {msg}", file=sys.stderr))
    rec = info["val_bpb"]
    desc = (f"checkpoint {args.checkpoint} (step {info['step']}; recorded val bpb "
            f"{rec:.4f} on its full validation set)" if rec is not None else
            f"checkpoint {args.checkpoint} (step {info['step']})")
    desc += f"; {info['windows']} validation windows of {info['context']} bytes"
    return model, evaluate, desc, "bpb", 1.0 / math.log(2.0)


def _from_translation(args, device, state):
    """A translation checkpoint: both stacks re-integrated; the loss is nats per target token
    on the first --windows validation pairs of its own corpus."""
    from ...runs.checkpoint import model_from_state
    from ...training.config import TrainConfig
    from ...translate.batches import EncodedPairs
    from ...translate.translation import load_data, validation_loss

    cfg = TrainConfig.from_dict({**state["train_config"], "out": str(args.checkpoint)})
    data = load_data(cfg, state, lambda msg: print(f"splitnet refine: {msg}", file=sys.stderr))
    n = args.windows or 256
    v = data.valid
    data.valid = EncodedPairs(v.src[:n], v.tgt[:n], v.pad_id, v.bos_id, v.eos_id)
    model = model_from_state(state, args.checkpoint).to(device).eval()
    desc = (f"translation checkpoint {args.checkpoint} (step {state.get('step')}); "
            f"{len(data.valid)} validation pairs of {data.corpus.describe().split(':')[0]}")

    def evaluate(m):
        return validation_loss(m, data, device, batch_size=args.batch_size)

    return model, evaluate, desc, "nats/token", 1.0


def _from_hf(args, device, state=None):
    """The imported model and its loss (nats per token) on the first windows of the text."""
    from ...analyses.sources import hf_source

    model, evaluate, info = hf_source(args.hf, text=args.text, windows=args.windows or 16,
                                      device=device)
    desc = (f"Hugging Face {args.hf} ({info['tokenizer']} tokens); {info['windows']} windows "
            f"of {info['context']} tokens of {info['text']}")
    return model, evaluate, desc, "nats/token", 1.0


def _inputs(args) -> list:
    """``(what, path)`` of what the command reads: no output may be written over one."""
    from ...runs.checkpoint import run_files

    out = [("the model folder", args.hf), ("the text", args.text)]
    return out + (run_files(args.checkpoint) if getattr(args, "checkpoint", None) else [])


def run(args) -> int:
    import json

    from ... import plots
    from ..._io import check_outputs
    from ...analyses.refine import refinement_study, scheme_label, stacks

    grid = _grid(args)                              # every input checked before any work
    check_outputs([("--out", args.out), ("--json", args.json),
                   ("--layer-costs' figure", _layers_png(args))], _inputs(args))
    plots.check_format(args.out)
    device = torch_device(args.device)
    set_threads(args.threads)
    if args.text and not args.hf:
        raise ValueError("--text goes with --hf (a checkpoint is evaluated on its own "
                         "validation windows)")
    state = shell = None
    if args.checkpoint:          # what the schemes ask of its network, before any load
        state, shell = _peek(args)
        if shell is not None:
            _check_stacks(shell, grid)
            _schemes(args, shell)
    source = _from_hf if args.hf else _from_checkpoint
    model, evaluate, desc, unit, scale = source(args, device, state)
    if model.config.depth_basis is not None:      # one network at any depth: its loss at each
        from ...analyses.depth import steps_study, steps_table

        print(steps_table(steps_study(model, evaluate), unit, scale))
    model = at_depth_of(model, args.at_depth, (state or {}).get("train_config"))
    _check_stacks(model, grid)
    schemes = _schemes(args, model)
    layers = sum(len(getattr(model, a)) for a in stacks(model))
    print(f"model: {desc}; {scheme_label(model)} ({model.config.weights}, "
          f"{model.config.method}), {layers} layers, h = {model.config.step_size:g}; "
          f"device {device}")
    res = refinement_study(model, evaluate, schemes=schemes, substeps=args.substeps,
                           methods=args.methods, exact_substeps=args.exact_substeps,
                           label=f"{scheme_label(model)} ({model.config.weights})", unit=unit,
                           scale=scale, progress=shows_progress(args.progress))
    print(res.table())
    depth = []
    if args.coarsen or args.prolong:
        from ...analyses.depth import depth_study, depth_table

        depth = depth_study(model, evaluate, args.coarsen, args.prolong,
                            progress=shows_progress(args.progress))
        print(depth_table(depth, unit, scale))
    study = _layer_study(args, model, evaluate, unit, scale)
    if args.json:                  # the numbers first: a figure that fails must not lose them
        import dataclasses

        from ..._io import atomic_write_text

        d = {**res.to_dict(), "depth": [dataclasses.asdict(p) for p in depth],
             "layers": None if study is None else study.to_dict()}
        atomic_write_text(args.json, json.dumps(_finite(d), indent=1))
        print(f"json: {args.json}")
    plots.plot_refinement([res], args.out)
    print(f"png: {args.out}")
    if study is not None:
        plots.plot_layer_study(study, _layers_png(args), unit, scale)
        print(f"png: {_layers_png(args)}")
    return 0


def _layers_png(args) -> str | None:
    """The figure of the layer study: ``--out``'s name with ``_layers`` (None: no study)."""
    from pathlib import Path

    if not args.layer_costs:
        return None
    p = Path(args.out)
    return str(p.with_name(f"{p.stem}_layers{p.suffix}"))


def _layer_study(args, model, evaluate, unit, scale):
    """Each layer dropped and each pair merged, ranked beside block influence (printed);
    None when not asked or when the network has no such layers (a line says why)."""
    if not args.layer_costs:
        return None
    from ...analyses.redundancy import drop_layer, layer_study

    try:
        drop_layer(model, 0)    # the networks it takes, checked; a view, nothing evaluated
    except ValueError as e:    # an encoder-decoder, a reversible stack: the rest still stands
        print(f"layers dropped and merged: - ({e})")
        return None
    study = layer_study(model, evaluate, progress=shows_progress(args.progress))
    print(study.table(unit, scale))
    return study


def _finite(x):
    """JSON has no NaN or infinity: a loss that diverged is written as null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


__all__ = ["DEFAULT_SCHEMES", "HELP", "MAX_SUBSTEPS", "ONLY_WITH", "OWN", "RANK", "configure",
           "factor_list", "run", "substeps_list"]
