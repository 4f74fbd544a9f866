"""What a training run says: each step's record (metrics.jsonl, TensorBoard, the progress
bar), its steady-state speed and MFU, and the summary at the end. ``run`` is the trainer's
state (:class:`splitnet.training.train._Run`).
"""

from __future__ import annotations

import json
import statistics

from ..runs import checkpoint as ck
from ..runs import data as D
from ..runs import lock as run_lock

# Dense bf16 tensor-core peak (FLOP/s) for MFU, matched on the CUDA device name.
PEAK_BF16 = {"H200": 989.4e12, "H100": 989.4e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12,
             "4090": 165.2e12}


class TrainingError(RuntimeError):
    """Training cannot go on (non-finite loss)."""



def record(run, p, loss: float, gnorm, dt: float) -> dict:
    tokens = p.tokens
    rec = {"step": p.step, "loss": loss, "bpb": loss / D.LN2, "lr": p.lr,
           "tokens": p.step * tokens, "tok_per_s": tokens / dt, "step_s": dt}
    if gnorm is not None:
        rec["grad_norm"] = gnorm
    if p.fpt is not None:        # --train-depths: the FLOPs of the depths this step ran
        rec["step_flops"] = p.fpt * tokens
    if run.peak:
        rec["mfu"] = run.fpt * rec["tok_per_s"] / run.peak
    return rec


def log_step(run, rec: dict) -> None:
    if not run.env.is_main:
        return
    log_line(run, rec)
    if run.tb is not None:
        run.tb.write(rec)
    speed = steady(run)
    post = {"loss": f"{rec['loss']:.3f}", "bpb": f"{rec['bpb']:.3f}",
            "tok/s": f"{speed['tok_per_s']:.0f}"}
    if "mfu" in speed:
        post["mfu"] = f"{speed['mfu']:.1%}"
    if run.last_val is not None:
        post["val_bpb"] = f"{run.last_val:.3f}"
    run.bar.set_postfix(post, refresh=False)
    run.bar.update(1)


def steady(run) -> dict:
    """Steady-state speed: the median over this session's steps after the warm-up ones (the
    first tenth, at least the first two: compilation, allocator and cache warm-up), never an
    average that includes them. ``compile_s`` (with --compile): the first step's excess over
    that median, i.e. tracing and code generation of forward and backward."""
    ts = run.step_times
    if not ts:
        return {"tok_per_s": 0.0}
    skip = min(len(ts) - 1, max(2, len(ts) // 10))
    med = statistics.median(ts[skip:])
    per_step = statistics.fmean(run.step_tokens[skip:]) if run.step_tokens[skip:] else \
        run.cfg.batch_size * run.cfg.context
    out = {"tok_per_s": per_step / med, "step_s": med,
           "first_step_s": ts[0], "warmup_steps": skip,
           "compile_s": max(0.0, ts[0] - med) if run.cfg.compile else None}
    if run.peak:
        out["mfu"] = run.fpt * out["tok_per_s"] / run.peak
    return out


def open_files(run) -> None:
    """Under the lock: clear what an overwritten run left, trim metrics on resume."""
    if not run.env.is_main:
        return
    if not run.cfg.resume:
        if not run.cfg.overwrite and (run.out / ck.CKPT).exists():
            raise ValueError(f"{run.out / ck.CKPT} appeared while this run started: another "
                             f"process wrote it; pass --resume or --overwrite")
        # the earlier run (--overwrite), or a run killed before its first save: kept aside
        prev = run_lock.move_aside(run.out)
        if prev is not None:
            run.log(f"the earlier run in {run.out} was moved to {prev}")
    ck.remove_torn_saves(run.out)
    if run.cfg.resume:
        ck.truncate_metrics(run.out / ck.METRICS, run.step)
    run.metrics = open(run.out / ck.METRICS, "a")
    if run.cfg.tensorboard_dir() is not None:
        from .tracking import TensorBoardLog

        run.tb = TensorBoardLog(run.cfg.tensorboard_dir(), run.step)
        run.log(f"TensorBoard events: {run.tb.log_dir} (tensorboard --logdir {run.tb.log_dir})")


def log_line(run, rec: dict) -> None:
    try:
        run.metrics.write(json.dumps(rec) + "\n")
        run.metrics.flush()
    except OSError as e:
        raise TrainingError(f"cannot write {run.out / ck.METRICS} ({e.strerror}); stopping at "
                            f"step {run.step}: the last checkpoint is kept, --resume continues "
                            f"from it") from None


def summary(run, sig, startup_s: float) -> dict:
    cfg = run.cfg
    speed = steady(run)
    summary = {"step": run.step, "steps": cfg.steps, "val_bpb": run.last_val,
               "n_params": run.n_params, "out": str(run.out), "signal": sig,
               "flops_per_token": run.fpt, "startup_s": startup_s,
               "compile_scope": run.compile_scope, **run.last_extra, **speed}
    if run.scores:
        summary.update(run.scores)
    if sig is not None:
        run.log(f"\nreceived signal {sig}: checkpoint saved at step {run.step} in "
                f"{run.out / ck.CKPT}; continue with --resume")
    elif run.step == cfg.steps:
        vb = f"{run.last_val:.4f}" if run.last_val is not None else "n/a (no step run)"
        mfu = f", MFU {speed['mfu']:.1%}" if "mfu" in speed else ""
        first = ""
        if run.step_times:
            comp = (f", compile {speed['compile_s']:.1f} s ({run.compile_scope})"
                    if cfg.compile else "")
            first = (f"; start-up {startup_s:.1f} s{comp}, first step "
                     f"{speed['first_step_s']:.2f} s")
        score = run.task.result(cfg, vb, run.last_extra)
        written = ",".join(n for n in (ck.CKPT, ck.METRICS, ck.PLOT) if (run.out / n).exists())
        run.log(f"done: step {run.step}, {score}, {speed['tok_per_s']:.0f} tokens/s steady"
                f" (median after {speed.get('warmup_steps', 0)} warm-up steps){mfu}"
                f"{first}; {run.out}/{{{written}}}")     # what is there: no plot under --no-plot
    return summary


__all__ = ["PEAK_BF16", "TrainingError", "log_line", "log_step", "open_files", "record", "steady",
           "summary"]
