"""``splitnet trajectories``: tokens of a short text as particles moving through a network."""

from __future__ import annotations

from pathlib import Path

from ...configs.options import LIMITS, WEIGHTS
from .._args import (
    SCHEME_LIST_HELP,
    add_model_source,
    add_output_option,
    add_png_option,
    add_replaced_option,
    add_threads_option,
    check_only_with,
    float_in,
    nonempty,
    nonnegative_int,
    positive_int,
    scheme_list,
    seed,
    set_threads,
)

RANK = 50   # place in `splitnet --help`
HELP = "plot token embeddings as particles"
DEFAULT_TEXT = "for i in range(n):"   # 18 bytes of the kind the default run was trained on
# the fresh model's options and their defaults (applied once no --checkpoint or --hf is given)
FRESH = {"d_model": 64, "n_heads": 4, "n_layers": 6, "step_size": 1.0, "weights": "shared",
         "seed": 0}
# options that only apply alongside another (splitnet.cli._args.check_only_with)
_FRESH_ONLY = ("to a fresh model (without --checkpoint or --hf, whose model is drawn as it is)",
               lambda a: a.checkpoint is None and a.hf is None)
ONLY_WITH = {**dict.fromkeys(FRESH, _FRESH_ONLY),
             "target": ("with --checkpoint of a translation model (the decoder's tokens)",
                        lambda a: a.checkpoint is not None),
             "restart": ("with the ODE path (without --no-ode)", lambda a: not a.no_ode)}


def configure(p) -> None:
    p.description = (
        "Plot every token of a short text as a particle moving through the network: PCA of all "
        "states (one line per token, a dot per stage, a circle per layer), with the dotted path "
        "of the ODE the layers approximate. Without --checkpoint a freshly initialised model.")
    add_model_source(p, required=False, hf=", imported exactly; tokens from its own "
                                           "tokenizer when it has one, else bytes")
    p.add_argument("--prompt", default=DEFAULT_TEXT, type=nonempty, metavar="TEXT",
                   help=f"the text whose tokens are drawn (a string, as splitnet sample's "
                        f"--prompt); short (12-24 characters) reads best (default "
                        f"{DEFAULT_TEXT!r}); a translation checkpoint: the source")
    add_replaced_option(p, "--text", "--text names a text file in every command (splitnet "
                        "train, splitnet refine); the string whose tokens trajectories draws is "
                        "--prompt TEXT")
    p.add_argument("--target", default=None, metavar="TEXT",
                   help="a translation checkpoint: the decoder's tokens (default: the model's "
                        "own greedy translation of --prompt); the encoder's output is drawn as "
                        "the fixed memory")
    add_png_option(p, "trajectories.png")
    p.add_argument("--scheme", default=None, type=nonempty,
                   help="scheme name or s/f pattern; fresh model: its scheme (default "
                        "lie-trotter); checkpoint: re-run its shared fields with it")
    p.add_argument("--3d", dest="three_d", action="store_true", help="3-D PCA plot")
    add_output_option(p, "--gif", "also write an animated GIF")
    add_output_option(p, "--diagnostics", "also write the clustering diagnostics (cosines, "
                      "effective rank)", metavar="PNG")
    p.add_argument("--compare", metavar="SCHEMES", type=scheme_list, action="extend",
                   help=f"also write small multiples for these schemes ({SCHEME_LIST_HELP}) "
                        f"on the same input to <out>_compare.png (shared fields)")
    p.add_argument("--per-layer", action="store_true",
                   help="record layer outputs only, not every stage")
    p.add_argument("--no-ode", action="store_true", help="do not integrate the ODE path")
    p.add_argument("--restart", action="store_true",
                   help="restart the ODE path from the network at every layer (local "
                        "comparison) instead of one path from the embedding")
    p.add_argument("--from-layer", type=nonnegative_int, default=0, metavar="K",
                   help="plot from the output of layer K on (PCA fitted on those states); "
                        "default 0 = from the embedding")
    p.add_argument("--points-per-layer", type=positive_int, default=16,
                   help="ODE path points per layer (default 16)")
    g = p.add_argument_group("fresh model (no --checkpoint)")
    g.add_argument("--d-model", type=positive_int, default=None,
                   help=f"width (default {FRESH['d_model']})")
    g.add_argument("--n-heads", type=positive_int, default=None,
                   help=f"attention heads (default {FRESH['n_heads']})")
    g.add_argument("--n-layers", type=positive_int, default=None,
                   help=f"layers (default {FRESH['n_layers']})")
    g.add_argument("--step-size", type=float_in(1e-6, LIMITS["step_size"]), default=None,
                   help=f"h (default {FRESH['step_size']})")
    g.add_argument("--weights", choices=WEIGHTS, default=None,
                   help=f"sub-layer weights (default {FRESH['weights']})")
    g.add_argument("--seed", type=seed, default=None,
                   help=f"initialisation seed (default {FRESH['seed']})")
    add_threads_option(p)


def compare_path(out: str) -> Path:
    p = Path(out)
    return p.with_name(p.stem + "_compare" + (p.suffix or ".png"))


def _outputs(args) -> list[tuple[str, str]]:
    """(flag, path) of every file the command will write."""
    outs = [("--out", args.out), ("--gif", args.gif), ("--diagnostics", args.diagnostics)]
    if args.compare:
        outs.append(("--compare", compare_path(args.out)))
    return [(flag, o) for flag, o in outs if o]


def _model(args):
    """The model to draw, every input checked first (nothing written on bad input)."""
    from ...analyses import trajectories as tr
    from ...configs.config import SplitConfig
    from ...integrators.schemes import resolve

    scheme = resolve(args.scheme) if args.scheme else None
    compare = [resolve(s) for s in args.compare or []]
    if args.checkpoint and args.hf:
        raise ValueError("give --checkpoint or --hf, not both")
    _check_outputs(args)
    if args.checkpoint or args.hf:
        tokenizer = None
        if args.hf:
            from ...interop.imported import load_hf_for_analysis

            imported = load_hf_for_analysis(args.hf)
            model, tokenizer = imported.model, imported.tokenizer
        else:
            model, tokenizer = _checkpoint_model(args)
        seq2seq = hasattr(model, "decoder_layers")
        if seq2seq and (scheme is not None or compare):
            raise ValueError("--scheme and --compare re-run a language model's fields; a "
                             "translation model is drawn as trained")
        # read first (a missing checkpoint is what is wrong), then what does not apply to it
        check_only_with(args, {**ONLY_WITH, "target": (ONLY_WITH["target"][0],
                                                       lambda a: seq2seq)})
        from ...analyses.refine import one_field_schemes

        one_field_schemes(model, [s for s in (scheme, *compare) if s is not None],
                          "--scheme / --compare", "drop them (the model is drawn as it is)")
        if scheme is not None:
            model = tr.with_scheme(model, scheme)
        if compare and model.weights != "shared":
            raise ValueError(f"--compare re-runs the fields under other schemes; the model has "
                             f"weights={model.weights!r}, whose stages have their own sub-layers")
        origin = f"Hugging Face {args.hf}" if args.hf else f"checkpoint {args.checkpoint}"
        return model, origin, compare, tokenizer
    check_only_with(args, ONLY_WITH)
    for name, value in FRESH.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    cfg = SplitConfig(vocab_size=256, d_model=args.d_model, n_heads=args.n_heads,
                      n_layers=args.n_layers, step_size=args.step_size, weights=args.weights,
                      scheme=scheme or "lie-trotter")
    _require_memory(args, cfg)
    model = tr.fresh_model(scheme or "lie-trotter", d_model=args.d_model, n_heads=args.n_heads,
                           n_layers=args.n_layers, step_size=args.step_size,
                           weights=args.weights, seed=args.seed)
    return model, f"fresh initialisation (seed {args.seed})", compare, None


def _checkpoint_model(args):
    """A checkpoint's model and, for a translation model, its tokenizer (else None: bytes)."""
    from ...runs.checkpoint import load, model_from_state
    from ...translate.batches import tokenizer_from_dict

    state = load(args.checkpoint, trust=args.trust_checkpoint)
    model = model_from_state(state, args.checkpoint)
    tok = state.get("tokenizer")
    return model, None if tok is None else tokenizer_from_dict(tok)


def _translation_input(model, tok, args):
    """``(decoder ids with bos first, source ids)`` of a translation model."""
    import torch

    src = torch.tensor(tok.encode(args.prompt)[:model.config.max_len], dtype=torch.long)
    if args.target is None:
        out = model.eval().generate(src[None], model.config.max_len - 1)[0].tolist()
        tgt = [t for t in out if t not in (tok.pad_id, tok.eos_id)]
        print(f"target: the model's greedy translation {tok.decode(tgt)!r}")
    else:
        tgt = tok.encode(args.target)
    ids = [tok.bos_id, *tgt][:model.config.max_len]
    return torch.tensor(ids, dtype=torch.long), src


def _check_outputs(args) -> None:
    """Every output a new name or a regular file in a writable folder, no two the same, each
    in a format that can be written: before any work."""
    from ... import plots
    from ..._io import check_outputs
    from ...runs.checkpoint import run_files

    outs = _outputs(args)
    inputs = [("the model folder", args.hf)]
    check_outputs(outs, inputs + (run_files(args.checkpoint) if args.checkpoint else []))
    for flag, o in outs:
        if flag != "--gif":
            plots.check_format(o, flag)


def memory_estimate(cfg, n_tokens: int, points_per_layer: int, ode: bool) -> float:
    """Bytes of a fresh model (float32 weights: per layer 12 d^2 for the shared attention and
    feed-forward, times the stages with per-stage weights) and of the recorded states (float64,
    a few copies for the PCA and the plots) of ``n_tokens`` tokens."""
    sch = cfg.resolved_scheme()
    stages = len(sch.stages)
    per_layer = (4 + 2 * cfg.d_ff / cfg.d_model) * cfg.d_model**2
    if cfg.weights == "per-stage":
        per_layer *= stages
    points = cfg.n_layers * (stages + 1 + (points_per_layer if ode else 0))
    return 4.0 * cfg.n_layers * per_layer + 8.0 * 4 * points * n_tokens * cfg.d_model


def _require_memory(args, cfg) -> None:
    from ...runenv import require_memory

    n = len(args.prompt.encode("utf-8", "surrogateescape"))
    require_memory(memory_estimate(cfg, n, args.points_per_layer, not args.no_ode),
                   f"a model of {cfg.n_layers} layers of width {cfg.d_model} and its trajectories",
                   "lower --n-layers or --d-model")


def _print_table(traj, cl, origin, model, text) -> None:
    what = "decoder scheme" if traj.memory is not None else "scheme"
    print(f"model: {origin}; {what} {traj.scheme} ({traj.weights}, {traj.method}), "
          f"h = {traj.step_size:g}, {traj.n_layers} layers, d_model {model.config.d_model}")
    print(f"text: {text!r} ({traj.n_tokens} {'decoder ' if traj.memory is not None else ''}"
          f"tokens), {traj.n_points} states per token")
    print(f"{'layer':>5} {'t':>7} {'mean cos':>9} {'eff. rank':>9}"
          + ("" if traj.path is None else f" {'ODE gap':>9} {'rel. gap':>9}"))
    gaps = rel = None
    if traj.path is not None:
        gaps, rel = traj.gap(), traj.gap(relative=True)
    for k in range(len(cl.times)):
        line = f"{k:>5} {cl.times[k]:7.3g} {cl.mean_cosine[k]:9.3f} {cl.effective_rank[k]:9.2f}"
        if gaps is not None:
            line += f" {gaps[k]:9.3g} {rel[k]:9.3g}"
        print(line)


def _compare(args, model, compare, idx, collect) -> dict:
    from ...analyses import trajectories as tr

    trajs = {}
    for s in compare:
        # Shared weights: the very same fields under every scheme (a fresh model per scheme
        # would not do: the initial scale of the output projections depends on the number of
        # stages). A fresh per-stage model: each scheme its own sub-layers, seeded alike.
        m = tr.with_scheme(model, s) if model.weights == "shared" else tr.fresh_model(
            s, d_model=args.d_model, n_heads=args.n_heads, n_layers=args.n_layers,
            step_size=args.step_size, weights=args.weights, seed=args.seed)
        trajs[s.name] = collect(m, idx)
    return trajs


def run(args) -> int:
    import torch

    from ... import plots
    from ...analyses import trajectories as tr
    from ...geometry import clustering

    set_threads(args.threads)
    model, origin, compare, tokenizer = _model(args)
    source = None
    if hasattr(model, "decoder_layers"):
        idx, source = _translation_input(model, tokenizer, args)
    else:
        idx = tr.encode(args.prompt) if tokenizer is None else \
            torch.tensor(tokenizer.encode(args.prompt), dtype=torch.long)

    def collect(m, ids):
        return tr.collect(m, ids, per_stage=not args.per_layer, continuous=not args.no_ode,
                          points_per_layer=args.points_per_layer, restart=args.restart,
                          tokenizer=tokenizer, source=source)

    n_layers = len(getattr(model, "decoder_layers", None) or model.layers)
    if args.from_layer >= n_layers:
        raise ValueError(f"--from-layer {args.from_layer}: the model has {n_layers} "
                         f"layers (use 0..{n_layers - 1})")
    if len(idx) > model.max_len:
        raise ValueError(f"--prompt has {len(idx)} tokens but the model's context is "
                         f"{model.max_len}: shorten it")
    traj = collect(model, idx)
    trajs = _compare(args, model, compare, idx, collect) if compare else {}
    _print_table(traj, clustering(traj), origin, model, args.prompt)
    written = {"png": plots.save_trajectory_plot(
        traj.since(args.from_layer) if args.from_layer else traj, args.out,
        dim=3 if args.three_d else 2, text=args.prompt)}
    if args.diagnostics:
        plots.plot_clustering(traj, args.diagnostics)
        written["diagnostics"] = args.diagnostics
    if trajs:
        same = "same fields" if model.weights == "shared" else "own per-stage sub-layers"
        plots.plot_scheme_comparison(trajs, compare_path(args.out),
                                     suptitle=f"same input {args.prompt!r}, {same}")
        written["compare"] = compare_path(args.out)
    if args.gif:
        written["gif"] = plots.animate(traj, args.gif)
    for k, v in written.items():
        print(f"{k}: {v}")
    return 0


__all__ = ["DEFAULT_TEXT", "FRESH", "HELP", "ONLY_WITH", "RANK", "compare_path", "configure",
           "memory_estimate", "run"]
