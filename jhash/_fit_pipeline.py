"""A method's whole schedule read from image files: one ``image_pipeline`` per phase.

``jhash.data.image_pipeline`` reads the minibatches of one minibatch phase; a method may
have several (MCH: its base model, then its crop agent), each at its own batch size,
with its own phase index in the order and its steps counted from the phase's start
(``jhash._loops.phase_loop``). ``training_pipeline`` chains them as ``jhash.fit``'s
schedule lays them out, so a stream trains as the set in memory would.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence

import jax

from jhash import _api
from jhash import _checks
from jhash import _fit
from jhash import _fit_checks
from jhash import _stream_checks
from jhash.data import ImagePipeline
from jhash.data import _arguments
from jhash.data import image_pipeline
from jhash.data._layouts import check_image_files


class TrainingPipeline:
  """The minibatches of a method's whole schedule (made by ``training_pipeline``): one
  ``ImagePipeline`` per minibatch phase still to run, read in turn; ``len(self)``
  minibatch dicts in all.

  Attributes:
    pipelines: ``(phase index, ImagePipeline)`` for each phase from ``start_step`` on.
    num_steps: minibatches per iteration (the steps left of the schedule).
    made_for: ``RunOf(key_data, start_step, num_items)``, the run it reads for:
      ``jhash.fit`` refuses it for another key, start step or training set size.
  """

  def __init__(self, pipelines: list[tuple[int, ImagePipeline]], num_steps: int, made_for):
    if not all(isinstance(p, tuple) and len(p) == 2 for p in pipelines):
      raise ValueError("TrainingPipeline: made by jhash.training_pipeline, not by hand.")
    self.pipelines, self.made_for = list(pipelines), made_for
    self.num_steps = _checks.nonneg_int(num_steps, "num_steps")

  def __len__(self) -> int:
    return self.num_steps

  def __iter__(self) -> Iterator[dict]:
    for _, pipeline in self.pipelines:
      it = iter(pipeline)
      try:
        yield from it
      finally:  # a phase read to its end, or left: its threads and workers stop
        close = getattr(it, "close", None)
        if close is not None:
          close()


#: ``image_pipeline``'s arguments that ``training_pipeline`` sets itself.
_SET_HERE = ("paths", "labels", "key", "batch_size", "train", "num_steps", "num_epochs")
_SET_HERE += ("start_step", "phase")


def _check_options(options) -> None:
  """``training_pipeline``'s ``**options``: image_pipeline's own, not those it sets."""
  allowed = [k for k in inspect.signature(image_pipeline).parameters if k not in _SET_HERE]
  bad = sorted(k for k in options if k not in allowed)
  if bad:
    raise ValueError(
      f"training_pipeline: {', '.join(map(repr, bad))} is not one of its options "
      f"({', '.join(allowed)}); the batch size, the phase and the step counts come from "
      "the method's schedule."
    )


def check_no_bind(method, source: str) -> None:
  """A method fed by ``source`` (a pipeline, process-local minibatches) must not read
  sizes from its whole training batch (``bind``)."""
  if method.bind is not None:
    raise ValueError(
      f"{method.name} reads sizes from its whole training batch (bind): train it in "
      f"memory, not from {source}."
    )


def minibatch_spans(method, num_items: int, num_steps, start_step, source: str):
  """The spans of ``method``'s schedule over ``num_items`` items and the checked start
  step, for a run fed by ``source``: every phase must read minibatches (not the whole
  set at each step)."""
  spans = _fit_checks.spans(method, num_items, num_steps, None)
  start = _checks.nonneg_int(start_step, "start_step")
  _fit_checks.check_start(method, start, spans[-1].stop)
  whole = [span.phase.name for span in spans if span.phase.batch_size is None]
  if whole:
    raise ValueError(
      f"{method.name}'s phase {whole[0]!r} trains on the whole set at every step: train it "
      f"in memory, not from {source}."
    )
  return spans, start


def training_pipeline(
  method: _api.HashingMethod,
  paths: Sequence[str],
  labels,
  *,
  key: jax.Array,
  start_step: int = 0,
  num_steps: int | None = None,
  **options,
) -> TrainingPipeline:
  """The minibatches ``jhash.fit`` reads over ``method``'s whole schedule, from image files.

  ``jhash.fit(method, key, jhash.training_pipeline(method, paths, labels, key=key),
  num_items=len(paths))`` trains on the minibatches, in the order, that ``fit`` draws
  from the same set in memory: each minibatch phase (a method may have several: MCH's
  base model, then its agent) reads its own ``image_pipeline`` (``train=True``) at its
  own ``batch_size``, with its phase index and its steps counted from the phase's start,
  as ``fit``'s device-side sampling does. To resume at step ``s``, pass
  ``start_step=s`` here and to ``fit`` (with the state saved at ``s``).

  Args:
    method: a ``HashingMethod`` trained on minibatches only (no full-batch phase, no
      ``bind``: ADSH's code phase and ITQ read the whole set; train them in memory).
    paths, labels: the training images (``ImageList.paths``, ``ImageList.labels``).
    key: the PRNG key given to ``jhash.fit``.
    start_step: the (global) step to start at.
    num_steps: the run's total steps, as ``fit``'s ``num_steps`` (default: the schedule's).
    **options: ``image_pipeline``'s other options (``image_size``, ``resize``, ``mean``,
      ``std``, ``process_index``, ``process_count``, ``worker_count``, ``read_threads``,
      ``check_files``); the batch size, phase and step counts come from the method.
  Returns:
    A ``TrainingPipeline``: ``len()`` minibatch dicts, as ``image_pipeline``'s.
  """
  _fit.check_method(method)
  _checks.prng_key(key)
  _check_options(options)
  check_no_bind(method, "a pipeline")
  paths = _arguments.image_paths(paths, "paths")
  if _checks.flag(options.pop("check_files", True), "check_files"):
    check_image_files(paths, "paths")
  spans, start = minibatch_spans(method, len(paths), num_steps, start_step, "a pipeline")
  large = [span.phase for span in spans if span.phase.batch_size > len(paths)]
  if large:
    raise ValueError(
      f"{method.name}'s phase {large[0].name!r} reads minibatches of {large[0].batch_size} "
      f"(the method's batch size for it), more than the {len(paths)} images: a pipeline "
      "reads at most the set at a step (in memory, fit reads the whole set at each step "
      "then). Give the method a batch size of at most the number of images."
    )
  pipelines = []
  for span in spans:
    if span.stop <= start:
      continue
    at = max(start, span.start)
    pipeline = image_pipeline(
      paths,
      labels,
      batch_size=span.phase.batch_size,
      key=key,
      train=True,
      num_steps=span.stop - at,
      start_step=at - span.start,
      phase=span.index,
      check_files=False,
      **options,
    )
    pipelines.append((span.index, pipeline))
  made_for = _stream_checks.RunOf(_stream_checks.key_words(key), start, len(paths))
  return TrainingPipeline(pipelines, spans[-1].stop - start, made_for)
