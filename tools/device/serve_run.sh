#!/usr/bin/env bash
# The service's load test on one H200, in two device commands (each planned inside 10 minutes):
#   service   N candidates (the bundled kernels and variants, tools/serve_loadtest.py) submitted by C client
#             processes to `kernelgate serve`, one workload tag (KG_TAGS, default smoke) and the quick preset;
#             nothing lost or duplicated is checked there
#   cli       the same candidates (same KG_N and KG_NONCE: byte for byte) through `kernelgate run`, for the
#             throughput comparison
# The device image lacks the service's packages: carry .whl (fastapi, uvicorn, httpx and their needs, made here by
#   python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     --platform any -d .whl fastapi uvicorn httpx
# about 4 MB) and .device (TileLang). KG_GPUS (default 0) names the GPUs both sides use. Usage on the device machine, from the repo root:
#   KG_NONCE=5e8a01c3 bash tools/device/serve_run.sh service    then    KG_NONCE=5e8a01c3 bash tools/device/serve_run.sh cli
set -uo pipefail
side="${1:?service or cli}"
OUT="${OUT:-/tmp/kg-out}"
export KERNELGATE_CACHE=/tmp/kg-cache
# shellcheck source=tools/device_env.sh
source tools/device_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/kgserve .whl/*.whl
export PYTHONPATH="/tmp/kgserve:$PYTHONPATH"
n="${KG_N:-500}"; nonce="${KG_NONCE:?set KG_NONCE (any 8 hex digits; the same for both sides)}"
common=(--n "$n" --clients "${KG_CLIENTS:-8}" --device cuda --gpus "${KG_GPUS:-0}" --preset quick --tags "${KG_TAGS:-smoke}"
        --nonce "$nonce" --out "$OUT/loadtest-$side")
if [ "$side" = service ]; then
  # the clients stop 45 s before the limit (the service's start-up and calibration, about 30 s, come first), so
  # a run that is cut still reports the latencies it saw; the report is written before the service is stopped
  timeout "${KG_SERVE_S:-575}" python3 tools/serve_loadtest.py "${common[@]}" --no-cli \
    --deadline-s $(( ${KG_SERVE_S:-575} - 45 )) 2>&1 | tail -20
elif [ "$side" = cli ]; then
  timeout "${KG_SERVE_S:-575}" python3 tools/serve_loadtest.py "${common[@]}" --no-service 2>&1 | tail -20
else
  echo "unknown side: $side (service or cli)" >&2; exit 2
fi
pkill -f "harness.commands.serve" 2>/dev/null; pkill -f "harness run" 2>/dev/null  # after a timeout: nothing lingers
d="$OUT/loadtest-$side"
cp "$d/loadtest.json" "$OUT/loadtest_$side.json" 2>/dev/null
cp "$d/service/results.jsonl" "$OUT/service_results.jsonl" 2>/dev/null
cp "$d/cli-results/results.jsonl" "$OUT/cli_results.jsonl" 2>/dev/null
tail -200 "$d/service.log" > "$OUT/service_log_tail.txt" 2>/dev/null
tail -200 "$d/cli.log" > "$OUT/cli_log_tail.txt" 2>/dev/null
rm -rf "$OUT/loadtest-$side" "$OUT/cache"
ls "$OUT"
