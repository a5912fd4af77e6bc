#!/usr/bin/env bash
# The retrieval core on an accelerator: its tests, then the search and metric
# benchmarks, whose results go to sections of benchmarks/RESULTS.md titled with
# the backend (e.g. "Hamming top-k (gpu: NVIDIA H200)"). Run from the repository
# root where JAX for the accelerator (and faiss-cpu, for the comparison) is installed:
#   benchmarks/accelerator.sh [LOGDIR]
set -uo pipefail
log=${1:-accelerator-logs}
mkdir -p "$log"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
python3 -c "import jax; print('jax', jax.__version__, jax.devices())" 2>&1 | tee "$log/devices.txt"
timeout "${TEST_SECONDS:-240}" python3 -m pytest -q -x --durations=10 \
  tests/test_search.py tests/test_index.py tests/test_metrics.py tests/test_methods.py \
  tests/test_fit.py 2>&1 | tee "$log/tests.txt"
for bench in bench_topk bench_metrics bench_index; do
  timeout "${BENCH_SECONDS:-150}" python3 "benchmarks/$bench.py" 2>&1 | tee "$log/$bench.txt"
done
