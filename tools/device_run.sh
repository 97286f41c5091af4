#!/usr/bin/env bash
# The H200 reproduction in one device command: calibrate, evaluate every bundled
# submission on the GPU workloads (full engine + screening), run the adversarial
# fixtures on the GPU (incl. a GPU kernel that hangs), time the Triton
# references twice (repeatability), and leave everything under $OUT.
#
# Usage on the device machine, from the repo root, carrying .device for TileLang:
#   bash tools/device_run.sh [BUNDLE_SECONDS]
# With two GPUs the bundle is timed on GPU 0 while the fixtures and the two
# repeat runs go to GPU 1 (one timed job per GPU at a time, as always); with
# one GPU they run one after the other.
# Environment: KG_ONLY="p1 p2" (only these problems), KG_JOBS (default 12), KG_SKIP_FIXTURES=1,
# KG_SKIP_REPEAT=1.
# The device tool returns at most 8 files: environment.txt (+ calibration), ceilings.json,
# bundle.txt, bundle_results.jsonl, leaderboard.json, fixtures.txt (+ status check),
# fixtures_results.jsonl, repeat.txt.
set -uo pipefail
budget="${1:-480}"
OUT="${OUT:-/tmp/kg-out}"
t_start=$(date +%s)
# shellcheck source=tools/device_env.sh
source tools/device_env.sh
kg() { python3 -m harness "$@"; }
cat "$OUT/environment.txt"
cp "$OUT"/cache/ceilings/*.json "$OUT/ceilings.json" 2>/dev/null
ngpu=$(nvidia-smi -L | wc -l)
side=0; [ "$ngpu" -ge 2 ] && side=1
scratch=/dev/shm/kg; mkdir -p $scratch
only=(); for p in ${KG_ONLY:-}; do only+=(--only "$p"); done

bundle() {
  echo "bundle start $(( $(date +%s) - t_start )) s"
  timeout "$budget" python3 -m harness run submissions/triton-reference submissions/tilelang-reference submissions/defects \
     --device cuda --gpus 0 --out "$OUT/bundle" --scratch $scratch/b --jobs "${KG_JOBS:-12}" --check-slots 3 --quick --yes-execute \
     --no-progress --compile-timeout 300 "${only[@]}" 2>&1
  echo "bundle exit $? after $(( $(date +%s) - t_start )) s"
}
fixtures() {
  [ -n "${KG_SKIP_FIXTURES:-}" ] && return
  echo "fixtures start $(( $(date +%s) - t_start )) s on GPU $side"
  timeout 150 python3 -m harness run tests/execute/fixtures/mixed tests/execute/fixtures/gpu --device cuda --gpus $side \
     --tags smoke --out "$OUT/fixtures" --scratch $scratch/f --jobs 6 --quick --yes-execute --no-progress \
     --round-timeout 20 --compile-timeout 60 2>&1
  echo "fixtures exit $? after $(( $(date +%s) - t_start )) s"
  echo "--- status check (expect: in each fixture's docstring)"
  python3 tools/check_fixture_statuses.py "$OUT/fixtures" 2>&1
  echo "--- GPU health probes after faults (record warnings)"
  python3 - "$OUT/fixtures/results.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    for w in r.get("warnings") or []:
        if "health probe" in w:
            print(f"{r['candidate']:40s} {r['status']:14s} {r['created_at']}  {w}")
PY
}
repeat() {  # the same good candidates twice on one GPU, full timing protocol
  [ -n "${KG_SKIP_REPEAT:-}" ] && return
  for i in 1 2; do
    echo "repeat$i start $(( $(date +%s) - t_start )) s on GPU $side"
    timeout 180 python3 -m harness run submissions/triton-reference --device cuda --gpus $side --out "$OUT/repeat$i" \
       --scratch $scratch/r$i --jobs 8 --yes-execute --no-progress > "$OUT/repeat$i.txt" 2>&1
    echo "repeat$i exit $? after $(( $(date +%s) - t_start )) s"; tail -3 "$OUT/repeat$i.txt"
  done
  python3 tools/compare_repeats.py "$OUT/repeat1" "$OUT/repeat2" 2>&1
}
if [ "$side" = 1 ]; then
  bundle > "$OUT/bundle.txt" &
  { fixtures > "$OUT/fixtures.txt"; repeat > "$OUT/repeat.txt"; } &
  wait
else
  bundle > "$OUT/bundle.txt"; fixtures > "$OUT/fixtures.txt"; repeat > "$OUT/repeat.txt"
fi
kg leaderboard --results "$OUT/bundle" --out "$OUT/leaderboard.json" > "$OUT/leaderboard.txt" 2>&1
# the device tool returns at most 8 files: keep the raw results, drop the rest
cp "$OUT/bundle/results.jsonl" "$OUT/bundle_results.jsonl" 2>/dev/null
cp "$OUT/fixtures/results.jsonl" "$OUT/fixtures_results.jsonl" 2>/dev/null
rm -rf "$OUT/bundle" "$OUT/fixtures" "$OUT/cache" "$OUT/leaderboard.txt" "$OUT"/repeat1* "$OUT"/repeat2*
tail -25 "$OUT/bundle.txt"; tail -45 "$OUT/fixtures.txt" 2>/dev/null; tail -45 "$OUT/repeat.txt" 2>/dev/null; ls "$OUT"
echo "total $(( $(date +%s) - t_start )) s"
