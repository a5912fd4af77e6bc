"""Bad input, fourth round: weights files (``jhash.coder.load_weights`` and ``init_variables``
files), the classifier's ``predict``, and the scene generators (``make_scene_dataset``,
``scene_split``, ``scene_items_alone``). Each case gave a silently wrong value or a raw
numpy / flax error; each is now a clear error naming the argument (or the file and the
array), or works as a user would expect."""

import jax
import numpy as np
import pytest

import jhash
from jhash import data
from jhash import _checks

SMALL = {"num_items": 40, "num_queries": 5, "num_train": 10, "size": 28}


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
  """A classifier of 2 classes on 8 features (initialised, not trained), and its weights file."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 8)).astype(np.float32)
  batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
  method = jhash.methods.classifier(2)
  state = jhash.init(method, jax.random.key(0), batch)
  path = jhash.coder.save_weights(tmp_path_factory.mktemp("weights") / "w.npz", state)
  return method, state, batch, path


def _write(path, tmp_path, name, **changes):
  """A copy of the weights file ``path`` with arrays changed or added, as ``name``."""
  arrays = dict(np.load(path))
  for key, value in changes.items():
    arrays[key.replace("__", "/")] = value
  np.savez(tmp_path / name, **arrays)
  return tmp_path / name


def test_input_statistics_are_checked_in_float32(weights, tmp_path):
  _, _, batch, path = weights
  tiny = _write(path, tmp_path, "tiny.npz", input__scale=np.full(8, 1e-300))
  with pytest.raises(
    ValueError, match=r"tiny.npz' is damaged: 'input/scale' must hold finite numbers > 0 in float32"
  ):
    jhash.coder.load_weights(tiny)  # was: loaded, scale 0 (float64 1e-300 passed, cast to 0)
  huge = _write(path, tmp_path, "huge.npz", input__mean=np.full(8, 1e300))
  with pytest.raises(ValueError, match=r"huge.npz' is damaged: 'input/mean' .*reads as inf"):
    jhash.init(jhash.methods.dch(4, init_variables=str(huge)), jax.random.key(0), batch)
    # was: loaded, mean inf


def test_input_kind_must_be_a_scalar_0_or_1(weights, tmp_path):
  _, _, _, path = weights
  for i, bad in enumerate((np.int8(2), np.float64(0.5), np.array([1, 0]))):
    # was: True, True (bool() of the value), and numpy's "truth value ... is ambiguous"
    damaged = _write(path, tmp_path, f"kind{i}.npz", input__integer=bad)
    with pytest.raises(
      ValueError, match=rf"kind{i}.npz' is damaged: 'input/integer' must be a scalar 0 or 1"
    ):
      jhash.coder.load_weights(damaged)
  for value, kind in ((np.True_, True), (np.int64(0), False)):
    assert (
      jhash.coder.load_weights(_write(path, tmp_path, "ok.npz", input__integer=value))[2] is kind
    )


def test_hand_made_weights_files_name_the_array_at_fault(weights, tmp_path):
  _, _, _, path = weights
  for key in ("input/mean", "input/scale"):  # was: could not convert string to float
    text = _write(path, tmp_path, "text.npz", **{key: np.array(["a"] * 8)})
    with pytest.raises(ValueError, match=f"text.npz' is damaged: '{key}' must hold real numbers"):
      jhash.coder.load_weights(text)
  inner = _write(path, tmp_path, "inner.npz", **{"params/hidden_0/bias/b": np.zeros(3, np.float32)})
  with pytest.raises(
    ValueError, match=r"inner.npz' is damaged: 'params/hidden_0/bias' is an array and also a folder"
  ):
    jhash.coder.load_weights(inner)  # was: IndexError from flax's unflatten_dict
  outer = _write(path, tmp_path, "outer.npz", **{"params/hidden_0": np.zeros(3, np.float32)})
  with pytest.raises(
    ValueError, match=r"outer.npz' is damaged: 'params/hidden_0' is an array and also a folder"
  ):
    jhash.coder.load_weights(outer)  # was: loaded, the array silently replacing the folder


def test_a_weights_file_suffix_is_read_in_any_case(weights, tmp_path):
  _, state, batch, path = weights
  upper = jhash.coder.save_weights(tmp_path / "W.NPZ", state)  # was: must name a .npz file
  np.testing.assert_array_equal(
    jhash.coder.load_weights(upper).statistics[1], jhash.coder.load_weights(path).statistics[1]
  )
  dch = jhash.methods.dch(4, init_variables=str(upper))
  start = jhash.init(dch, jax.random.key(1), batch)  # was: read as a torchvision file, refused
  np.testing.assert_array_equal(
    start.coder.train.params["hidden_0"]["kernel"], state.coder.train.params["hidden_0"]["kernel"]
  )


def test_classifier_predict_checks_its_batch_as_encode_does(weights):
  method, state, batch, _ = weights
  x = batch["views"][0]
  for bad in (x, [x], (x,)):  # was: IndexError, then TypeError (list / tuple indices)
    with pytest.raises(ValueError, match="batch must be a dict with keys 'views'"):
      method.extras.predict(state, bad)
  with pytest.raises(ValueError, match=r"views\[0\] must be 2-D or 3-D or 4-D"):
    method.extras.predict(state, {"views": (x[0],)})  # was: the widths message, of a 1-D view
  with pytest.raises(ValueError, match=r"views\[0\] must hold finite values"):
    method.extras.predict(state, {"views": (x * np.nan,)})  # as before
  assert method.extras.predict(state, {"views": (x,)}).shape == (64,)


def test_scene_split_num_objects_numpy_ints_and_strings():
  ds, _ = data.scene_split(0, **SMALL, num_objects=np.int64(2))  # was: int64 not iterable
  assert (ds.extras["num_objects"] == 2).all()
  ds, _ = data.scene_split(0, **SMALL, num_objects=[1, 2])
  assert set(ds.extras["num_objects"]) <= {1, 2}
  with pytest.raises(ValueError, match=r"num_objects must be an int or an inclusive \(min, max\)"):
    data.scene_split(0, **SMALL, num_objects="13")  # was: read as (1, 3)


def test_scene_num_objects_entries_must_be_ints(rng):
  img = rng.uniform(size=(30, 8, 8)).astype(np.float32)
  lab = rng.integers(0, 10, 30)
  for bad in ((1, None), (1, 2.7), ("1", "2"), (True, 2)):
    # was: int()'s TypeError, then silently (1, 2) for the others
    with pytest.raises(ValueError, match=r"num_objects must be an int or .* pair of ints; got"):
      data.make_scene_dataset(img, lab, num_objects=bad, num_items=3, size=28)


def test_scene_sizes_beyond_memory_are_refused_up_front(rng, monkeypatch):
  img = rng.uniform(size=(30, 8, 8)).astype(np.float32)
  lab = rng.integers(0, 10, 30)
  with pytest.raises(ValueError, match=r"num_items=1000000000000, size=28 .* bytes"):
    data.make_scene_dataset(img, lab, num_items=10**12, size=28)  # was: MemoryError
  with pytest.raises(ValueError, match=r"num_items=1000000000000, size=56 .* bytes"):
    data.scene_split(0, num_items=10**12)  # was: MemoryError
  with pytest.raises(ValueError, match=r"num_items=3, size=1000000 .*12,000,000,000,\d+ bytes"):
    data.make_scene_dataset(img, lab, num_items=3, size=10**6)  # was: MemoryError
  with pytest.raises(ValueError, match=r"num_classes must be at most 2\*\*31 .*got 1099511627776"):
    data.make_scene_dataset(img, lab, num_items=3, size=28, num_classes=2**40)  # was: MemoryError
  monkeypatch.setattr(_checks, "memory_bytes", lambda: 10**6)  # a machine of 1 MB
  with pytest.raises(ValueError, match=r"num_classes=100000 would need .* for the labels"):
    data.make_scene_dataset(img, lab, num_items=30, size=28, num_classes=10**5)
  data.make_scene_dataset(img, lab, num_items=30, size=28, num_classes=10)  # 95 kB: made


def test_scene_items_alone_checks_the_boxes(rng):
  img = rng.uniform(size=(30, 8, 8)).astype(np.float32)
  ds = data.make_scene_dataset(img, rng.integers(0, 10, 30), num_items=4, size=28)
  boxes = ds.extras["boxes"]
  for where, value in (((0, 0, 0), 100), ((0, 0, 3), 0), ((0, 0, 2), -5), ((0, 0, 1), -1)):
    # was: items marked present, empty (off the canvas, no width) or cut (a negative left)
    bad = boxes.copy()
    bad[where] = value
    with pytest.raises(ValueError, match=r"dataset: its 'boxes' extra must hold .*boxes\[0, 0\]"):
      data.scene_items_alone(ds._replace(extras={**ds.extras, "boxes": bad}))
  nan = boxes.astype(np.float64)
  nan[0, 0, 3] = np.nan
  with pytest.raises(ValueError, match=r"dataset: its 'boxes' extra must be integer \[4, M, 4\]"):
    data.scene_items_alone(ds._replace(extras={**ds.extras, "boxes": nan}))  # was: TypeError
  items, present = data.scene_items_alone(ds)
  assert (present == (ds.extras["sources"] >= 0)).all() and items.shape[:2] == boxes.shape[:2]


def test_canvas_num_objects_and_grid_are_checked_as_the_scenes_are():
  rng = np.random.default_rng(0)
  images = rng.integers(0, 255, (20, 4, 4), dtype=np.uint8)
  labels = np.arange(20) % 3
  ds = jhash.data.make_canvas_dataset(images, labels, num_objects=np.int64(2), num_items=5)
  assert (ds.labels.sum(axis=1) >= 1).all() and (ds.extras["cells"] >= 0).sum(axis=1).max() <= 2
  for bad in ("13", (1, None), (1, 2.7), (True, 2)):
    with pytest.raises(ValueError, match="num_objects must be an int or an inclusive"):
      jhash.data.make_canvas_dataset(images, labels, num_objects=bad, num_items=5)
  with pytest.raises(ValueError, match="grid must be"):
    jhash.data.load_protocol("canvases", 0, grid=2, num_items=50, num_queries=10, num_train=20)


def test_weights_statistics_of_another_input_shape_are_refused_at_init(weights, tmp_path):
  _, _, batch, path = weights  # 8 features: statistics [8]
  for i, shape in enumerate(((1,), (2, 8), ())):
    damaged = _write(path, tmp_path, f"shape{i}.npz", input__mean=np.zeros(shape, np.float32))
    # was: [1] and [] trained (then encode refused "features of width 1"), [2, 8] started
    with pytest.raises(ValueError, match=r"init_variables: its input mean has shape"):
      jhash.init(jhash.methods.dch(4, init_variables=str(damaged)), jax.random.key(0), batch)


def test_torchvision_weights_suffixes_are_read_in_any_case(tmp_path):
  pytest.importorskip("safetensors")
  net = jhash.models.backbone((32, 32, 3), 4)
  variables = jax.eval_shape(
    net.init, jax.random.key(0), jax.ShapeDtypeStruct((1, 32, 32, 3), np.float32)
  )
  bad = tmp_path / "BAD.SAFETENSORS"  # was: "path must name a .safetensors ... file"
  bad.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{not json")
  with pytest.raises(ValueError, match=r"BAD.SAFETENSORS' is not a readable .safetensors file"):
    jhash.models.load_torchvision_resnet(bad, variables)
