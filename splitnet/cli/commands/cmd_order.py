"""``splitnet order``: measured error slopes of schemes on the built-in particle system
(``--partitioned``: on its partitioned form, the ODE of a reversible network, where Euler
sub-steps keep every scheme's order)."""

from __future__ import annotations

import math
import sys
import time

from ...integrators.subflows import METHODS
from .._args import (
    SCHEME_LIST_HELP,
    add_png_option,
    add_singular,
    add_threads_option,
    check_only_with,
    csv,
    csv_floats,
    one_method,
    one_scheme,
    positive_int,
    scheme_list,
    seed,
    set_threads,
)

RANK = 10   # place in `splitnet --help`
VERDICT = "--strict: a measured order differs from the expected one"
HELP = ("measure the order of schemes on a random attention + feed-forward particle system "
        "(float64): the fitted local (or global) error slope against theory")
DEFAULT_SCHEMES = "lie-trotter,strang,yoshida4,suzuki4,blanes-moan4"
# Three fields (a decoder layer): the Transformer decoder (self, cross, feed-forward), the seed's
# Macaron decoder as published, and the symmetric generalised Strang and its triple jump over
# --field-order (feed-forward outermost, like Macaron). Separated by ';' (stage strings hold ',').
DEFAULT_SCHEMES_3 = "d:1,x:1,c:1;c:0.5,d:1,x:1,c:0.5;strang;yoshida4"
MAX_STEP = 100.0     # the largest step size --step-sizes takes (the system's time scale is ~1)
MEMORY = 5           # --memory's default: memory particles of a decoder layer
# options that only apply alongside another (splitnet.cli._args.check_only_with)
ONLY_WITH = {
    "memory": ("with --fields 3 (the memory particles a decoder layer attends to)",
               lambda a: a.fields == 3),
    "field_order": ("with --fields 3 (the order of a decoder layer's three fields)",
                    lambda a: a.fields == 3),
}


def configure(p) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--schemes", type=scheme_list, action="extend", default=None,
                       help=f"schemes: {SCHEME_LIST_HELP} (default: {DEFAULT_SCHEMES}; with "
                            f"--fields 3: {DEFAULT_SCHEMES_3})")
    add_singular(which, "--scheme", "schemes", one_scheme, "scheme")
    p.add_argument("--fields", type=int, choices=(2, 3), default=2,
                   help="2: attention + feed-forward (default); 3: a decoder layer, with "
                        "cross-attention to fixed memory particles")
    p.add_argument("--field-order", type=csv, default=None,
                   help="with --fields 3: the fields a registry name is taken over, first "
                        "outermost (default: as a SplitSeq2Seq decoder builds the name, "
                        "splitnet.integrators.schemes.network_scheme: strang = c/2 d/2 x d/2 c/2, "
                        "lie-trotter = d x c)")
    p.add_argument("--memory", type=positive_int, default=None,
                   help=f"with --fields 3: memory particles (default {MEMORY})")
    p.add_argument("--partitioned", action="store_true",
                   help="the same fields on a partitioned state (x1, x2), as in a reversible "
                        "network: x1' = D(x2), x2' = C(x1) (splitnet.analyses.problems."
                        "partitioned_system). Each field is a shear, so an Euler sub-step is "
                        "its exact sub-flow and every scheme keeps its order; --fields 2, no "
                        "d+c sum stage (default method here: euler)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--methods", type=csv, default=None, metavar="M,M,...",
                       help=f"sub-flow methods, comma-separated, of {', '.join(METHODS)} "
                            f"(default: exact; with --partitioned: euler)")
    add_singular(which, "--method", "methods", one_method, "sub-flow method")
    p.add_argument("--kind", choices=["local", "global"], default="local",
                   help="local: one step, slope = order + 1; global: error at T = 1, slope = "
                        "order (default: local)")
    p.add_argument("--step-sizes", type=csv_floats, default=None,
                   help="comma-separated h (default: 0.2,0.1,0.05,0.025 local; "
                        "0.5,0.25,0.125,0.0625 global)")
    p.add_argument("--tokens", type=positive_int, default=6, help="particles (default 6)")
    p.add_argument("--d-model", type=positive_int, default=8,
                   help="particle dimension, a multiple of 2 (default 8)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the random system (default 0)")
    add_png_option(p, "order.png")
    p.add_argument("--strict", action="store_true",
                   help="exit with status 1 if any measured slope is off theory by more than 0.3 "
                        "(or undetermined: every error at round-off)")
    add_threads_option(p)


def _validate(args):
    """Everything that can be wrong, before any work (nothing is written on bad input)."""
    from ..._io import check_output_file
    from ...integrators.flows import n_steps_for
    from ...integrators.schemes import available, get, network_scheme, resolve
    from ...integrators.subflows import get_method
    from ...integrators.validate import check_step_size
    from ...plots import check_format
    from ...runenv import require_memory
    from ...stagelists.stages import reversible_unsupported

    check_only_with(args, ONLY_WITH)
    if args.memory is None:
        args.memory = MEMORY
    if args.methods is None:    # the residual sub-layer is the point of --partitioned
        args.methods = ["euler"] if args.partitioned else ["exact"]
    if args.partitioned and args.fields != 2:
        raise ValueError("--partitioned takes --fields 2: the partitioned system has the "
                         "attention and feed-forward fields only")
    if args.d_model % 2:
        raise ValueError(f"--d-model must be a multiple of the 2 attention heads, got "
                         f"{args.d_model}")
    if args.fields == 2:
        schemes = [resolve(s) for s in (args.schemes or scheme_list(DEFAULT_SCHEMES))]
        for s in schemes:       # the system has two fields: others are refused before any work
            extra = set(s.fields) - {"diffusion", "convection"}
            if extra:
                fix = ("add --fields 3 (a decoder layer, with cross-attention)"
                       if extra == {"cross"} else f"it has no {', '.join(sorted(extra))}")
                raise ValueError(f"scheme {_label(s)!r} advances {', '.join(s.fields)}, but the "
                                 f"particle system of --fields 2 has diffusion and convection "
                                 f"only: {fix}")
            reason = args.partitioned and reversible_unsupported(s.stages)
            if reason:      # d+c writes both blocks, no shear: Euler is not its flow
                raise ValueError(f"scheme {_label(s)!r} cannot run on the partitioned system "
                                 f"(--partitioned): {reason}")
    else:
        names = args.schemes or scheme_list(DEFAULT_SCHEMES_3)
        if args.field_order is None:     # the networks' rule: one meaning per name
            schemes = [network_scheme(s, ("diffusion", "cross", "convection")) for s in names]
        else:
            order = tuple(args.field_order)
            schemes = [get(s, fields=order) if ":" not in s and s.lower() in available("all")
                       else resolve(s) for s in names]
        want = {"diffusion", "cross", "convection"}
        for s in schemes:
            if set(s.fields) != want:
                raise ValueError(f"scheme {s.name!r} advances {', '.join(s.fields)}; with "
                                 f"--fields 3 every scheme needs diffusion, cross and convection")
    for m in args.methods:
        get_method(m)
    hs = args.step_sizes or ([0.2, 0.1, 0.05, 0.025] if args.kind == "local"
                             else [0.5, 0.25, 0.125, 0.0625])
    for h in hs:
        check_step_size(h)
        if h > MAX_STEP:
            raise ValueError(f"--step-sizes: a step of {h:g} is beyond the system's time scale "
                             f"(at most {MAX_STEP:g})")
        if args.kind == "global":
            n_steps_for((0.0, 1.0), h)
    if len(set(hs)) < 2:
        raise ValueError("--step-sizes needs at least two distinct values")
    check_output_file(args.out)
    check_format(args.out)
    pairs = 2 if args.partitioned else 1      # the partitioned state holds two particle sets
    require_memory(memory_estimate(pairs * args.tokens, args.d_model),
                   f"a particle system of {pairs * args.tokens} tokens in R^{args.d_model}",
                   "lower --tokens or --d-model")
    return schemes, hs


def memory_estimate(tokens: int, d_model: int, heads: int = 2, d_ff: int = 16) -> float:
    """Bytes a convergence study of the particle system holds at once (float64): the attention
    scores and their softmax per head (tokens^2 each, a few copies), the solver's stages (about
    20 states of tokens x d_model) and the fields' weights."""
    return 8.0 * (4 * heads * tokens**2 + 20 * tokens * (d_model + d_ff)
                  + 4 * d_model**2 + 2 * d_model * d_ff)


def _system(args):
    """(fields, x0, description) of the random particle system of ``--fields``."""
    import torch

    from ...analyses.problems import decoder_system, particle_system, partitioned_system

    if args.partitioned:
        D, C, x0 = partitioned_system(n_tokens=args.tokens, d_model=args.d_model, seed=args.seed,
                                      dtype=torch.float64)
        return ({"diffusion": D, "convection": C}, x0,
                "Partitioned attention + feed-forward particle system (x1' = D(x2), "
                "x2' = C(x1); every field a shear)")
    if args.fields == 2:
        F, G, x0 = particle_system(n_tokens=args.tokens, d_model=args.d_model, seed=args.seed,
                                   dtype=torch.float64)
        return ({"diffusion": F, "convection": G}, x0,
                "Random attention + feed-forward particle system")
    fields, x0 = decoder_system(n_tokens=args.tokens, d_model=args.d_model,
                                n_memory=args.memory, seed=args.seed, dtype=torch.float64)
    return (fields, x0, f"Random decoder layer (self-attention + cross-attention to "
                        f"{args.memory} memory particles + feed-forward) as a particle system")


def _label(scheme) -> str:
    """The scheme's name, or its diagram when it has none of its own."""
    return scheme.diagram() if scheme.name == "custom" else scheme.name


def run(args) -> int:
    from tqdm.auto import tqdm

    from ... import plots
    from ...analyses import convergence as analysis
    from ...runenv import draws_progress

    schemes, hs = _validate(args)
    set_threads(args.threads)
    fields, x0, what = _system(args)
    slope = "local slope" if args.kind == "local" else "global slope"
    pair = "2 x " if args.partitioned else ""
    print(f"{what}: {pair}{args.tokens} particles in R^{args.d_model}, float64, seed {args.seed}; "
          f"{args.kind} error; h = {hs}")
    print(f"order p: the classical order (with these sub-flows); {slope} = "
          f"{'p + 1' if args.kind == 'local' else 'p'}: fitted log-log slope of the error")
    t0 = time.perf_counter()
    combos = [(s, m) for s in schemes for m in args.methods]
    results = [analysis.convergence_study(s, x0=x0, step_sizes=hs, kind=args.kind, method=m,
                                          fields=fields)
               for s, m in tqdm(combos, desc="convergence studies", unit="study",
                                file=sys.stderr, disable=not draws_progress())]
    width = max(16, *(len(_label(s)) + 2 for s in schemes))
    print(f"\n{'scheme':<{width}}{'method':<10}{'order':>6}{slope:>14}{'expected':>10}  verdict")
    bad = 0
    for s, r in zip((s for s, _ in combos), results):
        bad += not r.ok
        exact = s.is_exact and r.method == "exact"      # no slope: the step is the flow
        order = "exact" if exact else str(r.method_order)     # on shears: the scheme's
        slope_txt = "at floor" if exact else f"{r.order:.2f}"
        expected = "-" if exact else str(r.expected_order)
        # a slope that is not a number: every error at round-off (or zero), nothing measured
        verdict = "ok" if r.ok else ("MISMATCH" if math.isfinite(r.order) else
                                     "undetermined (errors at round-off)")
        print(f"{_label(s):<{width}}{r.method:<10}{order:>6}{slope_txt:>14}{expected:>10}  "
              f"{verdict}")
    for s, r in zip((s for s, _ in combos), results):
        r.scheme = _label(s)
    drawn = [r for s, r in zip((s for s, _ in combos), results)
             if not (s.is_exact and r.method == "exact")]
    system = ("partitioned " if args.partitioned else
              "decoder " if args.fields == 3 else "")
    plots.plot_convergence(drawn or results, args.out,
                           title=f"{args.kind} error on the random {system}particle system")
    print(f"\nplot: {args.out}   ({time.perf_counter() - t0:.1f} s)")
    return 1 if (bad and args.strict) else 0


__all__ = ["DEFAULT_SCHEMES", "DEFAULT_SCHEMES_3", "HELP", "MAX_STEP", "MEMORY", "ONLY_WITH",
           "RANK", "VERDICT",
           "configure", "memory_estimate", "run"]
