#!/usr/bin/env bash
# The retrieval core on a machine with an accelerator, in two parts:
#   gpu   its tests, then the search and metric benchmarks on the accelerator: sections
#         of benchmarks/RESULTS.md titled with the backend ("Hamming top-k (gpu: NVIDIA
#         H200)"); FAISS on the host's CPU cores, and FAISS's own GPU index where the
#         faiss-gpu package is installed.
#   images  JPEGs in NUS-WIDE's list layout through jhash's image pipeline into a
#         ResNet-18 DCH train step (and PyTorch's on the same device where torch is
#         installed), encoding, and CDH's exact B-step at 186,000 items
#         (benchmarks/bench_images_gpu.py); also run by gpu and all.
#   cpu2  the CPU benchmarks of top-k and mAP on two of the host's cores (taskset): the
#         README's 2-core machine, on the host's CPU kind; sections titled with that kind
#         ("Hamming top-k (cpu: 2 cores, AVX-512 VPOPCNTDQ)") unless it is AVX2. The
#         native kernels are built first (with a C++ compiler; else the run stops).
# Run from the repository root where JAX (and faiss-cpu, for the comparison) is installed:
#   benchmarks/accelerator.sh [LOGDIR] [gpu|images|cpu2|all]      (default: accelerator-logs all)
# The logs and a copy of benchmarks/RESULTS.md go to LOGDIR.
set -uo pipefail
log=${1:-accelerator-logs}
part=${2:-all}
case "$part" in gpu|images|cpu2|all) ;; *) echo "part must be gpu, images, cpu2 or all; got $part" >&2; exit 2;; esac
mkdir -p "$log"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
grep -m1 'model name' /proc/cpuinfo | tee "$log/cpu.txt"
grep -o -m1 'avx512_vpopcntdq\|avx2' /proc/cpuinfo | head -1 | tee -a "$log/cpu.txt"

if [ "$part" = cpu2 ] || [ "$part" = all ]; then
  if JAX_PLATFORMS=cpu python3 -m jhash.native 2>&1 | tee "$log/native.txt"; then
    for bench in bench_topk bench_metrics; do
      JAX_PLATFORMS=cpu timeout "${CPU_BENCH_SECONDS:-300}" taskset -c 0,1 \
        python3 "benchmarks/$bench.py" 2>&1 | tee "$log/cpu2_$bench.txt"
    done
  fi
fi

if [ "$part" = gpu ] || [ "$part" = all ]; then
  python3 -c "import jax; print('jax', jax.__version__, jax.devices())" 2>&1 |
    tee "$log/devices.txt"
  timeout "${TEST_SECONDS:-240}" python3 -m pytest -q -x --durations=10 \
    tests/test_search.py tests/test_index.py tests/test_metrics.py tests/test_methods.py \
    tests/test_fit.py 2>&1 | tee "$log/tests.txt"
  for bench in bench_topk bench_metrics bench_index; do
    timeout "${BENCH_SECONDS:-150}" python3 "benchmarks/$bench.py" 2>&1 |
      tee "$log/$bench.txt"
  done
fi
if [ "$part" != cpu2 ]; then
  timeout "${IMAGES_SECONDS:-300}" python3 benchmarks/bench_images_gpu.py 2>&1 |
    tee "$log/bench_images_gpu.txt"
fi
cp benchmarks/RESULTS.md "$log/RESULTS.md"
