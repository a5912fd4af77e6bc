"""Image minibatches for a GPU, on Grain: decode, resize, crop, flip, normalise.

``image_pipeline`` reads image files (JPEG, PNG) with the peers' transforms
(``jhash.data._transforms``) into float32 minibatches, in jhash's minibatch order.

Order. Training step ``s`` reads the items ``perm[a:a + b]`` of its epoch's permutation,
the order ``jhash._order.minibatch_order`` defines for every path (``image_stream``'s
module docstring gives the formula): a pipeline and an in-memory ``jhash.fit`` on the
same key train on the same minibatches. The order of the whole run (this process's rows
of every step, int32: 4 bytes per image read, 4 MB for 100 epochs of 10,000 images) is
computed once, when the pipeline is made, by the process that makes it; threads and
workers only look rows up in it (no JAX in the workers). Evaluation reads the items in
order.

Randomness. The crop and the flip of item ``i`` at step ``s`` come from
``np.random.default_rng([*key_data(fold_in(key, 2**32 - 2)), s, i])``: deterministic by
key, the same on any thread, worker or process, for any ``process_count``, and when a
run resumes at ``start_step``. (``fold_in(key, 2**32 - 1)`` is the order's key and
``fold_in(key, s + 1)`` the train step's.)

Grain. ``grain.MapDataset.range(steps * b_local)`` maps each position to its item (read
and transformed), ``MapDataset.batch`` groups ``b_local`` of them into one minibatch, and
``to_iter_dataset`` reads ``read_threads`` minibatches at once on a thread pool (PIL
releases the GIL while it decodes and resizes). With ``worker_count > 0``,
``mp_prefetch`` runs that in worker processes, each on every ``worker_count``-th
minibatch, and interleaves them back in order (each element is a whole minibatch, so
workers never mix the items of one). Iterators are Grain's: ``get_state()`` /
``set_state(state)`` checkpoint and restore the position mid-epoch, ``close()`` stops
the threads and workers.

Measured (``benchmarks/bench_pipeline.py``, 2 cores loaded 4 to 8 times over, 500 x 375
JPEGs): 100 to 120 images/s on one thread with the training transforms, about PyTorch's
``DataLoader`` with torchvision's on one core (x0.86 to x1.10); on nearly the same work
as ``image_stream`` (resize to 224 x 224) x0.68 to x1.00 of its hand-written threads, the
per-image work about 9 % dearer (a flip and the normalisation). Grain's spawned workers
took 6 to 15 s to deliver a first minibatch: use them for long runs only.
``benchmarks/RESULTS.md``, section "Image pipeline", has the table.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Sequence

import jax
import numpy as np

from jhash import _checks
from jhash import _order
from jhash.data import _arguments
from jhash.data import _errors
from jhash.data import _transforms
from jhash.data._layouts import check_image_files

_AUGMENT_FOLD = 0xFFFFFFFE  # the augmentations' key: fold_in(key, 2**32 - 2)


class ImagePipeline:
  """An iterable of ``len(self)`` minibatch dicts; ``iter`` gives a Grain iterator.

  Attributes:
    dataset: the ``grain.IterDataset`` behind it (Grain's own operations apply).
    num_steps: minibatches per iteration.
  """

  def __init__(self, dataset, num_steps: int):
    self.dataset, self.num_steps = dataset, num_steps

  def __len__(self) -> int:
    return self.num_steps

  def __iter__(self) -> Iterator[dict]:
    return iter(self.dataset)


@dataclasses.dataclass(frozen=True, eq=False)
class _ReadItem:
  """``read(j)``: the item at position ``j`` of this process's run, transformed.

  Picklable (Grain sends it to its worker processes): paths, labels, the run's rows,
  the transforms' settings and the augmentation key's words, no JAX value.
  """

  paths: list[str]
  labels: np.ndarray | None
  rows: np.ndarray  # int32 [num_steps, b_local]: item of each row; -1 pads evaluation
  start_step: int
  train: bool
  seed: tuple[int, ...]
  image_size: tuple[int, int]
  resize: int | tuple[int, int] | None
  mean: np.ndarray
  std: np.ndarray

  def __call__(self, j: int) -> dict:
    k, r = divmod(int(j), self.rows.shape[1])
    item = int(self.rows[k, r])
    if item < 0:
      pixels = np.zeros(self.image_size + (3,), np.float32)
      label = None if self.labels is None else np.zeros_like(self.labels[0])
    else:
      pixels = self._pixels(item, self.start_step + k)
      label = None if self.labels is None else self.labels[item]
    out = {"views": (pixels,), "index": np.int32(item)}
    if label is not None:
      out["labels"] = label
    return out

  def _pixels(self, item: int, step: int) -> np.ndarray:
    path = self.paths[item]
    image = _transforms.decode_image(path, self.resize)  # resized by PIL: one copy fewer
    settings = dict(size=self.image_size, resize=None, mean=self.mean, std=self.std)
    try:
      if self.train:
        rng = np.random.default_rng(self.seed + (step, item))
        return _transforms.train_transform(image, rng, **settings)
      return _transforms.eval_transform(image, **settings)
    except ValueError as e:  # an image smaller than the crop (resize=None)
      raise _errors.DataFormatError(f"{path}: {e}") from e


def image_pipeline(
  paths: Sequence[str],
  labels,
  *,
  batch_size: int,
  key: jax.Array,
  train: bool,
  num_steps: int | None = None,
  num_epochs: int | None = None,
  start_step: int = 0,
  phase: int = 0,
  image_size: int | tuple[int, int] = 224,
  resize: int | tuple[int, int] | None = 256,
  mean=_transforms.IMAGENET_MEAN,
  std=_transforms.IMAGENET_STD,
  process_index: int | None = None,
  process_count: int | None = None,
  worker_count: int = 0,
  read_threads: int | None = None,
  check_files: bool = True,
) -> ImagePipeline:
  """Minibatches of images read from files with the peers' transforms, on Grain.

  Training (``train=True``): the minibatches of ``jhash.minibatches`` (module docstring),
  each image resized, randomly cropped to ``image_size``, flipped with probability 1/2
  and normalised (``_transforms.train_transform``). Evaluation: the items in order,
  resized, centre-cropped and normalised; the last minibatch is padded to ``batch_size``
  rows with zero pixels, zero labels and ``index`` -1 (static shapes: one compiled
  encoder, every process stepping together): keep the rows with ``index >= 0``.

  Sharding: each process reads its block of rows of every global minibatch of
  ``batch_size``: process ``p`` of ``P`` the rows ``p * b / P .. (p + 1) * b / P - 1``, as
  ``jax.make_array_from_process_local_data`` expects a batch sharded over processes in
  order. The processes together read exactly each global minibatch.

  Processes. With ``worker_count > 0`` Grain starts that many worker processes (spawned:
  each imports jhash, JAX and Grain, seconds), sends each the pipeline once as a
  cloudpickle (paths, labels, the run's order, the transforms' settings and the
  augmentation key's words: jhash's own objects) and gets minibatches back as NumPy
  arrays in shared memory (Grain pickles the dict around them through a queue, between
  jhash's own processes). Image files are only ever opened by PIL: jhash unpickles no
  data file. Grain's worker code reads absl flags; if the program has not parsed them,
  they are marked parsed (their defaults). Close the iterator (``it.close()``) to stop
  the workers. A spawned worker imports the program's main module: a script that starts
  workers must guard its own work with ``if __name__ == "__main__":`` (else each worker
  runs the script again).

  Args:
    paths: ``n`` image file paths (``ImageList.paths``).
    labels: integer class ids [n] (each >= 0, as the metrics require) or multi-hot bool
      [n, C] (``ImageList.labels``), or ``None`` (minibatches without ``"labels"``).
    batch_size: items per global minibatch, at most ``n``, divisible by ``process_count``.
    key: the PRNG key given to ``jhash.fit``: the order and the augmentations.
    train: training (random crops and flips, the training order) or evaluation.
    num_steps, num_epochs: training: exactly one, the minibatches to read (``num_epochs``
      of ``n // batch_size``); evaluation: ``num_steps`` minibatches at most, by default
      all ``ceil(n / batch_size)``; no ``num_epochs``.
    start_step: the first (global) step: resumes a run exactly where it stopped.
    phase: the method's phase the pipeline feeds (0 for one phase), as ``image_stream``.
    image_size: the crop, ``(H, W)`` or an int for a square.
    resize: the resize before the crop: an int resizes the shorter side to it (the
      peers' ``Resize(256)``), ``(H, W)`` to that size, ``None`` not at all.
    mean, std: 3 numbers each, per RGB channel, of pixels in [0, 1] (ImageNet's).
    process_index, process_count: this process and how many read the minibatches
      (default ``jax.process_index()`` and ``jax.process_count()``).
    worker_count: Grain worker processes (0: threads of this process only).
    read_threads: minibatches read at once, each on a thread (in every worker when
      ``worker_count > 0``); default the CPU count (at most 16) without workers, 1 with
      them. Memory: ``read_threads`` minibatches of float32 in the works (a 64 x 224 x
      224 x 3 one is 39 MB). 0 reads on the consumer's thread.
    check_files: check that every image file exists before starting (one error).
  Returns:
    An ``ImagePipeline``: ``len()`` minibatch dicts ``{"views": (float32 [b_local, H, W,
    3],), "labels": labels' rows, "index": int32 [b_local]}``, ``b_local = batch_size /
    process_count``, ``index`` the items' positions in ``paths``. Each ``iter`` starts at
    ``start_step``.
  """
  import grain  # imported here: `import jhash` stays light

  paths = _check_paths(paths, check_files)
  n = len(paths)
  if labels is not None:
    labels = np.asarray(labels)
    _checks.label_array(labels, "labels", num_items=n)
    _arguments.nonneg_class_ids(labels, "labels")
  _checks.prng_key(key)
  train = _checks.flag(train, "train")
  batch_size = _checks.positive_int(batch_size, "batch_size")
  if train and batch_size > n:
    raise ValueError(
      f"batch_size must be at most the number of images ({n}); got {batch_size}. (In "
      f"memory, jhash reads all {n} items at every step then: pass batch_size={n}.)"
    )
  start_step = _checks.nonneg_int(start_step, "start_step")
  phase = _checks.nonneg_int(phase, "phase")
  image_size = _transforms._crop_size(image_size, "image_size")
  resize = _check_resize(resize, image_size)
  mean, std = _transforms.check_statistics(mean, std, 3)
  index, count = _check_processes(process_index, process_count, batch_size)
  worker_count = _checks.nonneg_int(worker_count, "worker_count")
  if read_threads is None:
    read_threads = min(16, os.cpu_count() or 1) if worker_count == 0 else 1
  read_threads = _checks.nonneg_int(read_threads, "read_threads")

  local = batch_size // count
  lo = index * local
  if train:
    num_steps = _train_steps(n, batch_size, num_steps, num_epochs)
    order = _order.minibatch_order(key, n, batch_size, num_steps, start_step, phase)
    rows = np.stack([np.asarray(at[lo : lo + local]) for at in order] or [np.zeros(local)])
  else:
    num_steps = _eval_steps(n, batch_size, num_steps, num_epochs, start_step)
    rows = (start_step + np.arange(max(num_steps, 1)))[:, None] * batch_size + lo
    rows = rows + np.arange(local)
    rows = np.where(rows < n, rows, -1)
  rows = rows[:num_steps].astype(np.int32)
  augment = jax.random.key_data(jax.random.fold_in(key, _AUGMENT_FOLD))
  read = _ReadItem(
    paths,
    labels,
    rows,
    start_step,
    train,
    tuple(int(w) for w in np.asarray(augment).ravel()),
    image_size,
    resize,
    mean,
    std,
  )
  dataset = grain.MapDataset.range(num_steps * local).map(read).batch(local)
  dataset = dataset.to_iter_dataset(
    grain.ReadOptions(num_threads=read_threads, prefetch_buffer_size=read_threads)
  )
  if worker_count:
    _absl_flags_parsed()
    dataset = dataset.mp_prefetch(grain.MultiprocessingOptions(num_workers=worker_count))
  return ImagePipeline(dataset, num_steps)


# ----------------------------------------------------------------------------- checks


def _check_paths(paths, check_files: bool) -> list[str]:
  paths = _arguments.image_paths(paths, "paths")
  if _checks.flag(check_files, "check_files"):
    check_image_files(paths, "paths")
  return paths


def _check_resize(resize, image_size: tuple[int, int]):
  """``resize`` as an int, a pair ``(H, W)`` or ``None``, no smaller than the crop."""
  resize = _transforms._resize_arg(resize)
  if resize is None:
    return None
  if isinstance(resize, tuple):
    small = resize[0] < image_size[0] or resize[1] < image_size[1]
  else:
    small = resize < max(image_size)
  if small:
    raise ValueError(
      f"resize {resize} would make images smaller than the crop image_size {image_size}; "
      f"resize must be at least the crop's size."
    )
  return resize


def _check_processes(process_index, process_count, batch_size: int) -> tuple[int, int]:
  count = jax.process_count() if process_count is None else process_count
  count = _checks.positive_int(count, "process_count")
  index = jax.process_index() if process_index is None else process_index
  index = _checks.nonneg_int(index, "process_index")
  if index >= count:
    raise ValueError(f"process_index must be below process_count ({count}); got {index}.")
  if batch_size % count:
    raise ValueError(
      f"batch_size ({batch_size}, the global minibatch) must be divisible by process_count "
      f"({count}): every process reads batch_size / process_count rows."
    )
  return index, count


def _train_steps(n: int, batch_size: int, num_steps, num_epochs) -> int:
  if (num_steps is None) == (num_epochs is None):
    raise ValueError(
      f"training needs exactly one of num_steps and num_epochs; got num_steps={num_steps!r}, "
      f"num_epochs={num_epochs!r}."
    )
  if num_steps is not None:
    return _checks.nonneg_int(num_steps, "num_steps")
  return _checks.nonneg_int(num_epochs, "num_epochs") * _order.steps_per_epoch(n, batch_size)


def _eval_steps(n: int, batch_size: int, num_steps, num_epochs, start_step: int) -> int:
  if num_epochs is not None:
    raise ValueError(
      "evaluation reads the items once, in order: pass num_steps (or nothing), not num_epochs."
    )
  left = max(math.ceil(n / batch_size) - start_step, 0)
  if num_steps is None:
    return left
  num_steps = _checks.nonneg_int(num_steps, "num_steps")
  if num_steps > left:
    raise ValueError(
      f"num_steps must be at most the {left} minibatches of the {n} images left after "
      f"start_step {start_step} (batch_size {batch_size}); got {num_steps}."
    )
  return num_steps


def _absl_flags_parsed() -> None:
  """Grain's worker processes read absl flags: mark them parsed (their defaults) when the
  program has not parsed them (a program using absl.app has)."""
  from absl import flags

  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()
