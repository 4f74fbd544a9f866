"""The GPU figures in docs/benchmarks.md are the recorded files of the H200 run (issue 31), and
the scripts that made them still run (on the CPU, tiny)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data" / "gpu-h200-2026-11-26"
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_table  # noqa: E402


def test_the_docs_quote_the_recorded_h200_files(tmp_path):
    shutil.copytree(DATA, tmp_path / "d")
    assert gpu_table.main([str(tmp_path / "d")]) == 0
    table = (tmp_path / "d" / "table.md").read_text()
    docs = (ROOT / "docs" / "benchmarks.md").read_text()
    ml = json.loads((DATA / "bench_model_loss.json").read_text())
    assert ml["device_name"] == "NVIDIA H200"
    assert f"{100 * ml['ours_mfu']:.1f}" == "46.0" and f"{100 * ml['ref_mfu']:.1f}" == "45.9"
    assert "| model_loss |" in table and "46.0%" in table
    for line in ("| 30.77 | **46.0 %** | 30.81 | 45.9 % | 0.999 |",
                 "| 48 | 22.51 | 5.53 | 70,517 | 36,356 | 0.52 |"):
        assert line in docs
    assert "| lt | 150 | 626,455 | 39.5% |" in table and "**39.5 % MFU**" in docs
    rev = json.loads((DATA / "gpu_reversible.json").read_text())
    peaks = [r["rev_peak_bytes"] for r in rev["rows"]]
    assert max(peaks) / min(peaks) < 1.001                  # "flat to three digits"
    assert rev["reconstruction"]["grid=10"] == 0.0


def test_the_reversible_benchmark_runs_on_the_cpu(tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_reversible.py"),
                        "--quick", "--json", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    assert [row["n_layers"] for row in res["rows"]] == [2, 4]
    assert res["reconstruction"]["grid=10"] == 0.0 < res["reconstruction"]["grid=None"]
