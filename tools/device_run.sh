#!/usr/bin/env bash
# The H200 reproduction: one device command that calibrates, evaluates every bundled
# submission on the GPU workloads (full engine + screening), runs the adversarial
# fixtures on the GPU, and writes everything back under $OUT.
#
# Usage on the device machine (from the repo root, carrying .device for TileLang):
#   bash tools/device_run.sh [bundle|fixtures|repeat|all]
set -uo pipefail
mode="${1:-all}"
OUT="${OUT:-/tmp/kg-out}"
mkdir -p "$OUT"
if [ -f .device/tl_site.tar.xz ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf .device/tl_site.tar.xz
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 KERNELGATE_CACHE="$OUT/cache"
kg() { python3 -m harness "$@"; }
{
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
  python3 -c "import tilelang; print('tilelang', tilelang.__version__)" 2>&1 | tail -1
  nproc
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
kg calibrate --device cuda 2>&1 | tee "$OUT/calibrate.txt"
cp "$OUT"/cache/ceilings/*.json "$OUT/ceilings.json" 2>/dev/null
scratch=/dev/shm/kg; mkdir -p $scratch
if [ "$mode" = bundle ] || [ "$mode" = all ]; then
  kg run submissions/triton-reference submissions/tilelang-reference submissions/defects --device cuda \
     --out "$OUT/bundle" --scratch $scratch --jobs "${KG_JOBS:-8}" --quick --yes-execute --no-progress \
     --compile-timeout 400 2>&1 | tail -150 > "$OUT/bundle.txt"
  kg leaderboard --results "$OUT/bundle" --out "$OUT/leaderboard.json" > "$OUT/leaderboard.txt" 2>&1
fi
if [ "$mode" = fixtures ] || [ "$mode" = all ]; then
  kg run tests/execute/fixtures/mixed tests/execute/fixtures/gpu --device cuda --tags smoke --out "$OUT/fixtures" \
     --scratch $scratch --jobs 4 --quick --yes-execute --no-progress --round-timeout 30 --compile-timeout 120 \
     > "$OUT/fixtures.txt" 2>&1
  python3 tools/check_fixture_statuses.py "$OUT/fixtures" >> "$OUT/fixtures.txt" 2>&1
fi
if [ "$mode" = repeat ]; then
  for i in 1 2; do
    kg run submissions/triton-reference --device cuda --out "$OUT/repeat$i" --scratch $scratch --jobs 8 \
       --yes-execute --no-progress > "$OUT/repeat$i.txt" 2>&1
  done
  python3 tools/compare_repeats.py "$OUT/repeat1" "$OUT/repeat2" > "$OUT/repeat.txt" 2>&1
fi
tar -C "$OUT" -czf "$OUT/results.tgz" bundle fixtures repeat1 repeat2 2>/dev/null
tail -60 "$OUT/bundle.txt" 2>/dev/null; cat "$OUT/fixtures.txt" 2>/dev/null | tail -40; cat "$OUT/repeat.txt" 2>/dev/null
