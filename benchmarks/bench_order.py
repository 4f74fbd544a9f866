"""Time `splitnet order` (the default: 5 schemes, exact sub-flows, local error, float64 particle
system) end to end as a user runs it, in a fresh process each time.

    python3 benchmarks/bench_order.py                 # median of 5 runs
    python3 benchmarks/bench_order.py --runs 3 -- --method rk4 --kind global

Prints every run's wall time, the median, and a markdown row for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from tqdm.auto import tqdm


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Median wall time of `splitnet order`.")
    ap.add_argument("--runs", type=int, default=5, help="number of runs (default 5)")
    ap.add_argument("extra", nargs=argparse.REMAINDER,
                    help="arguments passed to `splitnet order` after `--`")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    extra = [a for a in args.extra if a != "--"]
    exe = shutil.which("splitnet")
    base = [exe] if exe else [sys.executable, "-m", "splitnet"]
    times = []
    with tempfile.TemporaryDirectory() as d:
        cmd = [*base, "order", "--strict", "--out", os.path.join(d, "order.png"), *extra]
        for _ in tqdm(range(args.runs), desc="splitnet order", unit="run"):
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, check=False)
            times.append(time.perf_counter() - t0)
            if r.returncode != 0:
                print(r.stdout, r.stderr, file=sys.stderr)
                return r.returncode
    last = r.stdout
    med = statistics.median(times)
    print(last)
    print("runs (s): " + ", ".join(f"{t:.1f}" for t in times))
    print(f"median of {args.runs}: {med:.1f} s   (min {min(times):.1f}, max {max(times):.1f})")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cmd_txt = " ".join(["splitnet order", *extra])
    print(f"\n| `{cmd_txt}` | {med:.1f} s | "
          f"{min(times):.1f}–{max(times):.1f} s | {os.cpu_count()} cores, "
          f"{platform.processor() or platform.machine()}, load {load:.1f} | "
          f"{time.strftime('%Y-%m-%d')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
