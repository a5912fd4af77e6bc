"""Bad input, second round: cases that gave a silent answer or a raw traceback."""

import pathlib
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest

import jhash
from jhash import data

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _codes(rng, n, k):
  return np.where(rng.random((n, k)) < 0.5, 1, -1).astype(np.int8)


def test_unpacking_at_another_length_refuses_bits_it_would_drop(rng):
  packed = jhash.codes.pack_bits(_codes(rng, 6, 32))
  with pytest.raises(ValueError, match="packed sets bits past num_bits=16"):
    jhash.codes.unpack_bits(packed, 16)  # bits 16-31 would be dropped
  twelve = np.asarray(jhash.codes.pack_bits(_codes(rng, 6, 12))).copy()
  np.testing.assert_array_equal(jhash.codes.pack_bits(jhash.codes.unpack_bits(twelve, 12)), twelve)
  twelve[2, 0] |= np.uint32(1 << 20)  # a padding bit set
  with pytest.raises(ValueError, match=r"num_bits=12 in 1 codes \(first: code 2"):
    jhash.codes.unpack_bits(twelve, 12)


def test_map_over_no_defined_query_warns_that_it_is_nan(rng):
  q, db = _codes(rng, 10, 16), _codes(rng, 100, 16)
  q_labels, db_labels = np.zeros((10, 3), bool), np.zeros((100, 3), bool)
  with pytest.warns(RuntimeWarning, match="no query has a relevant item"):
    value = jhash.metrics.mean_average_precision(q, db, q_labels, db_labels, no_relevant="skip")
  assert np.isnan(value)
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # "zero" counts them: no warning, 0
    assert jhash.metrics.mean_average_precision(q, db, q_labels, db_labels) == 0.0
    q_labels[0, 0] = db_labels[:5, 0] = True  # one query defined: no warning
    jhash.metrics.mean_average_precision(q, db, q_labels, db_labels, no_relevant="skip")


def test_canvas_grid_as_one_int_names_the_argument(rng):
  images = rng.random((20, 8, 8)).astype(np.float32)
  with pytest.raises(ValueError, match=r"grid must be \(grid_h, grid_w\), two ints >= 1; got 2"):
    data.make_canvas_dataset(images, np.arange(20) % 4, grid=2)


def test_a_damaged_weights_file_is_named(tmp_path):
  pytest.importorskip("safetensors")
  net = jhash.models.backbone((32, 32, 3), 4)
  variables = jax.eval_shape(
    net.init, jax.random.key(0), jax.ShapeDtypeStruct((1, 32, 32, 3), np.float32)
  )
  bad = tmp_path / "bad.safetensors"
  bad.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{not json")
  with pytest.raises(ValueError, match=r"bad.safetensors' is not a readable .safetensors file"):
    jhash.models.load_torchvision_resnet(bad, variables)
  with pytest.raises(ValueError, match="no weights file at"):
    jhash.models.load_torchvision_resnet(tmp_path / "absent.safetensors", variables)


def _main(*args, cwd=ROOT):
  return subprocess.run(
    [sys.executable, "-m", "experiments.main", *args],
    cwd=cwd,
    capture_output=True,
    text=True,
    timeout=300,
  )


def test_an_unknown_config_key_is_named_with_the_keys_there_are(tmp_path):
  config = "experiments/configs/quickstart.py:quick"
  out = _main("--config", config, "--workdir", str(tmp_path / "run"), "--config.foo=1")
  assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
  assert "--config.foo=1: config has no key 'foo'; its keys: bits," in out.stderr
  out = _main(
    f"--config={config}", "--workdir", str(tmp_path / "run"), "--config.methods.itq.num_iter=3"
  )
  assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
  assert (
    "config.methods.itq has no key 'num_iter' (did you mean 'num_iters'?); its keys: "
    "method, num_iters."
  ) in out.stderr
  assert not (tmp_path / "run").exists()


def test_a_workdir_that_is_a_file_is_refused(tmp_path):
  blocker = tmp_path / "afile"
  blocker.write_text("x")
  for workdir in (blocker, blocker / "run"):
    out = _main("--config", "experiments/configs/quickstart.py:quick", "--workdir", str(workdir))
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert f"must be a directory (new or a run's); '{blocker}' is a file" in out.stderr


def test_a_damaged_progress_file_is_named(tmp_path):
  from experiments import harness

  path = tmp_path / "progress.json"
  harness.atomic_write_json(path, {"cells": {"a": {"map": 0.5}}, "seconds": {}})
  assert harness.read_json(path)["cells"]["a"]["map"] == 0.5
  path.write_text(path.read_text()[:20])  # truncated from outside
  with pytest.raises(harness.WorkdirError, match="progress.json is damaged"):
    harness.read_json(path)
  assert harness.read_json(tmp_path / "absent.json", {"x": 1}) == {"x": 1}
