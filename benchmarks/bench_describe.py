"""Time `splitnet describe --schemes all` (every registry scheme, shared and per-stage weights, at
the reference size) end to end as a user runs it, in a fresh process each time, and the same
table in process (`splitnet.nets.cost.table`, without start-up and imports).

    python3 benchmarks/bench_describe.py                 # median of 7 runs
    python3 benchmarks/bench_describe.py --runs 3 -- --diffusion-field conv --method rk4

The costs are closed forms (splitnet.configs.kinds): no model is built and torch is never imported
(the script checks: a describe that imports torch is a regression). Prints every run's wall
time, the medians, and a markdown row for docs/benchmarks.md.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from cli_timing import machine_row, parse, parser, splitnet, time_runs

NO_TORCH = ("import sys, runpy; sys.argv = ['splitnet', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('splitnet', run_name='__main__')\n"
            "except SystemExit as e:\n    code = e.code\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO TORCH', file=sys.stderr)\n")


def _in_process(extra: list[str], runs: int) -> float:
    from splitnet import cost
    from splitnet.cli import build_parser
    from splitnet.cli._args import given_options
    from splitnet.cli.commands.cmd_describe import SIZE
    from splitnet.configs.config import SplitConfig

    args = build_parser("describe").parse_args(extra)
    size = {**SIZE, **given_options(args, SplitConfig, skip=("scheme", "weights"))}
    size.update(vocab_size=args.vocab_size, max_len=args.seq_len)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        cost.table(seq_len=args.seq_len, **size)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    args, extra = parse(parser("describe --schemes all", runs=7), argv)
    cmd = [*splitnet(), "describe", "--schemes", "all", *extra]
    times, r = time_runs(cmd, args.runs)
    if r.returncode != 0:
        print(r.stdout, r.stderr, file=sys.stderr)
        return r.returncode
    rows = sum(1 for line in r.stdout.splitlines() if " shared " in line or " per-stage " in line)
    probe = subprocess.run([sys.executable, "-c", NO_TORCH, *cmd[cmd.index("describe"):]],
                           capture_output=True, text=True, check=False)
    torch_free = "NO TORCH" in probe.stderr
    med = statistics.median(times)
    inproc = _in_process(cmd[cmd.index("describe") + 1:], args.runs)
    print("runs (s): " + ", ".join(f"{t:.2f}" for t in times))
    print(f"median of {args.runs}: {med:.2f} s end to end (min {min(times):.2f}, max "
          f"{max(times):.2f}); {rows} rows; cost.table in process: {inproc * 1e3:.0f} ms; "
          f"torch imported: {'no' if torch_free else 'YES (regression)'}")
    cmd_txt = " ".join(["splitnet describe --schemes all", *extra])
    print("\n" + machine_row([f"`{cmd_txt}`", f"{med:.2f} s",
                              f"{min(times):.2f}–{max(times):.2f} s", f"{inproc * 1e3:.0f} ms"]))
    return 0 if torch_free else 1


if __name__ == "__main__":
    sys.exit(main())
