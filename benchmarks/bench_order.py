"""Time `splitnet order` (the default: 5 schemes, exact sub-flows, local error, float64 particle
system) end to end as a user runs it, in a fresh process each time.

    python3 benchmarks/bench_order.py                 # median of 5 runs
    python3 benchmarks/bench_order.py --runs 3 -- --method rk4 --kind global

Prints every run's wall time, the median, and a markdown row for docs/benchmarks.md.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from functools import partial

from cli_timing import machine_row, parse, parser, splitnet, time_runs
from tqdm.auto import tqdm


def main(argv=None) -> int:
    args, extra = parse(parser("order", runs=5), argv)
    with tempfile.TemporaryDirectory() as d:
        cmd = [*splitnet(), "order", "--strict", "--out", os.path.join(d, "order.png"), *extra]
        times, r = time_runs(cmd, args.runs, partial(tqdm, desc="splitnet order", unit="run"))
    if r.returncode != 0:
        print(r.stdout, r.stderr, file=sys.stderr)
        return r.returncode
    med = statistics.median(times)
    print(r.stdout)
    print("runs (s): " + ", ".join(f"{t:.1f}" for t in times))
    print(f"median of {args.runs}: {med:.1f} s   (min {min(times):.1f}, max {max(times):.1f})")
    cmd_txt = " ".join(["splitnet order", *extra])
    print("\n" + machine_row([f"`{cmd_txt}`", f"{med:.1f} s",
                              f"{min(times):.1f}–{max(times):.1f} s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
