"""Data sets composed from a single-label image set: multi-label canvases, two-view splits.

No package ships a multi-label image set, so ``make_canvas_dataset`` composes one:
a grid of cells, each empty or holding one source image; the labels of a canvas
are the set of classes it shows. Cross-modal and multi-view methods get two
aligned views of the same items from ``make_two_view``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jhash import _checks
from jhash.data._dataset import Dataset
from jhash.data._dataset import make_dataset


def _check_pixels(images: Any) -> np.ndarray:
  """Source images: real numbers (not bool), finite, ``[n, H, W]`` or ``[n, H, W, C]``
  (channels last: 1, 3 or 4 planes first with more than 4 last is refused as channels
  first) with sides >= 1; errors name ``images``."""
  images = _checks.as_array(images, "images")
  images = np.asarray(images)
  _checks.rank(images, (3, 4), "images", "with shape [n, H, W] or [n, H, W, C]")
  _checks.real_array(images, "images", "pixels, integer or floating numbers")
  if 0 in images.shape[1:]:
    raise ValueError(f"images must have sides >= 1; got {_checks.describe(images)}.")
  if images.shape[0] == 0:
    raise ValueError(f"images must hold at least one image; got {_checks.describe(images)}.")
  if images.ndim == 4 and images.shape[1] in (1, 3, 4) and images.shape[3] > 4:
    raise ValueError(
      f"images must be channels last, [n, H, W, C]; got {_checks.describe(images)}, which "
      "looks channels first ([n, C, H, W], PyTorch's layout): pass "
      "images.transpose(0, 2, 3, 1)."
    )
  _checks.finite(images, "images")
  return images


def _check_images(images: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
  images = _check_pixels(images)
  labels = np.asarray(labels)
  if labels.ndim != 1:  # before label_array, whose multi-hot hint does not apply here
    raise ValueError(
      f"labels must be integer class ids [{images.shape[0]}] (single-label source images: "
      f"a canvas's labels are the classes of its cells); got {_checks.describe(labels)}."
    )
  if _checks.label_array(labels, "labels", num_items=images.shape[0]) != "class_ids":
    raise ValueError(
      f"labels must be integer class ids [n] (single-label source images); "
      f"got {_checks.describe(labels)}."
    )
  if labels.size and labels.min() < 0:
    raise ValueError(f"labels must be class ids >= 0; found {int(labels.min())}.")
  _checks.int32_ids(labels, "labels")
  return images, labels


def _label_columns(labels: np.ndarray, num_classes) -> int:
  """The multi-hot width: ``num_classes`` (checked against the ids), or ``max(labels) + 1``."""
  c = (
    int(labels.max()) + 1
    if num_classes is None
    else _checks.positive_int(num_classes, "num_classes")
  )
  if labels.max() >= c:
    raise ValueError(f"labels must be below num_classes={c}; found {int(labels.max())}.")
  return c


def count_pair(num_objects: Any) -> tuple[int, int]:
  """``num_objects`` as ``(min, max)``: an int (a NumPy integer too) or an inclusive pair
  of ints with ``1 <= min <= max``; anything else a ValueError naming it."""
  is_int = lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool)
  pair = (num_objects, num_objects) if is_int(num_objects) else num_objects
  if not (
    isinstance(pair, (tuple, list, np.ndarray))
    and np.ndim(pair) == 1
    and len(pair) == 2
    and all(is_int(v) for v in pair)
  ):
    raise ValueError(
      f"num_objects must be an int or an inclusive (min, max) pair of ints; got {num_objects!r}."
    )
  lo, hi = int(pair[0]), int(pair[1])
  if not 1 <= lo <= hi:
    raise ValueError(f"num_objects must satisfy 1 <= min <= max; got {num_objects!r}.")
  return lo, hi


def _object_range(num_objects: Any, num_cells: int) -> tuple[int, int]:
  lo, hi = count_pair(num_objects)
  if hi > num_cells:
    raise ValueError(
      f"num_objects must be an int or an inclusive (min, max) range with "
      f"1 <= min <= max <= {num_cells} (the grid's cells); got {num_objects!r}."
    )
  return lo, hi


def check_grid(grid: Any) -> tuple[int, int]:
  """``grid`` as ``(grid_h, grid_w)``: two ints >= 1, or a ValueError naming it."""
  if not isinstance(grid, (tuple, list)) or len(grid) != 2:
    raise ValueError(f"grid must be (grid_h, grid_w), two ints >= 1; got {grid!r}.")
  grid_h, grid_w = (_checks.positive_int(g, "grid") for g in grid)
  return grid_h, grid_w


def canvas_bytes(images: np.ndarray, n: int, num_cells: int, c: int) -> dict[str, int]:
  """The bytes of ``n`` canvases of ``num_cells`` cells of ``images``, their ``c`` label
  columns and their extras (with the layout's working arrays), for ``fits_in_memory``."""
  cell = int(np.prod(images.shape[1:], dtype=np.float64)) * images.dtype.itemsize
  return {
    "the canvases": n * num_cells * cell,
    "the labels": n * c,  # multi-hot bool
    "the layout": n * num_cells * 40,  # int32 cells and labels; int64 / float64 working arrays
  }


def _draw_layout(
  rng: np.random.Generator,
  num_items: int,
  num_cells: int,
  lo: int,
  hi: int,
  num_sources: int,
  placement: str,
) -> np.ndarray:
  """int32 [num_items, num_cells]: the source index in each cell, -1 where empty."""
  counts = rng.integers(lo, hi + 1, size=num_items)
  if placement == "random":
    cell_order = np.argsort(rng.random((num_items, num_cells)), axis=1)
  else:
    cell_order = np.broadcast_to(np.arange(num_cells), (num_items, num_cells))
  occupied = np.zeros((num_items, num_cells), bool)
  rows = np.arange(num_items)[:, None]
  occupied[rows, cell_order] = np.arange(num_cells)[None, :] < counts[:, None]
  sources = rng.integers(0, num_sources, size=(num_items, num_cells))
  # One canvas never shows the same source image twice: redraw repeats.
  for _ in range(1000):
    ordered = np.sort(np.where(occupied, sources, -1 - np.arange(num_cells)), axis=1)
    repeated = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
    if repeated.size == 0:
      break
    sources[repeated] = rng.integers(0, num_sources, size=(repeated.size, num_cells))
  else:
    raise ValueError(
      f"could not draw distinct source images per canvas from only {num_sources} images."
    )
  return np.where(occupied, sources, -1).astype(np.int32)


def make_canvas_dataset(
  images: Any,
  labels: Any,
  *,
  grid: tuple[int, int] = (2, 2),
  num_objects: int | tuple[int, int] = (1, 3),
  seed: int = 0,
  num_items: int | None = None,
  placement: str = "random",
  num_classes: int | None = None,
) -> Dataset:
  """Multi-label images composed of single-label ones placed on a grid of cells.

  Each canvas is a ``grid_h x grid_w`` grid of cells of the source image size.
  A canvas draws how many objects it holds (uniformly in ``num_objects``), which
  cells hold them, and which source images fill them (uniformly, no source twice
  on one canvas); the other cells stay 0. Its labels are the set of the classes
  it shows, as in the multi-label image sets (NUS-WIDE, MS-COCO) that hashing
  papers use, but with known object positions: MCH-style crops have real
  objects to find.

  Args:
    images: uint8 (or any integer or floating dtype) ``[N, h, w]`` or ``[N, h, w, C]`` source images,
      e.g. Fashion-MNIST's ``[60000, 28, 28]``.
    labels: integer class ids ``[N]`` of the source images.
    grid: ``(grid_h, grid_w)`` cells.
    num_objects: objects per canvas: an int, or an inclusive ``(min, max)``
      range with ``1 <= min <= max <= grid_h * grid_w``.
    seed: seed of the NumPy generator; the same seed gives the same data set.
    num_items: canvases to make; ``None`` for ``N``.
    placement: ``"random"``: objects go in randomly chosen cells; ``"fixed"``:
      they fill the cells in row-major order (cell 0 first).
    num_classes: number of label columns ``C``; ``None`` for ``max(labels) + 1``.
      Sizes whose arrays would not fit in the machine's memory are refused up front
      (a ValueError naming them), not left to fail in NumPy.
  Returns:
    ``Dataset`` with one view ``"image"`` of dtype ``images.dtype`` and shape
    ``[num_items, grid_h * h, grid_w * w(, C)]``, labels multi-hot bool
    ``[num_items, num_classes]``, and extras:

    * ``"cells"``: int32 ``[num_items, grid_h * grid_w]``, the source index in
      each cell (row-major; cell ``k`` covers rows ``(k // grid_w) * h`` to
      ``+h`` and columns ``(k % grid_w) * w`` to ``+w``), -1 where empty;
    * ``"cell_labels"``: int32, the same layout with the class of each cell;
    * ``"grid"``: ``(grid_h, grid_w)``; ``"cell_shape"``: ``(h, w)``.
  """
  images, labels = _check_images(images, labels)
  seed = _checks.seed(seed)
  grid_h, grid_w = check_grid(grid)
  num_cells = grid_h * grid_w
  lo, hi = _object_range(num_objects, num_cells)
  if placement not in ("random", "fixed"):
    raise ValueError(f"placement must be 'random' or 'fixed'; got {placement!r}.")
  n = images.shape[0] if num_items is None else _checks.positive_int(num_items, "num_items")
  c = _label_columns(labels, num_classes)
  if images.shape[0] < hi:
    raise ValueError(
      f"images must hold at least {hi} images (num_objects max); got {images.shape[0]}."
    )
  _checks.fits_in_memory(
    canvas_bytes(images, n, num_cells, c),
    f"num_items={n}, grid={(grid_h, grid_w)} and num_classes={c}",
    "lower them",
  )

  cells = _draw_layout(
    np.random.default_rng(seed), n, num_cells, lo, hi, images.shape[0], placement
  )
  h, w = images.shape[1:3]
  canvas = np.zeros((n, grid_h * h, grid_w * w) + images.shape[3:], images.dtype)
  cell_labels = np.where(cells >= 0, labels[np.maximum(cells, 0)], -1).astype(np.int32)
  multi_hot = np.zeros((n, c), bool)
  for k in range(num_cells):
    filled = np.flatnonzero(cells[:, k] >= 0)
    top, left = (k // grid_w) * h, (k % grid_w) * w
    canvas[filled, top : top + h, left : left + w] = images[cells[filled, k]]
    multi_hot[filled, cell_labels[filled, k]] = True
  extras = {
    "cells": cells,
    "cell_labels": cell_labels,
    "grid": (grid_h, grid_w),
    "cell_shape": (h, w),
  }
  return make_dataset((canvas,), multi_hot, ("image",), name="canvas", extras=extras)


def make_two_view(
  images: Any, labels: Any, split: str = "halves", scale: float | None = None
) -> Dataset:
  """Two aligned views of one image set: its top/bottom or left/right halves.

  Gives cross-view and multi-view methods real data at scale with a known
  correspondence: item ``i`` of both views is the same image.

  Args:
    images: ``[n, H, W]`` or ``[n, H, W, C]`` images.
    labels: their labels, integer ``[n]`` or multi-hot bool ``[n, C]`` (kept).
    split: ``"halves"``: rows ``[0, H // 2)`` and ``[H // 2, H)``;
      ``"left_right"``: columns ``[0, W // 2)`` and ``[W // 2, W)``.
    scale: the pixels are divided by it, a number > 0; ``None`` for 255 with uint8 images,
      and the largest pixel value otherwise (1 when that is 0).
  Returns:
    ``Dataset`` with two float32 views, the pixels divided by ``scale``: in [0, 1] for
    pixels in [0, scale] (negative pixels stay negative), each a half flattened row-major to ``[n, H // 2 * W (* C)]``
    (top, or left, first; the second half gets the odd row / column),
    ``view_names`` ``("top", "bottom")`` or ``("left", "right")``, labels as
    given.
  """
  images = _check_pixels(images)
  labels = np.asarray(labels)
  _checks.label_array(labels, "labels", num_items=images.shape[0])
  if split in ("halves", "left_right"):
    axis, side = (1, "rows high") if split == "halves" else (2, "columns wide")
    if images.shape[axis] < 2:
      raise ValueError(
        f"images must be at least 2 {side} to split into {split!r}; got {_checks.describe(images)}."
      )
  if split == "halves":
    cut = images.shape[1] // 2
    parts, names = (images[:, :cut], images[:, cut:]), ("top", "bottom")
  elif split == "left_right":
    cut = images.shape[2] // 2
    parts, names = (images[:, :, :cut], images[:, :, cut:]), ("left", "right")
  else:
    raise ValueError(f"split must be 'halves' or 'left_right'; got {split!r}.")
  if scale is not None:
    _checks.scalar(scale, "scale", low=0, strict=True)
  else:
    scale = 255.0 if images.dtype == np.uint8 else float(images.max(initial=0)) or 1.0
  views = tuple((p.reshape(p.shape[0], -1) / np.float32(scale)).astype(np.float32) for p in parts)
  extras = {"split": split, "image_shape": images.shape[1:], "scale": float(scale)}
  return make_dataset(views, labels, names, name="two-view", extras=extras)
