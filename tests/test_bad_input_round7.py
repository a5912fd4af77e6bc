"""Bad input, round 7: what a seventh probe round found in this round's new code."""

import numpy as np
import pytest

import _experiment_runs as runs
from experiments import harness
from jhash import distributed
from jhash import models


def test_backbone_takes_arch_none_and_names_arch_on_feature_vectors():
  assert type(models.backbone((28, 28), 8, arch=None).module) is models.SmallCNN  # was refused
  with pytest.raises(ValueError, match=r"arch='alexnet' names an image network; items of"):
    models.backbone((20,), 8, arch="alexnet")  # was: "unknown option(s) arch"


def test_topn_must_increase(tmp_path):
  config = runs.load_config("papers", "quick").unlock()
  config.datasets.cifar10.root = str(tmp_path)
  config.evaluation.topn = (20, 5, 5)  # was accepted: repeated, unsorted N
  with pytest.raises(harness.ConfigError, match=r"topn: the N of P@N and R@N must increase"):
    runs.run_config(config.lock(), tmp_path / "run")


def test_distributed_names_a_bad_axis_and_non_numeric_rows():
  for name in ("", 5):
    with pytest.raises(ValueError, match=r"axis_name must be a non-empty str"):
      distributed.process_mesh(name)
  mesh = distributed.process_mesh()
  with pytest.raises(ValueError, match=r"local must be an array of numbers or bools"):
    distributed.global_rows(np.array(["a"] * 10), 10, mesh)  # was: JAX's dtype error
