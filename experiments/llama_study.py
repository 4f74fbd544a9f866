"""Is a Llama an ODE solver of its own fields? (issue 46) -> docs/llama.md

    python experiments/llama_study.py                 # train what is missing, evaluate, report
    python experiments/llama_study.py --report-only   # docs/llama.md from experiments/cache/llama

No Llama-family checkpoint is on this machine (nothing may be downloaded), so the question is
asked of small Llama-architecture networks trained here: byte-level language models of the
Python standard library (the CPU scale of experiments/depth_study.py: d_model 64, 4 heads,
context 64, batch 16, 1200 steps, AdamW at lr 2e-3, 3 seeds), with Llama's parts -- RMSNorm,
the SwiGLU feed-forward, grouped-query attention (2 key/value heads), rotary positions on every
channel, no biases, an untied head -- beside the GPT-2-style Transformer of the same depth and
about the same parameters (LayerNorm, GELU feed-forward, learned positions, biases). Each
trained network is then re-integrated with its own weights (:mod:`splitnet.analyses.refine`):
its own scheme with 2 and 4 sub-steps per layer (the same ODE, finer), Strang, and the exact
flow of its unsplit ODE; and at twice its depth (:func:`splitnet.nets.depth.prolong`). A network
that is an ODE solver of its fields keeps its loss when its ODE is solved more accurately.
Runs go to ``--runs`` (default runs/llama); each finished run's numbers to
experiments/cache/llama/, from which the report is rebuilt (``regen llama``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from splitnet.cli._args import csv_seeds

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "experiments" / "cache" / "llama"
DOC = ROOT / "docs" / "llama.md"
SCALE = {"d_model": 64, "n_heads": 4, "n_layers": 8, "context": 64, "batch_size": 16,
         "steps": 1200, "lr": 2e-3, "warmup": 30, "eval_every": 200, "eval_windows": 128}
# d_ff 256 for GELU; 176 for SwiGLU (3 matrices: about the GELU network's parameters)
ARMS = {"llama": {"norm": "rms", "convection_field": "swiglu", "d_ff": 176, "n_kv_heads": 2,
                  "attention_bias": "none", "positions": "none", "rotary_pct": 1.0,
                  "tie_head": False},
        "gpt2": {"d_ff": 256}}
LABELS = {"llama": "Llama parts (RMSNorm, SwiGLU, 2 kv heads, RoPE, no biases)",
          "gpt2": "GPT-2 parts (LayerNorm, GELU, learned positions, biases)"}
POINTS = (("own", 2), ("own", 4), ("strang", 1), ("strang", 2))
SEEDS = (0, 1, 2)


def train_config(arm: str, seed: int, out: Path):
    from splitnet.configs.config import SplitConfig
    from splitnet.training.config import TrainConfig

    sc = SCALE
    model = SplitConfig(d_model=sc["d_model"], n_heads=sc["n_heads"], n_layers=sc["n_layers"],
                        max_len=sc["context"], scheme="lie-trotter", **ARMS[arm])
    return TrainConfig(model=model, context=sc["context"], steps=sc["steps"],
                       batch_size=sc["batch_size"], lr=sc["lr"], warmup=sc["warmup"],
                       eval_windows=sc["eval_windows"], eval_every=sc["eval_every"],
                       ckpt_every=sc["steps"], seed=seed, device="cpu", threads=2,
                       progress=False, plot=False, out=str(out), overwrite=True)


def measure(out: Path) -> dict:
    """The trained network's loss (bpb) as trained, refined, as its ODE and prolonged."""
    from splitnet.analyses.refine import refinement_study
    from splitnet.analyses.sources import checkpoint_source
    from splitnet.nets.depth import prolong

    model, evaluate, _ = checkpoint_source(out, windows=SCALE["eval_windows"])
    res = refinement_study(model, evaluate, schemes=("own", "strang"), substeps=(1, 2, 4),
                           methods=("euler",), progress=False)
    bpb = {f"{p.scheme}-{p.substeps}": p.loss / math.log(2) for p in res.points}
    return {"trained": res.own.loss / math.log(2), **bpb,
            "ode": res.ode.loss / math.log(2) if res.ode else None,
            "prolong2": evaluate(prolong(model, 2).eval()) / math.log(2),
            "params": model.n_params()}


def run(arm: str, seed: int, runs: Path) -> dict:
    f = CACHE / f"{arm}-s{seed}.json"
    if f.exists():
        return json.loads(f.read_text())
    from splitnet.training.train import train

    out = runs / f"{arm}-s{seed}"
    train(train_config(arm, seed, out))
    rec = {"arm": arm, "seed": seed, **measure(out)}
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = f.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1))
    tmp.replace(f)                          # a killed study never caches half a run
    return rec


def _cell(values) -> str:
    m = statistics.fmean(values)
    return f"{m:+.4f} ± {statistics.stdev(values):.4f}" if len(values) > 1 else f"{m:+.4f}"


def report(records: list[dict]) -> str:
    cols = [("own", 2), ("own", 4), ("strang", 1), ("strang", 2)]
    head = ("| network | parameters | bpb as trained | own scheme, 2 sub-steps | own, 4 | "
            "Strang, 1 | Strang, 2 | exact ODE of the fields | prolonged to 2 L |")
    rows = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm in ARMS:
        rs = [r for r in records if r["arm"] == arm]
        if not rs:
            continue
        base = [r["trained"] for r in rs]
        diff = [[r[f"{s}-{k}"] - r["trained"] for r in rs] for s, k in cols]
        ode = [r["ode"] - r["trained"] for r in rs]
        pro = [r["prolong2"] - r["trained"] for r in rs]
        rows.append(f"| {LABELS[arm]} | {rs[0]['params']:,} | {statistics.fmean(base):.4f} | "
                    + " | ".join(_cell(d) for d in diff) + f" | {_cell(ode)} | {_cell(pro)} |")
    return "\n".join(rows)


def write_doc(records: list[dict]) -> None:
    n = len({r["seed"] for r in records})
    text = DOC.read_text() if DOC.exists() else ""
    start, end = "<!-- BEGIN LLAMA TABLE -->", "<!-- END LLAMA TABLE -->"
    table = (f"{start}\nChange in validation bits per byte against the network as trained "
             f"(mean ± sd over {n} seeds; `python3 experiments/llama_study.py`, "
             f"`regen llama`):\n\n{report(records)}\n{end}")
    if start in text:
        text = text[:text.index(start)] + table + text[text.index(end) + len(end):]
    else:
        text += "\n" + table + "\n"
    DOC.write_text(text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", default="runs/llama")
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--seeds", type=csv_seeds, default=",".join(map(str, SEEDS)))
    a = p.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    records = []
    for seed in seeds:
        for arm in ARMS:
            f = CACHE / f"{arm}-s{seed}.json"
            if a.report_only:
                if f.exists():
                    records.append(json.loads(f.read_text()))
                continue
            records.append(run(arm, seed, Path(a.runs)))
            print(f"{arm} seed {seed}: done", file=sys.stderr)
    if not records:
        print("no runs cached: run without --report-only", file=sys.stderr)
        return 1
    write_doc(records)
    print(report(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
