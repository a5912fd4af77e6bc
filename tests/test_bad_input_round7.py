"""Bad input, round 7: what a seventh probe round found in this round's new code."""

import subprocess
import sys

import jax
import numpy as np
import pytest
from jax.sharding import Mesh

import _experiment_runs as runs
import jhash
from experiments import harness
from experiments import retrieval
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


def _index(num_items=50, num_bits=32):
  codes = np.sign(np.random.default_rng(0).normal(size=(num_items, num_bits))).astype(np.int8)
  packed = jhash.codes.pack_bits(codes)
  return jhash.index.build_index(packed, num_bits=num_bits), packed


def test_max_results_is_bounded_by_int32_and_memory():
  index, packed = _index()
  for make in (
    lambda m: jhash.index.searcher(index, max_radius=1, max_results=m),
    lambda m: jhash.index.bucket_search(
      index, packed[:2], num_wanted=5, max_radius=1, max_results=m
    ),
  ):
    with pytest.raises(ValueError, match=r"max_results must be at most 2,147,483,647"):
      make(2**40)  # was: accepted, then JAX's OverflowError
  many = np.repeat(packed[:1], 4096, axis=0)
  with pytest.raises(ValueError, match=r"max_results=2,000,000,000 slots for 4,096 queries"):
    jhash.index.bucket_search(index, many, num_wanted=5, max_radius=1, max_results=2_000_000_000)
  found = jhash.index.bucket_search(index, packed[:2], num_wanted=5, max_radius=1, max_results=7)
  assert found.item_ids.shape == (2, 7)


def _sharded_case():
  rng = np.random.default_rng(1)
  q = np.sign(rng.normal(size=(6, 16))).astype(np.int8)
  db = np.sign(rng.normal(size=(12, 16))).astype(np.int8)
  return q, db, rng.integers(0, 3, 6), rng.integers(0, 3, 12)


def test_sharded_map_runs_inside_jit_and_on_explicit_meshes():
  q, db, ql, dbl = _sharded_case()
  want = jhash.metrics.mean_average_precision(q, db, ql, dbl, ties="aware", top_k=5)
  auto = Mesh(np.array(jax.devices()[:1]), ("db",))
  explicit = jax.make_mesh((1,), ("db",))  # Explicit axes: was shard_map's in_specs error
  for mesh in (auto, explicit):
    got = jhash.metrics.sharded_mean_average_precision(q, db, ql, dbl, mesh=mesh, top_k=5)
    assert got == pytest.approx(want, abs=1e-6)
    jitted = jax.jit(  # was: ConcretizationTypeError
      lambda a, b, c, d, mesh=mesh: jhash.metrics.sharded_mean_average_precision(
        a, b, c, d, mesh=mesh, top_k=5
      )
    )
    assert float(jitted(q, db, ql, dbl)) == pytest.approx(want, abs=1e-6)


def test_sharded_map_refuses_no_queries_as_the_unsharded_one():
  q, db, ql, dbl = _sharded_case()
  mesh = Mesh(np.array(jax.devices()[:1]), ("db",))
  with pytest.raises(ValueError, match=r"query_codes must hold at least one query"):
    jhash.metrics.sharded_mean_average_precision(q[:0], db, ql[:0], dbl, mesh=mesh)  # was NaN


def test_gather_refuses_what_is_not_an_array():
  for bad in (None, [1, None], "rows"):
    with pytest.raises(ValueError, match=r"x must be an array"):
      distributed.gather(bad)  # was: an object array
  np.testing.assert_array_equal(distributed.gather(np.arange(3)), np.arange(3))


def test_arch_is_checked_even_when_no_method_trains_a_network(tmp_path):
  config = runs.load_config("papers", "quick").unlock()
  config.datasets.cifar10.root = str(tmp_path)
  config.arch = "alexnt"
  with pytest.raises(harness.ConfigError, match=r"config.arch must be one of 'resnet18'"):
    runs.run_config(config.lock(), tmp_path / "a")
  config = config.unlock()
  config.arch = "alexnet"  # quick trains ITQ and LSH only: was ignored without a word
  with pytest.raises(harness.ConfigError, match=r"this config's methods \(itq, lsh\) train none"):
    runs.run_config(config.lock(), tmp_path / "b")


def test_the_curves_and_topn_can_be_turned_off_on_the_command_line(tmp_path):
  # An int key cannot be set to None from absl's flags: 0 is the spelling of "none" for
  # pr_curve_bits; () for topn (was: refused as "must be a tuple of ints N >= 1").
  args = [
    "--config=experiments/configs/papers.py:quick",
    f"--config.datasets.cifar10.root={tmp_path}",
    f"--workdir={tmp_path / 'run'}",
  ]
  off = ["--config.plots.pr_curve_bits=0", "--config.evaluation.topn=()"]
  script = "import sys; from absl import app; from experiments import main; " + (
    "app.run(main.main, argv=sys.argv, flags_parser=main._parse_flags)"
  )
  out = subprocess.run(
    [sys.executable, "-c", script, *args, *off], capture_output=True, text=True, timeout=300
  )
  # Past the config's checks: what stops the run is the missing data set.
  assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
  assert "cifar-10-batches-bin" in out.stderr and "pr_curve_bits" not in out.stderr
  config = runs.load_config("papers", "quick").unlock()
  config.plots.pr_curve_bits, config.evaluation.topn = 0, ()
  assert retrieval.pr_curve_bits(config) is None
