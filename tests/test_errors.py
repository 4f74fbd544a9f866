"""Bad input: every row of docs/errors.md, raised and checked.

The table in docs/errors.md is generated from ``CASES`` below (``python3 tests/test_errors.py``
rewrites it) and ``test_the_table_in_docs_is_current`` fails when the two drift apart.
Each case: (what is wrong, the call, the exception type, a regex the message must match: the
words that name the problem).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

import splitnet as sn

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"


def _fields():
    a = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([[0.5, 0.0], [0.2, -0.3]], dtype=torch.float64)
    return (lambda t, x: x @ a.T), (lambda t, x: x @ b.T), torch.tensor([1.0, 0.5],
                                                                          dtype=torch.float64)


def _step(**kw):
    F, G, x0 = _fields()
    args = {"diffusion": F, "convection": G, "x": x0, "t": 0.0, "step_size": 0.1, "method": "rk4"}
    args.update(kw)
    return sn.schemes.get(args.pop("scheme", "strang")).step(**args)


def _integrate(**kw):
    F, G, x0 = _fields()
    args = {"diffusion": F, "convection": G, "x0": x0, "t_span": (0.0, 1.0), "step_size": 0.25,
                "method": "rk4"}
    args.update(kw)
    return sn.schemes.get("strang").integrate(**args)


def _reference(**kw):
    F, G, x0 = _fields()
    args = {"diffusion": F, "convection": G, "x0": x0, "times": torch.tensor([0.0, 0.1],
                                                                      dtype=torch.float64)}
    args.update(kw)
    return sn.reference_solution(**args)


def _study(**kw):
    F, G, x0 = _fields()
    args = {"diffusion": F, "convection": G, "x0": x0, "step_sizes": [0.2, 0.1], "kind": "local",
                "method": "rk4"}
    args.update(kw)
    return sn.convergence_study("strang", **args)


def _bad_shape(t, x):
    return torch.zeros(x.shape[0] + 1, dtype=x.dtype)


def _nan_field(t, x):
    return x * float("nan")


def _mutate():
    s = sn.schemes.get("strang")
    s.order = 4


S = sn.SplittingScheme.from_stages
D, C = "diffusion", "convection"

CASES = [
    # --- schemes -------------------------------------------------------------------------
    ("unknown scheme name", lambda: sn.schemes.get("yoshida5"),
     ValueError, r"unknown scheme 'yoshida5'; available: lie-trotter, strang"),
    ("unknown scheme or pattern in `resolve`", lambda: sn.schemes.resolve("sfx"),
     ValueError, r"unknown scheme 'sfx'.*pattern"),
    ("stage with an unknown field name", lambda: S([("attention", 1.0), (C, 1.0)]),
     ValueError, r"unknown field 'attention'"),
    ("stage that is not a (field, coeff) pair", lambda: S([(D, 1.0, 2.0), (C, 1.0)]),
     TypeError, r"a stage is a Stage or a \(field, coeff\) pair"),
    ("non-numeric coefficient", lambda: S([(D, "1"), (C, 1.0)]),
     TypeError, r"coeff must be a real number, got str"),
    ("NaN coefficient", lambda: S([(D, float("nan")), (C, 1.0)]),
     ValueError, r"coefficient must be finite, got nan"),
    ("infinite coefficient", lambda: S([(D, float("inf")), (C, 1.0)]),
     ValueError, r"coefficient must be finite, got inf"),
    ("per-field coefficient sums differ", lambda: S([(D, 1.0), (C, 0.5)]),
     ValueError, r"diffusion coefficients sum to 1 but convection ones to 0.5"),
    ("a field's coefficients sum to zero", lambda: S([(D, 1.0), (C, 0.5), (C, -0.5)]),
     ValueError, r"convection coefficients sum to zero"),
    ("a field is missing", lambda: S([(D, 1.0)]),
     ValueError, r"has no convection stage"),
    ("empty stage list", lambda: S([]),
     ValueError, r"has no stages"),
    ("declared order the stages do not reach (Strang's stages declared order 4)",
     lambda: S([(C, 0.5), (D, 1.0), (C, 0.5)], order=4, name="mine"),
     ValueError, r"declares order 4 but its stages measure 2\.0"),
    ("declared order 2 but the second-order condition fails",
     lambda: S([(D, 1.0), (C, 1.0)], order=2),
     ValueError, r"declares order 2 but fails the second-order condition"),
    ("order that is not a positive int", lambda: S([(D, 1.0), (C, 1.0)], order=0),
     ValueError, r"order must be a positive int, got 0"),
    ("pattern with letters other than s/f", lambda: sn.schemes.from_pattern("sfa"),
     ValueError, r"has letters \['a'\]; use only 's'"),
    ("pattern without one of the fields", lambda: sn.schemes.from_pattern("sss"),
     ValueError, r"must contain both 's' and 'f'"),
    ("unknown group in `available`", lambda: sn.schemes.available("zoo"),
     ValueError, r"kind must be one of general, core, restricted, all, got 'zoo'"),
    ("registering a name twice", lambda: sn.schemes.register("strang", sn.schemes.Strang),
     ValueError, r"scheme 'strang' is already registered"),
    ("changing a scheme after construction", _mutate,
     AttributeError, r"SplittingScheme is immutable \(tried to set 'order'\)"),
    # --- stepping --------------------------------------------------------------------------
    ("step size zero", lambda: _step(step_size=0.0),
     ValueError, r"step_size must be nonzero, got 0.0"),
    ("negative step size in integrate", lambda: _integrate(step_size=-0.25),
     ValueError, r"step_size must be positive, got -0.25"),
    ("step size missing", lambda: _step(step_size=None),
     TypeError, r"step\(\) needs step_size"),
    ("step size not a number", lambda: _step(step_size="0.1"),
     TypeError, r"step_size must be a real number, got '0.1'"),
    ("non-integer number of steps", lambda: _integrate(step_size=0.3),
     ValueError, r"\(T - t0\) / h = 3.33333333333 is not an integer"),
    ("t_span with T <= t0", lambda: _integrate(t_span=(1.0, 0.0)),
     ValueError, r"t_span must have T > t0"),
    ("t_span not a pair", lambda: _integrate(t_span=1.0),
     ValueError, r"t_span must be a pair \(t0, T\), got 1.0"),
    ("unknown sub-flow method", lambda: _step(method="rk5"),
     ValueError, r"unknown method 'rk5'; available: euler, midpoint, rk4, exact"),
    ("option not applicable to the method", lambda: _step(method="euler", rtol=1e-8),
     ValueError, r"option\(s\) \['rtol'\] do not apply to method 'euler'"),
    ("unknown option for exact sub-flows", lambda: _step(method="exact", rtl=1e-8),
     ValueError, r"option\(s\) \['rtl'\] do not apply to method 'exact'"),
    ("non-positive solver tolerance", lambda: _step(method="exact", rtol=-1.0),
     ValueError, r"rtol must be a positive number, got -1.0"),
    ("state not a tensor", lambda: _step(x=[1.0, 0.5]),
     TypeError, r"x must be a torch.Tensor, got list"),
    ("integer state", lambda: _step(x=torch.tensor([1, 2])),
     TypeError, r"x must be a floating tensor, got dtype torch.int64"),
    ("NaN in the initial state", lambda: _integrate(x0=torch.tensor([float("nan"), 1.0],
                                                                    dtype=torch.float64)),
     ValueError, r"x0 contains NaN or inf"),
    ("field output shape differs from the state's", lambda: _step(diffusion=_bad_shape),
     ValueError, r"diffusion field returned shape \(3,\) for a state of shape \(2,\)"),
    ("field output dtype differs from the state's",
     lambda: _step(convection=lambda t, x: x.float()),
     TypeError, (r"convection field returned dtype torch.float32 for a state of dtype "
                r"torch.float64")),
    ("field returns something other than a tensor",
     lambda: _step(convection=lambda t, x: x.tolist()),
     TypeError, r"convection field returned list, not a tensor"),
    ("field produces NaN", lambda: _step(convection=_nan_field),
     ValueError, r"convection field produced NaN/inf at t=0"),
    ("field not callable", lambda: _step(diffusion=3.0),
     TypeError, r"diffusion field must be callable f\(t, x\), got float"),
    ("wrong number of per-stage fields", lambda: _step(convection=[_fields()[1]]),
     ValueError, r"1 convection fields given for the 2 convection stages of 'strang'"),
    # --- reference and analysis -----------------------------------------------------------
    ("integer times", lambda: _reference(times=torch.tensor([0, 1])),
     TypeError, r"times must be a floating tensor, got dtype torch.int64"),
    ("times not a tensor", lambda: _reference(times=[0.0, 0.1]),
     TypeError, r"times must be a 1-D floating torch.Tensor, got list"),
    ("times not monotone", lambda: _reference(times=torch.tensor([0.0, 0.2, 0.1])),
     ValueError, r"times must be strictly increasing"),
    ("a single time", lambda: _reference(times=torch.tensor([0.0])),
     ValueError, r"times must be 1-D with at least 2 entries"),
    ("unknown error kind", lambda: _study(kind="midway"),
     ValueError, r"kind must be 'local' or 'global', got 'midway'"),
    ("fewer than two step sizes", lambda: _study(step_sizes=[0.1]),
     ValueError, r"step_sizes needs at least two distinct values"),
    ("global study whose step does not divide [t0, T]",
     lambda: _study(kind="global", step_sizes=[0.3, 0.1]),
     ValueError, r"is not an integer"),
    ("work-precision with exact sub-flows",
     lambda: sn.work_precision(["strang"], ["exact"], *_fields(), [0.5, 0.25],
                               progress=False),
     ValueError, r"'exact' has no fixed cost"),
    ("reference solution with a field of the wrong output shape",
     lambda: _reference(diffusion=_bad_shape),
     ValueError, r"diffusion field returned shape \(3,\) for a state of shape \(2,\)"),
    ("Lie bracket with a field of the wrong output shape",
     lambda: sn.lie_bracket(_bad_shape, _fields()[1], _fields()[2]),
     ValueError, r"F field returned shape \(3,\)"),
    ("attention field on states of another width",
     lambda: sn.fields.Attention(8, 2)(0.0, torch.zeros(4, 7)),
     ValueError, r"Attention expects states of width d_model=8, got shape \(4, 7\)"),
    ("feed-forward field on states of another width",
     lambda: sn.fields.FeedForward(8, 16)(0.0, torch.zeros(4, 7)),
     ValueError, r"FeedForward expects states of width d_model=8, got shape \(4, 7\)"),
    ("Lie bracket of a non-callable", lambda: sn.lie_bracket(None, _fields()[1], _fields()[2]),
     TypeError, r"F must be a callable field"),
]


def _message(fn) -> tuple[type, str]:
    try:
        fn()
    except Exception as e:
        return type(e), str(e)
    return type(None), "(nothing raised)"


@pytest.mark.parametrize("what,fn,exc,pattern", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_clear_error(what, fn, exc, pattern):
    with pytest.raises(exc) as info:
        fn()
    assert type(info.value) is exc
    assert re.search(pattern, str(info.value)), str(info.value)


def render() -> str:
    lines = [
        "# Bad input and the errors it raises",
        "",
        ("Generated from `CASES` in `tests/test_errors.py` by `python3 tests/test_errors.py`; "
        "every row is a test, and a test fails if this file is out of date. Messages are the "
        "library's own, verbatim."),
        "",
        "| # | bad input | exception | message |",
        "|---|---|---|---|",
    ]
    for i, (what, fn, _exc, _pat) in enumerate(CASES, 1):
        typ, msg = _message(fn)
        msg = msg.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {i} | {what} | `{typ.__name__}` | {msg} |")
    lines.append("")
    lines.append("The command line turns these into `splitnet <command>: error: <message>` on "
                 "stderr and exit status 2 (see `tests/test_cli_order.py`).")
    lines.append("")
    lines.append("Two deliberate exceptions to 'step_size must be positive': `scheme.step` "
                 "accepts a negative step (the backward step, so that `step(h)` then "
                 "`step(-h)` tests symmetry), and only zero is refused there; `integrate`, "
                 "`layer`, `convergence_study` and `SplitTransformer` refuse any step <= 0. The "
                 "network layer (`SplitLayer`, `SplitTransformer.forward`) checks no NaN on its "
                 "hot path; `step`, `integrate` and the analysis functions do.")
    return "\n".join(lines) + "\n"


def test_the_table_in_docs_is_current():
    assert len(CASES) >= 12
    assert DOC.read_text() == render(), "run: python3 tests/test_errors.py"


if __name__ == "__main__":
    DOC.write_text(render())
    print(f"wrote {DOC} ({len(CASES)} rows)", file=sys.stderr)
