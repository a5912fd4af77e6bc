"""make_scene_dataset: items at random scales and non-overlapping positions, checked
against the boxes it reports and an independent resize of each source by JAX."""

import itertools

import jax
import numpy as np
import pytest

from jhash import data
from jhash.data._scenes import SCENE_SIDES

# Narrow side ranges for the pixel test: one JAX compilation per distinct side.
FEW_SIDES = {1: (30, 32), 2: (22, 24), 3: (16, 18)}


def _sources(dtype=np.uint8, shape=(28, 28)):
  rng = np.random.default_rng(7)
  images = rng.integers(0, 256, (20,) + shape).astype(dtype)
  return images, np.arange(20) % 4


@pytest.fixture(scope="module")
def scenes():
  images, labels = _sources()
  return images, labels, data.make_scene_dataset(images, labels, num_items=2000)


def _present(ds, i):
  """Rows of scene i's items: boxes [k, 4], classes [k], sources [k]."""
  k = ds.extras["num_objects"][i]
  return ds.extras["boxes"][i, :k], ds.extras["box_labels"][i, :k], ds.extras["sources"][i, :k]


def test_layout_extras_have_their_shapes_and_blanks(scenes):
  _, _, ds = scenes
  assert ds.views[0].shape == (2000, 56, 56) and ds.views[0].dtype == np.uint8
  assert ds.labels.shape == (2000, 4) and ds.labels.dtype == bool
  counts = ds.extras["num_objects"]
  assert ds.extras["boxes"].shape == (2000, 3, 4) and ds.extras["size"] == 56
  absent = np.arange(3)[None, :] >= counts[:, None]
  for key in ("box_labels", "sources"):
    assert ds.extras[key].dtype == np.int32
    np.testing.assert_array_equal(ds.extras[key] < 0, absent)
  np.testing.assert_array_equal((ds.extras["boxes"] < 0).all(axis=-1), absent)


def test_boxes_are_inside_square_and_apart(scenes):
  _, _, ds = scenes
  for i in range(ds.num_items):
    boxes, _, sources = _present(ds, i)
    top, left, height, width = boxes.T
    assert (top >= 0).all() and (left >= 0).all()
    assert (top + height <= 56).all() and (left + width <= 56).all()
    np.testing.assert_array_equal(height, width)
    assert len(set(sources.tolist())) == sources.size  # no source twice in a scene
    for a, b in itertools.combinations(boxes, 2):
      apart_rows = a[0] + a[2] <= b[0] or b[0] + b[2] <= a[0]
      apart_cols = a[1] + a[3] <= b[1] or b[1] + b[3] <= a[1]
      assert apart_rows or apart_cols, (i, a, b)


def test_boxes_may_touch_on_every_side():
  # Two items of side 20 on a 40 x 40 scene fit only edge to edge; the second item
  # touches the first from below, above, the right and the left, each in some scene.
  images, labels = _sources()
  ds = data.make_scene_dataset(
    images, labels, size=40, num_objects=2, sides={2: (20, 20)}, num_items=60
  )
  seen = set()
  for (t1, l1, _, _), (t2, l2, _, _) in ds.extras["boxes"]:
    share_cols, share_rows = abs(l1 - l2) < 20, abs(t1 - t2) < 20
    assert abs(t1 - t2) == 20 or abs(l1 - l2) == 20, (t1, l1, t2, l2)
    seen.add({(20, True): "below", (-20, True): "above"}.get((t2 - t1, share_cols)))
    seen.add({(20, True): "right", (-20, True): "left"}.get((l2 - l1, share_rows)))
  assert seen - {None} == {"below", "above", "right", "left"}, seen


def test_labels_are_the_classes_of_the_boxes(scenes):
  _, labels, ds = scenes
  for i in range(ds.num_items):
    _, classes, sources = _present(ds, i)
    np.testing.assert_array_equal(classes, labels[sources])
    np.testing.assert_array_equal(np.flatnonzero(ds.labels[i]), np.unique(classes))


def test_counts_cover_the_range_and_sides_follow_the_table(scenes):
  _, _, ds = scenes
  counts, sides = ds.extras["num_objects"], ds.extras["boxes"][..., 2]
  assert set(counts.tolist()) == {1, 2, 3}
  for count, (lo, hi) in SCENE_SIDES.items():
    drawn = sides[counts == count][:, :count]
    assert drawn.min() == lo and drawn.max() <= hi, (count, drawn.min(), drawn.max())
  # One item always fits, so its inclusive range is reached at both ends; with more, large
  # sides that fit only in a few places are rare (two of 36 never fit on 56).
  assert sides[counts == 1][:, 0].max() == SCENE_SIDES[1][1]


def test_other_sizes_scale_the_default_sides():
  images, labels = _sources()
  ds = data.make_scene_dataset(images, labels, size=28, num_items=1000)
  counts, sides = ds.extras["num_objects"], ds.extras["boxes"][..., 2]
  assert ds.views[0].shape == (1000, 28, 28)
  for count, (lo, hi) in {1: (10, 28), 2: (10, 18), 3: (10, 14)}.items():
    drawn = sides[counts == count][:, :count]
    assert drawn.min() == lo and drawn.max() <= hi, (count, drawn.min(), drawn.max())
  assert sides[counts == 1][:, 0].max() == 28


# JAX's resize, one compiled program per shape (op by op it took seconds per scene).
_resize = jax.jit(lambda x, shape: jax.image.resize(x, shape, "linear"), static_argnums=1)


@pytest.mark.parametrize(
  "dtype, shape, atol",
  [(np.uint8, (28, 28), 1), (np.float32, (28, 20, 3), 1e-3)],
  ids=["u8", "f32-rgb-not-square"],
)
def test_pixels_are_the_resized_sources_and_zero_elsewhere(dtype, shape, atol):
  images, labels = _sources(dtype, shape)
  channels = shape[2:]
  ds = data.make_scene_dataset(images, labels, sides=FEW_SIDES, num_items=60, seed=3)
  scenes = ds.views[0]
  assert scenes.dtype == dtype and scenes.shape == (60, 56, 56) + channels
  covered = np.zeros(scenes.shape[:3], bool)
  exact = []
  for i in range(ds.num_items):
    boxes, _, sources = _present(ds, i)
    for (top, left, h, w), source in zip(boxes, sources):
      # The reference: JAX's resize of this one source alone, rounded to the dtype.
      ref = np.asarray(_resize(images[source].astype(np.float32), (h, w) + channels))
      if dtype == np.uint8:
        ref = np.clip(np.rint(ref), 0, 255)
      crop = scenes[i, top : top + h, left : left + w].astype(np.float32)
      np.testing.assert_allclose(crop, ref, atol=atol, rtol=0)
      exact.append((crop == ref).mean())
      covered[i, top : top + h, left : left + w] = True
  assert not scenes[~covered].any()
  if dtype == np.uint8:  # float32 rounding may move a value at .5 by one, rarely
    assert np.mean(exact) > 0.97, np.mean(exact)


def test_same_seed_same_scenes_other_seed_other_scenes():
  images, labels = _sources()
  make = lambda seed: data.make_scene_dataset(images, labels, seed=seed, num_items=100)
  a, b, c = make(0), make(0), make(1)
  np.testing.assert_array_equal(a.views[0], b.views[0])
  np.testing.assert_array_equal(a.extras["boxes"], b.extras["boxes"])
  np.testing.assert_array_equal(a.labels, b.labels)
  assert not np.array_equal(a.views[0], c.views[0])
  assert not np.array_equal(a.extras["boxes"], c.extras["boxes"])


def test_one_object_per_scene():
  images, labels = _sources()
  ds = data.make_scene_dataset(images, labels, num_objects=1, num_items=200)
  np.testing.assert_array_equal(ds.extras["num_objects"], 1)
  assert ds.extras["boxes"].shape == (200, 1, 4)
  np.testing.assert_array_equal(ds.labels.sum(axis=1), 1)
  np.testing.assert_array_equal(ds.labels.argmax(axis=1), labels[ds.extras["sources"][:, 0]])


@pytest.mark.parametrize(
  "options, match",
  [
    ({"sides": {1: (20, 60)}, "num_objects": 1}, r"sides\[1\] must be .* <= size=56"),
    ({"sides": {1: (30, 20)}, "num_objects": 1}, r"sides\[1\] must be .*min <= max"),
    ({"sides": {1: (0, 20)}, "num_objects": 1}, r"sides\[1\] must be .*1 <= min"),
    ({"sides": {4: (30, 40)}, "num_objects": 4}, r"sides\[4\].*cannot fit 4 items of side"),
    ({"num_objects": (1, 4)}, r"num_objects=\(1, 4\) needs a sides entry .*\[4\]"),
    ({"num_objects": (0, 2)}, r"num_objects must satisfy 1 <= min <= max"),
    ({"num_objects": (3, 2)}, r"num_objects must satisfy 1 <= min <= max"),
    ({"num_classes": 3}, r"labels must be below num_classes=3"),
    ({"size": 0}, r"size must be >= 1"),
  ],
)
def test_bad_settings_name_the_argument(options, match):
  images, labels = _sources()
  with pytest.raises(ValueError, match=match):
    data.make_scene_dataset(images, labels, **options)


def test_too_few_source_images_is_an_error():
  images, labels = _sources()
  with pytest.raises(ValueError, match=r"images must hold at least 3 images .* got 2"):
    data.make_scene_dataset(images[:2], labels[:2], num_objects=(1, 3))


def test_an_unplaceable_setting_is_an_error_not_a_hang():
  # Four items of side 20 pass the up-front check on a 40 x 40 scene, but only the exact
  # 2 x 2 grid holds them, which random positions almost never draw.
  images, labels = _sources()
  with pytest.raises(ValueError, match=r"could not place .* sides=\{4: \(20, 20\)\}, size=40"):
    data.make_scene_dataset(
      images, labels, size=40, num_objects=4, sides={4: (20, 20)}, num_items=1
    )


def test_each_item_alone_is_its_box_of_the_scene_on_an_empty_scene(scenes):
  scenes = scenes[2]
  index = np.arange(0, 40, 3)
  alone, present = data.scene_items_alone(scenes, index)
  assert alone.shape == (index.size, 3) + scenes.views[0].shape[1:]
  np.testing.assert_array_equal(present, scenes.extras["box_labels"][index] >= 0)
  for row, i in enumerate(index):
    for j in range(3):
      top, left, h, w = scenes.extras["boxes"][i, j]
      inside = np.zeros(scenes.views[0].shape[1:], bool)
      if present[row, j]:
        inside[top : top + h, left : left + w] = True
      np.testing.assert_array_equal(alone[row, j][inside], scenes.views[0][i][inside])
      assert not alone[row, j][~inside].any()
  with pytest.raises(ValueError, match="index must be int scene indices"):
    data.scene_items_alone(scenes, [10**6])
  with pytest.raises(ValueError, match="dataset must be one make_scene_dataset made"):
    data.scene_items_alone(data.make_two_view(np.zeros((4, 8, 8)), np.arange(4)))
