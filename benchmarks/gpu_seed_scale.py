"""The seed-scale translation run (issue 31, step 3) in one device call: Transformer, Macaron and
symmetric Strang at the base setting of the Macaron paper's WMT experiment (d_model 512, 8 heads,
6 + 6 layers, dropout 0.1, batches of 256 pairs, inverse-square-root schedule, beam 5, length
penalty 1.0), all seeds at once on one GPU, each to the same step count.

    python3 benchmarks/gpu_seed_scale.py --budget-s 470            # on a CUDA machine
    python3 benchmarks/gpu_seed_scale.py --smoke                   # the same path, tiny, CPU

The step count is measured, not guessed: every run first trains ``--calib-steps`` steps
(``--stop-at``), all at once so that they share the device as they will after; the slowest
run's mean seconds per step, its start-up and an allowance for the validations and the final
beam search give the steps that fit the budget, and every run resumes to that count (exact
resume: the same batches as one uninterrupted run). A run still going at the budget's end gets
SIGTERM, which saves its checkpoint; what finished is recorded, nothing estimated.

Corpus: this machine's gettext catalogues, en -> de, BPE 4000 (the CPU study's choice). A device
machine without them gets ``--catalogues DIR`` (a copy of ``/usr/share/locale/de/LC_MESSAGES``)
put where the default reader looks, so that the corpus is the default one; where that is not
writable, the folder is read as ``--pairs DIR`` (grouped by file, so the split differs).

Writes ``OUT/seed_scale/`` (default ``$OUT`` or ``runs/``): each run's metrics.jsonl, the
summary (summary.json) and the table (table.md), printed last.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from splitnet.cli._args import csv_seeds, nonnegative_int, positive_int

ROOT = Path(__file__).resolve().parent.parent
LOCALE_DE = Path("/usr/share/locale/de/LC_MESSAGES")
ARMS = {   # label -> (encoder scheme, decoder scheme, weights): the CPU study's arrangements
    "Transformer": ("lie-trotter", "lie-trotter", "per-stage"),
    "Macaron": ("c:0.5,d:1,c:0.5", "c:0.5,d:1,x:1,c:0.5", "per-stage"),
    "Strang": ("strang", "strang", "shared"),
}
SEED_SCALE = ["--d-model", "512", "--n-heads", "8", "--n-encoder-layers", "6",
              "--n-decoder-layers", "6", "--dropout", "0.1", "--batch-size", "256",
              "--lr", "7e-4", "--schedule", "inverse-sqrt", "--beta2", "0.98",
              "--weight-decay", "0.01", "--label-smoothing", "0.1", "--beam", "5",
              "--length-penalty", "1.0", "--bpe", "4000", "--bleu-sentences", "400"]
SMOKE = ["--d-model", "32", "--n-heads", "2", "--n-encoder-layers", "1",
         "--n-decoder-layers", "1", "--batch-size", "8", "--bleu-sentences", "16",
         "--pairs", "copy", "--device", "cpu"]
SKIP = 5            # first steps left out of the step time (allocation, autotuning)


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget-s", type=float, default=470.0,
                   help="seconds from start to the last run's end (default 470)")
    p.add_argument("--seeds", default="0,1", type=csv_seeds,
                   help="comma-separated seeds (default 0,1)")
    p.add_argument("--arms", default=",".join(ARMS), help="comma-separated arrangements")
    p.add_argument("--warmup", type=nonnegative_int, default=400,
                   help="warm-up steps (the paper's 4000 is longer than the run) (default 400)")
    p.add_argument("--calib-steps", type=positive_int, default=40)
    p.add_argument("--steps", type=positive_int,
                   help="every run's steps, instead of the calibrated count (the budget still "
                        "stops a run that goes past it)")
    p.add_argument("--evals", type=positive_int, default=8, help="validations per run (default 8)")
    p.add_argument("--final-s", type=float, default=75.0,
                   help="seconds kept for the final validation and beam search (default 75)")
    p.add_argument("--catalogues", type=Path, help="a copy of the en->de .mo files")
    p.add_argument("--runs", type=Path, default=Path("/tmp/seed_scale_runs"))
    p.add_argument("--out", type=Path,
                   default=Path(os.environ.get("OUT") or ROOT / "runs") / "seed_scale")
    p.add_argument("--smoke", action="store_true", help="tiny CPU models on the copy task")
    p.add_argument("--table", type=Path, nargs="+", metavar="DIR",
                   help="print the per-arrangement table of recorded runs (DIR/summary.json)")
    p.add_argument("--doc", type=Path, help="with --table: write each table between the "
                   "markers <!-- seed_scale:DIRNAME --> of this document")
    a = p.parse_args(argv)
    bad = [x for x in a.arms.split(",") if x not in ARMS]
    if bad:
        p.error(f"--arms: unknown arrangement {bad[0]!r}; the arrangements are "
                f"{', '.join(ARMS)}")
    return a


def corpus_args(a) -> tuple[list[str], str]:
    """The ``--pairs`` argument that gives the default corpus here, and where it came from."""
    if a.smoke:
        return [], "synthetic copy task (smoke)"
    if any(LOCALE_DE.glob("*.mo")):
        return [], f"this machine's catalogues ({LOCALE_DE})"
    if a.catalogues is None:
        sys.exit(f"gpu_seed_scale: no catalogues in {LOCALE_DE}; pass --catalogues DIR")
    try:
        shutil.copytree(a.catalogues, LOCALE_DE, dirs_exist_ok=True)
        return [], f"catalogues copied from {a.catalogues} to {LOCALE_DE}"
    except OSError as e:
        return ["--pairs", str(a.catalogues)], f"--pairs {a.catalogues} ({e.strerror})"


def fallbacks(a) -> tuple[list[str], list[str]]:
    """Options that replace the seed-scale ones when an optional library is missing, and why."""
    import importlib.util

    extra, notes = [], []
    if not a.smoke and importlib.util.find_spec("tokenizers") is None:
        extra += ["--bpe", "0"]
        notes.append("no tokenizers: byte tokens")
    if importlib.util.find_spec("sacrebleu") is None:
        extra += ["--bleu-sentences", "0"]
        notes.append("no sacrebleu: no BLEU")
    return extra, notes


def command(a, arm: str, seed: int, extra: list[str]) -> list[str]:
    enc, dec, weights = ARMS[arm]
    size = SMOKE if a.smoke else SEED_SCALE
    return [sys.executable, "-m", "splitnet", "train", "--task", "translate", *size,
            "--encoder-scheme", enc, "--decoder-scheme", dec, "--weights", weights,
            "--warmup", str(a.warmup), "--seed", str(seed), "--threads", "2",
            "--no-progress", "--no-plot", "--ckpt-every", str(10 ** 6),
            "--out", str(a.runs / f"{arm}-s{seed}"), *extra]


def gpu_mib() -> dict[int, int]:
    """MiB of device memory each process holds (nvidia-smi: the allocator's reserve and the
    CUDA context); empty without nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = (line.split(",") for line in out.splitlines() if line.count(",") == 1)
    return {int(p): int(m) for p, m in rows if p.strip().isdigit() and m.strip().isdigit()}


def run_all(cmds: dict[str, list[str]], deadline: float, logs: Path,
            peak: dict[str, int]) -> dict[str, int]:
    """Start every command at once; SIGTERM (checkpoint saved) whatever runs past ``deadline``;
    ``peak`` gets the most device MiB each run held."""
    logs.mkdir(parents=True, exist_ok=True)
    procs = {k: subprocess.Popen(c, stdout=open(logs / f"{k}.log", "a"),
                                 stderr=subprocess.STDOUT) for k, c in cmds.items()}
    while any(p.poll() is None for p in procs.values()):
        held = gpu_mib()
        for k, p in procs.items():
            peak[k] = max(peak.get(k, 0), held.get(p.pid, 0))
        if time.monotonic() > deadline:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            deadline = float("inf")
        time.sleep(1.0)
    return {k: p.returncode for k, p in procs.items()}


def metrics(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def plan(a, names: list[str], wall: float, left: float) -> tuple[int, int, float]:
    """(steps, eval_every, seconds per step of the slowest run) that fit ``left`` seconds."""
    t_step = 0.0
    for k in names:
        steps = [r["step_s"] for r in metrics(a.runs / k) if "step_s" in r][SKIP:]
        t_step = max(t_step, sum(steps) / max(1, len(steps)))
    trained = a.calib_steps * t_step
    startup = max(0.0, wall - trained)                   # start-up, data, BPE, first steps
    # a validation pass: 2,625 pairs forward only, about 4 training steps' worth of time
    n = (left - startup - a.final_s) / t_step - 4 * a.evals
    every = max(1, int((a.calib_steps + max(0.0, n)) // a.evals))
    return max(every * a.evals, a.calib_steps + 1), every, t_step


def summarise(a, names: list[str], rcs: dict, info: dict) -> list[dict]:
    rows = []
    for k in names:
        m = metrics(a.runs / k)
        shutil.copy(a.runs / k / "metrics.jsonl", a.out / f"{k}.jsonl") if m else None
        vals = [(r["step"], r["val_loss"]) for r in m if "val_loss" in r]
        test = next((r for r in m if "test_bleu" in r), {})
        steps = [r["step_s"] for r in m if "step_s" in r][SKIP:]
        tok = [r["tok_per_s"] for r in m if "tok_per_s" in r][SKIP:]
        arm, seed = k.rsplit("-s", 1)
        rows.append({"run": k, "arm": arm, "seed": int(seed), "rc": rcs.get(k),
                     "step": max((r.get("step", 0) for r in m), default=0),
                     "val_loss": vals[-1][1] if vals else None,
                     "best_val_loss": min((v for _, v in vals), default=None),
                     "curve": vals, "bleu": test.get("test_bleu"),
                     "chrf": test.get("test_chrf"), "decode_s": test.get("test_decode_s"),
                     "gpu_mib": info.get("gpu_mib", {}).get(k),
                     "step_s_median": sorted(steps)[len(steps) // 2] if steps else None,
                     "tok_per_s_median": sorted(tok)[len(tok) // 2] if tok else None})
    (a.out / "summary.json").write_text(json.dumps({**info, "runs": rows}, indent=1))
    return rows


def table(rows: list[dict], info: dict) -> str:
    f = lambda v, p=3: "-" if v is None else f"{v:.{p}f}"   # noqa: E731
    out = [f"device {info['device']}, {info['date']}, commit {info['commit']}; "
           f"corpus {info['corpus']}; steps {info['steps']} (calibrated "
           f"{info['t_step']:.3f} s/step, all runs at once)", "",
           "| run | rc | step | val loss | best val loss | BLEU | chrF | s/step | tokens/s | MiB |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['run']} | {r['rc']} | {r['step']} | {f(r['val_loss'])} | "
                   f"{f(r['best_val_loss'])} | {f(r['bleu'], 2)} | {f(r['chrf'], 2)} | "
                   f"{f(r['step_s_median'], 4)} | {f(r['tok_per_s_median'], 0)} | "
                   f"{r['gpu_mib'] or '-'} |")
    return "\n".join(out)


def arm_table(summary: dict) -> str:
    """One row per arrangement: each seed's value, then the mean (the docs' table)."""
    def cell(vals, p):
        vals = [v for v in vals if v is not None]
        if not vals:
            return "-"
        each = " / ".join(f"{v:.{p}f}" for v in vals)
        return f"{each} (**{sum(vals) / len(vals):.{p}f}**)" if len(vals) > 1 else each

    arms = list(dict.fromkeys(r["arm"] for r in summary["runs"]))
    out = ["| arrangement | seeds | steps | final val loss | best val loss | BLEU | chrF | "
           "s/step | device MiB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for arm in arms:
        rs = [r for r in summary["runs"] if r["arm"] == arm]
        out.append(f"| {arm} | {len(rs)} | {min(r['step'] for r in rs)} | "
                   f"{cell([r['val_loss'] for r in rs], 3)} | "
                   f"{cell([r['best_val_loss'] for r in rs], 3)} | "
                   f"{cell([r['bleu'] for r in rs], 2)} | {cell([r['chrf'] for r in rs], 2)} | "
                   f"{cell([r['step_s_median'] for r in rs], 3)} | "
                   f"{cell([r['gpu_mib'] for r in rs], 0)} |")
    return "\n".join(out)


def _info(a, corpus: str) -> dict:
    import torch

    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    return {"device": dev, "date": time.strftime("%Y-%m-%d"), "commit": commit or "unknown",
            "torch": torch.__version__, "corpus": corpus, "command": sys.argv}


def main(argv=None) -> int:
    a = _args(argv)
    if a.table:
        tables = {d.name: arm_table(json.loads((d / "summary.json").read_text()))
                  for d in a.table}
        if a.doc is not None:
            sys.path.insert(0, str(ROOT))
            from splitnet.dev.docblocks import write_blocks

            write_blocks(a.doc, "seed_scale", tables)
        print("\n\n".join(tables.values()))
        return 0
    start = time.monotonic()
    a.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(a.runs, ignore_errors=True)
    extra, corpus = corpus_args(a)
    more, notes = fallbacks(a)
    extra += more
    info = _info(a, "; ".join([corpus, *notes]))
    names = [f"{arm}-s{s}" for arm in a.arms.split(",") for s in map(int, a.seeds.split(","))]
    cmd = {k: command(a, k.rsplit("-s", 1)[0], int(k.rsplit("-s", 1)[1]), extra)
           for k in names}
    t0, peak = time.monotonic(), {}
    rcs = run_all({k: c + ["--steps", str(10 ** 6), "--stop-at", str(a.calib_steps),
                           "--eval-every", str(10 ** 6)] for k, c in cmd.items()},
                  start + a.budget_s, a.out / "logs", peak)
    if any(rcs.values()):
        print(f"calibration failed: {rcs}; logs in {a.out / 'logs'}", file=sys.stderr)
        return 1
    steps, every, t_step = plan(a, names, time.monotonic() - t0,
                                a.budget_s - (time.monotonic() - start))
    if a.steps:
        steps, every = a.steps, max(1, a.steps // a.evals)
    info.update(steps=steps, eval_every=every, t_step=t_step)
    print(f"calibrated: {t_step:.3f} s/step (slowest); {steps} steps, validation every {every}",
          flush=True)
    rcs = run_all({k: [sys.executable, "-m", "splitnet", "train", "--out",
                       str(a.runs / k), "--resume", "--steps", str(steps), "--eval-every",
                       str(every), "--no-progress"] for k in names},
                  start + a.budget_s, a.out / "logs", peak)
    info["gpu_mib"] = peak
    rows = summarise(a, names, rcs, info)
    text = table(rows, info)
    (a.out / "table.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
