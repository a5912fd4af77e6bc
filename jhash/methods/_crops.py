"""Crops of images, batched: random crops for training the agent, five fixed crops for encoding.

Boxes are ``(top, left, height, width)`` in pixels, float32 [4]. Every crop MCH uses, the
random ones of training and the five fixed ones of encoding, is cut by one function,
``crop_resize``: the box, sub-pixel included, resampled to the image's size in one
``jax.image.scale_and_translate`` with the antialiased linear kernel of
``jax.image.resize``. The agent therefore learns on crops made exactly as those it judges
(their sizes and places differ; their cutting does not).

``fixed_crop`` (``lax.dynamic_slice`` then ``jax.image.resize``, for a box of static size)
is kept as a part: both cut exactly the box's pixels when the output has the box's size
(tested); resized, they differ only in the outermost output pixels, where ``fixed_crop``
repeats the box's edge pixels and ``crop_resize`` blends in the pixels just outside it.

Both are written for one image ``[H, W, C]`` and lifted over a batch with ``vmap``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks

NUM_FIXED = 5  # four corners, then the centre


def check_ratio(ratio, name: str, side: int | None = None) -> float:
  """``ratio`` as a float in (0, 1]; with ``side``, one whose crop of ``side`` pixels is
  at least one pixel."""
  dtype = np.asarray(ratio).dtype if not hasattr(ratio, "dtype") else np.dtype(ratio.dtype)
  if (
    isinstance(ratio, (str, bytes, bool, np.bool_))
    or np.ndim(ratio) != 0
    or dtype.kind not in "iuf"
  ):
    raise ValueError(f"{name} must be a number in (0, 1]; got {_checks.describe(ratio)}.")
  try:
    value = float(ratio)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be a number in (0, 1]; got {ratio!r}.") from None
  if not 0.0 < value <= 1.0:
    raise ValueError(f"{name} must be in (0, 1]; got {ratio!r}.")
  if side is not None and value * side < 1.0:
    raise ValueError(
      f"{name}={value} cuts crops smaller than a pixel from images of side "
      f"{side}: it must be at least {1.0 / side:.4g}."
    )
  return value


def check_range(ratio_range, name: str) -> tuple[float, float]:
  """``ratio_range`` as ``(low, high)``, two ratios with ``0 < low <= high <= 1``."""
  if not isinstance(ratio_range, (tuple, list)) or len(ratio_range) != 2:
    raise ValueError(
      f"{name} must be (low, high), two numbers in (0, 1]; got {_checks.describe(ratio_range)}."
    )
  low = check_ratio(ratio_range[0], f"{name}[0]")
  high = check_ratio(ratio_range[1], f"{name}[1]")
  if low > high:
    raise ValueError(f"{name} must be (low, high) with low <= high; got {tuple(ratio_range)}.")
  return low, high


def _pair(value, name: str) -> tuple[int, int]:
  """Two Python ints >= 1 (a static size)."""
  if not isinstance(value, (tuple, list)) or len(value) != 2:
    raise ValueError(
      f"{name} must be two ints >= 1 (height, width); got {_checks.describe(value)}."
    )
  return (
    _checks.positive_int(value[0], f"{name}[0]"),
    _checks.positive_int(value[1], f"{name}[1]"),
  )


def check_image_ratio(x, ratio: float, what: str, name: str) -> None:
  """Raise unless ``x`` (an array or shape struct) holds images [n, H, W, C] from which
  ``ratio`` cuts crops of at least one pixel; ``what`` names the ratio, ``name`` the method."""
  if len(x.shape) != 4:
    raise ValueError(
      f"{what} crops images: {name}'s view must hold images [n, H, W] or "
      f"[n, H, W, C]; got {tuple(x.shape)}."
    )
  check_ratio(ratio, what, min(x.shape[1:3]))


def fixed_boxes(height: int, width: int, sigma: float) -> np.ndarray:
  """The five crops' boxes: top-left, top-right, bottom-left, bottom-right, centre.

  Each crop is ``round(sigma H) x round(sigma W)`` pixels (at least 1), corners flush with
  the image's, the centre crop at ``floor((H - h) / 2), floor((W - w) / 2)``.

  Returns:
    int32 [5, 4], rows ``(top, left, height, width)``.
  Raises:
    ValueError: ``height`` or ``width`` not an int >= 1, or ``sigma`` not in (0, 1].
  """
  height = _checks.positive_int(height, "height")
  width = _checks.positive_int(width, "width")
  sigma = check_ratio(sigma, "sigma")
  h = max(1, int(round(sigma * height)))
  w = max(1, int(round(sigma * width)))
  tops = (0, 0, height - h, height - h, (height - h) // 2)
  lefts = (0, width - w, 0, width - w, (width - w) // 2)
  return np.array([(t, l, h, w) for t, l in zip(tops, lefts)], np.int32)


def fixed_crop(
  image: jax.Array,
  top: jax.Array,
  left: jax.Array,
  size: tuple[int, int],
  out_shape: tuple[int, int],
) -> jax.Array:
  """The ``size`` pixels at ``(top, left)`` of ``image`` [H, W, C], resized to ``out_shape``.

  ``lax.dynamic_slice`` (``size`` static, the position traced) then ``jax.image.resize``
  (linear, antialiased); a crop already of ``out_shape`` is returned as cut.

  Raises:
    ValueError: ``image`` not [H, W, C], a ``size`` or ``out_shape`` not two ints >= 1, a
      ``size`` larger than the image, or (concrete positions only) a box that does not lie
      inside the image (``lax.dynamic_slice`` would move it silently).
  """
  _checks.rank(image, 3, "image", "with shape [H, W, C]")
  size = _pair(size, "size")
  out_shape = _pair(out_shape, "out_shape")
  height, width = image.shape[0], image.shape[1]
  if size[0] > height or size[1] > width:
    raise ValueError(
      f"size must fit in the image: at most ({height}, {width}); got {size} for image "
      f"{_checks.describe(image)}."
    )
  for name, value, limit in (("top", top, height - size[0]), ("left", left, width - size[1])):
    if np.ndim(value) != 0 or _checks.dtype_of(value).kind not in "iu":
      raise ValueError(f"{name} must be an integer scalar; got {_checks.describe(value)}.")
    if _checks.is_concrete(value) and not 0 <= int(value) <= limit:
      raise ValueError(
        f"{name} must be in [0, {limit}] so that the box of size {size} lies inside the "
        f"image {tuple(image.shape)}; got {int(value)}."
      )
  channels = image.shape[-1]
  crop = lax.dynamic_slice(image, (top, left, 0), tuple(size) + (channels,))
  if tuple(size) == tuple(out_shape):
    return crop
  return jax.image.resize(crop, tuple(out_shape) + (channels,), "linear")


def five_crops(images: jax.Array, sigma: float) -> jax.Array:
  """The five fixed crops of each image, resized back to the image's size by ``crop_resize``
  (as the random training crops are).

  Args:
    images: float [n, H, W, C].
    sigma: a crop's side over the image's side, in (0, 1]; ``sigma = 1`` gives the
      images themselves.
  Returns:
    float32 [n, 5, H, W, C]: top-left, top-right, bottom-left, bottom-right, centre.
  """
  _checks.rank(images, 4, "images", "with shape [n, H, W, C]")
  _, height, width, _ = images.shape
  sigma = check_ratio(sigma, "sigma", min(height, width))
  boxes = jnp.asarray(fixed_boxes(height, width, sigma), jnp.float32)
  if sigma == 1.0:  # the crops are the image
    return jnp.repeat(images.astype(jnp.float32)[:, None], NUM_FIXED, axis=1)
  one_image = lambda image: jax.vmap(lambda box: crop_resize(image, box, (height, width)))(boxes)
  return jax.vmap(one_image)(images.astype(jnp.float32))


def crop_resize(image: jax.Array, box: jax.Array, out_shape: tuple[int, int]) -> jax.Array:
  """The region ``box`` = (top, left, height, width) of ``image`` [H, W, C], resampled to
  ``out_shape`` [h, w] with the antialiased linear kernel of ``jax.image.resize``.

  The box may be fractional; its size is traced, so one compiled call takes boxes of any
  size. Returns float32 [h, w, C].

  Raises:
    ValueError: ``image`` not [H, W, C], ``box`` not 4 entries, ``out_shape`` not two ints
      >= 1, or (a concrete box only) a height or width <= 0 or not finite.
  """
  _checks.rank(image, 3, "image", "with shape [H, W, C]")
  if np.shape(box) != (4,):
    raise ValueError(
      f"box must be (top, left, height, width), shape [4]; got {_checks.describe(box)}."
    )
  out_shape = _pair(out_shape, "out_shape")
  if _checks.is_concrete(box):
    b = np.asarray(box, np.float64)
    if not np.isfinite(b).all() or b[2] <= 0 or b[3] <= 0:
      raise ValueError(f"box must be finite with height and width > 0; got {b.tolist()}.")
  top, left, height, width = box[0], box[1], box[2], box[3]
  h, w = out_shape
  scale = jnp.stack([h / height, w / width])
  translation = jnp.stack([-top * scale[0], -left * scale[1]])
  return jax.image.scale_and_translate(
    image.astype(jnp.float32),
    (h, w, image.shape[-1]),
    (0, 1),
    scale,
    translation,
    method="linear",
    antialias=True,
  )


def random_boxes(
  key: jax.Array, num: int, height: int, width: int, ratio_range: tuple[float, float]
) -> jax.Array:
  """``num`` random boxes: side ratio uniform in ``ratio_range`` (the same for both
  sides), position uniform over the places the box fits.

  Returns:
    float32 [num, 4], rows ``(top, left, height, width)`` in pixels.
  Raises:
    ValueError: ``num`` not an int >= 0, ``height`` or ``width`` not ints >= 1, or
      ``ratio_range`` not ``(low, high)`` with ``0 < low <= high <= 1``.
  """
  _checks.prng_key(key, "key")
  num = _checks.nonneg_int(num, "num")
  height = _checks.positive_int(height, "height")
  width = _checks.positive_int(width, "width")
  ratio_range = check_range(ratio_range, "ratio_range")
  k_ratio, k_top, k_left = jax.random.split(key, 3)
  low, high = ratio_range
  ratio = jax.random.uniform(k_ratio, (num,), minval=low, maxval=high)
  h, w = ratio * height, ratio * width
  top = jax.random.uniform(k_top, (num,)) * (height - h)
  left = jax.random.uniform(k_left, (num,)) * (width - w)
  return jnp.stack([top, left, h, w], axis=1)


def random_crops(
  key: jax.Array, images: jax.Array, ratio_range: tuple[float, float]
) -> tuple[jax.Array, jax.Array]:
  """One random crop of each image, resized back to the image's size.

  Args:
    key: a PRNG key.
    images: float [n, H, W, C].
    ratio_range: (low, high), the crops' side ratio is uniform in it.
  Returns:
    (crops float32 [n, H, W, C], boxes float32 [n, 4]).
  """
  _checks.rank(images, 4, "images", "with shape [n, H, W, C]")
  n, height, width, _ = images.shape
  boxes = random_boxes(key, n, height, width, ratio_range)
  crops = jax.vmap(lambda image, box: crop_resize(image, box, (height, width)))(images, boxes)
  return crops, boxes
