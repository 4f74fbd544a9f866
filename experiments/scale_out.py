"""The scale-out equality table of docs/scaling.md: gloo ranks under ``--parallel fsdp`` (and
``--tp 2``) against one process, step by step, for the five networks tests/test_fsdp.py checks.

    python3 experiments/scale_out.py            # ~3 min on 2 CPU cores; writes docs/scaling.md

Each network trains 4 steps (batch 8 x 32, 2 micro-batches, 2 layers of width 32) in one
process, on 2 fsdp ranks and on 2 x 2 (dp x tp) ranks (1 x 2 for the translation model, whose
copy task the test runs on 2 ranks); the table lists the largest difference from the one
process over the 4 steps: of the loss, of the gradient norm (made whole over the ranks), and of
any weight of the final checkpoint (read back whole from its shards). The raw numbers go to
docs/data/scale_out.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "scaling.md"
DATA = ROOT / "docs" / "data" / "scale_out.json"
BASE = ["--d-model", "32", "--n-heads", "2", "--context", "32", "--batch-size", "8",
        "--grad-accum", "2", "--warmup", "2", "--eval-windows", "16", "--no-progress",
        "--no-plot", "--device", "cpu", "--steps", "4", "--eval-every", "2", "--threads", "1"]
LM = ["--n-layers", "2"]
CASES = {
    "lie-trotter": LM,
    "yoshida4, shared": LM + ["--scheme", "yoshida4"],
    "strang, per-stage": LM + ["--scheme", "strang", "--weights", "per-stage"],
    "strang, learned coefficients": LM + ["--scheme", "strang", "--learn-coefficients"],
    "translation (copy)": ["--task", "translate", "--pairs", "copy", "--n-encoder-layers", "1",
                           "--n-decoder-layers", "1", "--bleu-sentences", "0"],
}
LAYOUTS = {"fsdp, 2 ranks": (2, []), "fsdp x tp, 2 x 2 ranks": (4, ["--tp", "2"])}


def _train(argv, out, ranks: int) -> None:
    cmd = [sys.executable, "-m", "splitnet", "train", *argv, "--out", str(out)]
    if ranks > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={ranks}", "-m", "splitnet", "train", *argv,
               "--out", str(out), "--parallel", "fsdp"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if res.returncode:
        sys.exit(f"scale_out: {' '.join(cmd)} failed:\n{res.stderr[-2000:]}")


def _records(out) -> dict:
    from splitnet import checkpoint as ck

    return {r["step"]: r for r in ck.read_metrics(Path(out) / ck.METRICS) if "loss" in r}


def _weight_gap(a, b) -> float:
    """Largest weight difference of two checkpoints, the key part of attention's biases left
    out: its gradient is zero up to rounding, which AdamW scales to steps of the learning rate
    (tests/test_fsdp.py::_comparable)."""
    from splitnet import checkpoint as ck

    wa, wb = ck.load(a)["model"], ck.load(b)["model"]

    def part(k, w):
        if k.endswith("qkv.bias"):
            d = w.shape[0] // 3
            return w[[*range(d), *range(2 * d, 3 * d)]]
        return w[w.shape[0] // 2:] if k.endswith("kv.bias") else w
    return max(float((part(k, wb[k]) - part(k, v)).abs().max()) for k, v in wa.items())


def measure(text: Path, tmp: Path) -> list[dict]:
    rows = []
    for name, opts in CASES.items():
        argv = ([] if "--task" in opts else ["--text", str(text)]) + BASE + opts
        one = tmp / f"{len(rows)}-one"
        _train(argv, one, 1)
        ref = _records(one)
        for layout, (ranks, extra) in LAYOUTS.items():
            if "--task" in opts and extra:        # the copy task on 1 x 2: tp alone
                ranks = 2
            out = tmp / f"{len(rows)}-{ranks}"
            _train(argv + extra, out, ranks)
            got = _records(out)
            rows.append({
                "network": name, "layout": layout, "ranks": ranks,
                "loss": max(abs(got[s]["loss"] - ref[s]["loss"]) for s in ref),
                "grad_norm": max(abs(got[s]["grad_norm"] - ref[s]["grad_norm"]) for s in ref),
                "weights": _weight_gap(one, out)})
            print(f"{name:30s} {layout:24s} loss {rows[-1]['loss']:.1e}", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| network | layout | ranks | max Δ loss | max Δ grad norm | max Δ weight |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        layout = r["layout"] if r["ranks"] != 2 or "tp" not in r["layout"] else \
            "fsdp x tp, 1 x 2 ranks"
        lines.append(f"| {r['network']} | {layout} | {r['ranks']} | {r['loss']:.1e} | "
                     f"{r['grad_norm']:.1e} | {r['weights']:.1e} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", action="store_true",
                    help="rewrite the table from docs/data/scale_out.json, no training")
    args = ap.parse_args(argv)
    if args.report:
        rows = json.loads(DATA.read_text())["rows"]
    else:
        with tempfile.TemporaryDirectory() as d:
            text = Path(d) / "corpus.txt"
            text.write_text("".join(f"def g{i}(y):\n    return y - {i % 5}\n"
                                    for i in range(400)))
            rows = measure(text, Path(d))
        import torch

        DATA.write_text(json.dumps({"torch": torch.__version__.split("+")[0], "device": "cpu, gloo",
                                    "rows": rows}, indent=1) + "\n")
    from splitnet.dev.docblocks import write_blocks

    write_blocks(DOC, "scale-out", {"equality": table(rows)})
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
