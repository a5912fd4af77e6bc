"""Images read from files and minibatch streams: the runner's order, the same pixels as in
memory, the same trained state as an in-memory fit, clear errors, no threads left behind."""

import threading
import time
from concurrent import futures

import jax
import numpy as np
import pytest
from PIL import Image

import jhash
from jhash import data


def _write_images(folder, pixels, suffix=".png"):
  """One file per item of uint8 ``pixels`` [n, H, W, 3]; returns the paths."""
  folder.mkdir(exist_ok=True)
  paths = []
  for i, p in enumerate(pixels):
    paths.append(str(folder / f"{i:03d}{suffix}"))
    Image.fromarray(p).save(paths[-1])
  return paths


def _image_list(tmp_path, n=24, size=(20, 16), classes=4, seed=0):
  """An ImageList of ``n`` small images, PNG and JPEG in turn, with multi-hot labels."""
  rng = np.random.default_rng(seed)
  pixels = rng.integers(0, 256, (n,) + size + (3,), dtype=np.uint8)
  png = _write_images(tmp_path / "png", pixels[0::2])
  jpg = _write_images(tmp_path / "jpg", pixels[1::2], ".jpg")
  paths = [p for pair in zip(png, jpg) for p in pair]
  labels = rng.random((n, classes)) < 0.5
  labels[np.arange(n), rng.integers(0, classes, n)] = True  # every image has a label
  return data.ImageList(paths, labels), pixels


def _live_threads(before, timeout=2.0):
  end = time.monotonic() + timeout
  while threading.active_count() > before and time.monotonic() < end:
    time.sleep(0.01)
  return threading.active_count()


# ----------------------------------------------------------------------------- read_images


def test_read_images_png_pixels_grayscale_and_float(tmp_path, rng):
  pixels = rng.integers(0, 256, (5, 12, 10, 3), dtype=np.uint8)
  paths = _write_images(tmp_path, pixels)
  images = data.read_images(paths, num_threads=2)
  assert images.dtype == np.uint8 and images.shape == (5, 12, 10, 3)
  np.testing.assert_array_equal(images, pixels)  # PNG is lossless
  gray = data.read_images(paths, channels=1)
  expected = np.stack([np.asarray(Image.fromarray(p).convert("L")) for p in pixels])
  np.testing.assert_array_equal(gray, expected[..., None])
  floats = data.read_images(paths, dtype=np.float32)
  np.testing.assert_array_equal(floats, pixels.astype(np.float32) / np.float32(255))


def test_read_images_resizes_with_pil_bilinear(tmp_path, rng):
  pixels = rng.integers(0, 256, (3, 30, 40, 3), dtype=np.uint8)
  paths = _write_images(tmp_path, pixels, ".jpg")
  images = data.read_images(paths, size=(28, 28))
  assert images.shape == (3, 28, 28, 3)
  expected = [
    np.asarray(Image.open(p).convert("RGB").resize((28, 28), Image.Resampling.BILINEAR))
    for p in paths
  ]
  np.testing.assert_array_equal(images, np.stack(expected))


def test_read_images_of_different_sizes_need_a_size(tmp_path, rng):
  a = _write_images(tmp_path / "a", rng.integers(0, 256, (1, 8, 8, 3), dtype=np.uint8))
  b = _write_images(tmp_path / "b", rng.integers(0, 256, (1, 9, 8, 3), dtype=np.uint8))
  with pytest.raises(data.DataFormatError, match=r"9 x 8 \(H x W\).*8 x 8.*pass size="):
    data.read_images(a + b)
  assert data.read_images(a + b, size=(8, 8)).shape == (2, 8, 8, 3)


@pytest.mark.parametrize("content", [b"not an image at all", "truncated"])
def test_undecodable_image_names_the_file(tmp_path, rng, content):
  paths = _write_images(tmp_path, rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8))
  bad = tmp_path / "001.png"
  bad.write_bytes(bad.read_bytes()[:60] if content == "truncated" else content)
  with pytest.raises(data.DataFormatError, match=f"{bad} could not be decoded as an image"):
    data.read_images(paths, size=(16, 16))


def test_read_images_missing_files_one_error(tmp_path, rng):
  paths = _write_images(tmp_path, rng.integers(0, 256, (2, 4, 4, 3), dtype=np.uint8))
  missing = [str(tmp_path / f"gone{i}.png") for i in range(7)]
  with pytest.raises(FileNotFoundError, match=r"7 of the 9 image files .* and 2 more") as info:
    data.read_images(paths + missing)
  assert "gone0.png" in str(info.value) and "gone5.png" not in str(info.value)


def test_read_images_bad_arguments(tmp_path, rng):
  paths = _write_images(tmp_path, rng.integers(0, 256, (1, 4, 4, 3), dtype=np.uint8))
  with pytest.raises(ValueError, match="channels must be 3 .* or 1"):
    data.read_images(paths, channels=4)
  with pytest.raises(ValueError, match=r"size must be \(H, W\)"):
    data.read_images(paths, size=(0, 4))
  with pytest.raises(ValueError, match="dtype must be np.uint8 or np.float32"):
    data.read_images(paths, dtype=np.float64)
  with pytest.raises(ValueError, match="paths must be a list"):
    data.read_images(paths[0])


# ----------------------------------------------------------------------------- order


def test_the_order_is_the_documented_permutation():
  # One definition serves the device sampling, jhash.minibatches and the streams; pin it
  # to the formula the docs give, so a change of the order is a visible decision.
  for key in (jax.random.PRNGKey(0), jax.random.key(7)):
    for epoch, phase in ((0, 0), (3, 0), (1, 2)):
      k = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key, 2**32 - 1), epoch), phase)
      np.testing.assert_array_equal(
        jhash.epoch_permutation(key, epoch, 50, phase), jax.random.permutation(k, 50)
      )


def _assert_same_minibatches(streamed, expected):
  assert len(streamed) == len(expected)
  for got, want in zip(streamed, expected):
    np.testing.assert_array_equal(got["index"], want["index"])
    assert got["index"].dtype == np.int32
    np.testing.assert_array_equal(got["labels"], want["labels"])
    np.testing.assert_array_equal(got["views"][0], want["views"][0])
    assert got["views"][0].dtype == np.asarray(want["views"][0]).dtype


def test_image_stream_equals_minibatches_in_memory_and_resumes(tmp_path):
  listing, _ = _image_list(tmp_path, n=26)  # 3 steps an epoch of 8, 2 items left out
  key = jax.random.key(5)
  batch = {"views": (data.read_images(listing.paths, size=(14, 12)),), "labels": listing.labels}
  expected = list(jhash.minibatches(batch, 8, key, 8))
  stream = data.image_stream(listing, 8, key, 8, size=(14, 12), num_threads=2)
  assert len(stream) == 8
  _assert_same_minibatches(list(stream), expected)
  _assert_same_minibatches(list(stream), expected)  # each iteration starts over
  resumed = data.image_stream(listing, 8, key, 3, size=(14, 12), start_step=5, prefetch=0)
  _assert_same_minibatches(list(resumed), expected[5:])
  phase = data.image_stream(listing, 8, key, 4, size=(14, 12), phase=1, dtype=np.float32)
  floats = {
    "views": (batch["views"][0].astype(np.float32) / np.float32(255),),
    "labels": listing.labels,
  }
  _assert_same_minibatches(list(phase), list(jhash.minibatches(floats, 8, key, 4, phase=1)))


def test_array_stream_of_a_memmap_equals_minibatches(tmp_path, rng):
  x = rng.normal(size=(30, 5)).astype(np.float32)
  mapped = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float32, shape=x.shape)
  mapped[:] = x
  mapped.flush()
  labels = rng.integers(0, 3, 30).astype(np.int32)
  key = jax.random.key(1)
  stream = data.array_stream(
    {"views": (np.load(tmp_path / "x.npy", mmap_mode="r"),), "labels": labels},
    7,
    key,
    9,
    start_step=2,
    num_threads=2,
  )
  _assert_same_minibatches(
    list(stream),
    list(jhash.minibatches({"views": (x,), "labels": labels}, 7, key, 9, start_step=2)),
  )


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_stream_starts_exactly_prefetch_minibatches_ahead(monkeypatch, prefetch):
  # While the consumer holds minibatch s, minibatches s + 1 .. s + prefetch (and no more)
  # have been handed to the threads: the memory bound the module docstring gives.
  started = []

  class Counting(futures.ThreadPoolExecutor):
    def submit(self, fn, *args, **kwargs):
      started.append(fn)
      return super().submit(fn, *args, **kwargs)

  monkeypatch.setattr(futures, "ThreadPoolExecutor", Counting)
  batch = {"views": (np.arange(40, dtype=np.float32).reshape(20, 2),)}
  stream = data.array_stream(batch, 4, jax.random.key(0), 6, prefetch=prefetch)
  for step, _ in enumerate(stream):
    assert len(started) == min(step + 1 + prefetch, 6), (step, len(started))
  assert len(started) == 6


def test_leaving_a_stream_cancels_the_reads_not_started(monkeypatch):
  # One thread, six reads handed to it ahead, each slow: when the consumer leaves after the
  # first minibatch, the reads still queued are cancelled, not run to the end.
  submitted, ran = [], []

  class Counting(futures.ThreadPoolExecutor):
    def submit(self, fn, *args, **kwargs):
      def slow(*a, **k):
        time.sleep(0.05)
        ran.append(1)
        return fn(*a, **k)

      submitted.append(fn)
      return super().submit(slow, *args, **kwargs)

  monkeypatch.setattr(futures, "ThreadPoolExecutor", Counting)
  batch = {"views": (np.arange(80, dtype=np.float32).reshape(40, 2),)}
  stream = data.array_stream(batch, 4, jax.random.key(0), 8, prefetch=6, num_threads=1)
  it = iter(stream)
  next(it)
  it.close()
  assert len(submitted) == 7 and len(ran) <= 3, (len(submitted), len(ran))


# ----------------------------------------------------------------------------- training


def test_fit_on_an_image_stream_equals_the_in_memory_fit(tmp_path):
  listing, _ = _image_list(tmp_path, n=32, size=(28, 28), classes=3, seed=1)
  images = data.read_images(listing.paths, size=(28, 28), channels=1, dtype=np.float32)
  batch = {"views": (images,), "labels": listing.labels}
  small = jhash.models.backbone((28, 28, 1), 4, channels=(4,), dense=16)  # compiles faster
  method = jhash.methods.pairwise(4, batch_size=8, num_epochs=1, backbone=small)
  key = jax.random.key(0)
  state, history = jhash.fit(method, key, batch, progress=False)
  stream = data.image_stream(
    listing, 8, key, 6, size=(28, 28), channels=1, dtype=np.float32, num_threads=2
  )  # 2 minibatches more than read
  before = threading.active_count()
  streamed, streamed_history = jhash.fit(
    method, key, stream, 4, progress=False, state=jhash.init(method, key, batch)
  )
  assert _live_threads(before) == before
  jax.tree.map(np.testing.assert_array_equal, state, streamed)
  np.testing.assert_array_equal(history["loss"], streamed_history["loss"])


# ----------------------------------------------------------------------------- stopping


def test_early_stop_leaves_no_threads(tmp_path):
  listing, _ = _image_list(tmp_path, n=24)
  stream = data.image_stream(listing, 4, jax.random.key(0), 30, size=(8, 8), num_threads=3)
  before = threading.active_count()
  for step, _ in enumerate(stream):
    assert threading.active_count() > before  # decoding in the background
    if step == 2:
      break
  assert _live_threads(before) == before
  it = iter(stream)
  next(it)
  it.close()
  assert _live_threads(before) == before


def test_worker_error_reaches_the_consumer_and_stops_the_threads(tmp_path):
  listing, _ = _image_list(tmp_path, n=24)
  bad = listing.paths[17]
  with open(bad, "wb") as f:
    f.write(b"garbage")
  stream = data.image_stream(listing, 4, jax.random.key(0), 12, size=(8, 8), num_threads=3)
  before = threading.active_count()
  seen = []
  with pytest.raises(data.DataFormatError, match=f"{bad} could not be decoded"):
    for minibatch in stream:
      seen.append(minibatch["index"])
  assert 17 not in np.concatenate(seen or [np.zeros(0, int)])
  assert _live_threads(before) == before


def test_image_stream_checks_files_and_arguments(tmp_path):
  listing, _ = _image_list(tmp_path, n=6)
  gone = listing._replace(paths=listing.paths[:-1] + [str(tmp_path / "gone.png")])
  key = jax.random.key(0)
  before = threading.active_count()
  with pytest.raises(FileNotFoundError, match=r"1 of the 6 image files .*gone\.png"):
    data.image_stream(gone, 2, key, 3, size=(8, 8))
  assert threading.active_count() == before
  with pytest.raises(ValueError, match="images must be an ImageList"):
    data.image_stream(listing.paths, 2, key, 3)
  with pytest.raises(ValueError, match="key must be a JAX PRNG key"):
    data.image_stream(listing, 2, 0, 3)
  with pytest.raises(ValueError, match="batch_size must be >= 1"):
    data.image_stream(listing, 0, key, 3)
  with pytest.raises(ValueError, match="prefetch must be a Python int >= 0"):
    data.image_stream(listing, 2, key, 3, prefetch=None)
  with pytest.raises(ValueError, match="views\\[0\\], labels must have the same number"):
    data.array_stream({"views": (np.zeros((4, 2)),), "labels": np.zeros(3, np.int32)}, 2, key, 1)
