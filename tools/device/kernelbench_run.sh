#!/usr/bin/env bash
# KernelBench at native scale on one H200, in two device commands (each inside 10 minutes):
#   part1: environment + calibration, then KernelGate with default settings (--jobs 8) on the public LLM corpus's
#          native sample (one kernel per level-1 problem, one per fifth level-2 problem; Triton kernels in fp32,
#          TileLang kernels in fp16 as KernelBench's evaluator requires), at KernelBench's own sizes; then the same
#          kernels through the independent checker (tools/kernelbench/independent_check.py: fresh process per
#          kernel, KernelBench's allclose, correctness only);
#   part2: the same kernels through KernelBench's own evaluator (eval_kernel_against_ref, with its timing), with
#          its wall time;
#   check: the independent checker alone on the same kernels (when part1's budget ended inside it);
#   one FILE...: KernelGate alone, part1's settings (Triton files in fp32), on the files named (a rerun of records
#          a harness fix changed).
# The inputs travel in .kb/ (ignored by git; carried): .kb/KernelBench/level{1,2} and .kb/src from a KernelBench
# checkout at the commit named in tools/kernelbench/README.md, and .kb/sample from
#   python tools/kernelbench/fetch_corpus.py --mirror ... --out .kb/sample --native-sample
# Usage on the device machine, from the repo root, carrying .device (TileLang) and .kb (and .whl for part2: the
# wheels of pydantic, pydantic-core, annotated-types, typing-inspection and typing-extensions for Python 3.12, which
# KernelBench's evaluator imports and the device image lacks):
#   bash tools/device/kernelbench_run.sh part1      then      bash tools/device/kernelbench_run.sh part2
set -uo pipefail
part="${1:?part1, part2, check or one FILE...}"
OUT="${OUT:-/tmp/kg-out}"
t0=$(date +%s)
export KERNELGATE_CACHE=/tmp/kg-cache
# shellcheck source=tools/device_env.sh
source tools/device_env.sh
scratch=/dev/shm/kg; mkdir -p $scratch
stamp() { echo "== $1 ($(( $(date +%s) - t0 )) s)"; }
triton=(.kb/sample/*--triton)
tilelang=(.kb/sample/*--tilelang)
budget() { local left=$(( ${1} - ($(date +%s) - t0) )); [ $left -gt 20 ] && echo $left || echo 20; }
if [ "$part" = part1 ]; then
  tail -12 "$OUT/environment.txt"
  stamp "kernelgate: Triton kernels, fp32"
  /usr/bin/time -f "wall %e s" timeout "$(budget ${KG_T1:-300})" python3 -m harness run "${triton[@]}" \
    --problems .kb/KernelBench --out "$OUT/kg_triton" --scratch $scratch/t --jobs 8 --yes-execute --no-progress \
    > "$OUT/kg_triton.txt" 2>&1
  echo "exit $?" >> "$OUT/kg_triton.txt"
  tail -4 "$OUT/kg_triton.txt"
  stamp "kernelgate: TileLang kernels, fp16"
  /usr/bin/time -f "wall %e s" timeout "$(budget ${KG_T2:-460})" python3 -m harness run "${tilelang[@]}" \
    --problems .kb/KernelBench --precision float16 --out "$OUT/kg_tilelang" --scratch $scratch/l --jobs 8 \
    --yes-execute --no-progress > "$OUT/kg_tilelang.txt" 2>&1
  echo "exit $?" >> "$OUT/kg_tilelang.txt"
  tail -4 "$OUT/kg_tilelang.txt"
  for k in triton tilelang; do cp "$OUT/kg_$k/results.jsonl" "$OUT/kg_${k}_results.jsonl" 2>/dev/null; done
  rm -rf "$OUT/kg_triton" "$OUT/kg_tilelang" "$OUT/cache"
fi
if [ "$part" = one ]; then
  shift
  stamp "kernelgate: $*"
  mkdir -p $scratch/one_in && cp "$@" $scratch/one_in/   # a submission is a folder: the files named, as they are
  /usr/bin/time -f "wall %e s" timeout "$(budget ${KG_T1:-300})" python3 -m harness run $scratch/one_in \
    --problems .kb/KernelBench --out "$OUT/kg_one" --scratch $scratch/o --jobs 8 --yes-execute --no-progress \
    > "$OUT/kg_one.txt" 2>&1
  echo "exit $?" >> "$OUT/kg_one.txt"
  tail -6 "$OUT/kg_one.txt"
  cp "$OUT/kg_one/results.jsonl" "$OUT/kg_one_results.jsonl" 2>/dev/null
  rm -rf "$OUT/kg_one" "$OUT/cache"
fi
if [ "$part" = part1 ] || [ "$part" = check ]; then
  stamp "independent checker (KernelBench's protocol, no KernelGate import), 6 at a time"
  /usr/bin/time -f "wall %e s" timeout "$(budget ${KG_T3:-575})" python3 tools/kernelbench/independent_check.py \
    --problems .kb/KernelBench $(printf -- '--kernels %s ' "${triton[@]}" "${tilelang[@]}") \
    --precision auto --tolerance 1e-2 --no-timing --jobs 6 --timeout 150 --out "$OUT/independent.jsonl" \
    > "$OUT/independent.txt" 2>&1
  tail -3 "$OUT/independent.txt"
  python3 tools/kernelbench/agreement.py --kernelgate "$OUT"/kg_*_results.jsonl --independent "$OUT/independent.jsonl" \
    2>&1 | head -8
fi
if [ "$part" = part2 ]; then
  stamp "KernelBench's evaluator, 6 at a time"
  # its pydantic (and pydantic's needs) travel as wheels in .whl (carried), installed for this command only
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/kbsite .whl/*.whl
  PYTHONPATH="/tmp/kbsite:$PYTHONPATH" /usr/bin/time -f "wall %e s" timeout "$(budget ${KG_T4:-570})" \
    python3 tools/kernelbench/run_kernelbench_eval.py \
    --kernelbench .kb --problems .kb/KernelBench $(printf -- '--kernels %s ' "${triton[@]}" "${tilelang[@]}") \
    --backend auto --precision auto --jobs 6 --timeout 150 --out "$OUT/kb_eval.jsonl" > "$OUT/kb_eval.txt" 2>&1
  tail -3 "$OUT/kb_eval.txt"
fi
stamp "done"; ls "$OUT"
