"""The checks of ``jhash.fit``'s minibatches when training streams from an iterable: each
minibatch's positions (``index``), its entries, views and labels against the first
minibatch's, the method's own check, the rows a process passes over a mesh, and whether a
method's state needs the training set's size (``num_items``) to be given.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from jhash import _api
from jhash import _checks
from jhash._loops import _jit_init


def check_sized_without_num_items(run, sample) -> None:
  """A method whose state holds a row per training item (a memory bank) cannot learn the
  training set's size from a stream: refused unless ``num_items`` is given."""
  rows = _checks.batch(sample, "minibatch")
  method = _api.bound(run.method, sample)
  shapes = [
    jax.tree.map(lambda x: x.shape, jax.eval_shape(_jit_init(method, m), run.key, sample))
    for m in (rows, rows + 1)
  ]
  if shapes[0] != shapes[1]:
    raise ValueError(
      f"num_items: {run.method.name}'s state holds a row per training item (a memory "
      "bank), so training from an iterable of minibatches needs num_items=, the training "
      "set's size (fit(..., num_items=N)); without it the state would be sized to one "
      "minibatch."
    )


def check_by_method(method, minibatch, step: int) -> None:
  """The method's own check of every minibatch of a stream (its labels' classes, ...), as
  an in-memory batch gets, naming the step."""
  if method.check_batch is None:
    return
  try:
    method.check_batch(minibatch)
  except ValueError as e:
    raise ValueError(f"minibatch of step {step}: {e}") from None


def check_rows(minibatch, rows: int) -> None:
  """Every array of a minibatch split over a mesh: ``rows`` rows, as its ``index``."""
  for path, x in jax.tree_util.tree_leaves_with_path(minibatch):
    if np.ndim(x) < 1 or np.shape(x)[0] != rows:
      raise ValueError(
        f"minibatch{jax.tree_util.keystr(path)} must hold one row per item ({rows}, as "
        f"'index') to be split over the mesh; got {_checks.describe(x)}."
      )


def item_shapes(batch) -> list:
  return [
    None if v is None else (tuple(np.shape(v)[1:]), np.dtype(v.dtype).name) for v in batch["views"]
  ]


def check_same_views(first, minibatch, step: int) -> None:
  """Every minibatch of a stream has the first one's entries, and its views: item shapes
  and dtypes."""
  skip = {"num_items", "labels"}  # labels: told apart below
  entries = [{k for k, v in m.items() if v is not None} - skip for m in (first, minibatch)]
  if entries[0] != entries[1]:
    added, dropped = sorted(entries[1] - entries[0]), sorted(entries[0] - entries[1])
    what = "; ".join(
      f"{label} {keys}" for label, keys in (("adds", added), ("drops", dropped)) if keys
    )
    raise ValueError(
      f"minibatch of step {step} {what} against the first minibatch's entries "
      f"{sorted(entries[0])}; every minibatch of a stream must carry the same entries."
    )
  labelled = [m.get("labels") is not None for m in (first, minibatch)]
  if labelled[0] != labelled[1]:
    what = (
      "no labels, where the first has them" if labelled[0] else "labels, where the first has none"
    )
    raise ValueError(
      f"minibatch of step {step} has {what}; every minibatch of a stream must carry the "
      "same entries."
    )
  want, got = item_shapes(first), item_shapes(minibatch)
  if want != got:
    raise ValueError(
      f"minibatch of step {step}: its views (item shape, dtype) {got} differ "
      f"from the first minibatch's {want}; every minibatch of a stream must "
      "have the same views."
    )
  if labelled[0]:
    layout = lambda m: (np.shape(m["labels"])[1:], np.dtype(m["labels"].dtype).kind)
    if layout(first) != layout(minibatch):
      raise ValueError(
        f"minibatch of step {step}: its labels (item shape, dtype kind) {layout(minibatch)} "
        f"differ from the first minibatch's {layout(first)}; every minibatch of a stream "
        "must label items the same way (class ids [b] or multi-hot [b, C] of one C)."
      )


def check_index(minibatch, num_items: int | None = None) -> None:
  """``index``: int [b], distinct positions in the training set, in [0, num_items) when
  known."""
  index = minibatch.get("index")
  if index is None or np.ndim(index) != 1 or not np.issubdtype(np.asarray(index).dtype, np.integer):
    raise ValueError(
      "minibatch must carry 'index': int [b], the positions of its items in "
      f"the training set; got {_checks.describe(index)}."
    )
  _checks.same_length(
    [index, next(v for v in minibatch["views"] if v is not None)],
    ["minibatch['index']", "minibatch['views']"],
  )
  values = np.asarray(index)
  top = num_items if num_items is not None else np.iinfo(np.int32).max
  if values.size and (values.min() < 0 or values.max() >= top):
    raise ValueError(
      f"minibatch['index'] must hold positions in [0, {top}) (num_items={num_items}); "
      f"found {values.min()} to {values.max()}."
    )
  if values.size > 1:
    ordered = np.sort(values)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if repeated.size:
      raise ValueError(
        f"minibatch['index'] must hold each position once (a minibatch draws its items "
        f"without replacement, as an in-memory fit does; a memory bank writes one code per "
        f"position); found {np.unique(repeated)[:5].tolist()} more than once."
      )


class RunOf(NamedTuple):
  """The run a prepared stream was made for (``jhash.training_pipeline``'s ``made_for``):
  ``fit`` refuses the stream for a run of another key, start step or training set size."""

  key_words: tuple[int, ...]  # the PRNG key's data
  start_step: int
  num_items: int


def key_words(key: jax.Array) -> tuple[int, ...]:
  """A PRNG key's data as ints (comparable, hashable)."""
  return tuple(int(w) for w in np.asarray(jax.random.key_data(key)).ravel())


def check_made_for(made_for: RunOf, key, start: int, n: int | None) -> None:
  """A stream made for one run (``RunOf``) is read by that run only."""
  differ = []
  if made_for.key_words != key_words(key):
    differ.append("its key is not fit's key (the order and crops come from the key)")
  if made_for.start_step != start:
    differ.append(f"it starts at step {made_for.start_step}, fit at start_step={start}")
  if n != made_for.num_items:
    differ.append(f"it reads {made_for.num_items} items, fit was given num_items={n}")
  if differ:
    raise ValueError(
      f"data: this training_pipeline was made for another run: {'; '.join(differ)}. Make "
      "it with fit's key, start_step and the training set's size as num_items."
    )
