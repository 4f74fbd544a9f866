"""Flows (splitnet.integrators.flows), stated where mutation testing found them unstated
(``python3 -m splitnet.dev mutate splitnet/integrators/flows.py``): a sum stage's field and what
it passes to each component (clock offsets, the cache, the memory, the padding), the step count
of an interval, integrate's defaults. docs/testing.md lists the mutants each test catches."""

from __future__ import annotations

import math

import pytest
import torch

import splitnet as sn
from splitnet.integrators.flows import (
    SumField,
    context_for,
    field_map,
    integrate,
    n_steps_for,
    step,
)
from splitnet.stagelists.stages import parse


class _Field:
    """A callable field ``f(t, x) = (scale + t) x`` that records the keywords it receives."""

    def __init__(self, scale=1.0, **flags):
        self.scale, self.calls = scale, []
        for k, v in flags.items():
            setattr(self, k, v)

    def __call__(self, t, x, **kw):
        self.calls.append((t, sorted(kw)))
        return (self.scale + t) * x


def test_a_sum_field_adds_its_components_each_on_its_own_clock():
    a, b = _Field(1.0), _Field(2.0)
    f = SumField([a, b], [0, 0.25])
    x = torch.tensor([1.0, -2.0], dtype=torch.float64)
    torch.testing.assert_close(f(0.5, x), (1.0 + 0.5) * x + (2.0 + 0.75) * x)
    assert [c[0] for c in a.calls + b.calls] == [0.5, 0.75]
    assert repr(f) == f"SumField([{a!r}, {b!r}])"


@pytest.mark.parametrize("flags,cache,mixes", [
    ([{"supports_cache": True}, {"mixes_tokens": False}], True, True),     # attention + MLP
    ([{"supports_cache": True}, {"supports_cache": True}], False, True),   # two takers
    ([{"supports_cache": True}, {}], False, True),         # a callable that does not say mixes
    ([{"mixes_tokens": False}, {"mixes_tokens": False}], False, False),
    ([{"supports_cache": True, "mixes_tokens": False}, {"mixes_tokens": False}], True, False),
])
def test_a_sum_supports_a_cache_when_one_component_takes_it_and_the_rest_are_positionwise(
        flags, cache, mixes):
    f = SumField([_Field(**fl) for fl in flags], [0, 0])
    assert (f.supports_cache, f.mixes_tokens) == (cache, mixes)


def test_a_sum_field_passes_the_cache_memory_and_padding_to_the_components_that_read_them():
    taker = _Field(supports_cache=True, uses_memory=True, masks_padding=True)
    plain = _Field(mixes_tokens=False)
    f = SumField([taker, plain], [0, 0])
    assert (f.uses_memory, f.masks_padding) == (True, True)
    assert (SumField([plain], [0]).uses_memory, SumField([plain], [0]).masks_padding) == (
        False, False)
    x = torch.ones(2)
    f(0.0, x, cache="C", memory="M", memory_mask="MM", padding_mask="P")
    assert taker.calls[-1][1] == ["cache", "memory", "memory_mask", "padding_mask"]
    assert plain.calls[-1][1] == []
    f(0.0, x)
    assert taker.calls[-1][1] == [] and plain.calls[-1][1] == []


def test_context_for_gives_each_field_what_it_reads_and_refuses_a_padding_leak():
    ctx = {"memory": 1, "memory_mask": 2, "memory_cache": 3, "padding_mask": 4, "other": 5}
    assert context_for(_Field(uses_memory=True, masks_padding=True), ctx) == {
        "memory": 1, "memory_mask": 2, "memory_cache": 3, "padding_mask": 4}
    assert context_for(_Field(mixes_tokens=False), ctx) == {}
    assert context_for(_Field(uses_memory=True), {"memory": 1}) == {"memory": 1}
    with pytest.raises(ValueError, match="_Field mixes tokens but cannot mask padding"):
        context_for(_Field(), ctx)


@pytest.mark.parametrize("span,h,want", [
    ((0.0, 1.0), 0.25, (0.0, 0.25, 4)),
    ((0.0, 1.0), 1.0, (0.0, 1.0, 1)),                     # one step
    (torch.tensor([-3.0, -1.0]), 0.5, (-3.0, 0.5, 4)),     # a tensor pair
    ((-3.0, -1.0), 0.5 * (1 + 4e-10), (-3.0, 0.5 * (1 + 4e-10), 4)),   # within 1e-9 of 2
    ((0.0, 4.0), 1.0 + 2e-10, (0.0, 1.0 + 2e-10, 4)),      # 8e-10 off in 4: within 1e-9 * 4
])
def test_an_interval_takes_a_whole_number_of_steps(span, h, want):
    assert n_steps_for(span, h) == want


@pytest.mark.parametrize("span,h,message", [
    ((0.0, 1.0), 0.3, "is not an integer"),
    ((-3.0, -1.0), 0.5 * (1 + 1e-9), "is not an integer"),   # 2e-9 off in 2: beyond 1e-9 * 2
    ((0.0, 0.0), 0.5, "must have T > t0"),
    ((0.0, 1.0, 2.0), 0.5, "must be a pair"),
    ((0.0, math.nan), 0.5, "t_span"),
    (torch.tensor([[0.0, 1.0]]), 0.5, "must be a pair"),
])
def test_an_interval_that_is_not_a_whole_number_of_steps_is_refused(span, h, message):
    with pytest.raises(ValueError, match=message):
        n_steps_for(span, h)


def test_integrate_defaults_to_the_exact_method_checked_states_and_no_progress_bar(capfd):
    stages = sn.schemes.get("strang").stages
    fields = {"diffusion": _Field(0.5), "convection": _Field(-0.25)}
    x0 = torch.tensor([1.0, 2.0], dtype=torch.float64)
    got = integrate(stages, fields, x0, (0.0, 0.5), 0.25)
    want = integrate(stages, fields, x0, (0.0, 0.5), 0.25, method="exact", check=True)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    x1 = step(stages, fields, x0, 0.0, 0.25, "exact")
    torch.testing.assert_close(got[1], x1, rtol=0, atol=0)
    assert capfd.readouterr().err == ""
    with pytest.raises(ValueError, match="x0"):
        integrate(stages, fields, torch.tensor([math.nan, 1.0]), (0.0, 0.5), 0.25)
    # finite fields whose Euler steps overflow the state: the step's own check names the scheme
    big = {"diffusion": lambda t, x: torch.full_like(x, 1.7e308), "convection": _Field(0.0)}
    with pytest.raises(ValueError, match="NaN/inf in the state after a scheme step from t=0"):
        integrate(parse("d:0.5,c:1,d:0.5"), big, x0, (0.0, 2.0), 2.0, method="euler")


def test_integrate_passes_the_clocks_the_name_and_shows_a_progress_bar_when_asked(capfd):
    stages = sn.schemes.get("strang").stages
    fields = {"diffusion": _Field(0.5), "convection": _Field(-0.25)}
    x0 = torch.tensor([1.0, 2.0], dtype=torch.float64)
    clocks = [0.0, 0.3, 0.9]
    got = integrate(stages, fields, x0, (0.0, 0.5), 0.25, clocks=clocks)
    x1 = step(stages, fields, x0, 0.0, 0.25, "exact", clocks=clocks)
    torch.testing.assert_close(got[1], x1, rtol=0, atol=0)
    assert not torch.allclose(got[1], step(stages, fields, x0, 0.0, 0.25, "exact"))
    capfd.readouterr()
    integrate(stages, fields, x0, (0.0, 0.5), 0.25, progress=True, name="mine")
    err = capfd.readouterr().err
    assert ("mine/exact" in err and "step/s" in err) or "s/step" in err, err
    big = {"diffusion": lambda t, x: torch.full_like(x, 1.7e308), "convection": _Field(0.0)}
    with pytest.raises(ValueError, match="NaN/inf in the state after a mine step"):
        integrate(parse("d:0.5,c:1,d:0.5"), big, x0, (0.0, 2.0), 2.0, method="euler",
                  name="mine")
    with pytest.raises(TypeError, match=r"integrate\(\) needs x0 and t_span"):
        integrate(stages, fields, None, (0.0, 0.5), 0.25)


def test_a_missing_field_is_named_with_the_scheme():
    with pytest.raises(ValueError, match="scheme 'scheme' advances diffusion, convection; no "
                                         "callable given for diffusion"):
        field_map(("diffusion", "convection"), convection=_Field())


def test_a_sum_stage_runs_each_component_on_its_own_clock_scaled_by_the_step():
    """``d:0.5, d+c:1, c:0.5``: in the sum stage the diffusion's clock is 0.5 step ahead of the
    convection's (which has not moved), so the sum's offsets are ``h (c_j - c_0)``."""
    from splitnet.integrators.flows import stage_fields

    stages = parse("d:0.5,d+c:1,c:0.5")
    a, b = _Field(1.0), _Field(2.0)
    for h, kw in ((1.0, {}), (0.5, {"step_size": 0.5})):     # 1.0: the default step size
        out = stage_fields(stages, {"diffusion": a, "convection": b}, **kw)
        assert out[0] is a and out[2] is b
        assert isinstance(out[1], SumField) and out[1].fields == [a, b]
        assert out[1].offsets == [0.0, -0.5 * h]
    x = torch.tensor([1.0, 3.0], dtype=torch.float64)
    torch.testing.assert_close(out[1](0.5, x), (1.0 + 0.5) * x + (2.0 + 0.25) * x)


def test_step_checks_by_default_and_passes_the_method_options():
    stages = sn.schemes.get("strang").stages
    x0 = torch.tensor([1.0, 2.0], dtype=torch.float64)
    big = {"diffusion": lambda t, x: torch.full_like(x, 1.7e308), "convection": _Field(0.0)}
    with pytest.raises(ValueError, match="NaN/inf"):
        step(stages, big, x0, 0.0, 2.0, "euler")
    assert not torch.isfinite(step(stages, big, x0, 0.0, 2.0, "euler", check=False)).all()
    assert not torch.isfinite(integrate(stages, big, x0, (0.0, 2.0), 2.0, method="euler",
                                        check=False)[-1]).all()
    fields = {"diffusion": _Field(0.5), "convection": _Field(-0.25)}
    for call in (lambda: step(stages, fields, x0, 0.0, 0.25, "euler", rtol=1e-3),
                 lambda: integrate(stages, fields, x0, (0.0, 0.5), 0.25, method="euler",
                                   rtol=1e-3)):
        with pytest.raises(ValueError, match="its options"):
            call()
    loose = step(stages, fields, x0, 0.0, 0.25, "exact", rtol=1e-2, atol=1e-2)
    tight = step(stages, fields, x0, 0.0, 0.25, "exact")
    assert not torch.equal(loose, tight)
    torch.testing.assert_close(loose, tight, rtol=0.1, atol=0.1)     # the same flow, looser


def test_the_interval_tolerance_is_relative_to_at_least_one():
    """``|n h - (T - t0)| <= 1e-9 max(1, |T - t0|)``: 0.5 off by 1.5e-9 is refused."""
    with pytest.raises(ValueError, match="not an integer"):
        n_steps_for((0.0, 0.5 + 1.5e-9), 0.25)
    assert n_steps_for((0.0, 0.5 + 0.5e-9), 0.25)[2] == 2


def test_the_cache_itself_reaches_the_component_that_takes_it():
    seen = []

    class Taker(_Field):
        def __call__(self, t, x, **kw):
            seen.append(kw.get("cache"))
            return super().__call__(t, x, **kw)

    cache = object()
    SumField([Taker(supports_cache=True), _Field(mixes_tokens=False)], [0, 0])(
        0.0, torch.ones(2), cache=cache)
    assert seen == [cache]


def test_a_field_the_scheme_does_not_advance_is_refused():
    f = _Field()
    with pytest.raises(ValueError, match="cross"):
        field_map(["diffusion", "convection"], fields={"diffusion": f, "convection": f,
                                                         "cross": f})


def test_integrate_passes_the_method_options_to_every_step():
    stages = sn.schemes.get("strang").stages
    fields = {"diffusion": _Field(0.5), "convection": _Field(-0.25)}
    x0 = torch.tensor([1.0, 2.0], dtype=torch.float64)
    loose = integrate(stages, fields, x0, (0.0, 0.5), 0.25, rtol=1e-2, atol=1e-2)
    tight = integrate(stages, fields, x0, (0.0, 0.5), 0.25)
    assert not torch.equal(loose[-1], tight[-1])


def test_step_runs_a_sum_stage_on_clocks_scaled_by_its_step_size():
    """``step`` at h = 0.5 over ``d:0.5, d+c:1, c:0.5`` with Euler sub-steps and fields
    ``(s + t) x``: the sum stage starts at t + h/2 (the diffusion's clock) and evaluates the
    convection h/2 behind it, at its own clock t; the last stage starts at t + h."""
    a, b = _Field(1.0), _Field(2.0)
    x0, t, h = torch.tensor([1.0, -2.0], dtype=torch.float64), 0.3, 0.5
    x1 = x0 + 0.5 * h * (1.0 + t) * x0
    x2 = x1 + h * ((1.0 + t + 0.5 * h) * x1 + (2.0 + t) * x1)
    x3 = x2 + 0.5 * h * (2.0 + t + h) * x2
    got = step(parse("d:0.5,d+c:1,c:0.5"), {"diffusion": a, "convection": b}, x0, t, h, "euler")
    torch.testing.assert_close(got, x3, rtol=0, atol=1e-15)


def test_step_starts_at_time_zero_with_the_exact_method_by_default():
    stages = sn.schemes.get("strang").stages
    fields = {"diffusion": _Field(0.5), "convection": _Field(-0.25)}
    x0 = torch.tensor([1.0, 2.0], dtype=torch.float64)
    want = step(stages, fields, x0, 0.0, 0.25, "exact")
    torch.testing.assert_close(step(stages, fields, x0, step_size=0.25), want, rtol=0, atol=0)
    assert not torch.allclose(step(stages, fields, x0, 1.0, 0.25, "exact"), want)
    assert not torch.allclose(step(stages, fields, x0, 0.0, 0.25, "euler"), want)
