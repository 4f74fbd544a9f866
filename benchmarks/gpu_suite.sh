#!/usr/bin/env bash
# Every GPU measurement of issue 13, in resumable steps, ending with a short table.
#
#   bash benchmarks/gpu_suite.sh            # on a CUDA machine; run it again until it says "done"
#   SMOKE=1 PYTHON=.venv/bin/python bash benchmarks/gpu_suite.sh   # the same commands, tiny, CPU
#
# Steps, most important first (see docs/benchmarks.md for what each measures and the predictions):
#   bench_*    benchmarks/bench_layers.py at GPT-2-small size (d768, 12 heads, 12 layers, T 1024,
#              vocabulary 50304, bf16): ours (Lie–Trotter) against the nanoGPT-style reference,
#              one lever at a time; then every registry scheme, shared and per-stage (regional
#              compile), and cold compile seconds, whole graph against regional
#   train_*    splitnet train at the same size (byte vocabulary): steady-state tokens/s and MFU
#              with the optimiser, compile seconds
#   gpu_reversible  benchmarks/gpu_reversible.py: plain, checkpointed and reversible networks
#              (one and two streams) at 12 and 48 layers of GPT-2-small width, eager and
#              regionally compiled (peak memory, tokens/s), and bf16 reconstruction with/without grid
#   compare_*  experiments/compare_schemes.py: GPU scale, 3 seeds of six models; gpu-deep (16
#              layers), transformer against sandwich, 3 seeds
#
# Time: one invocation starts no step that its estimate says would end after SUITE_BUDGET_S
# (default 530 s) from its start, and kills any step at that limit (a killed training run keeps
# its checkpoint and resumes). So each invocation ends within about 9 minutes; a finished step
# is never run again (DIR/NAME.done), a failed one only with RETRY_FAILED=1. Outputs go to
# SUITE_DIR (default runs/gpu_suite); with $OUT set (the device tool's output folder), the small
# files (json, md, log, metrics) go there at the end as one archive, gpu_suite.tgz (the tool
# returns at most 8 files). The estimates of the steps run on an H200 on 2026-11-26 are a little
# above what they took there; the others are guesses.
#
# Environment: PYTHON (default python3), SUITE_DIR, SUITE_BUDGET_S, SMOKE=1 (tiny sizes on the
# CPU, no budget), ONLY=regex (run only the steps whose name matches), EXTRA=1 (also
# max-autotune-no-cudagraphs: a 6-minute compile in the issue's measurement), RETRY_FAILED=1.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DIR=${SUITE_DIR:-runs/gpu_suite}
BUDGET=${SUITE_BUDGET_S:-530}
START=$(date +%s)
mkdir -p "$DIR"
LEFT=0
FAILED=0

if [ "${SMOKE:-0}" != 1 ] && ! "$PY" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
    echo "gpu_suite: no CUDA device here (torch.cuda.is_available() is False); run it on a GPU" \
        "machine, or SMOKE=1 for the tiny CPU version" >&2
    exit 2
fi

"$PY" -m pip install -q --no-deps --no-build-isolation -e . || { echo "pip install failed"; exit 2; }

if [ "${SMOKE:-0}" = 1 ]; then
    BUDGET=100000
    DEV="--device cpu"
    GPT="--d-model 32 --n-heads 2 --n-layers 2 --seq-len 32 --vocab-size 512"
    B8=2; B16=4; B32=8; CHUNK=48
    SCHEMES=lie-trotter,yoshida4                 # the command path, not the whole registry
    BENCH="$DEV --dtype bfloat16 --threads 1 --pairs 1 --reps 1 --warmup 1 --scheme-reps 1"
    TRAIN="$DEV --threads 1 --d-model 32 --n-heads 2 --n-layers 2 --context 32 --batch-size 4"
    TSTEPS=6; TSTEPS_LONG=6
    CUDNN=math; EFFICIENT=math                  # no cuDNN / memory-efficient kernel on the CPU
    CMP="--scale cpu --device cpu --steps 3 --seeds 0 --threads 1"
    CMP_GPU_MODELS=transformer,sandwich; CMP_DEEP="$CMP"
else
    DEV="--device cuda"
    GPT="--d-model 768 --n-heads 12 --n-layers 12 --seq-len 1024 --vocab-size 50304"
    B8=8; B16=16; B32=32; CHUNK=4096
    SCHEMES=core                                 # the seven schemes of the contract (the zoo has 33)
    BENCH="$DEV --dtype bfloat16 --pairs 5 --reps 3 --warmup 2 --scheme-reps 3"
    TRAIN="$DEV --d-model 768 --n-heads 12 --n-layers 12 --context 1024 --batch-size 16"
    TSTEPS=150; TSTEPS_LONG=60
    CUDNN=cudnn; EFFICIENT=efficient
    CMP="--scale gpu --device cuda --steps 2000 --seeds 0,1,2 --threads 0"
    CMP_GPU_MODELS=transformer,macaron,strang-shared,sandwich,sdu-gates,interleaved
    CMP_DEEP="--scale gpu-deep --device cuda --steps 2000 --seeds 0,1,2 --threads 0"
fi

elapsed() { echo $(( $(date +%s) - START )); }

# step NAME ESTIMATE_S COMMAND...: run COMMAND unless done, failed or out of time.
step() {
    local name=$1 est=$2; shift 2
    if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return 0; fi
    [ -e "$DIR/$name.done" ] && return 0
    if [ -e "$DIR/$name.failed" ] && [ "${RETRY_FAILED:-0}" != 1 ]; then return 0; fi
    local left=$(( BUDGET - $(elapsed) ))
    if (( est > left )); then
        echo "-- $name: not started (estimate ${est} s, ${left} s left)"; LEFT=$((LEFT + 1))
        return 0
    fi
    echo "== $name ($(elapsed) s): $*"
    local t0 rc
    t0=$(date +%s)
    timeout -k 30 "$left" "$@" > "$DIR/$name.log" 2>&1
    rc=$?
    if [ $rc = 0 ]; then
        touch "$DIR/$name.done"; rm -f "$DIR/$name.failed"
        echo "   done in $(( $(date +%s) - t0 )) s"
    elif [ $rc = 3 ] || [ $rc = 124 ] || [ $rc = 137 ] || [ $rc = 143 ]; then
        echo "   stopped by the time budget (rc $rc): run the suite again to go on"
        LEFT=$((LEFT + 1))
    else
        echo "   FAILED (rc $rc): see $DIR/$name.log"; tail -5 "$DIR/$name.log"
        echo "$rc" > "$DIR/$name.failed"; FAILED=$((FAILED + 1))
    fi
}

bench() {   # bench NAME ESTIMATE_S ARGS...: ours and the reference under one lever setting
    local name=$1 est=$2; shift 2
    step "bench_$name" "$est" "$PY" benchmarks/bench_layers.py $BENCH $GPT --schemes none \
        --compile-cache --json "$DIR/bench_$name.json" "$@"
}

# -- 1. levers, one at a time, ours and the reference alike --------------------------------
bench base_model_only   150 --compile --compile-scope model --batch $B16
bench model_loss         70 --compile --batch $B16
bench chunked            70 --compile --batch $B16 --loss chunked --loss-chunk $CHUNK
bench chunked_8k        120 --compile --batch $B16 --loss chunked --loss-chunk $((2 * CHUNK))
bench cudagraphs        100 --compile --batch $B16 --compile-mode reduce-overhead
bench chunked_cudagraphs 150 --compile --batch $B16 --loss chunked --loss-chunk $CHUNK \
    --compile-mode reduce-overhead
bench batch8             50 --compile --batch $B8
bench batch32            80 --compile --batch $B32
bench batch32_cudagraphs 110 --compile --batch $B32 --compile-mode reduce-overhead
bench sdpa_flash         50 --compile --batch $B16 --sdpa flash
bench sdpa_cudnn         50 --compile --batch $B16 --sdpa $CUDNN
bench sdpa_efficient     50 --compile --batch $B16 --sdpa $EFFICIENT
bench adamw_foreach      50 --compile --batch $B16 --optimizer foreach
bench adamw_fused        70 --compile --batch $B16 --optimizer fused
bench autocast_fused     70 --compile --batch $B16 --optimizer fused --precision autocast
bench master_fused       70 --compile --batch $B16 --optimizer fused --precision master
bench regional          100 --compile --batch $B16 --compile-scope regional
bench regional_chunked  100 --compile --batch $B16 --compile-scope regional --loss chunked \
    --loss-chunk $CHUNK
# Macaron (Strang, per-stage weights) as one graph with its loss: against model_loss above
step bench_macaron 80 "$PY" benchmarks/bench_layers.py $BENCH $GPT --batch $B16 --pairs 0 \
    --compile --compile-scope model+loss --schemes strang --weights per-stage \
    --json "$DIR/bench_macaron.json"
if [ "${EXTRA:-0}" = 1 ]; then
    bench max_autotune  500 --compile --batch $B16 --compile-mode max-autotune-no-cudagraphs
fi

# -- 1b. reversible against plain as depth grows: peak memory, tokens/s, reconstruction ------
if [ "${SMOKE:-0}" = 1 ]; then REV="--quick"; else REV="--device cuda"; fi
step gpu_reversible 200 "$PY" benchmarks/gpu_reversible.py $REV --json "$DIR/gpu_reversible.json"

# -- 2. every registry scheme (regional compile, cold: compile seconds per model) ------------
for w in shared per-stage; do
    step "bench_schemes_$w" 300 "$PY" benchmarks/bench_layers.py $BENCH $GPT --batch $B16 \
        --pairs 0 --compile --compile-scope regional --schemes $SCHEMES --weights $w \
        --json "$DIR/bench_schemes_$w.json"
done
# compile seconds, cold: the whole graph grows with the stages, regional does not
step bench_compile_regional 300 "$PY" benchmarks/bench_layers.py $BENCH $GPT --batch $B16 \
    --pairs 0 --compile --compile-scope regional --schemes lie-trotter,yoshida4,suzuki4 \
    --weights shared --json "$DIR/bench_compile_regional.json"
step bench_compile_whole 120 "$PY" benchmarks/bench_layers.py $BENCH $GPT --batch $B16 \
    --pairs 0 --compile --compile-scope model+loss --schemes lie-trotter,yoshida4 \
    --weights shared --json "$DIR/bench_compile_whole.json"

# -- 3. the trainer: steady-state MFU with the optimiser, compile seconds ------------------
train() {   # train NAME ESTIMATE_S STEPS ARGS...
    local name=$1 est=$2 steps=$3; shift 3
    step "train_$name" "$est" "$PY" -m splitnet train $TRAIN --compile --steps "$steps" \
        --eval-every 100000 --ckpt-every 100000 --eval-windows 64 --no-plot --no-progress \
        --out "$DIR/train_$name" --overwrite "$@"
}
train lt               60 $TSTEPS
train lt_chunked      150 $TSTEPS --loss chunked --loss-chunk $CHUNK
train lt_cudagraphs   170 $TSTEPS --compile-mode reduce-overhead
train lt_bf16_master   60 $TSTEPS --param-dtype bfloat16
train lt_regional     120 $TSTEPS --compile-scope regional
train macaron          60 $TSTEPS --scheme strang --weights per-stage
train yoshida4         60 $TSTEPS_LONG --scheme yoshida4

# -- 4. the comparisons (resumable: each invocation goes on where the last stopped) ---------
compare() {   # compare NAME RUN_ESTIMATE_S ARGS...: start runs while one more fits the budget
    local name=$1 run_est=$2; shift 2
    local left=$(( BUDGET - $(elapsed) ))
    local minutes
    minutes=$(awk -v l="$left" -v r="$run_est" 'BEGIN { printf "%.2f", (l - r) / 60 }')
    step "compare_$name" "$run_est" "$PY" experiments/compare_schemes.py "$@" --compile \
        --runs "$DIR/compare-$name" --report "$DIR/results_$name.md" \
        --figure "$DIR/compare_$name.png" --max-minutes "$minutes"
}
compare gpu 120 $CMP --models $CMP_GPU_MODELS
compare deep 240 $CMP_DEEP --models transformer,sandwich

# -- the table -------------------------------------------------------------------------------
"$PY" benchmarks/gpu_table.py "$DIR"
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then   # the small files, not the checkpoints
    (cd "$DIR" && find . \( -name '*.json' -o -name '*.md' -o -name '*.log' -o -name '*.png' \
        -o -name '*.done' -o -name '*.failed' -o -name 'metrics.jsonl' \) -print0 |
        tar czf "$OUT/gpu_suite.tgz" --null -T -) || echo "could not archive the results to $OUT"
fi
echo "gpu_suite: $(elapsed) s; ${LEFT} steps left, ${FAILED} failed" \
    "$([ "$LEFT" = 0 ] && echo '(done)' || echo '(run it again to go on)')"
# a failed step is a failed suite: the exit status says so (0 only when nothing failed)
[ "$FAILED" = 0 ] || exit 1
