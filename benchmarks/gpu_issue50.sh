#!/usr/bin/env bash
# The device call of issue 50 (GPU evidence, third call), one command within the device tool's
# 10-minute limit, most important first; every output lands in $OUT as it is made.
#
#   bash benchmarks/gpu_issue50.sh         # on a CUDA machine, OUT=DIR (default runs/gpu_issue50)
#
# 1. the two-stream reversible backward's GPU test (bit-for-bit against one stream);
# 2. benchmarks/gpu_reversible.py: plain, checkpointed and reversible (one and two streams) at
#    12 and 48 layers of GPT-2-small width, eager and regionally compiled;
# 3. benchmarks/gpu_suite.sh, the lever rows not yet measured (CUDA graphs, batch 8 / 32, the
#    SDPA back-ends, foreach AdamW) and Macaron per-stage, until LIMIT_S (default 575) seconds
#    after the start.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu_issue50}
LIMIT=${LIMIT_S:-575}
mkdir -p "$OUT"
START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }
python3 -m pip install -q --no-deps --no-build-isolation -e . || exit 2
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch; print('torch', torch.__version__)"; date -u; git log -1 --format=%H 2>/dev/null; } \
    > "$OUT/device.txt" 2>&1
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_reversible.py -k two_streams \
    > "$OUT/pytest_two_streams.log" 2>&1
echo "two-streams test: $(tail -1 "$OUT/pytest_two_streams.log") ($(elapsed) s)"
timeout 240 python3 benchmarks/gpu_reversible.py --device cuda --reps 5 \
    --json "$OUT/gpu_reversible.json" > "$OUT/gpu_reversible.log" 2>&1
echo "gpu_reversible: rc $? ($(elapsed) s)"
SUITE_DIR=${SUITE_DIR:-runs/gpu_suite_issue50} \
    ONLY='bench_(cudagraphs|batch8|batch32|sdpa_cudnn|adamw_foreach|macaron|batch32_cudagraphs|sdpa_flash|sdpa_efficient)$' \
    SUITE_BUDGET_S=$(( LIMIT - $(elapsed) )) bash benchmarks/gpu_suite.sh > "$OUT/suite.log" 2>&1
echo "suite: $(tail -1 "$OUT/suite.log") ($(elapsed) s)"
cat "$OUT/device.txt"
grep -E "^\|" "$OUT/gpu_reversible.log"
grep -E "^\| (cudagraphs|batch|sdpa|adamw|macaron)" "$OUT/suite.log"
