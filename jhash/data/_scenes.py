"""Multi-object scenes composed from a single-label image set, for multiple-code hashing.

``make_scene_dataset`` pastes a few source images, each resized to a random square
side, at random non-overlapping positions on an empty square scene. Unlike the grid
canvases of ``make_canvas_dataset`` there are no cells: a crop of a scene (what MCH
encodes) still shows items, at any scale and position.

How the work is organised (all NumPy, vectorised across scenes):

1. counts and distinct sources per scene (``_draw_layout`` of the canvases);
2. the layout: sides for every scene, then the items' positions slot by slot, each try
   drawing a position for every scene still waiting and keeping those that overlap no
   earlier item; a scene that fails ``_TRIES`` times draws new sides (``_layout``);
3. the pixels: every item of one side is resized in one pair of matrix products with
   the bilinear, anti-aliased weights of ``jax.image.resize(..., method="linear")``
   (computed here in NumPy: JAX compiled one program per side, 8 s for the 37 sides of
   10,000 scenes), then pasted with one fancy-indexed write.

Cost: 10,000 scenes of 56 x 56 from 60,000 uint8 28 x 28 images took 0.6 s (0.2 s layout,
the rest resizing and pasting) on a busy 2-core machine, 2026-12-04; memory is the scenes
plus one side's items in float32.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from jhash import _checks
from jhash.data._canvas import _check_images
from jhash.data._canvas import count_pair
from jhash.data._canvas import _draw_layout
from jhash.data._canvas import _label_columns
from jhash.data._dataset import Dataset
from jhash.data._dataset import check_dataset
from jhash.data._dataset import make_dataset

#: Item count -> inclusive (min, max) side in pixels of the items of a scene with that
#: many items, on a 56 x 56 scene (the fixed setting; other sizes scale it by size / 56).
SCENE_SIDES = {1: (20, 56), 2: (20, 36), 3: (20, 28)}

_TRIES = 50  # positions drawn for one item before the scene draws new sides
_REDRAWS = 200  # new sides drawn for one scene before giving up


def _default_sides(size: int) -> dict[int, tuple[int, int]]:
  """``SCENE_SIDES`` scaled to a ``size x size`` scene (rounded, at least 1)."""
  scale = lambda v: max(1, round(v * size / 56))
  return {count: (scale(lo), scale(hi)) for count, (lo, hi) in SCENE_SIDES.items()}


def _count_range(num_objects: Any, sides: Mapping[int, Any]) -> tuple[int, int]:
  lo, hi = count_pair(num_objects)
  missing = [c for c in range(lo, hi + 1) if c not in sides]
  if missing:
    raise ValueError(
      f"num_objects={num_objects!r} needs a sides entry for each count in it; sides has "
      f"none for {missing} (it has {sorted(sides)})."
    )
  return lo, hi


def _check_sides(sides: Mapping[int, Any], lo: int, hi: int, size: int) -> None:
  """Each count in ``lo..hi`` has valid (min, max) sides that ``size`` can fit."""
  for count in range(lo, hi + 1):
    pair = sides[count]
    ints = isinstance(pair, (tuple, list)) and len(pair) == 2
    ints = ints and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in pair)
    if not ints or not 1 <= pair[0] <= pair[1] <= size:
      raise ValueError(
        f"sides[{count}] must be an inclusive (min, max) pair of ints with "
        f"1 <= min <= max <= size={size}; got {pair!r}."
      )
    # Sufficient: a grid of (size // min) ** 2 cells of the smallest side holds them.
    if (size // pair[0]) ** 2 < count:
      raise ValueError(
        f"sides[{count}] = {tuple(pair)}: cannot fit {count} items of side at least "
        f"{pair[0]} on a {size} x {size} scene."
      )


def _draw_sides(
  rng: np.random.Generator, counts: np.ndarray, table: np.ndarray, hi: int
) -> np.ndarray:
  """int [m, hi]: each item's side, uniform in its count's range; 0 in empty slots."""
  low, high = table[counts, 0], table[counts, 1]
  sides = rng.integers(low[:, None], high[:, None] + 1, size=(counts.size, hi))
  return np.where(np.arange(hi) < counts[:, None], sides, 0)


def _overlaps(top, left, side, tops, lefts, sides) -> np.ndarray:
  """bool [m, k]: box ``(top, left, side)`` [m] overlaps box j of [m, k] (touching is not)."""
  rows = (top[:, None] < tops + sides) & (tops < (top + side)[:, None])
  cols = (left[:, None] < lefts + sides) & (lefts < (left + side)[:, None])
  return rows & cols


def _place(
  rng: np.random.Generator, sides: np.ndarray, counts: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Tops and lefts int [m, hi] of non-overlapping items, and bool [m]: scene placed."""
  m, hi = sides.shape
  tops, lefts = np.zeros((m, hi), np.int64), np.zeros((m, hi), np.int64)
  placed = np.ones(m, bool)
  for k in range(hi):
    todo = np.flatnonzero(placed & (counts > k))
    for _ in range(_TRIES):
      if todo.size == 0:
        break
      side = sides[todo, k]
      top, left = rng.integers(0, size - side + 1), rng.integers(0, size - side + 1)
      earlier = (tops[todo, :k], lefts[todo, :k], sides[todo, :k])
      clash = _overlaps(top, left, side, *earlier).any(axis=1)
      tops[todo[~clash], k], lefts[todo[~clash], k] = top[~clash], left[~clash]
      todo = todo[clash]
    placed[todo] = False
  return tops, lefts, placed


def _layout(
  rng: np.random.Generator, counts: np.ndarray, sides: Mapping[int, Any], hi: int, size: int
) -> np.ndarray:
  """int32 [n, hi, 4]: each item's box (top, left, side, side), -1 rows in empty slots."""
  table = np.zeros((hi + 1, 2), np.int64)  # row c: the sides of a c-item scene
  for count in np.unique(counts):
    table[count] = sides[count]
  boxes = np.full((counts.size, hi, 4), -1, np.int32)
  pending = np.arange(counts.size)
  for _ in range(_REDRAWS):
    drawn = _draw_sides(rng, counts[pending], table, hi)
    tops, lefts, placed = _place(rng, drawn, counts[pending], size)
    done, filled = pending[placed], drawn[placed] > 0
    box = np.stack([tops[placed], lefts[placed], drawn[placed], drawn[placed]], axis=-1)
    boxes[done] = np.where(filled[..., None], box, -1)
    pending = pending[~placed]
    if pending.size == 0:
      return boxes
  raise ValueError(
    f"could not place the items of {pending.size} scenes without overlap after {_REDRAWS} "
    f"draws of their sides ({_TRIES} positions each); sides={dict(sides)!r}, "
    f"size={size}: widen the scene or lower the sides."
  )


_MAX_CLASSES = 2**31  # class ids are int32 (``_checks.int32_ids``): 0 .. 2**31 - 1


def _check_memory(images: np.ndarray, n: int, size: int, hi: int, c: int) -> None:
  """Refuse scenes whose arrays (scenes, labels, extras) exceed the machine's memory."""
  pixels = n * size * size * int(np.prod(images.shape[3:])) * images.dtype.itemsize
  labels, extras = n * c, n * (24 * hi + 4)  # multi-hot bool; int32 boxes, ids, counts
  _checks.fits_in_memory(
    {"the scenes": pixels, "the labels": labels, "the extras": extras},
    f"num_items={n}, size={size} and num_classes={c}",
    "lower them",
  )


def _linear_weights(n_in: int, n_out: int) -> np.ndarray:
  """float64 [n_out, n_in]: bilinear resize weights, anti-aliased when shrinking.

  The triangle kernel of ``jax.image.resize(..., method="linear")``: output pixel i
  samples the input at ``(i + 0.5) * n_in / n_out - 0.5``, with the kernel widened by
  ``n_in / n_out`` when that exceeds 1 (a low-pass filter), rows normalised to sum 1.
  """
  ratio = n_in / n_out
  centre = (np.arange(n_out) + 0.5) * ratio - 0.5
  distance = np.abs(centre[:, None] - np.arange(n_in)[None, :]) / max(ratio, 1.0)
  weights = np.maximum(0.0, 1.0 - distance)
  return weights / weights.sum(axis=1, keepdims=True)


def _resize(images: np.ndarray, side: int) -> np.ndarray:
  """``[k, h, w(, C)]`` images to ``[k, side, side(, C)]``, of their own dtype (rounded)."""
  work = np.result_type(images.dtype, np.float32)
  rows = _linear_weights(images.shape[1], side).astype(work)
  cols = _linear_weights(images.shape[2], side).astype(work)
  pixels = np.moveaxis(images.astype(work), (1, 2), (-2, -1))  # [k(, C), h, w]
  out = np.moveaxis(rows @ pixels @ cols.T, (-2, -1), (1, 2))
  if images.dtype.kind in "iu":
    info = np.iinfo(images.dtype)
    out = np.clip(np.rint(out), info.min, info.max)
  return out.astype(images.dtype)


def _paint(images: np.ndarray, sources: np.ndarray, boxes: np.ndarray, size: int) -> np.ndarray:
  """``[n, size, size(, C)]`` scenes: each item resized and pasted into its box, 0 elsewhere."""
  scenes = np.zeros((sources.shape[0], size, size) + images.shape[3:], images.dtype)
  scene, slot = np.nonzero(sources >= 0)
  item_sides = boxes[scene, slot, 2]
  for side in np.unique(item_sides):
    pick = item_sides == side
    s, k = scene[pick], slot[pick]
    rows = boxes[s, k, 0][:, None] + np.arange(side)
    cols = boxes[s, k, 1][:, None] + np.arange(side)
    pixels = _resize(images[sources[s, k]], int(side))
    scenes[s[:, None, None], rows[:, :, None], cols[:, None, :]] = pixels
  return scenes


def make_scene_dataset(
  images: Any,
  labels: Any,
  *,
  size: int = 56,
  num_objects: int | tuple[int, int] = (1, 3),
  sides: Mapping[int, tuple[int, int]] | None = None,
  seed: int = 0,
  num_items: int | None = None,
  num_classes: int | None = None,
) -> Dataset:
  """Multi-label scenes: source images at random scales and non-overlapping positions.

  Each ``size x size`` scene draws its item count ``n`` uniformly in ``num_objects``,
  ``n`` distinct source images, and for each a side uniform in ``sides[n]``; each
  source is resized (bilinear, anti-aliased when shrinking, as
  ``jax.image.resize(..., method="linear")``; rounded for integer dtypes) to that
  square and pasted at a uniform position where it overlaps no other item of the
  scene (boxes may touch). The rest of the scene is 0. Its labels are the set of the
  classes it shows. With no grid, any crop of a scene is again an image of items, as
  multiple-code hashing (MCH) needs of its crops.

  Placement draws positions item by item, rejecting those that overlap an earlier
  item; after 50 rejections the scene draws new sides, and after 200 such draws a
  ``ValueError`` names the settings. The up-front check guarantees only that the
  smallest sides fit (``(size // min_side) ** 2 >= n``). Sides that seldom fit
  together are therefore rarer than a uniform draw makes them: with the default
  table, two items average 24.4 pixels (uniform: 28; two of 36 never fit on 56)
  and three 23.1 (uniform: 24); one item is uniform in 20..56.

  Args:
    images: ``[N, h, w]`` or ``[N, h, w, C]`` source images, integer or floating,
      e.g. Fashion-MNIST's uint8 ``[60000, 28, 28]``.
    labels: integer class ids ``[N]`` of the source images.
    size: the side of the square scenes, in pixels.
    num_objects: items per scene: an int (a NumPy integer too), or an inclusive
      ``(min, max)`` range of ints; every count in it needs an entry in ``sides``.
    sides: item count -> inclusive ``(min_side, max_side)`` in pixels, with
      ``1 <= min_side <= max_side <= size`` (checked for the counts used).
      ``None`` for ``SCENE_SIDES``, ``{1: (20, 56), 2: (20, 36), 3: (20, 28)}``,
      the fixed setting for ``size=56``, scaled by ``size / 56`` (rounded, at
      least 1) for other sizes.
    seed: seed of the NumPy generator; the same seed gives the same scenes.
    num_items: scenes to make; ``None`` for ``N``.
    num_classes: number of label columns, at most ``2**31`` (class ids are int32);
      ``None`` for ``max(labels) + 1``.
  Returns:
    ``Dataset`` named ``"scenes"`` with one view ``"image"`` of dtype
    ``images.dtype`` and shape ``[num_items, size, size(, C)]``, labels multi-hot
    bool ``[num_items, num_classes]``, and extras (``M`` the largest count; row
    ``j < num_objects[i]`` of a scene is its ``j``-th item, later rows are -1):

    * ``"boxes"``: int32 ``[num_items, M, 4]``, each item's ``(top, left, height,
      width)`` in pixels (for diagnostics only: MCH does not read them);
    * ``"box_labels"``: int32 ``[num_items, M]``, the class of each item;
    * ``"sources"``: int32 ``[num_items, M]``, the index in ``images`` of each item;
    * ``"num_objects"``: int32 ``[num_items]``, the item count of each scene;
    * ``"size"``: ``size``.
  Raises:
    ValueError: an argument out of its range (the error names it); or sizes whose
      arrays (scenes, labels and extras) would need more bytes than the machine's
      physical memory (1 TiB where the system does not say), checked before any work
      is done: the error gives the bytes needed.
  """
  images, labels = _check_images(images, labels)
  seed = _checks.seed(seed)
  if images.dtype.kind not in "iuf":
    raise ValueError(f"images must be integer or floating; got {_checks.describe(images)}.")
  size = _checks.positive_int(size, "size")
  if sides is None:
    sides = _default_sides(size)
  if not isinstance(sides, Mapping):
    raise ValueError(f"sides must be a dict of count -> (min, max); got {sides!r}.")
  lo, hi = _count_range(num_objects, sides)
  _check_sides(sides, lo, hi, size)
  n = images.shape[0] if num_items is None else _checks.positive_int(num_items, "num_items")
  if images.shape[0] < hi:
    raise ValueError(
      f"images must hold at least {hi} images (num_objects max, distinct per scene); "
      f"got {images.shape[0]}."
    )
  if num_classes is not None and _checks.positive_int(num_classes, "num_classes") > _MAX_CLASSES:
    raise ValueError(f"num_classes must be at most 2**31 (class ids are int32); got {num_classes}.")
  c = _label_columns(labels, num_classes)
  _check_memory(images, n, size, hi, c)

  rng = np.random.default_rng(seed)
  # Counts and distinct sources: the canvases' draw, its "cells" being the item slots.
  sources = _draw_layout(rng, n, hi, lo, hi, images.shape[0], "fixed")
  counts = (sources >= 0).sum(axis=1).astype(np.int32)
  boxes = _layout(rng, counts, sides, hi, size)
  box_labels = np.where(sources >= 0, labels[np.maximum(sources, 0)], -1).astype(np.int32)
  multi_hot = np.zeros((n, c), bool)
  scene, slot = np.nonzero(sources >= 0)
  multi_hot[scene, box_labels[scene, slot]] = True
  extras = {
    "boxes": boxes,
    "box_labels": box_labels,
    "sources": sources,
    "num_objects": counts,
    "size": size,
  }
  scenes = _paint(images, sources, boxes, size)
  return make_dataset((scenes,), multi_hot, ("image",), name="scenes", extras=extras)


def _check_boxes(boxes: Any, scenes: tuple[int, ...]) -> np.ndarray:
  """The ``boxes`` extra of ``scenes`` [n, H, W(, C)]: integer [n, M, 4], each row a box
  of sides >= 1 inside the scene, or -1s (an empty slot)."""
  boxes, (n, h, w) = np.asarray(boxes), scenes[:3]
  if boxes.ndim != 3 or boxes.shape[::2] != (n, 4) or boxes.dtype.kind not in "iu":
    raise ValueError(
      f"dataset: its 'boxes' extra must be integer [{n}, M, 4], each item's (top, left, "
      f"height, width); got {_checks.describe(boxes)}."
    )
  top, left, height, width = np.moveaxis(boxes.astype(np.int64), -1, 0)
  inside = (top >= 0) & (left >= 0) & (top + height <= h) & (left + width <= w)
  bad = ~((inside & (height >= 1) & (width >= 1)) | (boxes == -1).all(axis=-1))
  if bad.any():
    i, j = np.argwhere(bad)[0]
    raise ValueError(
      f"dataset: its 'boxes' extra must hold (top, left, height, width) boxes of sides >= 1 "
      f"inside the {h} x {w} scenes, or -1s in empty slots; boxes[{i}, {j}] is "
      f"{boxes[i, j].tolist()} ({int(bad.sum())} bad in all)."
    )
  return boxes


def scene_items_alone(dataset: Dataset, index: Any = None) -> tuple[np.ndarray, np.ndarray]:
  """Each item of each scene rendered alone: the scene with every other item removed.

  The positive control of multiple-code hashing: the codes of a scene's items, each
  alone where it stands, are the best extra codes a crop agent could keep.

  Args:
    dataset: a ``make_scene_dataset`` data set (its ``boxes`` extra: integer, each row
      a box of sides >= 1 inside the scene, or -1s in an empty slot; a ValueError
      names the first other row).
    index: the scenes to take (int indices; None: all).
  Returns:
    (images ``[k, M, size, size(, C)]`` of the scenes' dtype, 0 outside the item's box
    and in empty slots; bool ``[k, M]``, the slots that hold an item).
  """
  check_dataset(dataset)
  scenes, boxes = dataset.views[0], dataset.extras.get("boxes")
  if boxes is None or dataset.name != "scenes":
    raise ValueError(
      f"dataset must be one make_scene_dataset made (with its 'boxes'); got {dataset.name!r}."
    )
  index = np.arange(scenes.shape[0]) if index is None else np.asarray(index)
  if (
    index.ndim != 1
    or index.dtype.kind not in "iu"
    or (index.size and not 0 <= index.min() <= index.max() < scenes.shape[0])
  ):
    raise ValueError(
      f"index must be int scene indices in [0, {scenes.shape[0]}); got {_checks.describe(index)}."
    )
  boxes = _check_boxes(boxes, scenes.shape)
  picked, kept = scenes[index], boxes[index]
  present = ~(kept == -1).all(axis=-1)
  out = np.zeros((index.size, boxes.shape[1]) + scenes.shape[1:], scenes.dtype)
  for i, j in zip(*np.nonzero(present)):
    top, left, h, w = kept[i, j]
    out[i, j, top : top + h, left : left + w] = picked[i, top : top + h, left : left + w]
  return out, present
