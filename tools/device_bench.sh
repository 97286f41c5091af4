#!/usr/bin/env bash
# Throughput benchmark in one device command (issue: throughput and scale-out).
# Same candidates, same full timing protocol, three configurations:
#   seq   1 job,  GPU 0       (one candidate at a time: compile, check, time)
#   pipe  12 jobs, GPU 0      (compiles overlap; GPU 0 runs one timed job at a time)
#   pipe2 24 jobs, GPUs 0,1   (the same, pulled by two GPUs from one queue)
# seq and pipe time the same kernels on the same GPU: compare_repeats on them is
# also a repeatability check (pipelining must not move the medians).
# Usage on a two-GPU device machine, from the repo root: bash tools/device_bench.sh
# Leaves under $OUT: environment.txt, bench.txt, benchmark.json, repeat_seq_vs_pipe.txt,
# {seq,pipe,pipe2}_results.jsonl.
set -uo pipefail
OUT="${OUT:-/tmp/kg-bench}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 KERNELGATE_CACHE="$OUT/cache"
{
  date -u
  nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
  echo "cpus $(nproc)"
  CUDA_VISIBLE_DEVICES=0 python3 -m harness calibrate --device cuda
} > "$OUT/environment.txt" 2>&1
problems="${KG_BENCH_PROBLEMS:-layernorm rmsnorm softmax sum_dim conv2d_1x1 depthwise_conv2d gemm_square bmm gelu swiglu}"
only=(); for p in $problems; do only+=(--only "$p"); done
configs="${KG_BENCH_CONFIGS:-seq:1:0 pipe:12:0 pipe2:24:0,1}"
timeout "${KG_BENCH_BUDGET:-330}" python3 tools/benchmark_throughput.py --configs $configs --out "$OUT/bench" \
   --folders submissions/triton-reference "${only[@]}" --extra --scratch /dev/shm/kgb > "$OUT/bench.txt" 2>&1
echo "benchmark exit $?" >> "$OUT/bench.txt"
python3 tools/compare_repeats.py "$OUT/bench/seq" "$OUT/bench/pipe" > "$OUT/repeat_seq_vs_pipe.txt" 2>&1
cp "$OUT/bench/benchmark.json" "$OUT/benchmark.json" 2>/dev/null
for c in seq pipe pipe2; do cp "$OUT/bench/$c/results.jsonl" "$OUT/${c}_results.jsonl" 2>/dev/null; done
rm -rf "$OUT/bench" "$OUT/cache"
cat "$OUT/environment.txt" | head -8; cat "$OUT/bench.txt" | tail -12; tail -5 "$OUT/repeat_seq_vs_pipe.txt"; ls "$OUT"
