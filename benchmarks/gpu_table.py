"""The short table of ``benchmarks/gpu_suite.sh``: what its finished steps measured.

    python3 benchmarks/gpu_table.py runs/gpu_suite          # prints it, writes DIR/table.md

Reads the suite's outputs and nothing else (a step that has not run shows as "not run"):
``bench_*.json`` (``bench_layers.py --json``: ours and the reference under one lever setting,
and per-scheme rows), ``gpu_reversible.json`` (``gpu_reversible.py``),
``train_*/metrics.jsonl`` (``splitnet train``: per-step figures, from which
the steady-state median and the compile time are taken exactly as the trainer's summary takes
them) and ``compare-*/results.json`` (``experiments/compare_schemes.py``).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _s(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def lever_rows(d: Path) -> list[str]:
    out = ["| step | levers | batch | ours ms | ours MFU | ref ms | ref MFU | ours/ref | "
           "compile s ours/ref |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for p in sorted(d.glob("bench_*.json")):
        r = json.loads(p.read_text())
        if "ratio" not in r:            # per-scheme rows only (--pairs 0)
            continue
        lev = (f"{r.get('compile_scope') if r.get('compile') else 'eager'}, "
               f"{r.get('compile_mode')}, loss {r.get('loss')}, sdpa {r.get('sdpa')}, "
               f"opt {r.get('optimizer')}, {r.get('precision')}")
        out.append(f"| {p.stem[6:]} | {lev} | {r['batch']} | {r['ours_ms']:.2f} | "
                   f"{_pct(r.get('ours_mfu'))} | {r['ref_ms']:.2f} | {_pct(r.get('ref_mfu'))} | "
                   f"{r['ratio']:.3f} | {_s(r.get('ours_compile_s'))} / "
                   f"{_s(r.get('ref_compile_s'))} |")
    return out


def scheme_rows(d: Path) -> list[str]:
    out = ["| step | scheme | weights | batch | ms | MFU | compile s |",
           "|---|---|---|---:|---:|---:|---:|"]
    for p in sorted(d.glob("bench_*.json")):
        for r in json.loads(p.read_text()).get("schemes", []):
            if "error" in r:
                out.append(f"| {p.stem[6:]} | {r['scheme']} | {r['weights']} | | {r['error']} "
                           f"| | |")
                continue
            out.append(f"| {p.stem[6:]} | {r['scheme']} | {r['weights']} | {r['batch']} | "
                       f"{r['ms']:.1f} | {_pct(r.get('mfu'))} | {_s(r.get('compile_s'))} |")
    return out if len(out) > 2 else []


def steady(recs: list[dict]) -> dict:
    """The trainer's own summary figures from its per-step records (splitnet.train._steady)."""
    ts = [r["step_s"] for r in recs]
    skip = min(len(ts) - 1, max(2, len(ts) // 10))
    med = statistics.median(ts[skip:])
    tok_s = recs[0]["tokens"] / recs[0]["step"] / med       # tokens per step / median step
    last = recs[-1]
    mfu = last["mfu"] / last["tok_per_s"] * tok_s if "mfu" in last else None   # FLOPs/token / peak
    return {"tok_s": tok_s, "mfu": mfu, "first_minus_median": ts[0] - med, "steps": len(ts)}


def train_rows(d: Path) -> list[str]:
    out = ["| run | steps | steady tokens/s | steady MFU | first step - median (compile) s |",
           "|---|---:|---:|---:|---:|"]
    for p in sorted(d.glob("train_*/metrics.jsonl")):
        lines = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
        if len(lines) < 3:
            continue
        s = steady(lines)
        out.append(f"| {p.parent.name[6:]} | {s['steps']} | {s['tok_s']:,.0f} | "
                   f"{_pct(s['mfu'])} | {s['first_minus_median']:.1f} |")
    return out if len(out) > 2 else []


# the networks benchmarks/gpu_reversible.py compares (version 2 of its JSON)
VARIANTS = ("plain", "checkpointed", "reversible", "two-streams")


def reversible_table(rows: list[dict], variants=VARIANTS) -> list[str]:
    """gpu_reversible.py's rows (version 2): one line per depth and compilation, each variant's
    peak GiB and tokens/s, and its speed against plain (columns: the ``variants`` some row has,
    or all of them without rows)."""
    names = [k for k in variants if not rows or any(k in r["variants"] for r in rows)]
    head = ["layers", "compile"] + [f"{k} GiB" for k in names] + \
        [f"{k} tok/s" for k in names] + [f"{k} / plain" for k in names if k != "plain"]
    out = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for r in rows:
        v = r["variants"]
        cells = [str(r["n_layers"]), r["compile"]]
        cells += [f"{v[k]['peak_bytes'] / 2**30:.2f}" if k in v else "-" for k in names]
        cells += [f"{v[k]['tok_s']:,.0f}" if k in v else "-" for k in names]
        cells += [f"{v[k]['tok_s'] / v['plain']['tok_s']:.2f}" if k in v and "plain" in v
                  else "-" for k in names if k != "plain"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def reversible_rows(d: Path) -> list[str]:
    """``gpu_reversible.json`` (benchmarks/gpu_reversible.py): peak memory and speed by depth
    (version 2: plain, checkpointed and reversible networks, eager and compiled; version 1, the
    2026-11-26 record: plain and reversible, eager)."""
    p = d / "gpu_reversible.json"
    if not p.exists():
        return []
    res = json.loads(p.read_text())
    rows = res["rows"]
    rec = ", ".join(f"{k}: {v:.3g}" for k, v in res["reconstruction"].items())
    tail = ["", f"reconstruction (max |x_rec - x| / max |x|, bf16 autocast): {rec}"]
    if res.get("version") == 2:
        return reversible_table(rows) + tail
    out = ["| layers | plain peak GiB | reversible peak GiB | reversible / first | "
           "plain tok/s | reversible tok/s | rev / plain speed |",
           "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['n_layers']} | {r['plain_peak_bytes'] / 2**30:.2f} | "
                   f"{r['rev_peak_bytes'] / 2**30:.2f} | "
                   f"{r['rev_peak_bytes'] / max(rows[0]['rev_peak_bytes'], 1):.3f} | "
                   f"{r['plain_tok_s']:,.0f} | {r['rev_tok_s']:,.0f} | "
                   f"{r['rev_tok_s'] / r['plain_tok_s']:.2f} |")
    return out + tail


def compare_rows(d: Path) -> list[str]:
    out = []
    for p in sorted(d.glob("compare-*/results.json")):
        res = json.loads(p.read_text())
        out += [f"**{p.parent.name}** ({len(res)} runs)", "",
                "| model | seeds | final val bpb mean ± std | tokens/s |", "|---|---:|---|---:|"]
        for name in dict.fromkeys(r["name"] for r in res):
            rs = [r for r in res if r["name"] == name]
            v = [r["final_val_bpb"] for r in rs]
            sd = f" ± {statistics.stdev(v):.4f}" if len(v) > 1 else ""
            tps = statistics.median(r.get("tokens_s") or 0.0 for r in rs)
            out.append(f"| {name} | {len(rs)} | {statistics.mean(v):.4f}{sd} | {tps:,.0f} |")
        out.append("")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    d = Path(argv[0] if argv else "runs/gpu_suite")
    if not d.is_dir():
        print(f"gpu_table: {d} is not a directory", file=sys.stderr)
        return 2
    parts = [("Levers: ours (Lie–Trotter) and the nanoGPT-style reference", lever_rows(d)),
             ("Every scheme", scheme_rows(d)), ("Trainer (splitnet train)", train_rows(d)),
             ("Reversible against plain, by depth", reversible_rows(d)),
             ("Scheme comparison", compare_rows(d))]
    text = []
    for title, rows in parts:
        text += [f"### {title}", ""] + (rows if rows and len(rows) > 2 else ["not run yet"]) + [""]
    (d / "table.md").write_text("\n".join(text))
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
