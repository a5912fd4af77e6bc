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
  with pytest.warns(RuntimeWarning, match="is 0: no query has a relevant item"):
    assert jhash.metrics.mean_average_precision(q, db, q_labels, db_labels) == 0.0  # "zero"
  with warnings.catch_warnings():
    warnings.simplefilter("error")
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
  config = "experiments/configs/baselines.py:quick"
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
    out = _main("--config", "experiments/configs/baselines.py:quick", "--workdir", str(workdir))
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


# ----------------------------------------------------------------------------- second round


def _signs(rng, *shape):
  return np.where(rng.random(shape) < 0.5, -1, 1).astype(np.int8)


def _feature_batch(rng, d=6):
  return {"views": (rng.normal(size=(40, d)).astype(np.float32),)}


def test_multi_hot_labels_other_than_zero_and_one_are_refused(rng):
  # Class ids as a column [n, 1] used to be read as multi-hot: ids 1 and 2 "shared" a label.
  q, db = _signs(rng, 4, 8), _signs(rng, 12, 8)
  ql, dl = rng.integers(0, 3, 4), rng.integers(0, 3, 12)
  with pytest.raises(ValueError, match=r"query_labels as multi-hot.*only 0 and 1.*1-D"):
    jhash.metrics.mean_average_precision(q, db, ql[:, None], dl[:, None])
  with pytest.raises(ValueError, match=r"db_labels as multi-hot.*\[-1\]"):
    jhash.metrics.mean_average_precision(q, db, np.ones((4, 2), int), -np.ones((12, 2), int))


def test_the_ap_kernel_refuses_distances_it_cannot_rank(rng):
  d = rng.integers(0, 9, (3, 10)).astype(np.int32)
  rel = rng.random((3, 10)) < 0.5
  with pytest.raises(ValueError, match="distances must be >= 0"):
    jhash.metrics.average_precision(d - 5, rel)
  with pytest.raises(ValueError, match="distances must not be NaN"):
    jhash.metrics.average_precision(np.full((3, 10), np.nan, np.float32), rel)
  with pytest.raises(ValueError, match=r"max_distance \(an int >= 0\).*got -1"):
    jhash.metrics.average_precision(d, rel, max_distance=-1)
  with pytest.raises(ValueError, match="at least one database item"):
    jhash.metrics.average_precision(d[:, :0], rel[:, :0])


def test_fit_refuses_a_state_of_another_method_or_settings_and_a_start_without_one(rng):
  batch, key = _feature_batch(rng), jax.random.key(0)
  itq, _ = jhash.fit(jhash.methods.itq(4), key, batch, progress=False)
  with pytest.raises(ValueError, match=r"state lsh makes.*got ITQState.*\.projection is absent"):
    jhash.fit(jhash.methods.lsh(4), key, batch, state=itq)  # was: an ITQState back, silently
  with pytest.raises(
    ValueError, match=r"\.pca is float32 \(6, 4\) where itq's is float32 \(6, 3\)"
  ):
    jhash.fit(jhash.methods.itq(3), key, batch, state=itq)
  with pytest.raises(ValueError, match="start_step=2 resumes a run: it needs the state"):
    jhash.fit(jhash.methods.itq(4), key, batch, start_step=2)  # was: a shorter history
  with pytest.raises(TypeError, match=r"HashingMethod \(call the factory"):
    jhash.fit(jhash.methods.itq, key, batch)
  with pytest.raises(TypeError, match="on_step must be a function"):
    jhash.fit(jhash.methods.itq(4), key, batch, on_step=3)
  with pytest.raises(TypeError, match="state must be a trained state"):
    jhash.encode(jhash.methods.itq(4), None, batch)


def test_make_train_refuses_nan_views_it_can_see(rng):
  batch = _feature_batch(rng)
  train = jhash.make_train(jhash.methods.itq(4, num_iters=2), batch)
  bad = {"views": (np.full_like(batch["views"][0], np.nan),)}
  with pytest.raises(ValueError, match=r"views\[0\]"):
    train(jax.random.key(0), bad)


def test_a_saved_state_without_its_file_list_is_damaged(rng, tmp_path):
  batch = _feature_batch(rng)
  method = jhash.methods.itq(4, num_iters=2)
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  path = jhash.save(tmp_path / "s", state)
  (path / jhash.files.MANIFEST).unlink()
  with pytest.raises(ValueError, match=r"damaged: .*jhash_files.json.*is missing"):
    jhash.restore(path, method, batch)


def test_grid_search_refuses_nan_scores_and_fields_it_cannot_sweep(rng):
  batch, key = _feature_batch(rng), jax.random.key(0)
  scores = iter([0.5, float("nan")])
  with pytest.raises(ValueError, match=r"one number for each grid point.*at value 2"):
    jhash.grid_search(  # NaN was kept as the best (np.argmax of a NaN)
      lambda v: jhash.methods.itq(4, num_iters=1),
      key,
      batch,
      None,
      [1.0, 2.0],
      score=lambda s: next(scores),
    )
  with pytest.raises(ValueError, match="float scalar of the state.*'rotation'"):
    jhash.grid_search(jhash.methods.itq(4), key, batch, "rotation", [0.0], score=lambda s: 0.0)
  with pytest.raises(ValueError, match="validation must be a batch dict"):
    jhash.grid_search(
      lambda v: jhash.methods.itq(4), key, batch, None, [0.0], validation=batch["views"][0]
    )
  with pytest.raises(ValueError, match="gamma is the value cdh_select_gamma sweeps"):
    jhash.cdh_select_gamma(4, key, batch, [0.1], score=lambda s: 0.0, gamma=1.0)


def test_codes_helpers_refuse_what_they_would_cast(rng):
  with pytest.raises(ValueError, match=r"32-bit words.*8589934597"):
    jhash.codes.unpack_bits(np.array([[2**33 + 5]], np.int64), 3)  # was: high bits dropped
  with pytest.raises(ValueError, match="uint32 words"):
    jhash.codes.unpack_bits(np.array([[5.7]]), 3)
  with pytest.raises(ValueError, match="signed must be True or False"):
    jhash.codes.unpack_bits(np.array([[5]], np.uint32), 3, signed="no")
  with pytest.raises(ValueError, match=r"32-bit words"):
    jhash.codes.to_bytes(np.array([[2**40]]))  # was: 0
  with pytest.raises(ValueError, match=r"bytes \(uint8, 0 to 255\)"):
    jhash.codes.from_bytes(np.array([[300]]))  # was: 44
  with pytest.raises(TypeError, match="cannot run inside jit"):
    jax.jit(jhash.codes.to_bytes)(np.zeros((1, 1), np.uint32))
  with pytest.raises(TypeError, match=r"real array \(bits: jhash.codes.from_bits\)"):
    jhash.codes.sign(np.array([True, False]))  # was: [1, 1]


def test_hbmp_refuses_class_ids_far_past_its_items(rng):
  # One id of 10**6 asked for a 10**6 x 10**6 affinity: 4 TB, a raw out-of-memory error.
  x = rng.normal(size=(40, 6)).astype(np.float32)
  y = np.zeros(40, np.int32)
  y[3] = 10**6
  with pytest.raises(ValueError, match=r"largest id is 1000000 for 40 labels of 2 distinct"):
    jhash.fit(jhash.methods.hbmp(4, num_iters=2), jax.random.key(0), {"views": (x,), "labels": y})


def test_deep_methods_refuse_hyperparameters_that_would_diverge_or_divide_by_zero():
  # Each was accepted and surfaced later as "training diverged" or a division by zero.
  with pytest.raises(ValueError, match="period must be >= 1; got 0"):
    jhash.methods.hashnet(8, period=0)
  with pytest.raises(ValueError, match="gamma must be a finite number > 0; got nan"):
    jhash.methods.dch(8, gamma=float("nan"))
  with pytest.raises(ValueError, match="learning_rate must be a finite number > 0; got -1.0"):
    jhash.methods.dch(8, learning_rate=-1.0)
  with pytest.raises(ValueError, match="margin must be a finite number >= 0"):
    jhash.methods.mmhh(8, margin=-2.0)
  with pytest.raises(ValueError, match="gamma must be a finite number >= 0; got -1.0"):
    jhash.methods.cdh(8, gamma=-1.0)
  # Traced values pass (hyperparameters swept under vmap), as does an optax schedule.
  jax.jit(lambda lr, g: jhash.methods.dch(8, learning_rate=lr, gamma=g).num_bits)(0.1, 5.0)
  jhash.methods.dch(8, learning_rate=lambda step: 1e-3)


def test_fit_names_key_when_given_several(rng):
  batch = _feature_batch(rng)
  with pytest.raises(ValueError, match=r"key must be one JAX PRNG key.*shape \(2,\).*split"):
    jhash.fit(jhash.methods.itq(4), jax.random.split(jax.random.key(0)), batch)
  state, _ = jhash.fit(jhash.methods.itq(4), jax.random.PRNGKey(0), batch, progress=False)
  assert state.rotation.shape == (4, 4)  # a raw uint32 [2] key is one key


def test_network_get_set_and_features_check_the_state_and_the_batch(rng):
  x = rng.normal(size=(32, 8)).astype(np.float32)
  batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
  method = jhash.methods.dch(8, batch_size=16, num_epochs=1)
  state = jhash.init(method, jax.random.key(0), batch)
  net = jhash.network(method)
  with pytest.raises(ValueError, match="state must be the method's state, with a field 'coder'"):
    net.get({"coder": 1})
  with pytest.raises(ValueError, match="coder_state must be a jhash.coder.CoderState"):
    net.set(state, {"a": 1})
  small = jax.tree.map(lambda a: a[..., :1] if np.ndim(a) else a, net.get(state))
  with pytest.raises(ValueError, match=r"coder_state\.train\.params.* must have shape"):
    net.set(state, small)
  assert net.set(state, net.get(state)).coder is net.get(state)
  with pytest.raises(ValueError, match="reads features of width 8.*have width 5"):
    net.coder.features(net.get(state), {"views": (x[:, :5],)})


def test_save_names_a_file_in_the_path_keys_and_tracers(rng, tmp_path):
  (tmp_path / "f").write_text("")
  with pytest.raises(FileExistsError, match=r"cannot be created: .*f is a file, not a folder"):
    jhash.save(tmp_path / "f" / "sub", {"a": np.ones(2)})
  with pytest.raises(ValueError, match=r"typed PRNG key at \['a'\].*key_data"):
    jhash.save(tmp_path / "k", {"a": jax.random.key(0)})
  with pytest.raises(TypeError, match="cannot run inside jit or vmap"):
    jax.jit(lambda a: jhash.save(tmp_path / "j", {"a": a}) and a)(np.ones(2))
  assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # nothing half-written


def test_grid_search_refuses_a_grid_that_is_not_a_list_of_numbers(rng):
  batch, key = _feature_batch(rng), jax.random.key(0)
  build = lambda v: jhash.methods.itq(4, num_iters=1)  # noqa: E731
  with pytest.raises(ValueError, match=r"1-D list of finite numbers; got array of shape \(2, 2\)"):
    jhash.grid_search(build, key, batch, None, np.ones((2, 2)), score=lambda s: 0.0)
  with pytest.raises(ValueError, match=r"1-D list of finite numbers; got list \['a', 'b'\]"):
    jhash.grid_search(build, key, batch, None, ["a", "b"], score=lambda s: 0.0)


def test_save_never_replaces_a_folder_it_did_not_write(rng, tmp_path):
  # jhash.save("", state, overwrite=True) once emptied the current folder.
  keep = tmp_path / "mine"
  keep.mkdir()
  (keep / "notes.txt").write_text("keep me")
  with pytest.raises(FileExistsError, match="not a state jhash.save wrote"):
    jhash.save(keep, {"a": np.ones(2)}, overwrite=True)
  assert (keep / "notes.txt").read_text() == "keep me"
  with pytest.raises(TypeError, match="path must name a folder"):
    jhash.save("", {"a": np.ones(2)}, overwrite=True)
  with pytest.raises(TypeError, match="path must name a folder"):
    jhash.save(3, {"a": np.ones(2)})
  with pytest.raises(ValueError, match=r"object array at \['a'\]"):
    jhash.save(tmp_path / "o", {"a": np.array([1, "a"], dtype=object)})
  path = jhash.save(tmp_path / "s", {"a": np.ones(2)})
  jhash.save(path, {"a": np.zeros(2)}, overwrite=True)  # its own folder: replaced
  with pytest.raises(TypeError, match=r"HashingMethod \(call the factory"):
    jhash.restore(path, jhash.methods.itq, _feature_batch(rng))


def test_kernels_refuse_distances_past_max_distance_and_nan_relevance(rng):
  d = rng.integers(0, 17, (10, 50)).astype(np.int32)
  rel = rng.random((10, 50)) < 0.3
  with pytest.raises(ValueError, match="must be <= max_distance=3"):
    jhash.metrics.average_precision(d, rel, max_distance=3)  # was: AP 0.14 for 0.39
  with pytest.raises(ValueError, match="must be <= max_distance=2"):
    jhash.metrics.hits_at_k(d, rel, (5,), max_distance=2)
  with pytest.raises(ValueError, match="must be <= max_distance=2"):
    jhash.metrics.ndcg(d, rel.astype(np.int32), k=5, max_distance=2)
  with pytest.raises(ValueError, match="relevance must not be NaN"):
    jhash.metrics.average_precision(d, np.where(rel, np.nan, 0.0))
  ap, _ = jhash.metrics.average_precision(d, rel, max_distance=16)
  np.testing.assert_allclose(ap, jhash.metrics.average_precision(d, rel)[0], rtol=1e-6)


def test_metrics_refuse_a_mask_kind_or_weights_they_would_misread(rng):
  q, db = _signs(rng, 10, 16), _signs(rng, 50, 16)
  ql, dl = rng.integers(0, 3, 10).astype(np.int32), rng.integers(0, 3, 50).astype(np.int32)
  multi = np.stack([db, -db], axis=1)
  with pytest.raises(ValueError, match="db_mask must be boolean"):
    jhash.metrics.mean_average_precision(q, multi, ql, dl, db_mask=np.full((50, 2), 0.5))
  with pytest.raises(ValueError, match="kind must be one of"):
    jhash.metrics.relevance(ql, dl, "garbage")  # was: same_class, silently
  with pytest.raises(ValueError, match="same layout"):
    jhash.metrics.relevance(ql, np.eye(3, dtype=bool)[dl], "same_class")
  with pytest.raises(ValueError, match="weights must be the bit weights"):
    jhash.metrics.weighted_mean_average_precision(q, db, ql, dl, None)


def test_factories_refuse_settings_they_would_misread():
  with pytest.raises(ValueError, match="num_iters must be a Python int >= 0"):
    jhash.methods.itq(4, num_iters=2.5)  # was: 2 iterations
  with pytest.raises(ValueError, match="num_iters must be >= 0"):
    jhash.methods.itq(4, num_iters=-1)
  with pytest.raises(ValueError, match="center must be True or False; got str 'yes'"):
    jhash.methods.lsh(4, center="yes")
  with pytest.raises(ValueError, match="view must be None or a view's index"):
    jhash.methods.itq(4, view="a")
  with pytest.raises(ValueError, match="memory must be True or False"):
    jhash.methods.dch(4, memory="yes")
  with pytest.raises(ValueError, match="optimizer must be an optax.GradientTransformation"):
    jhash.methods.dch(4, optimizer="adam")
  with pytest.raises(ValueError, match=r"crop_probability must be in \[0, 1\]"):
    jhash.methods.dch(4, crop_probability=1.5)
  with pytest.raises(ValueError, match="crop_probability must be a finite number"):
    jhash.methods.dch(4, crop_probability=float("nan"))
  with pytest.raises(ValueError, match="tol must be a finite float >= 0"):
    jhash.methods.hbmp(4, tol=float("nan"))
  with pytest.raises(ValueError, match="local_search must be True or False"):
    jhash.methods.hbmp(4, local_search="yes")
  with pytest.raises(ValueError, match="w_learning_rate must be a finite number > 0"):
    jhash.methods.cdh(4, w_learning_rate=-1.0)
  with pytest.raises(ValueError, match="w_l2 must be a finite number >= 0"):
    jhash.methods.cdh(4, w_l2=float("nan"))
  base = jhash.methods.dch(4, batch_size=16, num_epochs=1)
  with pytest.raises(ValueError, match="hidden must be a non-empty tuple of positive ints"):
    jhash.methods.mch(base, hidden=(8, 8, 8, 0))  # was: ZeroDivisionError at fit
  with pytest.raises(ValueError, match=r"momentum must be in \[0, 1\)"):
    jhash.methods.mch(base, momentum=1.5)
  with pytest.raises(ValueError, match="learning_rate must be a finite number > 0"):
    jhash.methods.mch(base, learning_rate=float("nan"))
  with pytest.raises(TypeError, match=r"HashingMethod \(call the factory"):
    jhash.make_train(jhash.methods.itq, {"views": (np.zeros((8, 4), np.float32),)})


def test_single_pair_and_flip_mask_helpers_check_their_shapes(rng):
  p16 = jhash.codes.pack_bits(_signs(rng, 2, 16))
  p40 = jhash.codes.pack_bits(_signs(rng, 2, 40))
  with pytest.raises(ValueError, match="one packed code each"):
    jhash.search.hamming_one(p40[0], p16[0])  # was: 24
  with pytest.raises(ValueError, match="one packed code each"):
    jhash.search.hamming_one(p16, p16)
  assert int(jhash.search.hamming_one(p16[0], p16[1])) == int(
    jhash.search.hamming_distance(p16[:1], p16[1:])[0, 0]
  )
  with pytest.raises(ValueError, match="1 <= num_bits <= 64"):
    jhash.index.flip_masks(70, 1)  # was: (70, 1) masks, bits past 63 lost
  with pytest.raises(ValueError, match="radius must be >= 0"):
    jhash.index.flip_masks(16, -1)


def test_batches_and_factories_refuse_what_training_would_misread(rng):
  x = rng.normal(size=(40, 8)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32)
  with pytest.raises(ValueError, match="labels must be an array"):
    jhash.fit(jhash.methods.itq(4), jax.random.key(0), {"views": (x,), "labels": y.tolist()})
  with pytest.raises(ValueError, match=r"views\[0\] must have a non-empty item shape"):
    jhash.fit(jhash.methods.lsh(4), jax.random.key(0), {"views": (x[:, :0],)})
  with pytest.raises(ValueError, match="a minibatch of one item has no pairs"):
    jhash.methods.ksh(4, batch_size=1)  # was: a loss of 0.0 at every step
  jhash.methods.ksh(4, batch_size=1, memory=True)  # paired with the memory: allowed
  with pytest.raises(ValueError, match="hash_options must be a dict"):
    jhash.methods.hbmp(4, hash_function="linear", hash_options="x")
  with pytest.raises(ValueError, match="reg must be a real scalar"):
    jhash.methods.scm(4, reg="x")
  with pytest.raises(ValueError, match="reg must be a finite number >= 0"):
    jhash.methods.cvh(4, reg=-1.0)


def test_states_given_to_encode_train_and_the_coder_are_checked(rng):
  x = rng.normal(size=(32, 6)).astype(np.float32)
  batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
  itq = jhash.methods.itq(4, num_iters=2)
  state, _ = jhash.fit(itq, jax.random.key(0), batch, progress=False)
  with pytest.raises(TypeError, match="state must be a trained state"):
    jhash.encode(itq, {"x": 1}, batch)  # was: AttributeError 'widths'
  train = jhash.make_train(itq, batch)
  with pytest.raises(ValueError, match=r"state must be a state itq makes .*\.mean is absent"):
    train(jax.random.key(0), batch, {"a": np.ones(2)})  # was: AttributeError
  jax.jit(train)(jax.random.key(0), batch, state)  # its own state: accepted, also traced
  dch = jhash.methods.dch(4, batch_size=16, num_epochs=1)
  net = jhash.network(dch)
  dch_state = jhash.init(dch, jax.random.key(0), batch)
  with pytest.raises(ValueError, match="state must be the network's CoderState"):
    net.coder.features(dch_state, batch)  # the method's state, not the coder's
  with pytest.raises(ValueError, match="batch must be a dict"):
    net.coder.features(net.get(dch_state), x)
  assert net.coder.scores(net.get(dch_state), {"views": (x[:0],)}).shape == (0, 4)  # was: 1/0
  with pytest.raises(ValueError, match="query_codes must hold only -1 and"):
    packed = jhash.codes.pack_bits(_signs(rng, 5, 16))
    jhash.metrics.precision_recall_at_radius(packed, packed, np.arange(5), np.arange(5), 2)


def test_a_stream_whose_minibatches_disagree_or_point_past_the_set_is_refused(rng):
  x = rng.normal(size=(64, 6)).astype(np.float32)
  y = (x[:, 0] > 0).astype(np.int32)
  method = jhash.methods.ksh(4, batch_size=16, num_epochs=1)

  def stream(labels_after=None, shift=0, n=16):
    for step in range(4):
      index = np.arange(step * n, (step + 1) * n) + shift
      batch = {"views": (x[index % 64],), "index": index}
      if labels_after is None or step < labels_after:
        batch["labels"] = y[index % 64]
      yield batch

  key = jax.random.key(0)
  with pytest.raises(ValueError, match="minibatch of step 2 has no labels, where the first"):
    jhash.fit(method, key, stream(labels_after=2), num_items=64, progress=False)  # KeyError
  with pytest.raises(ValueError, match=r"index'\] must hold positions in \[0, 64\)"):
    jhash.fit(method, key, stream(shift=8), num_items=64, progress=False)  # trained silently
  with pytest.raises(ValueError, match=r"index'\] must hold positions in \[0, 5\)"):
    jhash.fit(method, key, stream(), num_items=5, progress=False)  # was: one step, silently
  state, _ = jhash.fit(method, key, stream(), num_items=64, progress=False)
  assert state.coder.train.step == 4


def test_the_coder_names_parameters_and_inputs_that_do_not_fit_its_network(rng):
  x = rng.normal(size=(24, 6)).astype(np.float32)
  batch = {"views": (x,)}
  c8, c4 = jhash.coder.coder(8), jhash.coder.coder(4)
  s8, s4 = c8.init(jax.random.key(0), batch), c4.init(jax.random.key(0), batch)
  with pytest.raises(ValueError, match=r"state: .*'projection/bias' of shape \(8,\).*\(4,\)"):
    c8.scores(s4, batch)  # was: flax ScopeParamShapeError
  with pytest.raises(ValueError, match=r"state: .*'projection/bias'"):
    c8.outputs(s4, x)
  with pytest.raises(ValueError, match=r"params: .*'projection/bias'"):
    c8.apply(s8, s4.train.params, x)
  with pytest.raises(ValueError, match="params: the network's parameters must be a dict"):
    c8.apply(s8, None, x)  # was: flax ApplyScopeInvalidVariablesTypeError
  with pytest.raises(ValueError, match=r"x: network reads features \[n, 6\]"):
    c8.outputs(s8, x[:, :5])  # was: a raw broadcasting TypeError
  with pytest.raises(ValueError, match="read takes a batch"):
    c8.read(x)  # was: IndexError
  with pytest.raises(ValueError, match="got a dict"):
    c8.outputs(s8, batch)
  images = rng.integers(0, 256, (6, 28, 28), dtype=np.uint8)
  ci = jhash.coder.coder(8)
  si = ci.init(jax.random.key(0), {"views": (images,)})
  other = {"views": (rng.integers(0, 256, (6, 32, 32), dtype=np.uint8),)}  # another backbone
  with pytest.raises(ValueError, match=r"items of shape \(32, 32, 1\) has parameter"):
    ci.features(si, other)  # was: flax ScopeParamNotFoundError
  np.testing.assert_array_equal(c8.outputs(s8, x).logits, c8.apply(s8, s8.train.params, x).logits)


def test_states_edited_by_hand_are_checked_before_training_and_itq_needs_a_spread(rng):
  views = (rng.normal(size=(40, 6)).astype(np.float32), rng.normal(size=(40, 5)).astype(np.float32))
  batch, key = {"views": views, "labels": rng.integers(0, 3, 40)}, jax.random.key(0)
  with pytest.raises(ValueError, match="gamma must be a finite number >= 0; got -1"):
    jhash.grid_search(  # was: trained with gamma = -1 (the check skipped under jit)
      jhash.methods.cdh(4), key, batch, "gamma", [0.5, -1.0], score=lambda s: 0.0, num_steps=1
    )
  cdh = jhash.methods.cdh(4, num_sweeps=1)
  state = jhash.init(cdh, key, batch)
  with pytest.raises(ValueError, match="gamma must be"):
    jhash.fit(cdh, key, batch, state=state._replace(gamma=jax.numpy.float32(-2.0)))
  x = views[0]
  with pytest.raises(ValueError, match="more training items than num_bits \\(4\\).*got 1 items"):
    jhash.fit(jhash.methods.itq(4), key, {"views": (x[:1],)})  # was: arbitrary directions
  with pytest.raises(ValueError, match="got 4 items"):
    jhash.fit(jhash.methods.itq(4), key, {"views": (x[:4],)})
  jhash.fit(jhash.methods.itq(4, num_iters=1), key, {"views": (x[:5],)}, progress=False)


def test_the_coder_factory_and_its_helpers_check_their_arguments():
  with pytest.raises(ValueError, match="standardize must be True or False; got str"):
    jhash.coder.coder(4, standardize="yes")  # was: accepted
  with pytest.raises(ValueError, match="images must be True or False"):
    jhash.coder.coder(4, images="yes")
  with pytest.raises(ValueError, match="name must be a str; got int"):
    jhash.coder.coder(4, name=5)
  with pytest.raises(ValueError, match="optimizer must be an optax.GradientTransformation"):
    jhash.coder.head_only(5)  # was: AttributeError inside optax
  with pytest.raises(ValueError, match="optimizer must be an optax.GradientTransformation"):
    jhash.coder.coder(4, optimizer="adam")
  with pytest.raises(ValueError, match="init_variables must be a Flax variables dict"):
    jhash.coder.check_variables(5, {"params": {}})  # was: TypeError 'int' is not iterable


def test_input_statistics_that_overflow_float32_are_refused():
  x = np.full((4, 3), 3e38, np.float32)
  x[::2] *= -1
  with pytest.raises(ValueError, match="x: its mean or spread overflows float32"):
    jhash.training.input_statistics(x)  # was: mean inf, scale 0
  mean, scale = jhash.training.input_statistics(x / 1e30)
  assert np.all(np.isfinite(mean)) and np.all(scale > 0)
