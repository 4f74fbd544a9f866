"""``splitnet schemes``: the registry, or ``--check`` the order of a stage list."""

from __future__ import annotations

from ._args import nonempty, positive_int

HELP = "list the registered schemes, or check a stage list's order on random matrices"


def configure(p) -> None:
    p.add_argument("--check", metavar="STAGES", type=nonempty,
                   help="measure the order of a stage list 'field:coeff,...' (fields d/s/"
                        "diffusion, c/f/convection), a registered name or an s/f pattern, on "
                        "random non-commuting matrices; exit status 1 if it does not have the "
                        "declared order")
    p.add_argument("--order", type=positive_int, default=None,
                   help="the order you claim (needed with a stage list; a registered scheme "
                        "declares its own)")


def _check(args) -> int:
    from ..schemes import check_order
    from ..stages import parse

    spec = args.check.strip()
    if ":" in spec:
        parse(spec)                       # a malformed list: its own message first
    if ":" in spec and args.order is None:
        raise ValueError("--check with a stage list needs --order P: the order the stages "
                         "are meant to have")
    res = check_order(spec, order=args.order)
    print(res.summary())
    print(f"{'h':>10} {'local error':>12}  fitted")
    for h, e, u in zip(res.step_sizes, res.errors, res.used):
        print(f"{h:10.4g} {e:12.3e}  {'yes' if u else 'no'}")
    return 0 if res.ok else 1


def run(args) -> int:
    if args.check is not None:
        return _check(args)
    from ..schemes import available, get

    print(f"{'name':<14}{'order':>6}{'stages':>8}{'symmetric':>11}  diagram")
    for name in available():
        s = get(name)
        diag = s.diagram()
        if len(diag) > 70:
            diag = diag[:67] + "..."
        print(f"{name:<14}{s.order:>6}{len(s.stages):>8}{s.is_symmetric!s:>11}  {diag}")
    print("\ns = diffusion (attention), f = convection (feed-forward); first stage applied first; "
          "stages are not merged (scheme.merged() merges them).")
    return 0
