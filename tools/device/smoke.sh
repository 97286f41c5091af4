#!/usr/bin/env bash
# First look at a new engine on the GPU (one device command, about 5 minutes): the GPU tests
# (pytest -m gpu), the GPU and mixed fixtures, and a few bundled kernels of each kind with the
# trusted protocol, with their kernel tables, clock decisions and verification counts.
#
# Usage on the device machine, from the repo root, carrying .device (TileLang):
#   bash tools/device/smoke.sh
# (the device image has pytest)
set -uo pipefail
OUT="${OUT:-/tmp/kg-out}"
t0=$(date +%s)
# shellcheck source=tools/device_env.sh
source tools/device_env.sh
cat "$OUT/environment.txt"
scratch=/dev/shm/kg; mkdir -p $scratch
echo "== overhead probe ($(( $(date +%s) - t0 )) s)"
timeout 60 python3 tools/device/overhead_probe.py 2>&1 | tail -12 | tee "$OUT/overhead.txt"
echo "== pytest -m gpu ($(( $(date +%s) - t0 )) s)"
timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/execute/test_gpu_engine.py tests/execute/test_outputs_gpu.py \
  2>&1 | tail -40 | tee "$OUT/pytest_gpu.txt"
echo "== fixtures ($(( $(date +%s) - t0 )) s)"
timeout 150 python3 -m harness run tests/execute/fixtures/mixed tests/execute/fixtures/gpu ${KG_EXTRA_FIXTURES:-} \
  --device cuda --tags smoke --out "$OUT/fixtures" --scratch $scratch/f --jobs 8 --quick --yes-execute --no-progress \
  --round-timeout 15 --compile-timeout 60 > "$OUT/fixtures.txt" 2>&1
python3 tools/check_fixture_statuses.py "$OUT/fixtures" 2>&1 | tail -30
echo "== bundled sample ($(( $(date +%s) - t0 )) s)"
timeout 120 python3 -m harness run submissions/triton-reference submissions/tilelang-reference submissions/defects \
  --device cuda --out "$OUT/bundle" --scratch $scratch/b --jobs 8 --quick --yes-execute --no-progress \
  --only gelu --only layernorm --only gemm_square --only softmax > "$OUT/bundle.txt" 2>&1
tail -30 "$OUT/bundle.txt"
python3 - "$OUT/bundle/results.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    k, t, v = r.get("kernels") or {}, r.get("trusted_timing") or {}, r.get("verification") or {}
    top = ", ".join(f"{x['name'][:28]}:{x['kind']}:{x['share']:.2f}" for x in (k.get("kernels") or [])[:3])
    print(f"{r['candidate'][-34:]:34s} {r['workload'][:18]:18s} {r['status']:12s} dsl={k.get('dsl_share')} "
          f"src={t.get('source')} T_c={t.get('kernel_ms_per_call', 0):.4g} ev={(r.get('timing') or {}).get('median_ms', 0):.4g} "
          f"chk={v.get('checked_calls')} [{top}] {((r.get('error') or {}).get('message') or '')[:120]}")
PY
cp "$OUT/bundle/results.jsonl" "$OUT/bundle_results.jsonl" 2>/dev/null
cp "$OUT/fixtures/results.jsonl" "$OUT/fixtures_results.jsonl" 2>/dev/null
rm -rf "$OUT/bundle" "$OUT/fixtures" "$OUT/cache"
echo "total $(( $(date +%s) - t0 )) s"; ls "$OUT"
