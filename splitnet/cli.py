"""Command line: ``splitnet order | schemes | describe | train | trajectories``.

Subcommands living in other modules expose ``configure_parser(parser)`` and ``run_cli(args)``;
they are imported only when used, so ``splitnet schemes`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

# command -> (module, one-line help). The module provides configure_parser / run_cli.
_EXTERNAL = {
    "describe": ("splitnet.cost", "parameters, field evaluations and FLOPs per token of a model"),
    "train": ("splitnet.train", "train a SplitTransformer language model"),
    "trajectories": ("splitnet.trajectories", "plot token embeddings as particles"),
}

DEFAULT_ORDER_SCHEMES = "lie-trotter,strang,yoshida4,suzuki4,blanes-moan4"


def _csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def _floats(s: str) -> list[float]:
    try:
        return [float(x) for x in _csv(s)]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {s!r}") from e


def _order_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schemes", type=_csv, default=_csv(DEFAULT_ORDER_SCHEMES),
                   help=f"comma-separated scheme names or s/f patterns "
                        f"(default: {DEFAULT_ORDER_SCHEMES})")
    p.add_argument("--method", type=_csv, default=["exact"],
                   help="sub-flow method(s): exact, euler, midpoint, rk4; comma-separated "
                        "(default: exact)")
    p.add_argument("--kind", choices=["local", "global"], default="local",
                   help="local: one step; global: error at T = 1 (default: local)")
    p.add_argument("--step-sizes", type=_floats, default=None,
                   help="comma-separated h (default: 0.2,0.1,0.05,0.025 local; "
                        "0.5,0.25,0.125,0.0625 global)")
    p.add_argument("--tokens", type=int, default=6, help="particles (default 6)")
    p.add_argument("--d-model", type=int, default=8, help="particle dimension (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random system (default 0)")
    p.add_argument("--out", default="order.png", help="PNG to write (default order.png)")
    p.add_argument("--strict", action="store_true",
                   help="exit with status 1 if any measured order is off theory by more than 0.3")


def _run_order(args) -> int:
    import torch

    from . import analysis
    from .schemes import resolve

    torch.set_default_dtype(torch.float64)
    F, G, x0 = analysis.particle_system(n_tokens=args.tokens, d_model=args.d_model,
                                        seed=args.seed)
    hs = args.step_sizes or ([0.2, 0.1, 0.05, 0.025] if args.kind == "local"
                             else [0.5, 0.25, 0.125, 0.0625])
    schemes = [resolve(s) for s in args.schemes]
    # Fail on a bad method or step size before any work starts.
    from .flows import get_method, n_steps_for

    for m in args.method:
        get_method(m)
    if args.kind == "global":
        for h in hs:
            n_steps_for((0.0, 1.0), h)
    print(f"Random attention + feed-forward particle system: {args.tokens} particles in "
          f"R^{args.d_model}, float64, seed {args.seed}; {args.kind} error; h = {hs}")
    results = []
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    combos = [(s, m) for s in schemes for m in args.method]
    for s, m in tqdm(combos, desc="convergence studies", unit="study", file=sys.stderr):
        results.append(analysis.convergence_study(s, F, G, x0, hs, kind=args.kind, method=m))
    print(f"\n{'scheme':<16}{'method':<10}{'measured':>9}{'expected':>9}  verdict")
    bad = 0
    for r in results:
        verdict = "ok" if r.ok else "MISMATCH"
        bad += not r.ok
        print(f"{r.scheme:<16}{r.method:<10}{r.order:9.2f}{r.expected_order:9d}  {verdict}")
    analysis.plot_convergence(results, args.out,
                              title=f"{args.kind} error on the random particle system "
                                    f"(dotted: theory)")
    print(f"\nplot: {args.out}   ({time.perf_counter() - t0:.1f} s)")
    return 1 if (bad and args.strict) else 0


def _schemes_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", metavar="STAGES",
                   help="measure the order of a stage list 'field:coeff,...' (fields diffusion|d|s, "
                        "convection|c|f), a registered name or an s/f pattern, on random "
                        "non-commuting matrices")
    p.add_argument("--order", type=int, default=None,
                   help="declared order to compare with (with --check)")


def _parse_stages(text: str):
    alias = {"d": "diffusion", "s": "diffusion", "diffusion": "diffusion",
             "c": "convection", "f": "convection", "convection": "convection"}
    stages = []
    for item in _csv(text):
        if ":" not in item:
            raise ValueError(f"stage {item!r} is not field:coeff")
        f, c = item.split(":", 1)
        if f.strip().lower() not in alias:
            raise ValueError(f"unknown field {f!r} in {item!r}; use diffusion/convection (or s/f)")
        stages.append((alias[f.strip().lower()], float(c)))
    return stages


def _run_schemes(args) -> int:
    from .check import check_order
    from .schemes import available, get, resolve

    if args.check:
        if ":" in args.check:
            res = check_order(_parse_stages(args.check), order=args.order)
        else:
            res = check_order(resolve(args.check), order=args.order)
        print(res.summary())
        print(f"{'h':>10} {'local error':>12}  fitted")
        for h, e, u in zip(res.step_sizes, res.errors, res.used):
            print(f"{h:10.4g} {e:12.3e}  {'yes' if u else 'no'}")
        return 0 if res.ok else 1
    print(f"{'name':<14}{'order':>6}{'stages':>8}{'symmetric':>11}  diagram")
    for name in available():
        s = get(name)
        diag = s.pattern()
        if len(diag) > 70:
            diag = diag[:67] + "..."
        print(f"{name:<14}{s.order:>6}{len(s.stages):>8}{str(s.is_symmetric):>11}  {diag}")
    print("\ns = diffusion (attention), f = convection (feed-forward); first stage applied first; "
          "stages are not merged (scheme.merged() merges them).")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="splitnet", description="Transformer layers as ODE splitting integrators.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser("order", help="measure the order of schemes on a random particle system",
                       description="Measured against expected order of each scheme on a built-in "
                                   "random attention + feed-forward particle system (float64).")
    _order_parser(p)
    p.set_defaults(run=_run_order)
    p = sub.add_parser("schemes", help="the registry: name, order, stages, symmetric",
                       description="List the registered schemes, or check a stage list's order.")
    _schemes_parser(p)
    p.set_defaults(run=_run_schemes)
    for name, (module, help_) in _EXTERNAL.items():
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(module=module)
    return parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # External subcommands: build their full parser only when named (keeps start-up fast).
    if argv and argv[0] in _EXTERNAL:
        mod = importlib.import_module(_EXTERNAL[argv[0]][0])
        p = argparse.ArgumentParser(prog=f"splitnet {argv[0]}",
                                    description=_EXTERNAL[argv[0]][1])
        mod.configure_parser(p)
        args = p.parse_args(argv[1:])
        command, run = argv[0], mod.run_cli
    else:
        args = parser.parse_args(argv)
        command, run = args.command, args.run
    try:
        return int(run(args) or 0)
    except (ValueError, TypeError) as e:   # bad input: one clear line, no traceback
        print(f"splitnet {command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:                # `splitnet schemes | head`: the reader left
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
