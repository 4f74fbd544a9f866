"""`splitnet order` and `splitnet schemes` (the numerical core's commands)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

import splitnet as sn
from splitnet import cli


@pytest.fixture(autouse=True)
def _keep_default_dtype():
    """`splitnet order` sets float64 as the default dtype for its process; undo it here so the
    in-process calls do not leak into other test modules."""
    d = torch.get_default_dtype()
    yield
    torch.set_default_dtype(d)


def _run(argv, capsys):
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_order_prints_measured_against_expected_and_writes_the_plot(tmp_path, capsys):
    png = tmp_path / "order.png"
    rc, out, _ = _run(["order", "--schemes", "strang,yoshida4", "--method", "rk4,euler",
                       "--out", str(png), "--strict"], capsys)
    assert rc == 0
    assert "local slope" in out and "order p" in out
    rows = re.findall(r"^(\S+)\s+(\S+)\s+(\d+)\s+(-?\d+\.\d+)\s+(\d+)\s+(\S+)$", out,
                      re.MULTILINE)
    got = {(r[0], r[1]): (int(r[2]), float(r[3]), int(r[4]), r[5]) for r in rows}
    assert set(got) == {("strang", "rk4"), ("strang", "euler"), ("yoshida4", "rk4"),
                        ("yoshida4", "euler")}
    # order p and the local slope p + 1, named apart
    assert got[("yoshida4", "rk4")][:1] == (4,) and got[("yoshida4", "rk4")][2] == 5
    assert got[("strang", "euler")][0] == 1 and got[("strang", "euler")][2] == 2
    for order, measured, expected, verdict in got.values():
        assert expected == order + 1
        assert abs(measured - expected) <= 0.3 and verdict == "ok"
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_order_global_kind_and_a_pattern(tmp_path, capsys):
    rc, out, _ = _run(["order", "--schemes", "fsf", "--method", "midpoint", "--kind", "global",
                       "--out", str(tmp_path / "g.png")], capsys)
    assert rc == 0 and "global error" in out
    assert "global slope" in out
    assert re.search(r"^fsf\s+midpoint\s+2\s+\d\.\d\d\s+2\s+ok$", out, re.MULTILINE), out


def test_order_strict_fails_on_a_mismatch(tmp_path, capsys):
    """Step sizes far outside the asymptotic range: Yoshida 4 with Euler at h = 2, 1 does not
    show its slope; --strict turns the MISMATCH into exit status 1."""
    rc, out, _ = _run(["order", "--schemes", "yoshida4", "--method", "euler", "--step-sizes",
                       "2,1", "--out", str(tmp_path / "m.png"), "--strict"], capsys)
    assert "MISMATCH" in out and rc == 1


def test_order_bad_input_exits_2_with_the_message(tmp_path, capsys):
    rc, _, err = _run(["order", "--schemes", "nonsense", "--out", str(tmp_path / "x.png")],
                      capsys)
    assert rc == 2 and "unknown scheme 'nonsense'" in err
    rc, _, err = _run(["order", "--method", "rk5", "--out", str(tmp_path / "x.png")], capsys)
    assert rc == 2 and "unknown method 'rk5'" in err


def test_schemes_lists_the_registry(capsys):
    rc, out, _ = _run(["schemes"], capsys)
    assert rc == 0
    for name in sn.schemes.available():          # every registered scheme, with its data
        s = sn.schemes.get(name)
        row = rf"^{re.escape(name)}\s+{s.order}\s+{len(s.stages)}\s+{s.is_symmetric}\s"
        assert re.search(row, out, re.MULTILINE), name
    for name, order, stages, sym in [("lie-trotter", 1, 2, False), ("strang", 2, 3, True),
                                     ("yoshida4", 4, 9, True), ("yoshida8", 8, 45, True)]:
        assert re.search(rf"^{name}\s+{order}\s+{stages}\s+{sym}\s", out, re.MULTILINE), name
    assert "not merged" in out


@pytest.mark.parametrize("spec,order,rc", [
    ("yoshida8", None, 0), ("f:0.5,s:1,f:0.5", 2, 0), ("d:1,c:1", 2, 1), ("sfsf", None, 0),
    ("strang", 2, 0), ("strang", 3, 1)])
def test_schemes_check(spec, order, rc, capsys):
    argv = ["schemes", "--check", spec] + ([] if order is None else ["--order", str(order)])
    got, out, _ = _run(argv, capsys)
    assert got == rc
    assert ("OK" if rc == 0 else "MISMATCH") in out


def test_schemes_check_bad_stage_list(capsys):
    rc, _, err = _run(["schemes", "--check", "q:1,c:1"], capsys)
    assert rc == 2 and "unknown field" in err


@pytest.mark.parametrize("cmd", ["order", "schemes", "describe", "train", "trajectories"])
def test_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([cmd, "--help"])
    assert e.value.code == 0
    assert "usage: splitnet" in capsys.readouterr().out


def test_installed_splitnet_command_runs():
    """The console script of [project.scripts], as a user types it."""
    import shutil

    exe = shutil.which("splitnet")
    assert exe is not None, "the `splitnet` console script is not installed on PATH"
    r = subprocess.run([exe, "schemes"], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0 and "yoshida8" in r.stdout


@pytest.mark.parametrize("module", ["splitnet"])
def test_console_entry_point_runs(module):
    r = subprocess.run([sys.executable, "-m", module, "schemes"], capture_output=True,
                       check=False, text=True, timeout=120)
    assert r.returncode == 0 and "blanes-moan4" in r.stdout


@pytest.mark.slow
def test_default_order_command_passes_strict(tmp_path):
    """The README command as is: five schemes, exact sub-flows, local error."""
    r = subprocess.run(["splitnet", "order", "--strict", "--out", str(tmp_path / "o.png")],
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(" ok") == 5
