# Sourced by the device scripts (tools/device/*.sh), from the repo root,
# with OUT set: puts the carried TileLang bundle (.device/tl_site.tar.xz) and the repo on the
# path, points KernelGate's cache into $OUT, and writes $OUT/environment.txt (date, GPUs, driver,
# clocks, versions, CPU count, the calibrated ceilings of GPU 0).
mkdir -p "$OUT"
if [ -f .device/tl_site.tar.xz ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf .device/tl_site.tar.xz
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
# wheels carried in .whl (packages the image lacks: pyseccomp; the honest libraries' Liger-Kernel, FlagGems)
if compgen -G ".whl/*.whl" > /dev/null; then
  mkdir -p /tmp/site && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl 2>&1 | tail -3
  case ":${PYTHONPATH:-}:" in *:/tmp/site:*) ;; *) export PYTHONPATH="/tmp/site:${PYTHONPATH:-}";; esac
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 KERNELGATE_CACHE="${KERNELGATE_CACHE:-$OUT/cache}"
{
  date -u
  nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.mem,memory.total --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
  python3 -c "import tilelang; print('tilelang', tilelang.__version__)" 2>&1 | tail -1
  python3 -c "import pyseccomp; print('pyseccomp', pyseccomp.__file__)" 2>&1 | tail -1
  uname -r; id -u
  echo "kernelgate $(python3 -c 'import harness; print(harness.__version__)')"
  echo "cpus $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'))"
  CUDA_VISIBLE_DEVICES=0 python3 -m harness calibrate --device cuda
} > "$OUT/environment.txt" 2>&1

# A device command returns at most 8 files: with KG_PACK=1, pack_out leaves $OUT holding only
# evidence.tgz (every file at its top level; its folders are removed).
pack_out() {
  [ -n "${KG_PACK:-}" ] || return 0
  (cd "$OUT" && find . -maxdepth 1 -type f ! -name evidence.tgz -printf '%P\n' | tar -czf evidence.tgz -T - \
    && find . -maxdepth 1 -type f ! -name evidence.tgz -delete && find . -mindepth 1 -maxdepth 1 -type d \
    -exec rm -rf {} +)
  ls -la "$OUT"
}
