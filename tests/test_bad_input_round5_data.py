"""Bad input, fifth round: the protocols (``load_protocol``'s flags and split sizes), the
canvases' memory, weights files (``load_weights``, ``load_torchvision_resnet``), the flip
masks of the index and the metrics' ``top_k``, shapes and class ids. Each case ran out of
memory, gave a silently wrong value (NaN features, an empty database, a mAP of 0) or a raw
NumPy / torch / pathlib error; each is now a clear error naming the argument (or the file
and the entry)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import _data_files
import jhash
from jhash import data
from jhash.data import _protocols


@pytest.fixture
def small_fashion(monkeypatch):
  """Fashion-MNIST as the protocols read it, replaced by 100 images of 2 x 3 pixels."""

  def load(split="train", root=None):
    index = np.arange(60) if split == "train" else np.arange(60, 100)
    images = np.broadcast_to(index[:, None, None], (index.size, 2, 3)).astype(np.uint8)
    return data.Dataset((images,), index % 5, ("image",), f"fashion-mnist/{split}")

  monkeypatch.setattr(_protocols, "load_fashion_mnist", load)
  _protocols._fashion_pool.cache_clear()
  yield
  _protocols._fashion_pool.cache_clear()


CANVAS = {"num_items": 40, "num_queries": 8, "num_train": 12}


# ----------------------------------------------------------------------------- protocols


@pytest.mark.parametrize(
  "name, options",
  [
    ("mnist-5k", {"images": "False"}),
    ("fashion-mnist", {"images": "no"}),
    ("canvases", {"images": "yes", **CANVAS}),
    ("yeast", {"standardize": "no"}),
  ],
)
def test_protocol_flags_must_be_bools(name, options, small_fashion):
  flag = next(iter(options))
  with pytest.raises(ValueError, match=f"{flag} must be True or False; got str"):
    data.load_protocol(name, 0, **options)  # was: read by truthiness ("False" gave images)


def test_yeast_sizes_that_leave_no_training_gene_or_database_are_refused():
  with pytest.raises(ValueError, match="num_train must be >= 1; got 0"):
    data.load_protocol("yeast", 0, num_train=0)  # was: all-NaN features
  for q in (2417, 2418):  # was: all-NaN features / "num_train must be >= 0; got -1"
    with pytest.raises(ValueError, match=f"num_queries must be below 2417 .*; got {q}"):
      data.load_protocol("yeast", 0, num_queries=q)
  with pytest.raises(ValueError, match=r"num_queries \+ num_train = 3000 exceeds 2417"):
    data.load_protocol("yeast", 0, num_queries=2000, num_train=1000)  # was: "num_query + ..."
  with pytest.raises(ValueError, match="num_queries must be a Python int >= 0; got float"):
    data.load_protocol("yeast", 0, num_queries=5.0)  # was: "num_query must be ..."
  # One training gene has std 0: features blew up to 7e5. Without standardising it is fine.
  with pytest.raises(ValueError, match="num_train must be >= 2 to standardize"):
    data.load_protocol("yeast", 0, num_train=1)
  train, _, _ = data.load_protocol("yeast", 0, num_train=1, standardize=False)
  assert train["labels"].shape == (1, 14)


def test_per_class_sizes_name_the_protocols_options():
  for q in (200, 201):  # 200 was: an empty training set and database, silently
    with pytest.raises(ValueError, match=f"query_per_class must be below 200 .*; got {q}"):
      data.load_protocol("mfeat", 0, query_per_class=q)  # 201 was: "num_train_per_class"
  with pytest.raises(ValueError, match="query_per_class must be a Python int >= 0; got NoneType"):
    data.load_protocol("mfeat", 0, query_per_class=None)  # was: TypeError from int - None
  with pytest.raises(ValueError, match="query_per_class must be below 500 .*; got 501"):
    data.load_protocol("mnist-5k", 0, query_per_class=501)
  with pytest.raises(
    ValueError, match=r"query_per_class \+ train_per_class = 201 exceeds 200, the items"
  ):
    data.load_protocol("mfeat", 0, query_per_class=20, train_per_class=181)
  with pytest.raises(ValueError, match="train_per_class must be >= 1; got 0"):
    data.load_protocol("mfeat", 0, train_per_class=0)  # was: an empty training set


def test_canvas_and_scene_splits_name_num_queries(small_fashion):
  bad = {"num_items": 40, "num_queries": 30, "num_train": 20}
  with pytest.raises(ValueError, match=r"num_queries \+ num_train = 50 exceeds 40"):
    data.load_protocol("canvases", 0, **bad)  # was: "num_query + num_train = 50 ..."
  with pytest.raises(ValueError, match=r"num_queries \+ num_train = 50 exceeds 40"):
    _protocols.scene_split(0, **bad)
  with pytest.raises(ValueError, match="num_queries must be below 40"):
    data.load_protocol("canvases", 0, num_items=40, num_queries=40, num_train=1)


def test_canvases_too_large_for_memory_are_refused_up_front(small_fashion):
  images, labels = np.zeros((20, 2, 3), np.uint8), np.arange(20) % 5
  with pytest.raises(ValueError, match=r"num_items=1000000000000, grid=\(2, 2\).*memory"):
    data.make_canvas_dataset(images, labels, num_items=10**12)  # was: numpy MemoryError
  with pytest.raises(ValueError, match=r"num_classes=1099511627776 would need .*memory"):
    data.make_canvas_dataset(images, labels, num_classes=2**40)  # was: numpy MemoryError
  with pytest.raises(ValueError, match=r"num_items=100000000000, num_train=20 .*memory"):
    data.load_protocol(  # was: minutes of work, then a MemoryError or the OOM killer
      "canvases", 0, num_items=10**11, num_queries=10, num_train=20
    )
  train, query, database = data.load_protocol("canvases", 0, **CANVAS)
  assert [b["labels"].shape[0] for b in (train, query, database)] == [12, 8, 32]


# ----------------------------------------------------------------------------- weights


def test_weights_beyond_float32_are_refused(tmp_path):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 8)).astype(np.float32)
  batch = {"views": (x,), "labels": (x[:, 0] > 0).astype(np.int32)}
  state = jhash.init(jhash.methods.classifier(2), jax.random.key(0), batch)
  path = jhash.coder.save_weights(tmp_path / "w.npz", state)
  arrays = dict(np.load(path))
  kernel = arrays["params/hidden_0/kernel"]
  arrays["params/hidden_0/kernel"] = np.full(kernel.shape, 1e300, np.float64)
  np.savez(tmp_path / "big.npz", **arrays)
  with pytest.raises(ValueError, match=r"'params/hidden_0/kernel' reads as inf in float32"):
    jhash.coder.load_weights(tmp_path / "big.npz")  # was: loaded; init gave an inf state


@pytest.fixture(scope="module")
def resnet():
  """A ResNet-18's variables (shapes only) and a valid torchvision state dict for them."""
  return _data_files.resnet18_torchvision_state()


@pytest.mark.parametrize(
  "entry, value, match",
  [
    ("conv1.weight", np.nan, "conv1.weight in .* is damaged: it holds nan"),
    ("conv1.weight", np.inf, "conv1.weight in .* is damaged: it holds inf"),
    ("conv1.weight", 1e305, "conv1.weight in .* beyond float32's range"),
    ("bn1.running_var", -1.0, "bn1.running_var in .* variance must be >= 0"),
  ],
)
def test_torchvision_weights_must_be_finite(resnet, tmp_path, entry, value, match):
  save_file = pytest.importorskip("safetensors.numpy").save_file
  variables, state = resnet
  state = dict(state)
  dtype = np.float64 if abs(value) > 1e38 and np.isfinite(value) else np.float32
  state[entry] = np.full(state[entry].shape, value, dtype)
  save_file(state, str(tmp_path / "w.safetensors"))
  with pytest.raises(ValueError, match=match):  # was: loaded, a NaN / inf state
    jhash.models.load_torchvision_resnet(tmp_path / "w.safetensors", variables)


def test_torchvision_weights_must_be_floating_point(resnet, tmp_path):
  save_file = pytest.importorskip("safetensors.numpy").save_file
  variables, state = resnet
  state = dict(state, **{"conv1.weight": np.ones(state["conv1.weight"].shape, np.int64)})
  save_file(state, str(tmp_path / "w.safetensors"))
  with pytest.raises(ValueError, match=r"conv1.weight in .* must hold floating-point weights"):
    jhash.models.load_torchvision_resnet(tmp_path / "w.safetensors", variables)  # was: loaded


def test_torchvision_pth_files_that_cannot_be_read_are_named(resnet, tmp_path):
  pytest.importorskip("torch")
  variables, _ = resnet
  (tmp_path / "dir.pth").mkdir()
  (tmp_path / "empty.pth").write_bytes(b"")
  (tmp_path / "text.pth").write_text("not weights\n")
  with pytest.raises(ValueError, match="path: no weights file at .*none.pth"):
    jhash.models.load_torchvision_resnet(tmp_path / "none.pth", variables)  # FileNotFoundError
  with pytest.raises(ValueError, match="path: no weights file at .*dir.pth"):
    jhash.models.load_torchvision_resnet(tmp_path / "dir.pth", variables)  # IsADirectoryError
  for name in ("empty.pth", "text.pth"):  # was: EOFError (no message) / KeyError: 101
    with pytest.raises(ValueError, match=f"{name}' is not a readable torch weights file"):
      jhash.models.load_torchvision_resnet(tmp_path / name, variables)


def test_torchvision_arguments_of_the_wrong_kind(resnet, tmp_path):
  variables, state = resnet
  with pytest.raises(TypeError, match="path must be a file name .*; got NoneType None"):
    jhash.models.load_torchvision_resnet(None, variables)  # was: pathlib's TypeError
  with pytest.raises(TypeError, match="path must be a file name .*; got ''"):
    jhash.models.load_torchvision_resnet("", variables)  # was: shown as '.'
  with pytest.raises(TypeError, match="variables must be the ResNet's variables"):
    jhash.models.load_torchvision_resnet(tmp_path / "w.safetensors", None)  # flax assertion
  with pytest.raises(TypeError, match="variables must be the ResNet's variables"):
    jhash.models.load_torchvision_resnet(tmp_path / "w.safetensors", [1])


def test_an_empty_init_variables_name_is_shown_as_given():
  x = np.random.default_rng(0).normal(size=(16, 8)).astype(np.float32)
  batch = {"views": (x,), "labels": np.arange(16) % 2}
  with pytest.raises(ValueError, match="init_variables must name a weights file .*; got ''"):
    jhash.init(jhash.methods.dch(4, init_variables=""), jax.random.key(0), batch)  # was: '.'


# ----------------------------------------------------------------------------- index, metrics


def test_flip_masks_beyond_memory_are_refused_with_their_count():
  with pytest.raises(ValueError, match=r"radius=10\): its 151,473,214,816 masks .*lower radius"):
    jhash.index.flip_masks(64, 10)  # was: 75 s, then MemoryError
  assert jhash.index.flip_masks(64, 2).shape == (2016, 2)


def _codes(rng, n, bits=8):
  return rng.choice(np.array([-1, 1], np.int8), (n, bits))


def test_deephash_map_refuses_a_top_k_that_keeps_nothing(rng):
  q, d = _codes(rng, 4), _codes(rng, 10)
  ql, dl = np.arange(4) % 2, np.arange(10) % 2
  for k in (0, -10, -11):  # was: 0.0
    with pytest.raises(ValueError, match=f"top_k={k} keeps no database item"):
      jhash.metrics.deephash_map(q, d, ql, dl, k)
  assert 0.0 <= jhash.metrics.deephash_map(q, d, ql, dl, -1) <= 1.0  # the kept quirk


def test_harmonic_difference_names_shapes_that_differ():
  with pytest.raises(ValueError, match=r"a and b must have the same shape .*\(3,\) .*\(2,\)"):
    jhash.metrics.harmonic_difference(jnp.ones(3), jnp.ones(2))  # was: NumPy's broadcast error
  np.testing.assert_allclose(jhash.metrics.harmonic_difference(0, jnp.array([1, 2])), [1, 1.5])


def test_metrics_refuse_negative_class_ids(rng):
  q, d = _codes(rng, 5), _codes(rng, 30)
  with pytest.raises(ValueError, match="query_labels: class ids must be >= 0; found -1"):
    # was: 1.0, every "unlabelled" item relevant to every other
    jhash.metrics.mean_average_precision(q, d, np.full(5, -1), np.full(30, -1))
  with pytest.raises(ValueError, match="db_labels: class ids must be >= 0; found -2"):
    jhash.metrics.mean_average_precision(q, d, np.zeros(5, int), np.arange(30) - 2)


def test_torchvision_weights_already_in_flax_layout_are_named(resnet, tmp_path):
  save_file = pytest.importorskip("safetensors.numpy").save_file
  variables, state = resnet
  hwio = np.ascontiguousarray(np.transpose(state["conv1.weight"], (2, 3, 1, 0)))
  save_file(dict(state, **{"conv1.weight": hwio}), str(tmp_path / "w.safetensors"))
  # was: "the file's convolution reads 7-channel images"
  with pytest.raises(ValueError, match=r"conv1.weight .* the model's own \(Flax's HWIO\) layout"):
    jhash.models.load_torchvision_resnet(tmp_path / "w.safetensors", variables)
