"""``splitnet describe``: parameters, field evaluations and FLOPs per token (splitnet.nets.cost);
with ``--checkpoint`` a trained model's, and its coefficients layer by layer with their order
verdicts (learned coefficients: :mod:`splitnet.nets.learned`)."""

from __future__ import annotations

import sys

from ...configs.config import SplitConfig, cli_fields
from ...configs.options import WEIGHTS
from .._args import (
    SCHEME_LIST_HELP,
    add_config_options,
    add_model_source,
    add_replaced_option,
    check_only_with,
    given_options,
    one_scheme,
    positive_int,
    scheme_list,
)

RANK = 30   # place in `splitnet --help`
HELP = "parameters, field evaluations and FLOPs per token of a model"
# describe's own defaults: a mid-size model (see splitnet.nets.cost.REFERENCE_SIZE)
SIZE = {"d_model": 512, "n_heads": 8, "n_layers": 6}
VOCAB = 256          # --vocab-size's default: bytes
# options that only apply alongside another (splitnet.cli._args.check_only_with): the model
# options describe the model they build, not a trained or imported one
_BUILT = ("without --checkpoint or --hf (a trained or imported model is described as it is)",
          lambda a: a.checkpoint is None and a.hf is None)
ONLY_WITH = dict.fromkeys(("scheme", "schemes", "weights", "vocab_size", "jsonl",
                           *(f.name for f in cli_fields(SplitConfig))), _BUILT)
# and what a translation model's description (stack by stack) does not read
_LM = ("to a language model (a translation model is described stack by stack)",
       lambda a: False)
SEQ2SEQ_IGNORES = {"markdown": _LM, "world_size": _LM}


def configure(p) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--scheme", type=one_scheme, default=None,
                       help="one scheme, as splitnet train takes it: a name, s/f pattern or "
                            "stage string (default lie-trotter)")
    which.add_argument("--schemes", type=scheme_list, action="extend", default=None,
                       help=f"several schemes: {SCHEME_LIST_HELP}; or 'all' for the registry")
    p.add_argument("--weights", choices=[*WEIGHTS, "both"], default=None,
                   help="weights mode (default both)")
    g = p.add_argument_group("model (splitnet.nets.models.SplitConfig)")
    add_config_options(g, SplitConfig, defaults=SIZE, skip=("scheme", "weights"))
    p.add_argument("--vocab-size", type=positive_int, default=None,
                   help=f"vocabulary (default {VOCAB}, bytes)")
    p.add_argument("--seq-len", type=positive_int, default=256,
                   help="tokens per sequence (default 256)")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="print a markdown table")
    form.add_argument("--jsonl", action="store_true",
                      help="print one JSON object per row (JSON lines, on stdout)")
    add_replaced_option(p, "--json", "--json FILE writes a file in every command (splitnet "
                        "evaluate, splitnet refine); describe's one JSON object per row on "
                        "stdout is --jsonl")
    p.add_argument("--world-size", type=positive_int, default=None, metavar="N",
                   help="also the training memory per rank on N ranks (float32 weights, "
                        "gradients and AdamW state; activations aside)")
    p.add_argument("--parallel", choices=("ddp", "fsdp", "both"), default="both",
                   help="with --world-size: ddp (every rank all of it), fsdp (sharded: "
                        "splitnet train --parallel fsdp) or both (default)")
    p.add_argument("--activations", action="store_true",
                   help="also measure the bytes training saves for backward per token, plain "
                        "and reversible (one forward of one --seq-len sequence on the CPU, "
                        "float32; imports torch)")
    add_model_source(p, required=False,
                     what=": describe that trained model instead: its cost, then every layer's "
                          "coefficients (the learned ones with --learn-coefficients) with the "
                          "order conditions' defects by degree and check_order's verdict for "
                          "each layer",
                     hf=": describe that imported model (GPT-2, GPT-NeoX, Llama, Qwen2, "
                        "Mistral) as --checkpoint does")


def _degrees(order: int) -> int:
    """Degrees of the order conditions shown: the declared order (at least 2, at most 6; 2 for
    the exact flow)."""
    from ...stagelists.stages import EXACT_ORDER

    return 2 if order >= EXACT_ORDER else max(2, min(order, 6))


def _rescaled_verdict(stages, declared: int) -> str:
    """The order of ``stages`` with each field divided by its own sum (a consistent method for
    the rescaled fields ``s_f F_f``)."""
    from ...integrators.schemes import check_order
    from ...stagelists.stages import per_field_normalized

    norm = per_field_normalized(stages)
    if norm is None:
        return "no per-field rescaling (a sum stage joins fields with different sums)"
    r = check_order(list(norm), order=declared)
    measured = "the exact flow" if r.tail == float("inf") else f"order {r.tail:.2f}"
    return f"each field rescaled to sum 1: {measured} -> {r.verdict}"


def coefficient_lines(model) -> list[str]:
    """Every layer's coefficients: the stage string, each field's sum, the largest order
    condition by degree (``log(step)`` on Lyndon words, :func:`splitnet.order.algebra.lie_defects`)
    and :func:`splitnet.check_order`'s verdict, as they are and with each field rescaled to
    sum 1 (the method the coefficients are for the fields ``s_f F_f``)."""
    from ...integrators.schemes import check_order
    from ...stagelists.stages import EXACT_ORDER

    declared = model.scheme.order
    one = len(model.scheme.fields) == 1          # nothing to split, nothing to check
    raw = [None] * model.config.n_layers if one else check_order(model)
    learned = model.config.learn_coefficients
    lines = [f"coefficients ({'learned' if learned else 'the scheme’s, not learned'}; scheme "
             f"{model.scheme.name}, declared order "
             f"{'exact' if declared >= EXACT_ORDER else declared}); order conditions: largest "
             f"|log(step) - h sum X| on the Lyndon words of degree 1..{_degrees(declared)}"]
    for k, (stages, a) in enumerate(zip(model.coefficients(), raw)):
        lines += _stage_lines(f"layer {k}", stages, declared, a and a.verdict,
                              model.config.method)
    return lines


def _one_field_lines(label: str, stages, method: str) -> list[str]:
    """A layer of one field (its other fields ``none``): nothing to split, no order
    conditions (:class:`~splitnet.integrators.splitting.OneField`)."""
    from ...integrators.subflows import get_method
    from ...stagelists.stages import format_stages

    q = get_method(method).order
    return [f"{label}: {format_stages(stages)}",
            f"  one field: nothing to split, the plain residual step (exact as a splitting; as "
            f"an integrator of its field, the order of the sub-flow method {method}: "
            f"{'exact' if q is None else q})"]


def _stage_lines(label: str, stages, declared: int, verdict: str,
                 method: str = "euler") -> list[str]:
    """Three lines on one stage list: its string; each field's sum and the order conditions'
    largest defect by degree; ``verdict`` and the verdict with each field rescaled to sum 1
    (two lines for a layer of one field: :func:`_one_field_lines`)."""
    from ...order.algebra import lie_defects
    from ...order.check import consistency
    from ...stagelists.stages import coefficient_sums, field_names, format_stages

    if len(field_names(stages)) == 1:
        return _one_field_lines(label, stages, method)

    sums = ", ".join(f"{f} {v:.6g}" for f, v in coefficient_sums(stages).items())
    # over the layer's own fields (built-in ones first, as check_order lists them): ConvS2S's
    # decoder has no convection, and a field it does not have is no condition it fails
    present = tuple(consistency(stages)[0])
    defects = " ".join(f"{float(x):.1e}" for x in lie_defects(stages, _degrees(declared),
                                                              fields=present))
    return [f"{label}: {format_stages(stages)}",
            f"  sums: {sums}; conditions by degree: {defects}",
            f"  check_order: {verdict}; {_rescaled_verdict(stages, declared)}"]


def stack_lines(model, seq_len: int) -> list[str]:
    """:func:`splitnet.nets.cost.seq2seq_costs` as lines: the parameters, each stack's scheme,
    diagram, layers, evaluations and FLOPs per token, then each stack's coefficients with their
    order conditions (every layer of a stack has the same stages)."""
    from ...integrators.schemes import check_order
    from ...nets.cost import seq2seq_costs
    from ...stagelists.stages import EXACT_ORDER

    c = model.config
    lines = [f"translation model (SplitSeq2Seq): {model.n_params():,} parameters, "
             f"{model.n_params(embeddings=False):,} without embeddings and untied head; "
             f"d_model={c.d_model} n_heads={c.n_heads} "
             f"{'' if c.convection_field == 'none' else f'd_ff={c.d_ff} '}"
             f"src_vocab={c.src_vocab} "
             f"tgt_vocab={c.tgt_vocab} weights={c.weights} method={c.method} "
             f"h={c.step_size:g}; FLOPs = matmul FLOPs per token in closed form at "
             f"{seq_len} tokens"]
    coefficients = []
    for r in seq2seq_costs(c, seq_len):
        sch, side = r["scheme"], r["stack"]
        ev = ", ".join(f"{f} {n}" for f, n in r["evals"].items())
        lines.append(f"{side}: {sch.name} [{sch.diagram()}] x {r['layers']} layers; "
                     f"evaluations per token: {ev}; forward {r['flops'] / 1e9:.4g} GFLOP per "
                     f"token")
        declared = sch.order
        coefficients.append(f"{side} coefficients (the scheme’s, in every layer; declared "
                            f"order {'exact' if declared >= EXACT_ORDER else declared}):")
        one = len(sch.fields) == 1
        coefficients += _stage_lines(f"  {side}", sch.stages, declared,
                                     None if one else check_order(sch, order=declared).verdict,
                                     c.method)
    return lines + [""] + coefficients


def _measure_need(config, seq_len: int) -> float:
    """Rough bytes one measurement allocates: float32 weights and what a forward of
    ``seq_len`` tokens saves, per stage and token 2 (11 d_model + 4 d_ff + 5 heads seq_len)
    bytes (Korthikanti et al.'s counts in float32: 34.3 KB per layer and token measured at
    d_model 128, seq_len 256, 34.9 here), with half again to spare; a size that cannot fit is
    refused before it is built (issue 49 D5)."""
    seq2seq = hasattr(config, "decoder_scheme")
    layers = (config.n_encoder_layers + config.n_decoder_layers) if seq2seq else config.n_layers
    stages = 3 if seq2seq else len(config.resolved_scheme().stages)
    d, ff = config.d_model, config.d_ff
    vocab = (config.src_vocab + config.tgt_vocab) if seq2seq else config.vocab_size
    params = layers * stages * (2 * d * d + d * ff) + vocab * d
    saved = seq_len * layers * stages * 2 * (11 * d + 4 * ff + 5 * config.n_heads * seq_len)
    return 1.5 * (4.0 * params + saved) * (2 if seq2seq else 1)


def require_measurable(configs, seq_len: int) -> None:
    """A measurement of each config's activations that cannot fit in memory is refused, one
    line, before anything is printed (:func:`_measure_need`)."""
    from ...runenv import require_memory

    for config in configs:
        require_memory(_measure_need(config, seq_len), f"measuring the activations of "
                       f"{_name_and_depth(config)[1]} layers of width {config.d_model} on "
                       f"{seq_len} tokens", "lower --seq-len, --n-layers or --d-model")


def _bytes_per_token(config, seq_len: int) -> int:
    """Bytes saved for backward per token: a language model on ``seq_len`` tokens, a
    translation model on ``seq_len`` source and ``seq_len`` target tokens (per target token)."""
    import torch

    from ...nets.models import Seq2SeqConfig, SplitSeq2Seq, SplitTransformer
    from ...reversible import saved_bytes

    require_measurable([config], seq_len)
    torch.manual_seed(0)
    config = config.replace(max_len=max(seq_len, config.max_len))
    if isinstance(config, Seq2SeqConfig):
        special = (config.pad_id, config.bos_id, config.eos_id)
        token = next(i for i in range(min(config.src_vocab, config.tgt_vocab))
                     if i not in special)
        ids = torch.full((1, seq_len), token, dtype=torch.long)
        return saved_bytes(SplitSeq2Seq(config=config).train(), ids, ids) // seq_len
    model = SplitTransformer(config=config)
    return saved_bytes(model.train(), torch.zeros(1, seq_len, dtype=torch.long)) // seq_len


def _name_and_depth(c) -> tuple[str, str]:
    if hasattr(c, "decoder_scheme"):                  # an encoder–decoder: both stacks
        return (f"{c.encoder_scheme}/{c.decoder_scheme}",
                f"{c.n_encoder_layers}+{c.n_decoder_layers}")
    sch = c.resolved_scheme()
    return (sch.name if sch.name != "custom" else sch.diagram()), str(c.n_layers)


def activation_lines(configs, seq_len: int) -> list[str]:
    """Per config: the bytes per token autograd saves for backward (splitnet.reversible.memory:
    distinct storages, parameters excluded), as a plain network and as a reversible one (where
    its scheme can be: every stage one field, Euler), measured on the CPU's kernels."""
    lines = [f"activation bytes per token saved for backward (measured: one forward of "
             f"{seq_len} tokens, CPU kernels, float32; CUDA's flash attention saves less)",
             f"{'scheme':<16} {'weights':<10} {'layers':>6} {'plain':>12} {'reversible':>12} "
             f"{'ratio':>7}"]
    for c in configs:
        plain = _bytes_per_token(c.replace(reversible=False, reversible_grid=None), seq_len)
        try:
            rev = _bytes_per_token(c.replace(reversible=True, reversible_grid=None), seq_len)
        except ValueError:                 # a sum stage, another method: not a shear
            rev = None
        r = "-" if rev is None else f"{rev:,}"
        ratio = "-" if rev is None else f"{plain / rev:.1f}x"
        name, layers = _name_and_depth(c)
        lines.append(f"{name:<16} {c.weights:<10} {layers:>6} {plain:>12,} {r:>12} "
                     f"{ratio:>7}")
    return lines


def _size(b: float) -> str:
    """Bytes in GiB (3 decimals) from a tenth of one, else MiB or KiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if b >= scale / 10:
            return f"{b / scale:.3f} {unit}" if unit == "GiB" else f"{b / scale:.1f} {unit}"
    return f"{b / 2**10:.1f} KiB"


def memory_lines(configs, world: int, parallel: str) -> list[str]:
    """:func:`splitnet.nets.cost.memory_per_rank` of each config, as lines."""
    from ...nets.cost import memory_per_rank

    modes = ("ddp", "fsdp") if parallel == "both" else (parallel,)
    lines = [f"training memory per rank on {world} rank(s): float32 weights + gradients + "
             f"AdamW state, activations aside (fsdp: its shard, plus the root and one layer "
             f"gathered whole)"]
    for c in configs:
        name = _name_and_depth(c)[0]
        parts = []
        for mode in modes:
            m = memory_per_rank(c, world, mode)
            extra = f" ({_size(m['sharded'])} + {_size(m['in_flight'])} gathered)" \
                if mode == "fsdp" else ""
            parts.append(f"{mode} {_size(m['total'])}{extra}")
        lines.append(f"{name:<16} {c.weights:<10} " + "; ".join(parts))
    return lines


def _describe_checkpoint(args) -> int:
    from ...runs import checkpoint as ck

    state = ck.load(args.checkpoint, trust=args.trust_checkpoint)
    model = ck.model_from_state(state, args.checkpoint)
    return _describe_model(args, model, f"{ck.checkpoint_file(args.checkpoint)}: step "
                                        f"{state.get('step')}", state.get("train_config"))


def depth_line(config, train_options: dict | None = None) -> str | None:
    """What ``describe`` says of a network's depth: its basis (weights as functions of depth)
    and how its training made the depth elastic (``train_options``, a checkpoint's
    ``train_config``: ``--train-depths``, ``--layer-drop``, ``--early-exit``); None when it
    has none of these."""
    o = train_options or {}
    train_depths = o.get("train_depths") or ()
    basis, L = config.depth_basis, getattr(config, "n_layers", None)
    parts = []
    if basis is not None:
        parts.append(f"depth basis {basis}: every weight a function of depth, "
                     f"{basis.split(':')[1]} coefficients; runs at any number of steps "
                     f"(--at-depth N){f'; {L} as built' if L else ''}")
    if train_depths:
        parts.append(f"trained at {', '.join(map(str, train_depths))} steps (--train-depths)")
    if (o.get("layer_drop") or 0) > 0:
        parts.append(f"trained with LayerDrop {o['layer_drop']:g} "
                     f"({o.get('layer_drop_rule', 'uniform')}): --at-depth N keeps every "
                     f"(L/N)-th layer")
    if o.get("early_exit"):
        parts.append(f"trained with early exits after {', '.join(map(str, o['early_exit']))} "
                     f"layers: --at-depth N exits after the first N")
    return "; ".join(parts) or None


def _describe_hf(args) -> int:
    from ...interop.convert import from_hf

    model = from_hf(args.hf)
    return _describe_model(args, model, f"{args.hf}: {model.config.n_layers} layers imported "
                                        f"as a splitting network")


def _describe_model(args, model, title: str, train_options: dict | None = None) -> int:
    from ...nets import cost

    line = depth_line(model.config, train_options)
    title = title if line is None else f"{title}\n{line}"
    seq_len = min(args.seq_len, model.config.max_len)
    if args.activations or model.config.reversible:
        require_measurable([model.config], seq_len)     # before anything is printed
    if hasattr(model, "decoder_layers"):           # an encoder–decoder: its two stacks
        check_only_with(args, SEQ2SEQ_IGNORES)
        print(title)
        for line in stack_lines(model, seq_len):
            print(line)
        if args.activations or model.config.reversible:
            print()
            for line in activation_lines([model.config], seq_len):
                print(line)
        sys.stdout.flush()
        return 0
    row = cost.describe(model.config, seq_len=seq_len)
    print(title)
    print(cost.format_table([row], markdown=args.markdown))
    print()
    if args.world_size is not None:
        for line in memory_lines([model.config], args.world_size, args.parallel):
            print(line)
        print()
    if args.activations or model.config.reversible:
        for line in activation_lines([model.config], seq_len):
            print(line)
        print()
    for line in coefficient_lines(model):
        print(line)
    sys.stdout.flush()
    return 0


def run(args) -> int:
    import json

    from ...configs.options import check_applicable

    if args.parallel != "both" and args.world_size is None:
        raise ValueError(f"--parallel {args.parallel} is the memory per rank's: give "
                         f"--world-size N with it")
    check_only_with(args, ONLY_WITH)

    from ...integrators.schemes import available
    from ...nets import cost

    if args.checkpoint is not None and args.hf is not None:
        raise ValueError("--checkpoint and --hf both name a model: give one")
    if args.checkpoint is not None:
        return _describe_checkpoint(args)
    if args.hf is not None:
        return _describe_hf(args)

    given = args.schemes or [args.scheme or "lie-trotter"]
    names = available() if given == ["all"] else given
    weights = WEIGHTS if args.weights in (None, "both") else (args.weights,)
    typed = given_options(args, SplitConfig, skip=("scheme", "weights"))
    size = {**SIZE, **typed, "vocab_size": args.vocab_size or VOCAB, "max_len": args.seq_len}
    for n in names:                     # every problem before any work
        check_applicable(SplitConfig(**size, scheme=n), set(typed), SplitConfig.ONLY_WITH)
    configs = [SplitConfig(**size, scheme=n, weights=w) for n in names for w in weights]
    if args.activations:
        require_measurable(configs, args.seq_len)
    rows = cost.table(names, weights=weights, seq_len=args.seq_len, **size)
    if args.jsonl:
        for r in rows:
            print(json.dumps(r.as_dict()))
        return 0
    r0 = rows[0]
    kinds = ", ".join(f"{f} = {k}" for f, k in r0.kinds.items())
    print(f"d_model={r0.d_model} n_heads={r0.n_heads} n_layers={r0.n_layers} d_ff={r0.d_ff} "
          f"vocab={r0.vocab_size} seq_len={r0.seq_len} method={r0.method}; fields: {kinds}; "
          f"FLOPs = matmul FLOPs per token in closed form (FlopCounterMode's convention, dense "
          f"attention)")
    if depth_line(configs[0]) is not None:
        print(depth_line(configs[0]))
    print(cost.format_table(rows, markdown=args.markdown))
    print()
    for s in dict.fromkeys(r.scheme for r in rows):
        r = next(x for x in rows if x.scheme == s)
        diag = r.pattern if len(r.pattern) <= 90 else r.pattern[:87] + "..."
        print(f"{s:<14} {diag}")
    if args.world_size is not None:
        print()
        for line in memory_lines(configs, args.world_size, args.parallel):
            print(line)
    if args.activations:
        print()
        for line in activation_lines(configs, args.seq_len):
            print(line)
    sys.stdout.flush()
    return 0


__all__ = ["HELP", "ONLY_WITH", "RANK", "SEQ2SEQ_IGNORES", "SIZE", "VOCAB", "activation_lines",
           "coefficient_lines", "configure", "depth_line", "memory_lines", "require_measurable",
           "run", "stack_lines"]
