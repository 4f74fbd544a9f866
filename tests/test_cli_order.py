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
    rc, out, _ = _run(["order", "--schemes", "strang,yoshida4", "--methods", "rk4,euler",
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


def _sections(out: str) -> dict[str, str]:
    """The listing's blocks, keyed by their first line ("order 4", "restricted problem ...")."""
    return {b.splitlines()[0]: b for b in out.split("\n\n") if b.strip()}


def test_schemes_lists_the_registry_grouped_by_order_with_cost(capsys):
    rc, out, _ = _run(["schemes"], capsys)
    assert rc == 0
    blocks = _sections(out)
    for name in sn.schemes.available():          # every general scheme, in its order's block
        s = sn.schemes.get(name)
        merged = len(sn.stages.merge(s.stages))
        row = rf"^{re.escape(name)}\s+{s.order}\s+{len(s.stages)}\s+{merged}\s+{s.is_symmetric}\s"
        assert re.search(row, blocks[f"order {s.order}"], re.MULTILINE), name
    for name, order, stages, merged, sym in [("lie-trotter", 1, 2, 2, False),
                                             ("strang", 2, 3, 3, True),
                                             ("yoshida4", 4, 9, 7, True),
                                             ("forest-ruth4", 4, 7, 7, True),
                                             ("yoshida8", 8, 45, 31, True),
                                             ("sofroniou-spaletta10", 10, 105, 71, True)]:
        assert re.search(rf"^{name}\s+{order}\s+{stages}\s+{merged}\s+{sym}\s",
                         blocks[f"order {order}"], re.MULTILINE), name
    restricted = next(b for k, b in blocks.items() if k.startswith("restricted"))
    for name in sn.schemes.available("restricted"):
        assert re.search(rf"^{re.escape(name)}\s+\d+\s.*\[order \d+ for rkn\]$", restricted,
                         re.MULTILINE), name
        assert name not in blocks["order 3"] + blocks["order 4"]
    assert "not merged" in out and "field evaluations per step" in out


@pytest.mark.parametrize("spec,order,rc", [
    ("yoshida8", None, 0), ("f:0.5,s:1,f:0.5", 2, 0), ("d:1,c:1", 2, 1), ("sfsf", None, 0),
    ("strang", 2, 0), ("strang", 3, 1), ("kahan-li10", None, 0)])
def test_schemes_check(spec, order, rc, capsys):
    argv = ["schemes", "--check", spec] + ([] if order is None else ["--order", str(order)])
    got, out, _ = _run(argv, capsys)
    assert got == rc
    assert ("OK" if rc == 0 else "MISMATCH") in out


def test_schemes_check_reads_a_file_of_coefficients(tmp_path, capsys):
    """One stage per line, # comments: Yoshida 6 written out as a file."""
    s = sn.schemes.get("yoshida6")
    lines = ["# Yoshida 1990, order 6, solution A: 21 stages, first applied first"]
    lines += [f"{'c' if st.field == 'convection' else 'd'}: {st.coeff!r}   # stage {i}"
              for i, st in enumerate(s.stages, 1)]
    path = tmp_path / "yoshida6.txt"
    path.write_text("\n".join(lines) + "\n")
    rc, out, _ = _run(["schemes", "--check", str(path), "--order", "6"], capsys)
    assert rc == 0 and "declared order 6" in out and "OK" in out
    rc, out, _ = _run(["schemes", "--check", str(path), "--order", "8"], capsys)
    assert rc == 1 and "MISMATCH" in out
    doubled = tmp_path / "doubled.txt"
    doubled.write_text("\n".join(f"{ln.split(':')[0]}: {2 * float(ln.split(':')[1].split('#')[0])}"
                                 for ln in lines[1:]))
    rc, out, _ = _run(["schemes", "--check", str(doubled), "--order", "6"], capsys)
    assert rc == 1 and "not consistent" in out and "INCONSISTENT" in out
    rc, out, _ = _run(["schemes", "--check", str(doubled), "--order", "6", "--normalize"], capsys)
    assert rc == 0 and "normalised" in out


def test_schemes_check_bad_stage_list(tmp_path, capsys):
    rc, _, err = _run(["schemes", "--check", "3q:1,c:1"], capsys)
    assert rc == 2 and "'3q' is not a field" in err
    rc, _, err = _run(["schemes", "--check", str(tmp_path / "missing.txt"), "--order", "2"],
                      capsys)
    assert rc == 2 and "no file" in err and "Traceback" not in err
    bad = tmp_path / "bad.txt"
    bad.write_text("c: 0.5\nd: one\nc: 0.5\n")
    rc, _, err = _run(["schemes", "--check", str(bad), "--order", "2"], capsys)
    assert rc == 2 and "stage 2 'd: one': coefficient 'one' is not a number" in err
    rc, _, err = _run(["schemes", "--check", "c:0.5,d:1,c:0.5"], capsys)
    assert rc == 2 and "needs --order" in err


@pytest.mark.parametrize("cmd", list(cli.COMMANDS))
def test_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([cmd, "--help"])
    assert e.value.code == 0
    assert f"usage: splitnet {cmd}" in capsys.readouterr().out


def _option_help(flag: str) -> dict[str, str]:
    """command -> the help of its option ``flag``, for every command that has it."""
    out = {}
    for name in cli.COMMANDS:
        action = cli.build_parser(name)._option_string_actions.get(flag)
        if action is not None:
            out[name] = action.help
    return out


def test_an_option_several_commands_take_says_the_same_everywhere():
    """--checkpoint, --hf, --trust-checkpoint and --device are declared once (cli/_args.py):
    every command that loads a model offers --trust-checkpoint with train's words, --device
    with train's words, and a --checkpoint that reads a 'splitnet train' run."""
    from splitnet.training.config import option_fields

    train_help = {f.name: f.metadata["help"] for _, f in option_fields("lm")}
    checkpoint, trust = _option_help("--checkpoint"), _option_help("--trust-checkpoint")
    assert {"describe", "export", "refine", "sample", "trajectories", "translate"} <= set(
        checkpoint)
    assert set(trust) == set(checkpoint) | {"train"}
    assert set(trust.values()) == {train_help["trust_checkpoint"]}
    for text in checkpoint.values():
        assert text.startswith("directory holding checkpoint.pt from 'splitnet train"), text
    device = _option_help("--device")
    assert {"sample", "refine", "translate", "train"} <= set(device)
    assert {text.replace(" [may change on --resume]", "") for text in device.values()} == {
        f"{train_help['device']} (default auto)"}
    hf = _option_help("--hf")
    assert set(hf) == {"describe", "refine", "sample", "trajectories"}
    assert all(t.startswith("a Hugging Face model directory (GPT-2, GPT-NeoX, Llama, Qwen2, "
                            "Mistral, or one written by 'splitnet export')") and
               t.endswith("pip install 'splitnet[hf]')") for t in hf.values()), hf
    threads = {k: v for k, v in _option_help("--threads").items() if k != "train"}
    assert len(threads) >= 6 and len(set(threads.values())) == 1, threads


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
