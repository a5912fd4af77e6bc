"""List sets streamed from their files in the retrieval trainer (``stream=True``).

A list set (``jhash.data.PAPER_PRESETS`` of layout "lists": NUS-WIDE, MS-COCO,
ImageNet-100, MIRFlickr, VOC) is decoded in memory by default, at ``image_size``; NUS-WIDE
at 224 x 224 is about 31 GB of pixels. With ``stream=True`` in its ``config.datasets``
entry the trainer never holds the images: each cell trains from
``jhash.training_pipeline`` (the peers' transforms: resize the shorter side to
``resize``, random crop to ``image_size``, flip, ImageNet's per-channel statistics), and
the queries and the database are coded through ``jhash.encode_stream`` from evaluation
pipelines (resize, centre crop), ``eval_batch_size`` images a call. A resumed cell
restarts its pipeline at the checkpoint's step (``start_step``): the run continues on
the minibatches it would have read. A cell's trained state is saved when its training
ends, so an image that fails to decode while the sets are coded costs no training: the
run stops with the file's path, and a rerun codes the sets again.

The pipeline normalises the images per channel; a network that standardises its inputs
(``standardize=True``, the methods' default) then takes one mean and scale from the
first training minibatch as well. The papers' ``NAME,stream`` arguments set
``standardize=False`` (linked to ``stream``: an override of either moves both), as a
pretrained backbone expects its inputs.

Options, beside the protocol's own (each optional; given without ``stream=True`` it is
refused, as it would change nothing): ``resize`` (256), ``eval_batch_size`` (256),
``worker_count`` (Grain worker processes: 0, threads of the trainer's process only).

A method that reads the whole training set at a step (ADSH's code phase, ITQ, LSH, the
cross-view methods) or sizes itself from it (``bind``: HBMP) cannot stream: refused before
any cell trains, as are MCH's controls (they read the database's pixels).
``papers.py:NAME,stream`` and ``mch_papers.py:NAME,stream`` stream list set NAME with
the base models that can (all but ADSH).

A streamed split is three ``Part``; ``encode``, ``encode_multi``, ``labels`` and
``num_items`` take a ``Part`` or an in-memory batch alike, so the trainer's evaluation
is one code path.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import numpy as np

import jhash
from jhash import data as jdata
from experiments import harness

#: The streaming options of a list set's entry and their defaults (``stream`` itself: False).
OPTIONS = {"resize": 256, "eval_batch_size": 256, "worker_count": 0}
KEYS = ("stream",) + tuple(OPTIONS)
#: Training images read for the shape checks before any cell trains.
SAMPLE_SIZE = 8


class Part(NamedTuple):
  """One part of a streamed split: its files, and how they are read.

  Attributes:
    images: the part's ``ImageList`` (paths, bool labels [n, C]).
    settings: ``image_pipeline``'s ``image_size``, ``resize`` and ``worker_count``.
    eval_batch_size: images a call when the part is coded.
    sample: for the training part, a batch of its first ``SAMPLE_SIZE`` images as
      evaluation reads them (shapes and dtypes for the checks before training); else None.
  """

  images: jdata.ImageList
  settings: dict
  eval_batch_size: int
  sample: dict | None = None


def split_options(spec: dict) -> tuple[dict, dict | None]:
  """A data set's entry as (its protocol's options, its streaming options or None when it
  is not streamed)."""
  spec = dict(spec)
  stream = {k: spec.pop(k) for k in KEYS if k in spec}
  if not stream.pop("stream", False):
    return spec, None
  return spec, {k: OPTIONS[k] if stream.get(k) is None else stream[k] for k in OPTIONS}


def check_spec(label: str, spec) -> None:
  """The streaming keys of ``config.datasets.LABEL``: only on a list set, ``stream`` a
  bool, the options positive ints (``worker_count`` >= 0), given only with ``stream``."""
  where = f"config.datasets.{label}"
  given = [k for k in KEYS if spec.get(k) is not None]
  if not given:
    return
  stream = spec.get("stream")
  if not isinstance(stream, bool):
    raise harness.ConfigError(f"{where}.stream: must be True or False; got {stream!r}.")
  preset = jdata.PAPER_PRESETS.get(spec.protocol)
  if preset is None or preset.layout != "lists":
    lists = [k for k, p in jdata.PAPER_PRESETS.items() if p.layout == "lists"]
    raise harness.ConfigError(
      f"{where}: {', '.join(given)}: only the list sets ({', '.join(lists)}) take the "
      f"streaming keys; protocol {spec.protocol!r} is always read in memory. Drop "
      f"{'it' if len(given) == 1 else 'them'}."
    )
  options = [k for k in OPTIONS if spec.get(k) is not None]
  if options and not stream:
    raise harness.ConfigError(
      f"{where}: {', '.join(options)} set how a streamed set is read; with stream=False "
      f"the images are decoded in memory and {'it' if len(options) == 1 else 'they'} would "
      "change nothing. Set stream=True, or drop them."
    )
  for k in options:
    value, minimum = spec.get(k), 0 if k == "worker_count" else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
      raise harness.ConfigError(f"{where}.{k}: must be an int >= {minimum}; got {value!r}.")
  image_size = spec.get("image_size", jdata.protocol_options(spec.protocol)["image_size"])
  resize = spec.get("resize") or OPTIONS["resize"]
  if stream and isinstance(image_size, int) and resize < image_size:
    given_as = "" if spec.get("resize") is not None else f" (the default, {OPTIONS['resize']})"
    raise harness.ConfigError(
      f"{where}: image_size {image_size}, the crop, is larger than resize {resize}"
      f"{given_as}, the side the images are resized to first; set resize to at least "
      f"{image_size}."
    )


def load(protocol: str, seed: int, options: dict, stream: dict) -> tuple[Part, Part, Part]:
  """The (train, query, database) ``Part`` of list set ``protocol`` at ``seed``: its
  split as ``load_protocol`` gives it (``jhash.data.load_paper_split``), not decoded."""
  options = dict(options)
  image_size = options.pop("image_size", jdata.protocol_options(protocol)["image_size"])
  lists = jdata.load_paper_split(protocol, seed, **options)
  if lists.notes:
    warnings.warn(" ".join(lists.notes), UserWarning, stacklevel=2)
  settings = {
    "image_size": image_size,
    "resize": stream["resize"],
    "worker_count": stream["worker_count"],
  }
  batch_size = stream["eval_batch_size"]
  train = Part(lists.train, settings, batch_size)
  first = jdata.ImageList(train.images.paths[:SAMPLE_SIZE], train.images.labels[:SAMPLE_SIZE])
  sample = _read(train._replace(images=first), next)
  sample.pop("index")
  return (
    train._replace(sample=sample),
    Part(lists.query, settings, batch_size),
    Part(lists.database, settings, batch_size),
  )


def _eval_pipeline(part: Part) -> jdata.ImagePipeline:
  n = len(part.images.paths)
  return jdata.image_pipeline(
    part.images.paths,
    part.images.labels,
    batch_size=min(part.eval_batch_size, n),
    key=jax.random.key(0),  # evaluation draws nothing
    train=False,
    check_files=False,  # load_paper_split checked them
    **part.settings,
  )


# ----------------------------------------------------------------------------- either kind


def num_items(part) -> int:
  """The items of a ``Part`` or of an in-memory batch."""
  return len(part.images.paths) if isinstance(part, Part) else jhash.num_items(part)


def labels(part) -> np.ndarray:
  """The labels of a ``Part`` or of an in-memory batch."""
  return part.images.labels if isinstance(part, Part) else part["labels"]


def sample(part):
  """What the checks before training trace: a ``Part``'s sample, or the batch itself."""
  return part.sample if isinstance(part, Part) else part


def encode(method, state, part):
  """``jhash.encode`` of a batch, or of a ``Part`` through its evaluation pipeline."""
  if not isinstance(part, Part):
    return jhash.encode(method, state, part)
  return _read(part, lambda it: jhash.encode_stream(method, state, it, num_items(part)))


def encode_multi(method, state, part):
  """``jhash.encode_multi`` of a batch, or of a ``Part`` through its evaluation pipeline."""
  if not isinstance(part, Part):
    return jhash.encode_multi(method, state, part)
  return _read(part, lambda it: jhash.encode_stream(method, state, it, num_items(part), multi=True))


def _read(part: Part, fn):
  """``fn(iterator)`` over ``part``'s evaluation pipeline, the iterator closed after (its
  threads, and Grain's workers and their shared memory, released at once)."""
  it = iter(_eval_pipeline(part))
  try:
    return fn(it)
  finally:
    it.close()


def training_data(part):
  """What ``harness.Workdir.fit`` trains on: the batch itself, or a ``harness.Streamed``
  whose minibatches come from ``jhash.training_pipeline`` from a given step."""
  if not isinstance(part, Part):
    return part

  def at(method, key, start_step: int):
    return jhash.training_pipeline(
      method,
      part.images.paths,
      part.images.labels,
      key=key,
      start_step=start_step,
      check_files=False,
      **part.settings,
    )

  return harness.Streamed(part.sample, num_items(part), at)


def check_streamable(method, part) -> None:
  """A ValueError unless ``method`` can train from a pipeline over ``part`` (when it is a
  ``Part``): ``jhash.training_pipeline``'s own rule (minibatch phases of at most the set,
  no ``bind``), checked by making the pipeline (orders only: no image is read)."""
  if not isinstance(part, Part):
    return
  try:
    jhash.training_pipeline(
      method,
      part.images.paths,
      part.images.labels,
      key=jax.random.key(0),
      check_files=False,
      **part.settings,
    )
  except ValueError as e:
    raise ValueError(
      f"{method.name} cannot train from a stream: {e} Set the data set's stream=False (in "
      "memory) or leave the method out (the papers' configs: the argument NAME,stream does)."
    ) from None
