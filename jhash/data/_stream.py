"""Images read from files, and minibatch streams in the runner's order.

Order. Step ``s`` of a stream reads the items ``perm[a:a + b]``, with ``b`` the batch
size, epoch ``e = s // (n // b)``, ``a = (s % (n // b)) * b`` and ``perm`` the epoch's
permutation ``jax.random.permutation(fold_in(fold_in(fold_in(key, 2**32 - 1), e), phase),
n)`` (``phase`` 0 for a method of one phase): the sequence ``jhash.minibatches``
gives on the host and an in-memory ``jhash.fit`` draws on the device, so training on
a stream equals training in memory, and ``start_step`` resumes a stream where a saved
state stopped. The order is defined once, in ``jhash._order``, for every path.

Work. The consumer's thread computes the order (one permutation per epoch) and hands
each item of the next minibatches to a pool of ``num_threads`` threads, which decode
and resize the images straight into that minibatch's array (PIL releases the GIL while
it decodes and resizes, so threads run in parallel). At most ``prefetch`` minibatches
are in the works while the consumer holds one: memory is ``(prefetch + 1) * b * H * W
* C`` bytes of uint8 (4x for float32). Each minibatch is a fresh array, so the consumer
may keep it. Leaving the loop, dropping or closing the iterator, or an error in a
worker (raised in the consumer, naming the file) cancels what has not started and
joins the threads. Grain's thread prefetch gives the same; its process workers were
not used (they need absl flags parsed, took seconds to start, and interleave workers'
elements unless each element is a whole minibatch), so a dependency was not worth it for
this stream. Re-measured with Grain 0.2.18 (2026-12-05, ``benchmarks/bench_pipeline.py``):
still so. On nearly the same work (decode, resize to 224 x 224) Grain's threads read at
x0.68 to x1.00 of these across runs on 2 cores loaded 4 to 8 times over, the per-image
work itself about 9 % dearer (a flip and the normalisation); two spawned workers took 6 to
15 s to deliver their first minibatch. ``jhash.data._pipeline.image_pipeline`` uses Grain
for the peers' training transforms (random crops and flips, normalisation), sharding over
processes and checkpointable iterators; this stream reads images as they are.

Measured on a shared 2-core machine with other jobs running, 256 JPEG files of 500 x 375
read to 224 x 224 x 3: 130 to 200 images/s with one thread, up to 1.2 times that with
two (the cores were busy; the speed-up on idle cores is not measured here). A minibatch
of 64 such images then takes about 0.4 s on one core: give a GPU run enough threads.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures

import jax
import numpy as np

from jhash import _checks
from jhash import _order
from jhash.data import _arguments
from jhash.data import _errors
from jhash.data import _transforms
from jhash.data._layouts import ImageList
from jhash.data._layouts import check_image_files

_DTYPES = (np.uint8, np.float32)

Minibatch = dict
Finish = Callable[[], Minibatch]  # waits for a minibatch's reads and returns it


# ----------------------------------------------------------------------------- images


def read_images(
  paths: Sequence[str],
  size: tuple[int, int] | None = None,
  channels: int = 3,
  *,
  dtype=np.uint8,
  num_threads: int | None = None,
) -> np.ndarray:
  """Decode image files into one array, on ``num_threads`` threads.

  Each file is opened with PIL, converted to RGB (``channels=3``) or grayscale
  (``channels=1``) and resized to ``size`` with bilinear filtering. 16-bit grayscale
  images are scaled to 8 bits (``>> 8``); 32-bit integer and float ones are refused
  (``jhash.data.decode_image``, ``_transforms.eight_bit``).

  Args:
    paths: ``n`` image file paths (``ImageList.paths``); all are checked to exist
      before any is read.
    size: ``(H, W)``; ``None`` keeps the images' own size, which must then be the
      same for all.
    channels: 3 (RGB) or 1 (grayscale).
    dtype: ``np.uint8`` (0..255) or ``np.float32`` (pixels / 255, in [0, 1]).
    num_threads: decoding threads (default: the CPU count, at most 16).
  Returns:
    ``dtype`` ``[n, H, W, channels]``. A file PIL cannot decode raises
    ``DataFormatError`` naming it.
  """
  paths = _check_paths(paths)
  read = _image_reader(paths, size, channels, dtype)
  out = np.empty((len(paths),) + read.shape, read.dtype)
  threads = _num_threads(num_threads)
  starts = lambda pool: (pool.submit(read, out, j, p).result for j, p in enumerate(paths))
  for _ in _run_ahead(starts, 4 * threads, threads):
    pass
  return out


class _ImageReader:
  """``read(out, j, path)`` decodes ``path`` into ``out[j]``; ``shape`` is one image's.

  With ``resize=False`` an image of another size than ``size`` is refused.
  """

  def __init__(self, size: tuple[int, int], channels: int, dtype, resize: bool):
    self.size, self.channels, self.dtype, self.resize = size, channels, np.dtype(dtype), resize
    self.shape = tuple(size) + (channels,)

  def __call__(self, out: np.ndarray, j: int, path: str) -> None:
    from PIL import Image  # imported here: `import jhash` stays light

    width_height = (self.size[1], self.size[0])
    with _transforms.open_image(path) as image:  # 8 bits a sample: PIL's convert clips 16
      found = image.size
      image = image.convert("RGB" if self.channels == 3 else "L")
      if self.resize and image.size != width_height:
        image = image.resize(width_height, Image.Resampling.BILINEAR)
      pixels = np.asarray(image)
    if found != width_height and not self.resize:
      raise _errors.DataFormatError(
        f"{path} is {found[1]} x {found[0]} (H x W) but the first image is {self.size[0]} "
        f"x {self.size[1]}; pass size=(H, W) to resize every image."
      )
    pixels = pixels.reshape(self.shape)
    out[j] = pixels if self.dtype == np.uint8 else pixels.astype(np.float32) / np.float32(255)


def _image_reader(paths, size, channels, dtype) -> _ImageReader:
  if (
    isinstance(channels, bool)
    or not isinstance(channels, (int, np.integer))
    or channels not in (1, 3)
  ):
    raise ValueError(
      f"channels must be 3 (RGB) or 1 (grayscale), an int; got {_checks.describe(channels)}."
    )
  channels = int(channels)
  if _dtype_or_none(dtype) not in _DTYPES:
    raise ValueError(f"dtype must be np.uint8 or np.float32; got {dtype!r}.")
  if size is not None:
    if (
      not isinstance(size, (tuple, list))
      or len(size) != 2
      or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in size)
    ):
      raise ValueError(f"size must be (H, W), two ints >= 1, or None; got {size!r}.")
    return _ImageReader(tuple(int(s) for s in size), channels, dtype, resize=True)
  from PIL import Image

  try:
    with Image.open(paths[0]) as image:  # reads the header only
      width, height = image.size
  except Exception as e:
    raise _errors.DataFormatError(
      f"{paths[0]} could not be decoded as an image ({type(e).__name__}: {e})."
    ) from e
  return _ImageReader((height, width), channels, dtype, resize=False)


def _dtype_or_none(dtype) -> np.dtype | None:
  try:
    return np.dtype(dtype)
  except TypeError:
    return None


def _check_paths(paths) -> list[str]:
  paths = _arguments.image_paths(paths, "paths")
  check_image_files(paths, "paths")
  return paths


def _num_threads(num_threads) -> int:
  if num_threads is None:
    return min(16, os.cpu_count() or 1)
  return _checks.positive_int(num_threads, "num_threads")


# ----------------------------------------------------------------------------- order


_minibatch_order = _order.minibatch_order


# ----------------------------------------------------------------------------- streams


class Stream:
  """An iterable of ``num_steps`` minibatches; each iteration runs its own threads."""

  def __init__(
    self,
    starts: Callable[[futures.Executor], Iterator[Finish]],
    num_steps: int,
    prefetch: int,
    num_threads: int,
  ):
    self._starts, self._num_steps = starts, num_steps
    self._prefetch, self._num_threads = prefetch, num_threads

  def __len__(self) -> int:
    return self._num_steps

  def __iter__(self) -> Iterator[Minibatch]:
    return _run_ahead(self._starts, self._prefetch, self._num_threads)


def _run_ahead(starts, prefetch: int, num_threads: int) -> Iterator[Minibatch]:
  """Yield each minibatch of ``starts(pool)`` in order, ``prefetch`` started ahead.

  The ``finally`` runs when the consumer finishes, closes or drops the iterator, or a
  read fails: work not started is cancelled and the threads are joined.
  """
  pool = futures.ThreadPoolExecutor(num_threads, thread_name_prefix="jhash-data")
  pending: collections.deque[Finish] = collections.deque()
  try:
    for finish in starts(pool):
      pending.append(finish)
      if len(pending) > prefetch:
        yield pending.popleft()()
    while pending:
      yield pending.popleft()()
  finally:
    pool.shutdown(wait=True, cancel_futures=True)


def image_stream(
  images: ImageList,
  batch_size: int,
  key: jax.Array,
  num_steps: int,
  *,
  size: tuple[int, int] | None = None,
  channels: int = 3,
  dtype=np.uint8,
  start_step: int = 0,
  phase: int = 0,
  prefetch: int = 2,
  num_threads: int | None = None,
  check_files: bool = True,
) -> Stream:
  """Minibatches of images read from files, in ``jhash.minibatches``' order.

  For a training set too large for memory: ``jhash.fit(method, key, stream, num_steps,
  state=...)`` trains as on the set in memory (same minibatches, same order). Images
  are decoded on background threads, ``prefetch`` minibatches ahead (module docstring).

  Args:
    images: an ``ImageList`` (``load_image_list``): ``n`` paths and bool [n, C] labels.
    batch_size: items per minibatch (the method's; over ``n``, every step reads all).
    key: the PRNG key given to ``jhash.fit``.
    num_steps: minibatches to yield.
    size, channels, dtype: as ``read_images``.
    start_step: the first step (to resume a run at a saved state's step).
    phase: the index of the method's phase the stream feeds (0 for one phase).
    prefetch: minibatches read ahead of the one the consumer holds (>= 0).
    num_threads: decoding threads (default: the CPU count, at most 16).
    check_files: check that every image file exists before starting (one error).
  Returns:
    An iterable of ``num_steps`` minibatch dicts ``{"views": (dtype [b, H, W, C],),
    "labels": bool [b, C], "index": int32 [b]}``, ``index`` the items' positions in
    ``images``. Each ``iter`` starts over at ``start_step`` with its own threads;
    ``close()`` on the iterator (or dropping it) stops them.
  """
  if not isinstance(images, ImageList):
    raise ValueError(
      f"images must be an ImageList (jhash.data.load_image_list); got {_checks.describe(images)}."
    )
  paths = list(images.paths)
  labels = _check_labels(images.labels, len(paths))
  order = _order_arguments(len(paths), batch_size, key, num_steps, start_step, phase)
  if _checks.flag(check_files, "check_files"):
    check_image_files(paths, "images")
  read = _image_reader(paths, size, channels, dtype)

  def start(pool, index):
    out = np.empty((len(index),) + read.shape, read.dtype)
    reads = [pool.submit(read, out, j, paths[i]) for j, i in enumerate(index)]

    def finish():
      for done in reads:
        done.result()
      return {"views": (out,), "labels": labels[index], "index": index}

    return finish

  return Stream(
    lambda pool: (start(pool, index) for index in _minibatch_order(*order)),
    num_steps,
    _checks.nonneg_int(prefetch, "prefetch"),
    _num_threads(num_threads),
  )


def array_stream(
  batch: dict,
  batch_size: int,
  key: jax.Array,
  num_steps: int,
  *,
  start_step: int = 0,
  phase: int = 0,
  prefetch: int = 2,
  num_threads: int = 1,
) -> Stream:
  """Minibatches of a batch of arrays (``np.memmap`` ones included), gathered ahead.

  The sequence of ``jhash.minibatches(batch, batch_size, key, num_steps, start_step,
  phase)``, each minibatch gathered on a background thread ``prefetch`` steps ahead:
  a memory-mapped set is read from disk one minibatch at a time, while the device
  trains on the one before.

  Args:
    batch: ``{"views": (arrays [n, ...],), "labels": ...}``; every array with ``n``
      rows is gathered per minibatch. Checked on its first item only (a memory map is
      not read through).
    batch_size, key, num_steps, start_step, phase, prefetch: as ``image_stream``.
    num_threads: gathering threads.
  Returns:
    An iterable of ``num_steps`` minibatch dicts, each with ``"index"`` int32 [b].
  """
  n = _check_arrays(batch)
  order = _order_arguments(n, batch_size, key, num_steps, start_step, phase)

  def start(pool, index):
    return pool.submit(_take, batch, index, n).result

  return Stream(
    lambda pool: (start(pool, index) for index in _minibatch_order(*order)),
    num_steps,
    _checks.nonneg_int(prefetch, "prefetch"),
    _checks.positive_int(num_threads, "num_threads"),
  )


def _take(batch: dict, index: np.ndarray, n: int) -> Minibatch:
  """The items ``index`` of every per-item array of ``batch`` (NumPy), and ``"index"``."""
  out = {}
  for name, value in batch.items():
    if name == "views":
      out[name] = tuple(None if v is None else np.asarray(v[index]) for v in value)
    elif name != "num_items" and np.ndim(value) >= 1 and np.shape(value)[0] == n:
      out[name] = np.asarray(value[index])
    else:
      out[name] = value
  out["index"] = index
  return out


# ----------------------------------------------------------------------------- checks


def _order_arguments(n, batch_size, key, num_steps, start_step, phase) -> tuple:
  if not isinstance(key, jax.Array) or not (
    jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) or key.shape == (2,)
  ):
    raise ValueError(
      f"key must be a JAX PRNG key (jax.random.key(seed)); got {_checks.describe(key)}."
    )
  return (
    key,
    n,
    _checks.positive_int(batch_size, "batch_size"),
    _checks.nonneg_int(num_steps, "num_steps"),
    _checks.nonneg_int(start_step, "start_step"),
    _checks.nonneg_int(phase, "phase"),
  )


def _check_labels(labels, n: int) -> np.ndarray:
  if n == 0:
    raise ValueError("images must name at least one image; the list is empty.")
  labels = np.asarray(labels)
  _checks.label_array(labels, "images.labels", num_items=n)
  _arguments.nonneg_class_ids(labels, "images.labels")
  return labels


def _check_arrays(batch) -> int:
  """Check a batch's ranks, dtypes and lengths reading one item of each array; return n."""
  if not isinstance(batch, Mapping) or not isinstance(batch.get("views"), (tuple, list)):
    raise ValueError(f"batch must be a dict with a tuple 'views'; got {_checks.describe(batch)}.")
  head = {"views": tuple(None if v is None else v[:1] for v in batch["views"])}
  if batch.get("labels") is not None:
    head["labels"] = batch["labels"][:1]
  _checks.batch(head)
  named = {f"views[{i}]": v for i, v in enumerate(batch["views"]) if v is not None}
  if batch.get("labels") is not None:
    named["labels"] = batch["labels"]
  return int(_checks.same_length(list(named.values()), list(named)))
