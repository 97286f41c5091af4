#!/usr/bin/env bash
# The trusted-measurement evidence on one H200, in parts that a device command runs in the order given
# (plan each command inside 10 minutes; each part has a time budget, its default given below):
#   probe     what confines a worker on this machine (the isolation probe with a CUDA context inside the boundary),
#             as root and as an unprivileged user made for it
#   tests     the GPU tests: pytest -m gpu (timer and calibration, profiler, IPC bounds with a live exporter,
#             the GPU fixtures, bundled kernels), budget KG_PYTEST_S (default 330 s)
#   fixtures  every other adversarial fixture (tests/execute/fixtures/{mixed,hostile,exploits}) at smoke size and
#             the status each must get, budget KG_FIX_S (default 300 s); then the exploits whose trick fires only
#             at GPU-sized workloads at those workloads (tools/check_fixture_statuses.py --targets), KG_FIXT_S (150 s)
#   honest    production libraries (tests/execute/fixtures/honest_gpu: Liger-Kernel, FlagGems, carried as wheels in
#             .whl) judged with default settings, each record beside the library's own error against float64 outside
#             KernelGate (tools/device/honest_libraries.py), budget KG_HONEST_S (default 200 s)
#   suite     the whole bundled suite (--quick, 12 jobs: evaluations per GPU-hour), budget KG_SUITE_S (220 s)
#   suite_exec  the same with every worker started by exec (--spawn exec), compared with the first suite: what
#             the fork server buys on this machine
#   suite_var the same with the options in KG_SUITE_VARIANT (e.g. "--context-starts 2"), compared with the first
#   bench     the Triton references of 10 problems one at a time and 12 at a time (full protocol: harness
#             overhead per candidate, and the seq-vs-pipelined repeatability of the medians), KG_BENCH_S (230 s)
#   trace     the same 10 problems one at a time only, then where each alternating pair's time went
#             (tools/pair_costs.py: round trips, inputs, kernels, holds), about 2 minutes
#   part1 = tests fixtures; part2 = suite bench
# KG_PACK=1 packs everything in $OUT into $OUT/evidence.tgz at the end (a device command returns 8 files at most).
# Usage on the device machine, from the repo root, carrying .device (TileLang):
#   bash tools/device/trusted_run.sh tests suite      then      bash tools/device/trusted_run.sh fixtures bench
# The calibration is cached under /tmp/kg-cache, so a later command on the same (warm) machine reuses it.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: $0 PART... (probe tests fixtures honest suite suite_exec suite_var bench trace part1 part2)" >&2; exit 2; }
OUT="${OUT:-/tmp/kg-out}"
t0=$(date +%s)
export KERNELGATE_CACHE=/tmp/kg-cache
# shellcheck source=tools/device_env.sh
source tools/device_env.sh
scratch=/dev/shm/kg; mkdir -p $scratch
stamp() { echo "== $1 ($(( $(date +%s) - t0 )) s)"; }
cat "$OUT/environment.txt"
parts=()
for a in "$@"; do
  case "$a" in part1) parts+=(tests fixtures);; part2) parts+=(suite bench);; *) parts+=("$a");; esac
done
for part in "${parts[@]}"; do
if [ "$part" = probe ]; then
  stamp "isolation probe"
  python3 - <<'PY' 2>&1 | tee "$OUT/probe.txt"
from harness.execute.parent import isolation
for device in ("cpu", "cuda"):
    got = isolation.probe(device)
    print(device, "root:", got.describe(), "|", got.to_dict())
PY
  id kgprobe >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin kgprobe 2>/dev/null
  d=$(mktemp -d); chmod 755 "$d"; chown kgprobe "$d" 2>/dev/null
  (cd "$d" && setpriv --reuid kgprobe --regid kgprobe --clear-groups env PYTHONPATH="$PYTHONPATH" HOME="$d" \
     python3 -m harness.execute.boundary.probe --cuda) 2>&1 | tail -3 | sed 's/^/cuda unprivileged: /' | tee -a "$OUT/probe.txt"
  (cd "$d" && setpriv --reuid kgprobe --regid kgprobe --clear-groups env PYTHONPATH="$PYTHONPATH" HOME="$d" \
     python3 -c "import torch; torch.ones(1, device='cuda'); torch.cuda.synchronize(); print('ok')") 2>&1 | tail -1 \
     | sed 's/^/cuda unprivileged, no boundary: /' | tee -a "$OUT/probe.txt"
  rm -rf "$d"
  stamp "seccomp rules against the CUDA driver"
  timeout 200 python3 tools/device/seccomp_cuda.py 2>&1 | tee -a "$OUT/probe.txt"
elif [ "$part" = honest ]; then
  stamp "honest libraries"
  timeout ${KG_HONEST_S:-200} python3 -m harness run tests/execute/fixtures/honest_gpu --device cuda --quick \
    --out "$OUT/honest" --scratch $scratch/h --jobs 8 --yes-execute --no-progress > "$OUT/honest.txt" 2>&1
  echo "honest exit $?" >> "$OUT/honest.txt"; tail -25 "$OUT/honest.txt"
  stamp "honest libraries outside KernelGate"
  timeout 70 python3 tools/device/honest_libraries.py tests/execute/fixtures/honest_gpu "$OUT/honest" \
    --json "$OUT/honest_check.json" 2>&1 | tee "$OUT/honest_check.txt"
  cp "$OUT/honest/results.jsonl" "$OUT/honest_results.jsonl" 2>/dev/null
  rm -rf "$OUT/honest"
elif [ "$part" = tests ]; then
  stamp "pytest -m gpu"
  # every GPU test, the GPU fixtures among them (those take most of it: budgets of 120 and 180 s ended inside them)
  timeout ${KG_PYTEST_S:-330} python3 -m pytest -q -m gpu -p no:cacheprovider --durations=0 tests/ 2>&1 \
    | tail -40 | tee "$OUT/pytest_gpu.txt"
elif [ "$part" = fixtures ]; then
  stamp "fixtures"
  # a 64 MiB file cap (the hostile disk filler writes 200 MB; the default cap is 4 GiB)
  fixopts=(--device cuda --out "$OUT/fixtures" --jobs 16 --quick --yes-execute --no-progress --round-timeout 15
           --compile-timeout 90 --timing-timeout 30 --max-file-mib 64)
  # KG_FIX_DIRS: the fixture folders (default: all but gpu/, which pytest -m gpu runs)
  # shellcheck disable=SC2086 # a list of folders
  timeout ${KG_FIX_S:-300} python3 -m harness run ${KG_FIX_DIRS:-tests/execute/fixtures/mixed \
    tests/execute/fixtures/hostile tests/execute/fixtures/exploits tests/execute/fixtures/boundary \
    tests/execute/fixtures/redteam tests/execute/fixtures/honest} --tags smoke --scratch $scratch/f "${fixopts[@]}" \
    > "$OUT/fixtures.txt" 2>&1
  echo "fixtures exit $?" >> "$OUT/fixtures.txt"
  # the exploits whose trick fires only at GPU-sized workloads, at those workloads (same results file)
  rm -rf $scratch/t; mkdir -p $scratch/t/exploits; names=()
  while read -r f wl; do cp "tests/execute/fixtures/$f" $scratch/t/exploits/; names+=("$wl"); done \
    < <(python3 tools/check_fixture_statuses.py --targets)
  wls=$(printf '%s\n' "${names[@]}" | tr ',' '\n' | sort -u | paste -sd,)
  stamp "fixtures at their GPU workloads ($wls)"
  timeout ${KG_FIXT_S:-150} python3 -m harness run $scratch/t/exploits --workloads "$wls" --scratch $scratch/ft \
    "${fixopts[@]}" > "$OUT/fixtures_targets.txt" 2>&1
  echo "fixtures at their workloads exit $?" >> "$OUT/fixtures_targets.txt"
  python3 tools/check_fixture_statuses.py "$OUT/fixtures" > "$OUT/fixture_statuses.txt" 2>&1
  cp "$OUT/fixtures/results.jsonl" "$OUT/fixtures_results.jsonl" 2>/dev/null
  rm -rf "$OUT/fixtures"
  tail -80 "$OUT/fixture_statuses.txt"
elif [ "$part" = trace ]; then
  stamp "bench (10 problems, one at a time)"
  timeout 200 python3 tools/benchmark_throughput.py --configs seq:1:0 --out "$OUT/trace" \
    --folders submissions/triton-reference --only layernorm --only rmsnorm --only softmax --only sum_dim \
    --only conv2d_1x1 --only depthwise_conv2d --only gemm_square --only bmm --only gelu --only swiglu \
    --extra --scratch $scratch/b --compile-timeout 300 > "$OUT/trace.txt" 2>&1
  python3 tools/pair_costs.py "$OUT/trace/seq" > "$OUT/pair_costs.txt" 2>&1
  cp "$OUT/trace/seq/results.jsonl" "$OUT/trace_seq_results.jsonl" 2>/dev/null
  rm -rf "$OUT/trace"
  tail -4 "$OUT/trace.txt"; cat "$OUT/pair_costs.txt"
elif [ "$part" = suite ] || [ "$part" = suite_exec ] || [ "$part" = suite_var ]; then
  # a second suite in one command is suite2, and its medians are compared with the first's
  tag=suite; [ -f "$OUT/suite_results.jsonl" ] && tag=suite2
  more=(); [ "$part" = suite_exec ] && { tag=suite_exec; more=(--spawn exec); }
  # shellcheck disable=SC2206 # the variant's options are words
  [ "$part" = suite_var ] && { tag=suite_var; more=(${KG_SUITE_VARIANT:?suite_var needs KG_SUITE_VARIANT}); }
  stamp "$tag ${more[*]}"
  timeout ${KG_SUITE_S:-220} python3 tools/benchmark_throughput.py --configs one:12:0 --out "$OUT/$tag" \
    --folders submissions/triton-reference submissions/tilelang-reference submissions/defects \
    --extra --scratch $scratch/s --compile-timeout 300 --quick --check-slots 3 "${more[@]}" > "$OUT/$tag.txt" 2>&1
  cp "$OUT/$tag/one/results.jsonl" "$OUT/${tag}_results.jsonl" 2>/dev/null
  cp "$OUT/$tag/benchmark.json" "$OUT/${tag}_benchmark.json" 2>/dev/null
  python3 tools/pair_costs.py "$OUT/$tag/one" > "$OUT/pair_costs_$tag.txt" 2>&1
  python3 tools/side_stream_rules.py "$OUT/${tag}_results.jsonl" > "$OUT/side_stream_rules_$tag.txt" 2>&1
  rm -rf "$OUT/$tag"
  tail -12 "$OUT/$tag.txt"; tail -1 "$OUT/side_stream_rules_$tag.txt"
  if [ "$tag" != suite ] && [ -f "$OUT/suite_results.jsonl" ]; then
    python3 tools/compare_repeats.py --elib "$OUT/suite_results.jsonl" "$OUT/${tag}_results.jsonl" \
      > "$OUT/repeat_suite_vs_$tag.txt" 2>&1
    tail -2 "$OUT/repeat_suite_vs_$tag.txt"
  fi
elif [ "$part" = bench ]; then
  stamp "bench (10 problems, seq and pipelined)"
  timeout ${KG_BENCH_S:-230} python3 tools/benchmark_throughput.py --configs seq:1:0 pipe:12:0 --out "$OUT/bench" \
    --folders submissions/triton-reference --only layernorm --only rmsnorm --only softmax --only sum_dim \
    --only conv2d_1x1 --only depthwise_conv2d --only gemm_square --only bmm --only gelu --only swiglu \
    --extra --scratch $scratch/b --compile-timeout 300 > "$OUT/bench.txt" 2>&1
  python3 tools/compare_repeats.py "$OUT/bench/seq" "$OUT/bench/pipe" > "$OUT/repeat_seq_vs_pipe.txt" 2>&1
  for c in seq pipe; do cp "$OUT/bench/$c/results.jsonl" "$OUT/bench_${c}_results.jsonl" 2>/dev/null; done
  cp "$OUT/bench/benchmark.json" "$OUT/bench_benchmark.json" 2>/dev/null
  python3 tools/pair_costs.py "$OUT/bench/seq" > "$OUT/pair_costs_seq.txt" 2>&1
  python3 tools/side_stream_rules.py "$OUT/bench_seq_results.jsonl" "$OUT/bench_pipe_results.jsonl" \
    > "$OUT/side_stream_rules_bench.txt" 2>&1
  rm -rf "$OUT/bench" "$OUT/cache"
  tail -12 "$OUT/bench.txt"; tail -6 "$OUT/repeat_seq_vs_pipe.txt"
else
  echo "unknown part: $part (probe tests fixtures honest suite suite_exec suite_var bench trace part1 part2)" >&2
fi
done
stamp "done"; ls "$OUT"
pack_out  # KG_PACK=1: everything in $OUT as one archive (tools/device_env.sh)
