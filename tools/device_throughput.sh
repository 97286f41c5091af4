#!/usr/bin/env bash
# The throughput evidence in one command on a two-GPU device machine (carry .device for TileLang):
#   1. tools/device_bench.sh on the Triton references of 10 problems: seq / pipe / pipe2
#      (harness overhead per candidate, pipelining, repeatability seq vs pipe);
#   2. the whole bundled suite (Triton, TileLang, defects; --quick) on GPU 0 with 12 jobs,
#      then on GPUs 0,1 with 24 jobs (1 vs 2 GPU scaling), same machine, one after the other.
# Leaves $OUT/throughput.tar.gz (bench/ and suite/, as device_bench.sh leaves them).
set -uo pipefail
OUT="${OUT:-/tmp/kg-throughput}"
mkdir -p "$OUT"
OUT="$OUT/bench" KG_BENCH_BUDGET="${KG_BENCH_BUDGET:-220}" bash tools/device_bench.sh
OUT="$OUT/suite" KG_BENCH_CONFIGS="one:12:0 two:24:0,1" KG_BENCH_PROBLEMS=all \
  KG_BENCH_FOLDERS="submissions/triton-reference submissions/tilelang-reference submissions/defects" \
  KG_BENCH_EXTRA="--quick --check-slots 3" KG_BENCH_BUDGET="${KG_SUITE_BUDGET:-330}" bash tools/device_bench.sh
tar -C "$OUT" -czf "$OUT/throughput.tar.gz" bench suite && rm -rf "$OUT/bench" "$OUT/suite"
ls -la "$OUT"
