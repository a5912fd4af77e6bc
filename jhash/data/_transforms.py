"""Per-image transforms of the deep hashing peers, as NumPy/PIL functions of one image.

The peers (DeepHash-pytorch's ``utils/tools.py``, torchvision) train on ``Resize(256)``,
then ``RandomHorizontalFlip()`` and ``RandomCrop(224)``, and evaluate on ``Resize(256)``
and ``CenterCrop(224)``; both end with ``ToTensor()`` (pixels / 255) and ``Normalize``
with ImageNet's mean and std. ``Resize(256)`` with an int resizes the *shorter* side to
256 and keeps the aspect ratio (``resize_shorter``, the default here, as the peers);
``Resize((256, 256))`` with a pair resizes to exactly that size (``resize_to``). Both use
PIL's bilinear filter, as torchvision does on PIL images.

Every function takes one image, uint8 ``[H, W, C]`` (``C`` = 3 for RGB), and its
randomness explicitly (a ``np.random.Generator``): no global random state, so a pipeline
draws the same crops from the same key on any thread or process. ``train_transform``
crops, then flips (the peers flip, then crop: the same distribution, since a flip of a
crop at column ``j`` is a crop at column ``W - w - j`` of the flipped image, and ``j`` is
uniform), so only the crop is flipped.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from jhash import _checks
from jhash.data import _arguments
from jhash.data import _errors

#: ImageNet's per-channel (RGB) mean of pixels in [0, 1], as torchvision's models expect.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
#: ImageNet's per-channel (RGB) standard deviation of pixels in [0, 1].
IMAGENET_STD = (0.229, 0.224, 0.225)
_MODE_NAMES = {"I": "32-bit integer pixels", "F": "32-bit float pixels"}


def decode_image(
  path: str | os.PathLike, resize: int | tuple[int, int] | None = None
) -> np.ndarray:
  """uint8 ``[H, W, 3]``: the image file ``path`` (JPEG, PNG, any format PIL reads) in RGB.

  ``resize``: an int resizes the shorter side to it (``resize_shorter``), a pair ``(H, W)``
  to that size (``resize_to``), ``None`` keeps the size. The resize runs on PIL's image
  before it becomes an array: the same pixels as resizing the array, one copy fewer.
  Pixel depth (``eight_bit``): 8-bit images are read as they are; 16-bit grayscale ones
  (PIL's ``I;16``, a 16-bit PNG or TIFF) are scaled to 8 bits by ``>> 8``; 32-bit integer
  (``I``) and float (``F``) images are refused (``DataFormatError``), their range unknown.
  A missing file raises ``FileNotFoundError``; a file PIL cannot decode raises
  ``DataFormatError`` naming it.
  """

  _arguments.path_argument(path, "path", "an image file")
  resize = _resize_arg(resize)
  try:
    with open_image(path) as image:
      source = (image.height, image.width)
      size = None if resize is None else _target_size(source, resize)
      if size is None or 3 * size[0] * size[1] <= _checks.memory_bytes():
        image = image if image.mode == "RGB" else image.convert("RGB")
        if resize is not None:
          image = _resize_pil(image, resize)
        return np.asarray(image)
    raise ValueError(
      f"resize={resize!r} makes the {source[0]} x {source[1]} image {os.fspath(path)} "
      f"{size[0]} x {size[1]} pixels ({3 * size[0] * size[1] / 2**30:.1f} GiB), more than "
      "this machine's memory."
    )
  except FileNotFoundError:
    raise FileNotFoundError(
      f"path: no image file {os.fspath(path)!r} (it does not exist)."
    ) from None


@contextlib.contextmanager
def open_image(path: str | os.PathLike):
  """The PIL image at ``path``, of 8 bits a sample (``eight_bit``); PIL's errors, raised
  while it opens or (lazily) decodes inside the block, as ``DataFormatError`` naming the
  file. Missing or unreadable files keep their own errors."""
  from PIL import Image  # imported here: `import jhash` stays light

  try:
    with Image.open(path) as image:
      yield eight_bit(image, path)
  except (FileNotFoundError, PermissionError, _errors.DataFormatError):
    raise
  except Exception as e:  # PIL raises OSError, SyntaxError, ValueError, DecompressionBomb...
    raise _errors.DataFormatError(
      f"{os.fspath(path)} could not be decoded as an image ({type(e).__name__}: {e})."
    ) from e


def eight_bit(image, path: str | os.PathLike):
  """A PIL image of 8 bits a sample, which ``convert("RGB")`` / ``("L")`` read correctly.

  8-bit modes (``L``, ``RGB``, ``P``, ``1``...) are returned as they are. 16-bit grayscale
  (``I;16``, or ``I`` from a PNG, whose samples are 16 bits at most) becomes ``L`` by
  ``>> 8``, its high byte (65535 -> 255, 257 -> 1): PIL's own conversion clips it at 255.
  Other modes, 32-bit integer ``I`` and float ``F`` (a TIFF), raise ``DataFormatError``
  naming ``path`` and the mode: PIL would round floats in [0, 1] to 0, and their range
  (0..1, 0..255 or other) is not written in the file, so no scale would be safe.
  """
  from PIL import Image
  from PIL import ImageMode

  depth = ImageMode.getmode(image.mode).typestr[1:]  # "u1": 8 bits, "u2": 16, "f4"...
  if depth in ("u1", "b1"):
    return image
  if depth == "u2" or (image.mode == "I" and image.format == "PNG"):
    return Image.fromarray((np.asarray(image) >> 8).astype(np.uint8))
  held = _MODE_NAMES.get(image.mode, f"{depth} samples")
  raise _errors.DataFormatError(
    f"{os.fspath(path)} holds {held} (PIL mode {image.mode!r}); jhash reads 8-bit images "
    "(RGB, L, P, CMYK...) and 16-bit grayscale ones (I;16, scaled to 8 bits by >> 8). "
    "Convert it to 8 bits first, with the scale its values need (floats in [0, 1]: "
    "np.clip(x * 255, 0, 255).astype(np.uint8))."
  )


def resize_shorter(image: np.ndarray, size: int) -> np.ndarray:
  """uint8 ``[h, w, C]``: ``image`` resized (PIL bilinear) so its shorter side is ``size``.

  As torchvision's ``Resize(size)`` with an int: the longer side becomes
  ``int(size * long / short)`` (rounded down); an image already that size is returned
  as it is.
  """
  size = _checks.positive_int(size, "size")
  return _resize_array(image, size)


def resize_to(image: np.ndarray, size: int | tuple[int, int]) -> np.ndarray:
  """uint8 ``[H, W, C]``: ``image`` resized (PIL bilinear) to ``size`` = ``(H, W)``, or
  ``(size, size)`` for an int: torchvision's ``Resize((H, W))``."""
  return _resize_array(image, _crop_size(size, "size"))


def _resize_array(image: np.ndarray, resize) -> np.ndarray:
  from PIL import Image

  shape = _image_shape(image)
  height, width = _target_size(shape[:2], resize)
  if shape[:2] == (height, width):
    return image
  plane = image[..., 0] if shape[2] == 1 else image  # PIL reads [H, W] for one channel
  resized = _resize_pil(Image.fromarray(plane), resize)
  return np.asarray(resized).reshape(height, width, shape[2])


def _target_size(shape: tuple[int, int], resize) -> tuple[int, int]:
  """``(H, W)`` after ``resize``: an int for the shorter side (torchvision's rule for the
  longer one: ``int(resize * long / short)``), or a pair ``(H, W)``."""
  if isinstance(resize, tuple):
    return resize
  height, width = shape
  short, long = sorted((height, width))
  new_long = int(resize * long / short)
  return (resize, new_long) if height <= width else (new_long, resize)


def _resize_pil(image, resize):
  """A PIL image resized (bilinear) as ``_target_size`` says; as it is when already so."""
  from PIL import Image

  height, width = _target_size((image.height, image.width), resize)
  if (image.height, image.width) == (height, width):
    return image
  return image.resize((width, height), Image.Resampling.BILINEAR)


def random_crop(
  image: np.ndarray, size: int | tuple[int, int], rng: np.random.Generator
) -> np.ndarray:
  """A view ``[h, w, C]`` of ``image`` at a uniform random position (torchvision's
  ``RandomCrop``): the top row ``rng.integers(0, H - h + 1)`` drawn first, then the left
  column ``rng.integers(0, W - w + 1)``. ``size``: ``(h, w)``, or an int for a square."""
  height, width = _fits(image, size)
  if not isinstance(rng, np.random.Generator):
    raise ValueError(
      f"rng must be a np.random.Generator (np.random.default_rng(seed)); got "
      f"{_checks.describe(rng)}."
    )
  top = int(rng.integers(0, image.shape[0] - height + 1))
  left = int(rng.integers(0, image.shape[1] - width + 1))
  return image[top : top + height, left : left + width]


def center_crop(image: np.ndarray, size: int | tuple[int, int]) -> np.ndarray:
  """A view ``[h, w, C]`` of ``image``'s centre, as torchvision's ``CenterCrop``: top row
  ``round((H - h) / 2)`` and left column ``round((W - w) / 2)`` (Python's ``round``, half
  to even). ``size``: ``(h, w)``, or an int for a square."""
  height, width = _fits(image, size)
  top = int(round((image.shape[0] - height) / 2.0))
  left = int(round((image.shape[1] - width) / 2.0))
  return image[top : top + height, left : left + width]


def flip(image: np.ndarray, do: bool) -> np.ndarray:
  """``image [H, W, C]`` mirrored left to right (a view) when ``do`` (True or False; a
  NumPy bool too), else ``image``. NumPy, not traced: ``do`` is a concrete bool."""
  _image_shape(image)
  return image[:, ::-1] if _checks.flag(do, "do") else image


def normalize(image: np.ndarray, mean=IMAGENET_MEAN, std=IMAGENET_STD) -> np.ndarray:
  """float32 ``[H, W, C]``: ``(image / 255 - mean) / std`` per channel, computed in float32
  in that order (torchvision's ``ToTensor`` then ``Normalize``, channels last).

  ``image``: uint8 (0..255); ``mean``, ``std``: ``C`` numbers each, of pixels in [0, 1]
  (``std`` > 0).
  """
  channels = _image_shape(image)[2]
  mean, std = check_statistics(mean, std, channels)
  height, width, _ = image.shape
  # Rows of W * C values against mean and std repeated W times: the same float32
  # operations, in place, 6x faster than broadcasting over a last axis of 3.
  pixels = image.astype(np.float32, order="C").reshape(height, width * channels)
  pixels /= np.float32(255)
  pixels -= np.tile(mean, width)
  pixels /= np.tile(std, width)
  return pixels.reshape(height, width, channels)


def check_statistics(mean, std, channels: int = 3) -> tuple[np.ndarray, np.ndarray]:
  """``(mean, std)`` as float32 ``[channels]``, or a ``ValueError`` naming the bad one:
  ``channels`` finite numbers each, every ``std`` > 0."""
  out = []
  for value, name in ((mean, "mean"), (std, "std")):
    try:
      array = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
      array = None
    if array is None or array.shape != (channels,) or not np.isfinite(array).all():
      raise ValueError(
        f"{name} must be {channels} finite numbers, one per channel (e.g. jhash's "
        f"IMAGENET_{name.upper()}); got {_checks.describe(value)}."
      )
    out.append(array)
  if (out[1] <= 0).any():
    raise ValueError(f"std must be > 0 for every channel; got {tuple(out[1].tolist())}.")
  return out[0], out[1]


def train_transform(
  image: np.ndarray,
  rng: np.random.Generator,
  *,
  size: int | tuple[int, int] = 224,
  resize: int | tuple[int, int] | None = 256,
  mean=IMAGENET_MEAN,
  std=IMAGENET_STD,
) -> np.ndarray:
  """float32 ``[h, w, C]``: the peers' training transform of one uint8 image: resize
  (an int: the shorter side, ``resize_shorter``; a pair: that size, ``resize_to``;
  ``None``: none), ``random_crop`` to ``size``, ``flip`` with probability 1/2
  (``rng.random() < 0.5``, drawn after the crop) and ``normalize``."""
  image = _resized(image, resize)
  image = random_crop(image, size, rng)
  image = flip(image, rng.random() < 0.5)
  return normalize(image, mean, std)


def eval_transform(
  image: np.ndarray,
  *,
  size: int | tuple[int, int] = 224,
  resize: int | tuple[int, int] | None = 256,
  mean=IMAGENET_MEAN,
  std=IMAGENET_STD,
) -> np.ndarray:
  """float32 ``[h, w, C]``: the peers' evaluation transform of one uint8 image: resize as
  ``train_transform``, ``center_crop`` to ``size``, ``normalize``; no randomness."""
  return normalize(center_crop(_resized(image, resize), size), mean, std)


# ----------------------------------------------------------------------------- checks


def _resized(image: np.ndarray, resize) -> np.ndarray:
  resize = _resize_arg(resize)
  return image if resize is None else _resize_array(image, resize)


#: The largest side a resize may ask for (a 16-bit image's worth, 65,535 pixels).
MAX_SIDE = 65_535


def _resize_arg(resize, name: str = "resize"):
  """``resize`` as ``None``, an int in [1, MAX_SIDE] (the shorter side) or a tuple
  ``(H, W)`` of them."""
  if resize is None:
    return None
  size = _crop_size(resize, name) if isinstance(resize, (tuple, list)) else None
  side = max(size) if size else _checks.positive_int(resize, name)
  if side > MAX_SIDE:
    raise ValueError(
      f"{name} must ask for sides of at most {MAX_SIDE} pixels (one image of that size is "
      f"{3 * MAX_SIDE**2 / 2**30:.0f} GiB); got {resize!r}."
    )
  return size if size else side


def _image_shape(image) -> tuple[int, int, int]:
  if not isinstance(image, np.ndarray) or image.ndim != 3 or image.dtype != np.uint8:
    raise ValueError(f"image must be a uint8 array [H, W, C]; got {_checks.describe(image)}.")
  if 0 in image.shape:
    raise ValueError(f"image must hold pixels; got an empty array of shape {image.shape}.")
  return image.shape


def _crop_size(size, name: str) -> tuple[int, int]:
  """``(h, w)`` from an int or a pair of ints >= 1."""
  if isinstance(size, (tuple, list)):
    if len(size) != 2:
      raise ValueError(f"{name} must be an int or a pair (H, W) of ints >= 1; got {size!r}.")
    return _checks.positive_int(size[0], name), _checks.positive_int(size[1], name)
  side = _checks.positive_int(size, name)
  return side, side


def _fits(image, size) -> tuple[int, int]:
  """The crop size ``(h, w)``; a ``ValueError`` when ``image`` is smaller."""
  height, width = _crop_size(size, "size")
  shape = _image_shape(image)
  if shape[0] < height or shape[1] < width:
    raise ValueError(
      f"the image is {shape[0]} x {shape[1]} (H x W), smaller than the crop {height} x {width}; "
      f"resize it first (resize_shorter) to at least the crop's size."
    )
  return height, width
