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
# <config>_results.jsonl.
# Environment: KG_BENCH_CONFIGS (NAME:JOBS:GPUS ...), KG_BENCH_PROBLEMS (space-separated; "all" for
# every problem), KG_BENCH_FOLDERS (default submissions/triton-reference), KG_BENCH_EXTRA (more
# 'kernelgate run' flags), KG_BENCH_BUDGET (seconds, default 330). Carry .device for TileLang.
# The 1-vs-2-GPU measurement on the whole suite (two commands, same machine, one after the other):
#   KG_BENCH_CONFIGS=one:12:0 KG_BENCH_PROBLEMS=all KG_BENCH_FOLDERS="submissions/triton-reference
#   submissions/tilelang-reference submissions/defects" KG_BENCH_EXTRA="--quick --check-slots 3" bash tools/device_bench.sh
#   ... and the same with KG_BENCH_CONFIGS=two:24:0,1
set -uo pipefail
OUT="${OUT:-/tmp/kg-bench}"
# shellcheck source=tools/device_env.sh
source tools/device_env.sh
problems="${KG_BENCH_PROBLEMS:-layernorm rmsnorm softmax sum_dim conv2d_1x1 depthwise_conv2d gemm_square bmm gelu swiglu}"
only=(); [ "$problems" != all ] && for p in $problems; do only+=(--only "$p"); done
configs="${KG_BENCH_CONFIGS:-seq:1:0 pipe:12:0 pipe2:24:0,1}"
# shellcheck disable=SC2086 # word splitting of the folder and flag lists is intended
timeout "${KG_BENCH_BUDGET:-330}" python3 tools/benchmark_throughput.py --configs $configs --out "$OUT/bench" \
   --folders ${KG_BENCH_FOLDERS:-submissions/triton-reference} "${only[@]}" \
   --extra --scratch /dev/shm/kgb --compile-timeout 300 ${KG_BENCH_EXTRA:-} > "$OUT/bench.txt" 2>&1
echo "benchmark exit $?" >> "$OUT/bench.txt"
[ -d "$OUT/bench/seq" ] && [ -d "$OUT/bench/pipe" ] && \
  python3 tools/compare_repeats.py "$OUT/bench/seq" "$OUT/bench/pipe" > "$OUT/repeat_seq_vs_pipe.txt" 2>&1
cp "$OUT/bench/benchmark.json" "$OUT/benchmark.json" 2>/dev/null
for d in "$OUT"/bench/*/; do c=$(basename "$d"); cp "$d/results.jsonl" "$OUT/${c}_results.jsonl" 2>/dev/null; done
rm -rf "$OUT/bench" "$OUT/cache"
cat "$OUT/environment.txt" | head -8; cat "$OUT/bench.txt" | tail -12; tail -5 "$OUT/repeat_seq_vs_pipe.txt" 2>/dev/null; ls "$OUT"
