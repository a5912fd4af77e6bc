"""The image transforms (by hand on tiny images) and the Grain image pipeline: jhash's
minibatch order, exact resumption, determinism by key, sharding over processes, and clear
errors."""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

import jhash
from jhash import data
from jhash.data import _transforms as tf
from jhash.data._pipeline import image_pipeline

# A 4 x 6 RGB image whose pixel (r, c) is (10 r + c, 100 + 10 r + c, 200 + c).
TINY = np.stack(
  [
    10 * np.arange(4)[:, None] + np.arange(6),
    100 + 10 * np.arange(4)[:, None] + np.arange(6),
    200 + np.zeros((4, 1), int) + np.arange(6),
  ],
  axis=-1,
).astype(np.uint8)


# ----------------------------------------------------------------------------- transforms


def test_center_crop_pixels_follow_torchvision_rounding():
  crop = tf.center_crop(TINY, (2, 4))  # top round(1.0) = 1, left round(1.0) = 1
  np.testing.assert_array_equal(crop[..., 0], [[11, 12, 13, 14], [21, 22, 23, 24]])
  np.testing.assert_array_equal(crop[..., 2], [[201, 202, 203, 204]] * 2)
  odd = tf.center_crop(TINY, 3)  # top round(0.5) = 0, left round(1.5) = 2 (half to even)
  np.testing.assert_array_equal(odd[..., 0], [[2, 3, 4], [12, 13, 14], [22, 23, 24]])
  assert (
    tf.center_crop(TINY, (4, 6)) is not None and tf.center_crop(TINY, (4, 6)).shape == TINY.shape
  )


def test_flip_mirrors_columns_only_when_asked():
  flipped = tf.flip(TINY, True)
  np.testing.assert_array_equal(flipped[0, :, 0], [5, 4, 3, 2, 1, 0])
  np.testing.assert_array_equal(flipped[3, :, 1], [135, 134, 133, 132, 131, 130])
  np.testing.assert_array_equal(tf.flip(TINY, False), TINY)


def test_normalize_exact_values():
  pixels = np.array([[[0, 255, 51]]], np.uint8)
  out = tf.normalize(pixels, (0.5, 0.5, 0.2), (0.5, 0.25, 2.0))
  assert out.dtype == np.float32 and out.shape == (1, 1, 3)
  np.testing.assert_array_equal(out[0, 0], np.float32([-1.0, 2.0, 0.0]))  # 51 / 255 = 0.2
  imagenet = tf.normalize(np.zeros((1, 1, 3), np.uint8))[0, 0]
  np.testing.assert_allclose(imagenet, [-2.1179039, -2.0357141, -1.8044444], rtol=1e-6)
  white = tf.normalize(np.full((1, 1, 3), 255, np.uint8))[0, 0]
  np.testing.assert_allclose(white, [2.2489083, 2.4285715, 2.64], rtol=1e-6)


def test_random_crop_is_inside_the_image_and_deterministic_by_seed():
  positions = set()
  for seed in range(60):
    crop = tf.random_crop(TINY, (2, 4), np.random.default_rng(seed))
    top, left = crop[0, 0, 0] // 10, crop[0, 0, 0] % 10  # pixel (r, c) holds 10 r + c
    assert 0 <= top <= 2 and 0 <= left <= 2, (top, left)
    np.testing.assert_array_equal(crop, TINY[top : top + 2, left : left + 4])
    again = tf.random_crop(TINY, (2, 4), np.random.default_rng(seed))
    np.testing.assert_array_equal(crop, again)
    positions.add((int(top), int(left)))
  assert len(positions) == 9  # every position is reached


def test_resize_shorter_side_and_to_a_size():
  assert tf.resize_shorter(TINY, 8).shape == (8, 12, 3)
  assert tf.resize_shorter(np.ascontiguousarray(TINY.transpose(1, 0, 2)), 8).shape == (12, 8, 3)
  odd = np.zeros((5, 7, 3), np.uint8)
  assert tf.resize_shorter(odd, 8).shape == (8, 11, 3)  # int(8 * 7 / 5): rounded down
  assert tf.resize_shorter(TINY, 4) is TINY  # already that size
  expected = np.asarray(Image.fromarray(TINY).resize((12, 8), Image.Resampling.BILINEAR))
  np.testing.assert_array_equal(tf.resize_shorter(TINY, 8), expected)
  assert tf.resize_to(TINY, (3, 5)).shape == (3, 5, 3) and tf.resize_to(TINY, 7).shape == (7, 7, 3)


def test_decode_image_gives_rgb_and_resizes_as_the_array(tmp_path):
  Image.fromarray(TINY).save(tmp_path / "tiny.png")
  Image.fromarray(TINY[..., 0]).save(tmp_path / "gray.png")  # mode L: converted to RGB
  np.testing.assert_array_equal(tf.decode_image(tmp_path / "tiny.png"), TINY)
  gray = tf.decode_image(tmp_path / "gray.png")
  np.testing.assert_array_equal(gray, np.repeat(TINY[..., :1], 3, axis=-1))
  for resize in (8, (5, 9), [5, 9]):
    want = tf._resized(TINY, resize)
    np.testing.assert_array_equal(tf.decode_image(tmp_path / "tiny.png", resize), want)
  assert tf.decode_image(tmp_path / "tiny.png", 8).shape == (8, 12, 3)


def test_transforms_refuse_bad_input():
  with pytest.raises(ValueError, match=r"smaller than the crop 5 x 5"):
    tf.center_crop(TINY, 5)
  with pytest.raises(ValueError, match="rng must be a np.random.Generator"):
    tf.random_crop(TINY, 2, 0)
  with pytest.raises(ValueError, match="image must be a uint8 array"):
    tf.flip(TINY.astype(np.float32), True)
  with pytest.raises(ValueError, match="mean must be 3 finite numbers"):
    tf.normalize(TINY, (0.5, 0.5), (1.0, 1.0, 1.0))
  with pytest.raises(ValueError, match="std must be > 0"):
    tf.normalize(TINY, (0.5, 0.5, 0.5), (1.0, 0.0, 1.0))


def test_transforms_equal_torchvisions():
  # The peers' transforms (DeepHash-pytorch utils/tools.py), when torchvision is usable.
  try:
    from torchvision import transforms
  except Exception as e:  # not installed, or a wheel built for another torch (RuntimeError)
    pytest.skip(f"torchvision is not usable here ({type(e).__name__}: {e})")
  image = np.random.default_rng(0).integers(0, 256, (13, 17, 3), dtype=np.uint8)
  normalize = transforms.Normalize(tf.IMAGENET_MEAN, tf.IMAGENET_STD)
  peer = transforms.Compose(
    [transforms.Resize(10), transforms.CenterCrop(8), transforms.ToTensor(), normalize]
  )
  want = peer(Image.fromarray(image)).permute(1, 2, 0).numpy()
  np.testing.assert_array_equal(tf.eval_transform(image, size=8, resize=10), want)
  # Training: the same crop position and flip drawn on both sides.
  resized = transforms.Resize(10)(Image.fromarray(image))
  top, left = 1, 2
  crop = transforms.functional.crop(resized, top, left, 8, 8)
  want = transforms.Compose([transforms.ToTensor(), normalize])(transforms.functional.hflip(crop))
  ours = tf.normalize(tf.flip(tf.resize_shorter(image, 10)[top : top + 8, left : left + 8], True))
  np.testing.assert_array_equal(ours, want.permute(1, 2, 0).numpy())


# ----------------------------------------------------------------------------- pipeline


def _write_images(folder, n=26, seed=0):
  """``n`` small images of a few sizes, PNG and JPEG in turn; returns (paths, labels)."""
  folder.mkdir(exist_ok=True)
  rng = np.random.default_rng(seed)
  paths = []
  for i in range(n):
    pixels = rng.integers(0, 256, (12 + i % 3, 11 + i % 5, 3), dtype=np.uint8)
    paths.append(str(folder / f"{i:03d}.{'png' if i % 2 == 0 else 'jpg'}"))
    Image.fromarray(pixels).save(paths[-1])
  labels = rng.random((n, 4)) < 0.5
  return paths, labels


@pytest.fixture(scope="module")
def images(tmp_path_factory):
  return _write_images(tmp_path_factory.mktemp("images"))


SMALL = dict(image_size=8, resize=10, read_threads=2)


def _pipeline(images, **options):
  paths, labels = images
  settings = dict(batch_size=8, key=jax.random.key(5), train=True) | SMALL | options
  return image_pipeline(paths, labels, **settings)


def _assert_same(got, want):
  assert len(got) == len(want)
  for a, b in zip(got, want):
    assert set(a) == set(b) == {"views", "labels", "index"}
    np.testing.assert_array_equal(a["index"], b["index"])
    np.testing.assert_array_equal(a["labels"], b["labels"])
    np.testing.assert_array_equal(a["views"][0], b["views"][0])


def test_the_order_is_jhash_minibatch_order(images):
  paths, labels = images
  key = jax.random.key(5)
  pipeline = _pipeline(images, num_steps=7)  # 3 steps an epoch: crosses 2 epochs
  got = list(pipeline)
  assert len(pipeline) == 7 and len(got) == 7
  in_memory = {"views": (np.zeros((26, 1), np.float32),), "labels": labels}
  for minibatch, want in zip(got, jhash.minibatches(in_memory, 8, key, 7)):
    assert minibatch["index"].dtype == np.int32
    np.testing.assert_array_equal(minibatch["index"], want["index"])
    np.testing.assert_array_equal(minibatch["labels"], labels[want["index"]])
    assert minibatch["views"][0].shape == (8, 8, 8, 3)
    assert minibatch["views"][0].dtype == np.float32
  by_epochs = list(_pipeline(images, num_epochs=2))
  assert len(by_epochs) == 6
  _assert_same(by_epochs, got[:6])
  phase = list(_pipeline(images, num_steps=2, phase=1))
  want = list(jhash.minibatches(in_memory, 8, key, 2, phase=1))
  assert [list(m["index"]) for m in phase] == [list(m["index"]) for m in want]


def test_start_step_and_grain_state_resume_exactly(images):
  full = list(_pipeline(images, num_steps=7))
  resumed = list(_pipeline(images, num_steps=3, start_step=4))  # mid-epoch (step 4 of 3/epoch)
  _assert_same(resumed, full[4:])
  pipeline = _pipeline(images, num_steps=7)
  it = iter(pipeline)
  head = [next(it) for _ in range(4)]
  state = it.get_state()
  it.close()
  again = iter(pipeline)
  again.set_state(state)
  _assert_same(head + list(again), full)


def test_same_key_same_pixels_other_key_other_crops(images):
  first = list(_pipeline(images, num_steps=6))
  _assert_same(list(_pipeline(images, num_steps=6, read_threads=1)), first)
  other = list(_pipeline(images, num_steps=6, key=jax.random.key(6)))

  def by_step_and_item(run):
    return {(s, int(i)): v for s, m in enumerate(run) for i, v in zip(m["index"], m["views"][0])}

  # The same item at the same step under both keys: only the key differs in its seed.
  a, b = by_step_and_item(first), by_step_and_item(other)
  shared = sorted(set(a) & set(b))
  assert len(shared) >= 8, shared
  differ = [k for k in shared if not np.array_equal(a[k], b[k])]
  assert len(differ) >= len(shared) * 3 // 4, (differ, shared)


def test_training_pixels_are_a_crop_and_flip_of_the_resized_image(images):
  paths, _ = images
  for minibatch in _pipeline(images, num_steps=2):
    for i, pixels in zip(minibatch["index"], minibatch["views"][0]):
      resized = tf.resize_shorter(np.asarray(Image.open(paths[i]).convert("RGB")), 10)
      candidates = [
        tf.normalize(tf.flip(resized[t : t + 8, c : c + 8], f))
        for t in range(resized.shape[0] - 7)
        for c in range(resized.shape[1] - 7)
        for f in (False, True)
      ]
      assert any(np.array_equal(pixels, c) for c in candidates), paths[i]


def test_evaluation_is_decode_center_crop_normalize_in_order(images):
  paths, labels = images
  run = list(_pipeline(images, train=False, batch_size=8))
  assert len(run) == 4  # ceil(26 / 8), the last padded
  index = np.concatenate([m["index"] for m in run])
  np.testing.assert_array_equal(index, list(range(26)) + [-1] * 6)
  pixels = np.concatenate([m["views"][0] for m in run])
  mean, std = np.float32(tf.IMAGENET_MEAN), np.float32(tf.IMAGENET_STD)
  for i, path in enumerate(paths):
    image = Image.open(path).convert("RGB")
    w, h = image.size
    size = (10, int(10 * h / w)) if w <= h else (int(10 * w / h), 10)  # PIL: (W, H)
    resized = np.asarray(image.resize(size, Image.Resampling.BILINEAR))
    top, left = round((resized.shape[0] - 8) / 2), round((resized.shape[1] - 8) / 2)
    crop = resized[top : top + 8, left : left + 8].astype(np.float32) / np.float32(255)
    np.testing.assert_array_equal(pixels[i], (crop - mean) / std, err_msg=path)
  assert not pixels[26:].any()
  np.testing.assert_array_equal(np.concatenate([m["labels"] for m in run])[:26], labels)
  again = list(_pipeline(images, train=False, batch_size=8, key=jax.random.key(9)))
  _assert_same(again, run)  # no randomness: the key does not matter
  tail = list(_pipeline(images, train=False, batch_size=8, start_step=2))
  _assert_same(tail, run[2:])


@pytest.mark.parametrize("train", [True, False])
def test_two_processes_together_read_each_global_minibatch(images, train):
  whole = list(_pipeline(images, num_steps=None if not train else 5, train=train))
  parts = [
    list(
      _pipeline(
        images,
        num_steps=None if not train else 5,
        train=train,
        process_index=p,
        process_count=2,
      )
    )
    for p in (0, 1)
  ]
  assert len(parts[0]) == len(parts[1]) == len(whole)
  for w, p0, p1 in zip(whole, *parts):
    assert p0["index"].shape == (4,)
    joined = {
      "views": (np.concatenate([p0["views"][0], p1["views"][0]]),),
      "labels": np.concatenate([p0["labels"], p1["labels"]]),
      "index": np.concatenate([p0["index"], p1["index"]]),
    }
    _assert_same([joined], [w])


def test_labels_may_be_class_ids_or_none(images):
  paths, _ = images
  ids = np.arange(26, dtype=np.int32) % 3
  minibatch = next(
    iter(
      image_pipeline(
        paths, ids, batch_size=4, key=jax.random.key(0), train=True, num_steps=1, **SMALL
      )
    )
  )
  np.testing.assert_array_equal(minibatch["labels"], ids[minibatch["index"]])
  unlabelled = image_pipeline(
    paths, None, batch_size=4, key=jax.random.key(0), train=False, **SMALL
  )
  assert set(next(iter(unlabelled))) == {"views", "index"}


def test_missing_files_one_error_naming_how_many_and_the_first(images, tmp_path):
  paths, labels = images
  gone = [str(tmp_path / f"gone{i}.jpg") for i in range(7)]
  with pytest.raises(FileNotFoundError, match=r"7 of the 33 image files .*gone0\.jpg.* 2 more"):
    image_pipeline(paths + gone, None, batch_size=4, key=jax.random.key(0), train=True, num_steps=1)


def test_an_undecodable_file_is_named(images, tmp_path):
  paths, labels = images
  bad = tmp_path / "bad.png"
  bad.write_bytes(b"not an image at all")
  listing = paths[:-1] + [str(bad)]
  pipeline = image_pipeline(
    listing, labels, batch_size=26, key=jax.random.key(0), train=True, num_steps=1, **SMALL
  )
  with pytest.raises(data.DataFormatError, match=f"{bad} could not be decoded as an image"):
    list(pipeline)


def test_bad_arguments_are_refused(images):
  paths, labels = images
  key = jax.random.key(0)

  def make(**options):
    settings = dict(batch_size=8, key=key, train=True, num_steps=1) | options
    return image_pipeline(paths, labels, **settings)

  with pytest.raises(ValueError, match=r"batch_size must be at most the number of images \(26\)"):
    make(batch_size=27)
  with pytest.raises(ValueError, match="mean must be 3 finite numbers"):
    make(mean=(0.5, 0.5))
  with pytest.raises(ValueError, match="std must be 3 finite numbers"):
    make(std=np.ones((3, 1)))
  with pytest.raises(ValueError, match=r"divisible by process_count \(3\)"):
    make(process_index=0, process_count=3)
  with pytest.raises(ValueError, match="process_index must be below process_count"):
    make(process_index=2, process_count=2)
  with pytest.raises(ValueError, match="exactly one of num_steps and num_epochs"):
    make(num_epochs=1)
  with pytest.raises(ValueError, match="not num_epochs"):
    make(train=False, num_steps=None, num_epochs=1)
  with pytest.raises(ValueError, match="resize 100 would make images smaller than the crop"):
    make(resize=100, image_size=224)
  with pytest.raises(ValueError, match="key must be one JAX PRNG key"):
    make(key=0)
  with pytest.raises(ValueError, match="paths must be a list"):
    image_pipeline(paths[0], None, batch_size=1, key=key, train=True, num_steps=1)


@pytest.mark.slow
def test_worker_processes_give_the_same_minibatches(images):
  # Grain's worker processes (spawned: each imports jhash, JAX and Grain; about 10 s here).
  threads = list(_pipeline(images, num_steps=5))
  it = iter(_pipeline(images, num_steps=5, worker_count=2, read_threads=1))
  try:
    _assert_same(list(it), threads)
  finally:
    it.close()


def test_encode_stream_codes_an_evaluation_pipeline_in_item_order(images):
  paths, labels = images
  run = list(_pipeline(images, train=False, batch_size=8))  # the last minibatch padded
  pixels = np.concatenate([m["views"][0] for m in run])[: len(paths)]
  method = jhash.methods.lsh(12)
  state, _ = jhash.fit(method, jax.random.key(0), {"views": (pixels,)}, progress=False)
  want = np.asarray(jhash.encode(method, state, {"views": (pixels,)}))
  np.testing.assert_array_equal(jhash.encode_stream(method, state, run, len(paths)), want)
  shuffled = [run[i] for i in (3, 1, 0, 2)]  # any order of minibatches
  np.testing.assert_array_equal(jhash.encode_stream(method, state, shuffled, len(paths)), want)
  with pytest.raises(ValueError, match=r"gave 24 of num_items=26 positions; the first missing"):
    jhash.encode_stream(method, state, run[:3], len(paths))
  with pytest.raises(ValueError, match=r"minibatch 4: position 0 comes a second time"):
    jhash.encode_stream(method, state, run + run[:1], len(paths))
  with pytest.raises(ValueError, match=r"minibatch 2: .index. holds 23, past num_items=20"):
    jhash.encode_stream(method, state, run, 20)
  with pytest.raises(ValueError, match=r"minibatch 0 must be a batch dict with 'index'"):
    jhash.encode_stream(method, state, [{"views": run[0]["views"]}], len(paths))


# ----------------------------------------------------------------------------- whole schedules


class _Seen(NamedTuple):
  total: jax.Array  # int32 []: a running hash of the items read, in order


def _two_minibatch_phases(first=8, second=4, metrics=("first", "second")):
  """Phase 0: five steps of ``first`` items; phase 1: two epochs of ``second``; each step
  reports the items it read (as ``metrics[phase]``) and folds them into the state."""

  def init(key, batch):
    del key, batch
    return _Seen(jnp.zeros((), jnp.int32))

  def update(name, state, batch, key):
    del key
    index = batch["index"]
    total = state.total * 31 + jnp.sum(index * (jnp.arange(index.shape[0]) + 1))
    return _Seen(total), {name: index}

  phases = (
    jhash.Phase("first", functools.partial(update, metrics[0]), first, num_steps=5),
    jhash.Phase("second", functools.partial(update, metrics[1]), second, num_epochs=2),
  )
  encode = lambda state, batch: jnp.ones((batch["views"][0].shape[0], 1), jnp.int8)
  return jhash.HashingMethod(init, encode, 1, "two_minibatch_phases", phases)


def test_training_pipeline_feeds_fit_each_phase_as_in_memory_and_resumes_across_them(images):
  paths, labels = images
  key = jax.random.key(5)
  method = _two_minibatch_phases()
  in_memory = {"views": (np.zeros((26, 8, 8, 3), np.float32),), "labels": labels}
  want_state, want = jhash.fit(method, key, in_memory, progress=False)
  pipeline = jhash.training_pipeline(method, paths, labels, key=key, **SMALL)
  assert len(pipeline) == jhash.schedule(method, 26) == 5 + 2 * 6
  assert [p for p, _ in pipeline.pipelines] == [0, 1]
  state, got = jhash.fit(method, key, pipeline, num_items=26, progress=False)
  assert int(state.total) == int(want_state.total)
  for name, shape in (("first", (5, 8)), ("second", (12, 4))):  # each at its batch size
    assert got[name].shape == shape
    np.testing.assert_array_equal(got[name], want[name])
  # Resumed in the second phase's first epoch, and in the first phase: the same run.
  for start in (8, 3):
    part, _ = jhash.fit(method, key, in_memory, start, progress=False)
    rest = jhash.training_pipeline(method, paths, labels, key=key, start_step=start, **SMALL)
    assert len(rest) == 17 - start
    resumed, tail = jhash.fit(
      method, key, rest, state=part, start_step=start, num_items=26, progress=False
    )
    assert int(resumed.total) == int(want_state.total), start
    np.testing.assert_array_equal(tail["second"], want["second"][max(start - 5, 0) :])
  # The pixels of a resumed step are those of the whole run's (crops and flips by key).
  whole = list(pipeline)
  _assert_same(
    list(jhash.training_pipeline(method, paths, labels, key=key, start_step=8, **SMALL)), whole[8:]
  )


def test_training_pipeline_refuses_what_fit_would_refuse_and_options_it_sets(images):
  paths, labels = images
  key = jax.random.key(0)
  method = _two_minibatch_phases()
  whole = method._replace(phases=(jhash.Phase("all", method.phases[0].update, None, num_steps=2),))
  with pytest.raises(ValueError, match=r"phase 'all' trains on the whole set at every step"):
    jhash.training_pipeline(whole, paths, labels, key=key)
  bound = method._replace(bind=lambda batch: None)
  with pytest.raises(ValueError, match=r"reads sizes from its whole training batch"):
    jhash.training_pipeline(bound, paths, labels, key=key)
  with pytest.raises(ValueError, match=r"'batch_size' is not one of its options \(image_size"):
    jhash.training_pipeline(method, paths, labels, key=key, batch_size=4)
  with pytest.raises(ValueError, match=r"start_step=18 is past the end of .*17 steps"):
    jhash.training_pipeline(method, paths, labels, key=key, start_step=18)
  big = _two_minibatch_phases(second=27)
  with pytest.raises(ValueError, match=r"phase 'second' reads minibatches of 27 .* the 26 images"):
    jhash.training_pipeline(big, paths, labels, key=key, **SMALL)


def test_a_metric_that_changes_shape_between_phases_is_named_at_once():
  method = _two_minibatch_phases(metrics=("index", "index"))
  batch = {"views": (np.zeros((26, 2), np.float32),)}
  with pytest.raises(ValueError, match=r"metric 'index' of phase 'second' has shape \(4,\) a "):
    jhash.fit(method, jax.random.key(0), batch, progress=False)


def test_encode_stream_multi_gives_encode_multi_of_the_whole_set(images):
  paths, labels = images
  run = list(_pipeline(images, train=False, batch_size=8))
  pixels = np.concatenate([m["views"][0] for m in run])[: len(paths)]
  method = jhash.methods.lsh(12)
  state, _ = jhash.fit(method, jax.random.key(0), {"views": (pixels,)}, progress=False)
  codes, mask = jhash.encode_stream(method, state, run, len(paths), multi=True)
  want_codes, want_mask = jhash.encode_multi(method, state, {"views": (pixels,)})
  assert codes.shape == (26, 1, 12) and mask.shape == (26, 1)
  np.testing.assert_array_equal(codes, want_codes)
  np.testing.assert_array_equal(mask, want_mask)
  with pytest.raises(ValueError, match=r"multi must be True or False"):
    jhash.encode_stream(method, state, run, len(paths), multi="yes")
