#!/usr/bin/env bash
# An A/B of the bundled suite on one machine in one command: this working tree's harness against an older
# commit's, alternating base, head (KG_AB_ROUNDS times), so the machine's drift and its neighbours fall on both.
# Why: two suites on two machines, at two commits, cannot tell the machine's speed from the change's cost.
# Make the base here (its files travel as an ignored folder, carried):
#   mkdir -p .ab && git archive REF harness problems submissions tools pyproject.toml | gzip > .ab/base.tgz
#   grep -qx '/.ab/' .git/info/exclude || echo '/.ab/' >> .git/info/exclude
# Each side runs its own tools/benchmark_throughput.py, which runs its own harness (its folder first on PYTHONPATH).
# KG_AB_VARIANT="ARGS" adds a third side each round, this tree with more `kernelgate run` arguments (for instance
# "--check-slots 4"), compared with head.
# Usage on the device machine, from the repo root, carrying .device and .ab (each suite about 120 s):
#   KG_AB_ROUNDS=1 bash tools/device/ab_suite.sh
#   KG_AB_VARIANT="--check-slots 4" bash tools/device/ab_suite.sh
#   KG_AB_NO_BASE=1 KG_AB_VARIANT="--context-starts 2" bash tools/device/ab_suite.sh   (head and variant only)
# KG_PACK=1 packs $OUT into $OUT/evidence.tgz at the end (a device command returns 8 files at most).
set -uo pipefail
OUT="${OUT:-/tmp/kg-out}"
export KERNELGATE_CACHE=/tmp/kg-cache
# shellcheck source=tools/device_env.sh
source tools/device_env.sh
if [ -z "${KG_AB_NO_BASE:-}" ]; then
  [ -f .ab/base.tgz ] || { echo "no .ab/base.tgz: make it with git archive (see the top of this script)" >&2; exit 2; }
  rm -rf /tmp/ab-base && mkdir -p /tmp/ab-base && tar -C /tmp/ab-base -xzf .ab/base.tgz
fi
head_dir=$PWD
sides="base head"; [ -n "${KG_AB_VARIANT:-}" ] && sides="base head variant"
[ -n "${KG_AB_NO_BASE:-}" ] && sides="${sides#base }"
for r in $(seq 1 "${KG_AB_ROUNDS:-1}"); do
  for side in $sides; do
    dir=$head_dir; [ "$side" = base ] && dir=/tmp/ab-base
    slots=(--check-slots 3); more=()
    # shellcheck disable=SC2206  # the variant's arguments are words
    [ "$side" = variant ] && { slots=(); more=(${KG_AB_VARIANT}); }
    tag="ab-$side-$r"
    echo "== $tag ($(date -u +%T)) ${more[*]}"
    (cd "$dir" && PYTHONPATH="/tmp/site:$dir" timeout "${KG_SUITE_S:-200}" python3 tools/benchmark_throughput.py \
      --configs one:12:0 --out "$OUT/$tag" \
      --folders submissions/triton-reference submissions/tilelang-reference submissions/defects \
      --extra --scratch /dev/shm/kg/ab --compile-timeout 300 --quick "${slots[@]}" "${more[@]}" > "$OUT/$tag.txt" 2>&1)
    cp "$OUT/$tag/one/results.jsonl" "$OUT/${tag}_results.jsonl" 2>/dev/null
    cp "$OUT/$tag/benchmark.json" "$OUT/${tag}_benchmark.json" 2>/dev/null
    rm -rf "$OUT/$tag" /dev/shm/kg/ab
    tail -4 "$OUT/$tag.txt" | head -2
  done
done
if [ -f "$OUT/ab-base-1_results.jsonl" ]; then
  python3 tools/compare_repeats.py "$OUT/ab-base-1_results.jsonl" "$OUT/ab-head-1_results.jsonl" \
    > "$OUT/repeat_base_vs_head.txt" 2>&1
  tail -2 "$OUT/repeat_base_vs_head.txt"
fi
if [ -f "$OUT/ab-variant-1_results.jsonl" ]; then
  python3 tools/compare_repeats.py "$OUT/ab-head-1_results.jsonl" "$OUT/ab-variant-1_results.jsonl" \
    > "$OUT/repeat_head_vs_variant.txt" 2>&1
  tail -2 "$OUT/repeat_head_vs_variant.txt"
fi
ls "$OUT"
pack_out  # KG_PACK=1: everything in $OUT as one archive (tools/device_env.sh)
