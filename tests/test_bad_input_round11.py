"""Bad input, round 11: the metric kernels' distances and options, packed-code checks,
bfloat16 bits and the unchecked sharded top-k. Each case names what it did before."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jhash import codes
from jhash import metrics
from jhash import search

RELEVANT_FIRST = np.array([[True, False, False]])


def test_ranked_positions_checks_max_distance_as_the_other_kernels_do():
  d = np.array([[5, 3, 1]], np.int32)
  np.testing.assert_array_equal(metrics.ranked_positions(d, 3, max_distance=5), [[2, 1, 0]])
  for bad, match in (
    (1, r"distances must be <= max_distance=1"),  # was: the order [[2, 0, 1]]
    (-1, r"max_distance \(an int >= 0\)"),  # was: [[0, 1, 2]]
    (1.5, r"max_distance must be None or an int"),  # was: float "indices"
    ("3", r"max_distance must be None or an int"),  # was: a TypeError from a comparison
  ):
    with pytest.raises(ValueError, match=match):
      metrics.ranked_positions(d, 3, max_distance=bad)
  with pytest.raises(ValueError, match=r"bounds integer distances"):
    metrics.ranked_positions(np.array([[2.5, 0.5]], np.float32), 2, max_distance=3)


def test_distances_past_int32_or_past_float32_are_refused_not_rounded():
  wide = np.array([[2**32, 1, 5]])  # int64: was truncated, the far item ranked first
  for call in (
    lambda d: metrics.average_precision(d, RELEVANT_FIRST, ties="index"),
    lambda d: metrics.hits_at_k(d, RELEVANT_FIRST, (1,), ties="index"),
    lambda d: metrics.ranked_positions(d, 3),
  ):
    with pytest.raises(ValueError, match=r"distances must fit in int32"):
      call(wide)
  two = np.array([[True, False]])
  with pytest.raises(ValueError, match=r"float32 .* cannot tell 1\.0 from 1\.000000001"):
    metrics.average_precision(np.array([[1.0 + 1e-9, 1.0]]), two, ties="index")  # was: AP 1
  with pytest.raises(ValueError, match=r"distances overflow float32"):
    metrics.average_precision(np.array([[1e40, 1e39]]), two, ties="index")  # was: AP 1
  with pytest.raises(ValueError, match=r"distances must be numbers"):
    metrics.average_precision(np.array([[True, False, True]]), RELEVANT_FIRST)  # was accepted
  # float64 distances that float32 keeps apart rank as their float32 copies do.
  d = np.array([[0.1, 0.3, 0.2]])
  got = metrics.average_precision(d, RELEVANT_FIRST, ties="index")[0]
  want = metrics.average_precision(d.astype(np.float32), RELEVANT_FIRST, ties="index")[0]
  np.testing.assert_array_equal(got, want)


def test_a_max_distance_too_large_to_count_is_named():
  d = np.array([[3, 1, 5]], np.int32)
  for call in (
    lambda m: metrics.average_precision(d, RELEVANT_FIRST, max_distance=m),
    lambda m: metrics.hits_at_k(d, RELEVANT_FIRST, (1,), max_distance=m),
    lambda m: metrics.ndcg(d, RELEVANT_FIRST.astype(np.float32), k=2, max_distance=m),
  ):
    for m in (2**30, 2**31):  # was: JAX's OverflowError
      with pytest.raises(ValueError, match=r"max_distance must be at most 65,536"):
        call(m)
  with pytest.raises(ValueError, match=r"counting bins, past int32"):
    metrics.average_precision(
      np.zeros((20_000, 1), np.int32), np.ones((20_000, 1), bool), max_distance=2**16
    )


@pytest.mark.parametrize("a", [2**24, 2**31, 10**12])
def test_harmonic_difference_keeps_its_precision_past_float32s_integers(a):
  for span in (1, 2, 7):
    want = sum(1.0 / (a + i) for i in range(1, span + 1))  # float64, exact enough
    got = float(metrics.harmonic_difference(a, a + span))  # was: 0.0
    assert got == pytest.approx(want, rel=1e-6)


def test_check_padding_names_words_that_are_not_integers():
  for bad in (np.array([[7.5]]), np.array([["a"]]), np.array([[True]])):  # was: NumPy's
    with pytest.raises(ValueError, match=r"p must be packed codes, integer words"):  # TypeError,
      codes.check_padding(bad, 3, "p")  # or bool passed
  codes.check_padding(np.array([[7]], np.uint32), 3, "p")  # 3 bits, no padding set


def test_bfloat16_bits_are_read_eagerly_as_under_jit():
  bits = jnp.array([[1, 0, 1]], jnp.bfloat16)
  np.testing.assert_array_equal(codes.from_bits(bits), [[1, -1, 1]])  # was refused eagerly
  np.testing.assert_array_equal(
    codes.pack_bits(bits, bits=True), jax.jit(lambda b: codes.pack_bits(b, bits=True))(bits)
  )
  with pytest.raises(ValueError, match=r"bits must hold only 0 and 1"):
    codes.from_bits(jnp.array([1, 0.5], jnp.bfloat16))


def test_options_given_as_jax_arrays_are_named_as_not_python_ints():
  rng = np.random.default_rng(0)
  q, d = codes.sign(rng.normal(size=(4, 5))), codes.sign(rng.normal(size=(8, 5)))
  ql, dl = np.arange(4) % 2, np.arange(8) % 2
  with pytest.raises(ValueError, match=r"ks must be a Python int .* \(not a Python int\)"):
    metrics.precision_at_k(q, d, ql, dl, jnp.array([1, 2]))  # was: "got Array(1)", in range
  with pytest.raises(ValueError, match=r"radius must be a Python int .* \(not a Python int\)"):
    metrics.precision_recall_at_radius(q, d, ql, dl, jnp.int32(1))
  with pytest.raises(ValueError, match=r"radius must be a Python int in \[0, 5\] .*; got 9\."):
    metrics.precision_recall_at_radius(q, d, ql, dl, 9)


def test_the_unchecked_sharded_topk_checks_its_static_sizes():
  mesh = jax.make_mesh((1,), ("data",))
  packed = codes.pack_bits(codes.sign(np.random.default_rng(0).normal(size=(13, 40))))
  with pytest.raises(ValueError, match=r"k must be <= num_rows = 5"):  # was: a padding row
    search.sharded_hamming_topk_unchecked(packed[:3], packed, 6, mesh=mesh, num_rows=5)
  with pytest.raises(ValueError, match=r"num_rows must be <= the database's 13 rows"):
    search.sharded_hamming_topk_unchecked(packed[:3], packed, 2, mesh=mesh, num_rows=99)
  _, idx = search.sharded_hamming_topk_unchecked(packed[:3], packed, 5, mesh=mesh, num_rows=5)
  assert np.asarray(idx).max() < 5


# ----------------------------------------------------------------------------- data, models, fit


def _small_batch():
  x = np.random.default_rng(0).normal(size=(40, 8)).astype(np.float32)
  return {"views": (x,), "labels": np.arange(40) % 4}


def test_a_memory_bank_stream_without_num_items_is_refused():
  import jhash

  batch, key = _small_batch(), jax.random.key(0)
  method = jhash.methods.pairwise(8, batch_size=8, num_epochs=1, memory=True)
  stream = lambda: jhash.minibatches(batch, 8, key, 5)
  for state in (None, jhash.init(method, key, batch)):  # was: a bank of one minibatch's
    with pytest.raises(ValueError, match=r"num_items: pairwise's state holds a row per"):
      jhash.fit(method, key, stream(), 5, state=state, progress=False)  # rows, or blamed
  state, _ = jhash.fit(method, key, stream(), 5, num_items=40, progress=False)  # the state
  assert state.memory.outputs.shape == (40, 8)
  plain = jhash.methods.pairwise(8, batch_size=8, num_epochs=1)  # no bank: no num_items
  jhash.fit(plain, key, stream(), 5, progress=False)


def test_every_minibatch_of_a_stream_gets_the_methods_own_check():
  import jhash

  batch, key = _small_batch(), jax.random.key(0)
  method = jhash.methods.classifier(4, batch_size=8, num_epochs=1)
  state = jhash.init(method, key, batch)

  def shifted():
    for i, minibatch in enumerate(jhash.minibatches(batch, 8, key, 5)):
      yield minibatch if i == 0 else {**minibatch, "labels": minibatch["labels"] + 3}

  with pytest.raises(ValueError, match=r"minibatch of step 1: labels: classifier has num_"):
    jhash.fit(method, key, shifted(), 5, state=state, progress=False)  # was: "diverged"


def test_channels_of_the_image_readers_must_be_an_int(tmp_path):
  from PIL import Image

  import jhash

  paths = []
  for i in range(2):
    Image.new("RGB", (5, 4), (50 * i, 0, 0)).save(tmp_path / f"{i}.png")
    paths.append(str(tmp_path / f"{i}.png"))
  for bad in (True, 3.0):  # was: NumPy's TypeError from np.empty
    with pytest.raises(ValueError, match=r"channels must be 3 \(RGB\) or 1 \(grayscale\)"):
      jhash.data.read_images(paths, (8, 8), channels=bad)
  assert jhash.data.read_images(paths, (8, 8), channels=np.int64(1)).shape == (2, 8, 8, 1)


def test_a_plain_hdf5_mat_file_is_read_row_major(tmp_path):
  h5py = pytest.importorskip("h5py")
  import _data_files

  import jhash

  arrays = _data_files.cross_view_arrays(np.random.default_rng(0), {"tr": 30, "te": 12}, 3)
  with h5py.File(tmp_path / "plain.mat", "w") as f:  # NumPy's row-major arrays, no header
    for name, value in arrays.items():
      f[name] = value
  data = jhash.data.load_cross_modal_mat(tmp_path / "plain.mat")  # was: read transposed
  np.testing.assert_allclose(data["train"].views[0], arrays["I_tr"].astype(np.float32))
  np.testing.assert_allclose(data["test"].views[1], arrays["T_te"].astype(np.float32))
  matlab = _data_files.write_mat_v73(tmp_path / "matlab.mat", arrays)  # column-major
  np.testing.assert_allclose(
    jhash.data.load_cross_modal_mat(matlab)["train"].views[0], data["train"].views[0]
  )


def test_source_images_are_named_as_images():
  import jhash

  images = np.random.default_rng(0).integers(0, 255, (20, 8, 8)).astype(np.uint8)
  labels = np.arange(20) % 3
  with pytest.raises(ValueError, match=r"^images must be pixels"):  # was: "views[0] ..."
    jhash.data.make_canvas_dataset(images > 5, labels)
  with pytest.raises(ValueError, match=r"^images must hold finite values"):
    jhash.data.make_canvas_dataset(np.full((20, 8, 8), np.nan), labels)
  with pytest.raises(ValueError, match=r"images must be at least 2 rows high"):
    jhash.data.make_two_view(images[:, :1], labels)  # was: "views[0] ... non-empty"
  with pytest.raises(ValueError, match=r"images must be at least 2 columns wide"):
    jhash.data.make_two_view(images[:, :, :1], labels, split="left_right")


def test_swapped_views_at_encode_are_named_without_speaking_of_tracing():
  import jhash

  rng = np.random.default_rng(0)
  a, b = rng.normal(size=(40, 6)).astype(np.float32), rng.normal(size=(40, 4)).astype(np.float32)
  method = jhash.methods.cvh(4)
  state = jhash.init(method, jax.random.key(0), {"views": (a, b), "labels": np.arange(40) % 3})
  with pytest.raises(ValueError, match=r"views\[0\] must have 6 features .*; got 4") as error:
    jhash.encode(method, state, {"views": (b, a)})
  assert "traced" not in str(error.value)  # was: "got a traced value ... inside jit"


def test_folders_where_files_belong_are_named_as_folders(tmp_path):
  import jhash
  from jhash.data import _layouts

  (tmp_path / "w.pth").mkdir()
  (tmp_path / "w.safetensors").mkdir()
  for name in ("w.pth", "w.safetensors"):
    with pytest.raises(ValueError, match=r"no weights file at .* \(a folder, not a file\)"):
      jhash.models.load_torchvision(tmp_path / name, {"params": {}}, "resnet18")
  (tmp_path / "img.png").mkdir()
  with pytest.raises(FileNotFoundError, match=r"'.*img\.png' \(a folder, not a file\)"):
    _layouts.check_image_files([str(tmp_path / "img.png")])  # load_paper_lists' check
  cifar = tmp_path / "cifar"
  cifar.mkdir()
  for name in [f"data_batch_{i}.bin" for i in range(1, 6)]:
    (cifar / name).write_bytes(b"")
  (cifar / "test_batch.bin").mkdir()
  with pytest.raises(FileNotFoundError, match=r"test_batch\.bin \(a folder, not a file\)"):
    jhash.data.read_cifar10_binary(cifar, records_per_file=None)


def test_small_ones_of_round_11():
  import jhash

  with pytest.raises(ValueError, match=r"the SmallCNN is built for 28 x 28 and 56 x 56"):
    jhash.models.backbone((12, 12), 8, channels=(4,), dense=8)  # was: ResNet's options only
  method = jhash.methods.lsh(4)
  with pytest.raises(ValueError, match=r"a NumPy array: a raw key must be a JAX array"):
    jhash.fit(method, np.zeros(2, np.uint32), _small_batch(), progress=False)
