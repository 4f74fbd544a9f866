"""Issue 62's hostile pass: the round's surfaces tried as a new user would, each input with what
must happen, and a count of those where something else did.

    OMP_NUM_THREADS=1 python3 benchmarks/hostile_pass.py [--out DIR] [--only GROUP]

An input *fails* when the outcome is not the one a user is owed: a refusal that is not one line
(exit 2 from the command line; a ValueError or TypeError from Python), a traceback, an exit 0 or
a result for nonsense, a hang (each input runs under a time limit), or a value that is wrong.
Prints one line per failure and the totals (inputs, failed); the distinct defects and any data
lost are judged from the failures by hand (see the issue's closing note).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "2", "--context", "16",
        "--batch-size", "4", "--warmup", "0", "--threads", "1", "--no-progress", "--no-plot",
        "--eval-windows", "4"]
TEXT = "".join(f"def f{i}(x):\n    return x * {i % 7} + {i * 7919 % 1000}\n" for i in range(300))


class Pass:
    def __init__(self):
        self.inputs, self.failures = 0, []

    def fail(self, group, what, why):
        self.failures.append((group, what, why))
        print(f"FAIL [{group}] {what}: {why}", flush=True)

    # -- the command line, in this process (tracebacks escape main and are caught here)
    def cli(self, group, argv, want, pattern=None, limit=120):
        """``want``: "refuse" (exit 2, one line), "ok" (exit 0) or an exit status."""
        from splitnet.cli import main

        self.inputs += 1
        out, err = io.StringIO(), io.StringIO()
        what = "splitnet " + " ".join(map(str, argv))
        signal.alarm(limit)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rc = main([str(a) for a in argv])
        except SystemExit as e:
            rc = e.code
        except TimeoutError:
            return self.fail(group, what, f"no answer in {limit} s")
        except BaseException as e:
            return self.fail(group, what, f"traceback: {type(e).__name__}: {e}")
        finally:
            signal.alarm(0)
        e = err.getvalue()
        if want == "refuse":
            lines = [x for x in e.splitlines() if x.strip()]
            if rc != 2 or len(lines) != 1:
                return self.fail(group, what, f"exit {rc}, stderr {e.strip()[:300]!r}")
            if pattern and pattern not in e:
                return self.fail(group, what, f"says {e.strip()[:300]!r}, not {pattern!r}")
        elif rc != (0 if want == "ok" else want):
            return self.fail(group, what, f"exit {rc} (want {want}): {e.strip()[-300:]!r}")
        return out.getvalue(), e

    # -- Python calls
    def py(self, group, what, fn, want="refuse", limit=60):
        """``want``: "refuse" (ValueError / TypeError, one line) or a predicate of the result."""
        self.inputs += 1
        signal.alarm(limit)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = fn()
        except TimeoutError:
            return self.fail(group, what, f"no answer in {limit} s")
        except (ValueError, TypeError) as e:
            signal.alarm(0)
            if want != "refuse":
                return self.fail(group, what, f"refused: {e}")
            if "\n" in str(e).strip() or not str(e).strip():
                return self.fail(group, what, f"message not one line: {str(e)[:200]!r}")
            return None
        except BaseException as e:
            signal.alarm(0)
            return self.fail(group, what, f"{type(e).__name__}: {str(e)[:200]}")
        finally:
            signal.alarm(0)
        if want == "refuse":
            return self.fail(group, what, f"accepted, returned {str(got)[:120]}")
        if not want(got):
            return self.fail(group, what, f"wrong result {str(got)[:160]}")
        return got


def _alarm(signum, frame):
    raise TimeoutError


# ---------------------------------------------------------------------------------------------


def depth_inputs(p: Pass, tmp: Path):
    import torch

    import splitnet as sn

    def lm(**kw):
        torch.manual_seed(0)
        return sn.SplitTransformer(vocab_size=32, d_model=16, n_heads=2, n_layers=kw.pop(
            "n_layers", 4), max_len=16, **kw)

    g = "depth_basis"
    for basis in ["legendre:0", "bernstein:-1", "foo:3", "legendre:", ":3", "legendre:3.5",
                  "legendre:1e3", "legendre:+2", "bernstein:0", "legendre:2:3", "legendre:1025",
                  3, ["legendre", 2], "", "none", "legendre:0x2", True]:
        p.py(g, f"SplitConfig(depth_basis={basis!r})",
             lambda b=basis: sn.models.SplitConfig(depth_basis=b))
    # taken, stored in the one spelling
    for basis, spec in [("legendre:2", "legendre:2"), ("bernstein:3", "bernstein:3"),
                        ("linear:2", "linear:2"), ("LEGENDRE:2", "legendre:2"),
                        (" legendre:2", "legendre:2"), ("legendre:2 ", "legendre:2"),
                        ("linear:1", "linear:1"), ("legendre:\u0663", "legendre:3")]:
        p.py(g, f"SplitConfig(depth_basis={basis!r}) is {spec!r}",
             lambda b=basis: sn.models.SplitConfig(depth_basis=b),
             want=lambda c, s=spec: c.depth_basis == s)
    g = "at_depth"
    m = lm()
    for n in [0, -1, 2.5, "4", None, float("nan"), True, 3, 10 ** 9, [2, 3]]:
        p.py(g, f"at_depth(layered 4, {n!r})", lambda n=n: sn.depth.at_depth(m, n))
    p.py(g, "at_depth(layered 4, 8)", lambda: sn.depth.at_depth(m, 8),
         want=lambda r: r.config.n_layers == 8)
    p.py(g, "at_depth(layered 4, 2)", lambda: sn.depth.at_depth(m, 2),
         want=lambda r: r.config.n_layers == 2)
    p.py(g, "at_depth(layered 4, 4) is the model's function",
         lambda: _same(sn.depth.at_depth(m, 4), m), want=bool)
    e = lm(depth_basis="legendre:2")
    for n in [0, -3, 1.5, float("inf"), "x"]:
        p.py(g, f"at_depth(legendre:2, {n!r})", lambda n=n: sn.depth.at_depth(e, n))
    p.py(g, "at_depth(legendre:2, 7)", lambda: sn.depth.at_depth(e, 7),
         want=lambda r: r.config.n_layers == 7)
    p.py(g, "at_depth(legendre:2, 1000000)", lambda: sn.depth.at_depth(e, 10 ** 6))
    p.py(g, "at_depth(a Linear)", lambda: sn.depth.at_depth(torch.nn.Linear(2, 2), 2))
    p.py(g, "at_depth(layered, 8, view='yes')", lambda: sn.depth.at_depth(m, 8, view="yes"))
    g = "to_basis"
    for basis in ["legendre:0", "legendre:5", "foo:2", "bernstein:-1", None, 3, "legendre:4"]:
        want = (lambda r: r.config.depth_basis == "legendre:4") if basis == "legendre:4" \
            else "refuse"
        p.py(g, f"to_basis(layered 4, {basis!r})", lambda b=basis: sn.depth.to_basis(m, b),
             want=want)
    for fit in ["STEPS", "", None, "mean "]:
        p.py(g, f"to_basis(fit={fit!r})", lambda f=fit: sn.depth.to_basis(m, "legendre:2", fit=f))
    p.py(g, "to_basis(return_residual='no')",
         lambda: sn.depth.to_basis(m, "legendre:2", return_residual="no"))
    p.py(g, "to_basis(legendre:4) of 4 layers equals them (Lie-Trotter, K = L)",
         lambda: _same(sn.depth.to_basis(m, "legendre:4"), m, tol=1e-4), want=bool)
    p.py(g, "to_basis of a model already a function of depth, another K",
         lambda: sn.depth.to_basis(e, "legendre:3"),
         want=lambda r: r.config.depth_basis == "legendre:3")


def _same(a, b, tol=1e-5):
    import torch

    idx = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return float((a.eval()(idx) - b.eval()(idx)).abs().max()) < tol


# ---------------------------------------------------------------------------------------------


def options_inputs(p: Pass, tmp: Path):
    import splitnet as sn

    g = "ignored options"
    C = sn.models.SplitConfig
    S = sn.models.Seq2SeqConfig
    for kw in [{"convection_field": "swiglu", "activation": "tanh"},
               {"convection_field": "none", "activation": "silu"},
               {"convection_field": "none", "d_ff": 100},
               {"diffusion_field": "conv", "n_kv_heads": 1},
               {"diffusion_field": "conv", "attention_bias": "qkv"},
               {"diffusion_field": "conv", "rotary_pct": 0.5},
               {"diffusion_field": "conv", "rotary_base": 500.0},
               {"norm": "none", "norm_eps": 1e-6},
               {"conv_kernel": 7}]:
        p.py(g, f"SplitConfig({kw})", lambda kw=kw: C(**kw))
    for kw in [{"diffusion_field": "conv", "convection_field": "none", "cross_field": "multistep",
                    "init": "convs2s", "norm": "none", "activation": "relu"},
               {"diffusion_field": "conv", "convection_field": "none", "cross_field": "multistep",
                    "init": "convs2s", "norm": "none", "norm_eps": 1e-3},
               {"convection_field": "swiglu", "activation": "relu"},
               {"conv_kernel": 5}]:
        p.py(g, f"Seq2SeqConfig({kw})", lambda kw=kw: S(**kw))
    for argv in [["--convection-field", "swiglu", "--activation", "relu"],
                 ["--convection-field", "none", "--d-ff", "64"],
                 ["--diffusion-field", "conv", "--n-kv-heads", "1"],
                 ["--diffusion-field", "conv", "--attention-bias", "none"],
                 ["--norm", "none", "--norm-eps", "1e-4"],
                 ["--task", "translate", "--diffusion-field", "conv", "--convection-field",
                  "none", "--cross-field", "multistep", "--init", "convs2s", "--norm", "none",
                  "--activation", "relu"]]:
        p.cli(g, ["train", *TINY, *argv, "--steps", "1", "--out", tmp / "ign"], "refuse")
    p.cli(g, ["describe", "--convection-field", "swiglu", "--activation", "relu"], "refuse")


# ---------------------------------------------------------------------------------------------


TASK_FILE = '''
import dataclasses, torch
from splitnet.tasks.task import Task, register

@dataclasses.dataclass(frozen=True)
class Opts:
    width: int = 3

class Good(Task):
    name = "good"
    options = Opts
    def batch(self, step, cfg):
        g = torch.Generator().manual_seed(step)
        x = torch.randint(0, 256, (cfg.batch_size, 16), generator=g)
        return x, x
'''


def task_inputs(p: Pass, tmp: Path):
    g = "--task"
    f = tmp / "mytask.py"
    f.write_text(TASK_FILE)
    (tmp / "notask.py").write_text("x = 1\n")
    (tmp / "syntax.py").write_text("def (:\n")
    (tmp / "raises.py").write_text("raise RuntimeError('boom at import')\n")
    for spec in ["nosuchmodule:Task", f"{tmp}/nosuch.py:Good", f"{tmp}/notask.py:Good",
                 f"{tmp}/syntax.py:Good", f"{tmp}/raises.py:Good", f"{f}:Nope", f"{f}:",
                 ":Good", "json:loads", "os:path", f"{f}:Opts", "", " ", "lm:", "LM",
                 f"{tmp}:Good", f"{f}:Good:Extra"]:
        p.cli(g, ["train", *TINY, "--task", spec, "--steps", "1", "--out", tmp / "t-run"],
              "refuse")


# ---------------------------------------------------------------------------------------------


def stack_inputs(p: Pass, tmp: Path):
    import splitnet as sn

    g = "--stack"
    for kind in ["", "Plain", "reversible ", "none", "checkpointed,plain", "__init__"]:
        p.cli(g, ["train", *TINY, "--stack", kind, "--steps", "1", "--out", tmp / "s"],
              "refuse")
    p.cli(g, ["train", *TINY, "--stack", "checkpointed", "--reversible", "--steps", "1",
              "--out", tmp / "s2"], "refuse")
    p.cli(g, ["train", *TINY, "--stack", "plain", "--reversible-grid", "8", "--steps", "1",
              "--out", tmp / "s3"], "refuse")
    p.cli(g, ["train", *TINY, "--stack", "checkpointed", "--steps", "2", "--out", tmp / "s4"],
          "ok")
    for name in ["", "bad name", None, 3, "plain"]:
        p.py(g, f"sn.stacks.register({name!r}, object)",
             lambda n=name: sn.stacks.register(n, object))


# ---------------------------------------------------------------------------------------------


def hf_inputs(p: Pass, tmp: Path):
    import torch
    import transformers as tf
    from safetensors.torch import load_file, save_file

    import splitnet as sn

    g = "hf folders"
    torch.manual_seed(0)
    base = tf.LlamaConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=1, intermediate_size=24,
                          max_position_embeddings=16, tie_word_embeddings=False)
    src = tf.LlamaForCausalLM(base)

    def folder(name, edit_cfg=None, edit_sd=None, shards=False):
        d = tmp / "hf" / name
        src.save_pretrained(d, **({"max_shard_size": "4KB"} if shards else {}))
        if edit_cfg:
            c = json.loads((d / "config.json").read_text())
            edit_cfg(c)
            (d / "config.json").write_text(json.dumps(c))
        if edit_sd:
            f = d / "model.safetensors"
            sd = load_file(f)
            edit_sd(sd)
            save_file(sd, f, metadata={"format": "pt"})
        return d

    def warned(d, words):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            sn.interop.from_hf(d)
        return any(words in str(x.message) for x in w)

    tied = folder("tied-head", lambda c: c.update(tie_word_embeddings=True))
    p.py(g, "tie_word_embeddings true, its own lm_head: said", lambda: warned(tied, "tied"),
         want=bool)
    fewer = folder("fewer", lambda c: c.update(num_hidden_layers=1))
    p.py(g, "num_hidden_layers lowered: the layer named", lambda: warned(fewer, "layers.1.*"),
         want=bool)
    extra = folder("extra", edit_sd=lambda sd: sd.update({"foo.weight": torch.zeros(2)}))
    p.py(g, "an unknown tensor: named", lambda: warned(extra, "foo.weight"), want=bool)
    more = folder("more", lambda c: c.update(num_hidden_layers=3))
    p.py(g, "num_hidden_layers raised", lambda: sn.interop.from_hf(more))
    for name, edit in [("vocab-0", lambda c: c.update(vocab_size=0)),
                       ("heads-str", lambda c: c.update(num_attention_heads="2")),
                       ("eps-neg", lambda c: c.update(rms_norm_eps=-1.0)),
                       ("kv-3", lambda c: c.update(num_key_value_heads=3)),
                       ("no-type", lambda c: c.pop("model_type")),
                       ("type-null", lambda c: c.update(model_type=None)),
                       ("rope-yarn", lambda c: c.update(rope_scaling={"rope_type": "yarn",
                                                                      "factor": 2.0})),
                       ("act-gelu", lambda c: c.update(hidden_act="gelu")),
                       ("max-pos-0", lambda c: c.update(max_position_embeddings=0))]:
        d = folder(name, edit)
        p.py(g, f"config.json {name}", lambda d=d: sn.interop.from_hf(d))
    half = folder("nan-weights", edit_sd=lambda sd: sd["model.norm.weight"].fill_(float("nan")))
    p.py(g, "NaN weights (imported as they are, logits NaN as transformers')",
         lambda: sn.interop.from_hf(half), want=lambda m: m is not None)
    shard = folder("sharded-missing", shards=True)
    files = sorted(shard.glob("model-*.safetensors"))
    files[1].unlink()
    p.py(g, "a shard missing", lambda: sn.interop.from_hf(shard))
    idx = folder("sharded-badindex", shards=True)
    (idx / "model.safetensors.index.json").write_text("{not json")
    p.py(g, "a sharded folder's index not JSON", lambda: sn.interop.from_hf(idx))
    for argv in [["describe", "--hf", more], ["sample", "--hf", shard, "--max-new-tokens", "2"],
                 ["trajectories", "--hf", idx, "--prompt", "ab", "--out", tmp / "t.png"],
                 ["refine", "--hf", tmp / "hf" / "vocab-0", "--out", tmp / "r.png"]]:
        p.cli(g, argv, "refuse")
    p.cli(g, ["describe", "--hf", tied], "ok")


# ---------------------------------------------------------------------------------------------


def cli_inputs(p: Pass, tmp: Path):
    g = "commands"
    text = tmp / "text.txt"
    text.write_text(TEXT)
    run = tmp / "run"
    p.cli(g, ["train", *TINY, "--text", text, "--steps", "4", "--out", run], "ok")
    ck = run / "checkpoint.pt"
    bad = [
        ["sample", "--checkpoint", run, "--max-new-tokens", "-1"],
        ["sample", "--checkpoint", run, "--temperature", "nan"],
        ["sample", "--checkpoint", run, "--top-k", "0", "--temperature", "1"],
        ["sample", "--checkpoint", run, "--top-p", "1.5", "--temperature", "1"],
        ["sample", "--checkpoint", tmp / "nowhere"],
        ["sample", "--checkpoint", text],
        ["evaluate", "--checkpoint", run, "--suite", "glue"],
        ["evaluate", "--checkpoint", run, "--max-train", "0"],
        ["evaluate", "--checkpoint", run, "--fine-tune", "-1"],
        ["evaluate", "--checkpoint", run, "--json", ""],
        ["refine", "--checkpoint", run, "--substeps", "0", "--out", tmp / "r.png"],
        ["refine", "--checkpoint", run, "--substeps", "1,nan", "--out", tmp / "r.png"],
        ["refine", "--checkpoint", run, "--methods", "euler,foo", "--out", tmp / "r.png"],
        ["refine", "--checkpoint", run, "--out", tmp / "text.txt" / "x.png"],
        ["describe", "--scheme", "foo"],
        ["describe", "--checkpoint", ck, "--d-ff", "3"],
        ["describe", "--scheme", "c:0.5,d:1,c:0.4"],
        ["export", "--checkpoint", run, "--out", text],
        ["export", "--checkpoint", run, "--format", "onnx", "--out", tmp / "e"],
        ["order", "--steps", "0", "--out", tmp / "o.png"],
        ["order", "--scheme", "d:1,c:1,d:-1e309", "--out", tmp / "o.png"],
        ["order", "--fields", "4", "--out", tmp / "o.png"],
        ["trajectories", "--checkpoint", run, "--prompt", "", "--out", tmp / "t.png"],
        ["trajectories", "--checkpoint", run, "--prompt", "ab", "--out", tmp / "t.txt"],
        ["train", *TINY, "--text", text, "--steps", "0", "--out", tmp / "z"],
        ["train", *TINY, "--text", text, "--steps", "4", "--lr", "nan", "--out", tmp / "z2"],
        ["train", *TINY, "--text", text, "--steps", "4", "--lr", "-1", "--out", tmp / "z3"],
        ["train", *TINY, "--text", text, "--steps", "3", "--grow-at", "3", "--out", tmp / "z4"],
        ["train", *TINY, "--text", text, "--resume", "--steps", "2", "--out", run],
        ["train", *TINY, "--text", text, "--resume", "--stop-at", "1", "--out", run],
        ["train", *TINY, "--text", text, "--steps", "4", "--out", run],
        ["train", *TINY, "--text", text, "--depth-basis", "legendre:0", "--out", tmp / "z5"],
        ["train", *TINY, "--text", text, "--depth-basis", "bernstein:-1", "--out", tmp / "z6"],
        ["train", *TINY, "--text", text, "--depth-basis", "foo:3", "--out", tmp / "z7"],
    ]
    for argv in bad:
        p.cli(g, argv, "refuse")
    for argv in [["sample", "--checkpoint", run, "--max-new-tokens", "3", "--temperature", "0"],
                 ["sample", "--checkpoint", run, "--prompt", "", "--max-new-tokens", "2"],
                 ["trajectories", "--checkpoint", run, "--prompt", "ab", "--out", tmp / "t.gif"],
                 ["train", *TINY, "--text", text, "--depth-basis", "legendre:3", "--steps", "2",
                  "--out", tmp / "z8"],     # 3 functions on 2 layers: fine from scratch
                 ["describe", "--checkpoint", ck],
                 ["export", "--checkpoint", run, "--out", tmp / "exported"]]:
        p.cli(g, argv, "ok")


# ---------------------------------------------------------------------------------------------


def _train_cmd(text, out, *extra):
    return [sys.executable, "-m", "splitnet", "train", *TINY, "--text", str(text), "--out",
            str(out), *map(str, extra)]


def process_inputs(p: Pass, tmp: Path):
    """Two trainers on one run folder; kill -9 mid-training and resume bit-exactly."""
    import torch

    g = "processes"
    text = tmp / "text.txt"
    text.write_text(TEXT)
    out = tmp / "two"
    a = subprocess.Popen(_train_cmd(text, out, "--steps", "100000", "--ckpt-every", "5"),
                         env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(10)
    if a.poll() is not None:
        raise SystemExit(f"the first trainer ended: {a.stderr.read()[-300:]!r}")
    b = subprocess.run(_train_cmd(text, out, "--steps", "400", "--resume"), env=ENV,
                       capture_output=True, text=True, timeout=120)
    p.inputs += 1
    lines = [x for x in b.stderr.splitlines() if x.strip()]
    if b.returncode != 2 or len(lines) != 1:
        p.fail(g, "a second trainer on a running folder (--resume)", f"exit {b.returncode}: "
               f"{b.stderr[-300:]!r}")
    c = subprocess.run(_train_cmd(text, out, "--steps", "400", "--overwrite"), env=ENV,
                       capture_output=True, text=True, timeout=120)
    p.inputs += 1
    if c.returncode != 2:
        p.fail(g, "a second trainer on a running folder (--overwrite)", f"exit {c.returncode}")
    a.kill()
    a.wait()
    # kill -9 at a random moment, resume; compare with an uninterrupted run
    full = tmp / "full"
    subprocess.run(_train_cmd(text, full, "--steps", "1500", "--seed", "3"), env=ENV,
                   check=True, capture_output=True, timeout=600)
    for delay in (6.0, 10.0):
        cut = tmp / f"cut{delay}"
        q = subprocess.Popen(_train_cmd(text, cut, "--steps", "1500", "--seed", "3",
                                        "--ckpt-every", "3"), env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if q.poll() is not None:
            raise SystemExit(f"the trainer to kill ended after {delay} s: rc {q.returncode}")
        q.send_signal(signal.SIGKILL)
        q.wait()
        r = subprocess.run(_train_cmd(text, cut, "--steps", "1500", "--seed", "3", "--resume"),
                           env=ENV, capture_output=True, text=True, timeout=600)
        p.inputs += 1
        if r.returncode != 0:
            if not (cut / "checkpoint.pt").exists() and r.returncode == 2:
                print(f"# kill -9 after {delay} s: before the first checkpoint (refused)")
                continue            # killed before the first save: nothing to resume, said so
            p.fail(g, f"kill -9 after {delay} s, --resume", f"exit {r.returncode}: "
                   f"{r.stderr[-300:]!r}")
            continue
        sa = torch.load(full / "checkpoint.pt", weights_only=True)["model"]
        sb = torch.load(cut / "checkpoint.pt", weights_only=True)["model"]
        if sa.keys() != sb.keys() or not all(torch.equal(sa[k], sb[k]) for k in sa):
            p.fail(g, f"kill -9 after {delay} s, --resume", "weights differ from an "
                   "uninterrupted run")
        else:
            print(f"# kill -9 after {delay} s, resumed: bit-exact ({len(sa)} tensors)")


GROUPS = {"depth": depth_inputs, "options": options_inputs, "task": task_inputs,
          "stack": stack_inputs, "hf": hf_inputs, "cli": cli_inputs,
          "processes": process_inputs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="scratch folder (default: a temporary one)")
    ap.add_argument("--only", action="append", choices=list(GROUPS))
    args = ap.parse_args(argv)
    signal.signal(signal.SIGALRM, _alarm)
    p = Pass()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(args.out or t)
        for name in args.only or GROUPS:
            d = tmp / name
            d.mkdir(parents=True, exist_ok=True)
            start, n = time.time(), p.inputs
            GROUPS[name](p, d)
            print(f"# {name}: {p.inputs - n} inputs, {time.time() - start:.0f} s", flush=True)
    print(f"inputs {p.inputs}, failed {len(p.failures)}")
    return 1 if p.failures else 0


if __name__ == "__main__":
    math.isfinite(0.0)
    sys.exit(main())
