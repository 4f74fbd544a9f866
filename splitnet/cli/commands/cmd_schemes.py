"""``splitnet schemes``: the registry grouped by order with each scheme's cost, or ``--check``
the order of a stage list (inline or from a file)."""

from __future__ import annotations

from .._args import check_only_with, nonempty, positive_int

RANK = 20   # place in `splitnet --help`
VERDICT = "--check: the stage list's verdict is not ok (mismatch, undetermined, inconsistent)"
HELP = ("list the registered schemes by order with their cost, or check a stage list's order "
        "on random matrices")


# options that only apply alongside another (splitnet.cli._args.check_only_with)
_CHECK = ("with --check (a stage list's measurement)", lambda a: a.check is not None)
ONLY_WITH = {"order": _CHECK, "normalize": _CHECK}


def configure(p) -> None:
    p.add_argument("--check", metavar="STAGES|FILE", type=nonempty,
                   help="measure the order of a stage list 'field:coeff,...' (fields d/s/"
                        "diffusion, c/f/convection), of a file holding one (one stage per line, "
                        "# comments), of a registered name or of an s/f pattern, on random "
                        "non-commuting matrices; exit status 1 unless the verdict is OK "
                        "(mismatch, undetermined, or coefficients that do not sum to 1)")
    p.add_argument("--order", type=positive_int, default=None,
                   help="the order you claim (needed with a stage list; a registered scheme "
                        "declares its own)")
    p.add_argument("--normalize", action="store_true",
                   help="with --check: divide each field's coefficients by their sum first "
                        "(otherwise sums other than 1 fail as not consistent)")


MAX_COEFF = 1e6        # |stage coefficient| that --check measures (published ones are below 10)
MAX_FILE = 1 << 20     # bytes of a --check FILE


def _is_spec(text: str) -> bool:
    """A stage list, a registered name or an s/f pattern: told from the text alone, never
    looked up on disk (a long pattern is not a file name)."""
    from ...integrators.schemes import registry_name

    t = text.strip()
    return (":" in t or registry_name(t) is not None
            or (bool(t) and set(t.lower()) <= {"s", "f"}))


def _spec(text: str) -> tuple[str, bool]:
    """(stage text or name, whether it is a stage list): a stage list, name or pattern as
    given; anything else is a file (one stage per line), read as UTF-8 by the one rule for
    inputs (:func:`splitnet._io.input_kind`): a regular file, or a stream read once
    (``/dev/stdin``, a pipe), at most :data:`MAX_FILE` bytes."""
    import os

    from ..._io import input_kind, read_input

    if _is_spec(text):
        return text.strip(), ":" in text
    if not os.path.lexists(text):
        raise ValueError(f"--check {text!r}: no file of that name, and not a stage list "
                         f"'field:coeff,...', a scheme name or an s/f pattern")
    # a folder, a socket or a device is named as such (it is no "missing file")
    kind = input_kind(text, "--check", stream=True)
    size = os.stat(text).st_size
    if kind == "file" and size > MAX_FILE:
        raise ValueError(f"--check {text}: {size:,} bytes; a stage file holds one stage per "
                         f"line (at most {MAX_FILE:,} bytes)")
    data = read_input(text, f"--check {text}", limit=MAX_FILE)
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError as e:
        raise ValueError(f"--check {text}: not UTF-8 text (byte 0x{data[e.start]:02x} at "
                         f"offset {e.start})") from None


def _check_coefficients(stages) -> None:
    for i, st in enumerate(stages, 1):
        if abs(st.coeff) > MAX_COEFF:
            raise ValueError(f"stage {i} has coefficient {st.coeff:g}: --check measures "
                             f"coefficients up to {MAX_COEFF:g} in size (published methods "
                             f"stay below 10)")


def _check(args) -> int:
    from ...integrators.schemes import check_order
    from ...stagelists.stages import parse

    spec, is_list = _spec(args.check)
    if is_list:
        _check_coefficients(parse(spec))  # a malformed list: its own message first
        if args.order is None:
            raise ValueError("--check with a stage list needs --order P: the order the stages "
                             "are meant to have")
    res = check_order(spec, order=args.order, normalize=args.normalize)
    print(res.summary())
    if len(res.errors):
        print(f"{'h':>10} {'local error':>12}  fitted")
        for h, e, u in zip(res.step_sizes, res.errors, res.used):
            print(f"{h:10.4g} {e:12.3e}  {'yes' if u else 'no'}")
    return 0 if res.ok else 1


def _row(s) -> str:
    from ...stagelists.stages import merge

    diag = s.diagram()
    if len(diag) > 52:
        diag = diag[:49] + "..."
    order = "exact" if s.is_exact else str(s.order)
    return (f"{s.name:<22}{order:>6}{len(s.stages):>8}{len(merge(s.stages)):>8}"
            f"{s.is_symmetric!s:>11}  {diag}")


def run(args) -> int:
    check_only_with(args, ONLY_WITH)
    if args.check is not None:
        return _check(args)
    import warnings

    from ...integrators.schemes import available, get

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # restricted ones: listed as such below
        general = [get(n) for n in available()]
        restricted = [get(n) for n in available("restricted")]
        unsplit = [get(n) for n in available("unsplit")]
    head = f"{'name':<22}{'order':>6}{'stages':>8}{'merged':>8}{'symmetric':>11}  diagram"
    for order in sorted({s.order for s in general}):
        print(f"order {order}")
        print(head)
        for s in sorted((s for s in general if s.order == order), key=lambda s: len(s.stages)):
            print(_row(s))
        print()
    print("restricted problem class (order = as a general splitting; class order in brackets)")
    print(head)
    for s in restricted:
        print(_row(s) + f"  [order {s.class_order} for {s.problem_class}]")
    print("\nunsplit (one stage advancing the sum of the fields: the exact flow; order = that "
          "of the sub-flow method)")
    print(head)
    for s in unsplit:
        print(_row(s))
    print("\ncost: 'stages' = field evaluations per step with Euler sub-steps (stages are not "
          "merged; scheme.merged() merges them), 'merged' = sub-flows per step with adjacent "
          "stages of one field merged. s = diffusion (attention), f = convection "
          "(feed-forward); first stage applied first. Citations: docs/zoo.md.")
    return 0


__all__ = ["HELP", "MAX_COEFF", "MAX_FILE", "ONLY_WITH", "RANK", "VERDICT", "configure", "run"]
