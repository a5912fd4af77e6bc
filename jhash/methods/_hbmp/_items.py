"""HBMP's items: which rows of a batch define the neighbourhood, and their affinity.

Three levels (Cakir et al., Sec. 3.1): the classes of integer labels, the unique label
sets of multi-hot labels, or the instances themselves. ``items_and_affinity`` gives the
items of a training batch, the item of each row and the affinity ``R`` between the items
(``_affinity``); ``row_items`` maps the rows of any batch to the training items (a row
of an unseen label set to the nearest set). The number of classes or label sets sets the
shapes of a state, so when labels are traced it must be given (``num_items``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _api
from jhash import _checks
from jhash.methods._hbmp import _affinity

LEVELS = ("class", "label_sets", "instance")


def check_level_and_metric(level: str, metric: str) -> None:
  """``level`` in ``LEVELS`` and ``metric`` in ``_affinity.METRICS``, and they agree."""
  if level not in LEVELS:
    raise ValueError(f"level must be one of {', '.join(map(repr, LEVELS))}; got {level!r}.")
  if metric not in _affinity.METRICS:
    raise ValueError(
      f"metric must be one of {', '.join(map(repr, _affinity.METRICS))}; got {metric!r}."
    )
  if level == "class" and metric == "shared_count":
    raise ValueError(
      "metric='shared_count' needs multi-hot labels (level='label_sets' or "
      "'instance'); got level='class'."
    )


def _items_needed(level: str) -> ValueError:
  what = "classes" if level == "class" else "unique label sets"
  hint = (
    "max(labels) + 1"
    if level == "class"
    else "len(jhash.methods._hbmp.unique_label_sets(labels).sets)"
  )
  return ValueError(
    f"num_items must be given for level={level!r} when init is traced (jhash.init and "
    f"jhash.fit jit it): the number of {what} sets the state's shapes. Pass "
    f"num_items={hint}, or call method.init eagerly."
  )


def class_items(labels, num_items: int | None):
  """``(m, ids int32 [m], index int32 [n])`` of class-id labels [n]."""
  if _checks.label_array(labels, "labels") != "class_ids":
    raise ValueError(
      f"labels must be integer class ids [n] for level='class' (use "
      f"level='label_sets' for multi-hot labels); got {_checks.describe(labels)}."
    )
  if _checks.is_concrete(labels):
    y = np.asarray(labels)
    if y.size and y.min() < 0:
      raise ValueError(f"labels must be class ids >= 0; got minimum {y.min()}.")
    found = int(y.max()) + 1 if y.size else 0
    if num_items is None and found > y.size:
      distinct = np.unique(y).size
      raise ValueError(
        f"labels must be class ids 0..C-1: HBMP makes one item per id (an affinity of "
        f"C x C), and the largest id is {found - 1} for {y.size} labels of {distinct} "
        "distinct ids. Number the classes from 0 (np.unique(labels, return_inverse=True)"
        "[1]), or pass num_items."
      )
    if num_items is None:
      num_items = found
    elif found > num_items:
      raise ValueError(
        f"labels must be class ids below num_items={num_items}; got class id {found - 1}."
      )
  elif num_items is None:
    raise _items_needed("class")
  ids = jnp.arange(num_items, dtype=jnp.int32)
  return num_items, ids, jnp.asarray(labels, jnp.int32)


def label_set_items(labels, num_items: int | None):
  """``(m, sets bool [m, C], index int32 [n])`` of multi-hot labels [n, C]."""
  if _checks.label_array(labels, "labels") != "multi_hot":
    raise ValueError(
      f"labels must be multi-hot bool [n, C] for level='label_sets'; got "
      f"{_checks.describe(labels)}."
    )
  if _checks.is_concrete(labels):
    found = _affinity.unique_label_sets(labels)
    if num_items is not None and num_items != found.sets.shape[0]:
      raise ValueError(
        f"num_items must equal the number of unique label sets in labels, "
        f"{found.sets.shape[0]}; got num_items={num_items}."
      )
    return found.sets.shape[0], jnp.asarray(found.sets), jnp.asarray(found.index)
  if num_items is None:
    raise _items_needed("label_sets")
  # Traced: a static number of sets. Extra rows (num_items too large) repeat a set.
  sets, index = jnp.unique(
    labels, axis=0, size=num_items, return_inverse=True, fill_value=labels[0]
  )
  return num_items, sets, index.reshape(-1).astype(jnp.int32)


def label_items(level: str, labels, num_items: int | None):
  """``(m, item_labels, index int32 [n])`` of the classes or the label sets of ``labels``."""
  if level == "class":
    return class_items(labels, num_items)
  return label_set_items(labels, num_items)


def labels_of(level: str, batch: dict):
  """``batch["labels"]``, which the class and label-set levels need."""
  labels = batch.get("labels")
  if labels is None:
    raise ValueError(f"batch must hold 'labels' for level={level!r}; got keys {sorted(batch)}.")
  return labels


def _instance_items(batch: dict, metric: str, num_bits: int, view: int | None):
  """Instance level: ``(n, R float32 [n, n], item_labels [n], index int32 [n])``.

  ``R`` from the labels, or from the features (``metric="euclidean"`` or no labels).
  """
  labels = batch.get("labels")
  n = _api.view_features(batch, view).shape[0] if labels is None else np.shape(labels)[0]
  index = jnp.arange(n, dtype=jnp.int32)
  if labels is None or metric == "euclidean":
    r = _affinity.feature_affinity(_api.view_features(batch, view), num_bits)
    item_labels = jnp.zeros((n,), jnp.int32) if labels is None else jnp.asarray(labels)
  else:
    r = _affinity.instance_affinity(labels, num_bits, metric)
    item_labels = jnp.asarray(labels)
  return n, r, item_labels, index


def items_and_affinity(
  batch: dict, level: str, metric: str, num_bits: int, num_items: int | None, view: int | None
):
  """The items of a training batch and their affinity.

  Args:
    batch: the training batch (``labels``; ``views`` for ``metric="euclidean"`` or
      unlabelled instances).
    level, metric, num_items, view: as ``hbmp`` takes them.
    num_bits: b, the scale of ``R``.
  Returns:
    ``(m, R, item_labels, index)``: the number of items, ``R`` float32 [m, m], the
    items' labels (class ids int32 [m], label sets bool [m, C], or the instances'
    labels) and the item of each row, int32 [n]. ``R`` of classes and label sets comes
    from their labels, or (``metric="euclidean"``) from the distances of their mean
    features (Eq. 2).
  """
  if level == "instance":
    return _instance_items(batch, metric, num_bits, view)
  m, item_labels, index = label_items(level, labels_of(level, batch), num_items)
  if m < 2:
    what = "classes" if level == "class" else "unique label sets"
    raise ValueError(f"level={level!r} needs at least 2 {what}; got {m}.")
  if metric == "euclidean":
    centroids = _affinity.item_centroids(_api.view_features(batch, view), index, m)
    r = _affinity._affinity_from_distances(_affinity.euclidean_distances(centroids), num_bits)
  elif level == "class":
    r = _affinity.class_affinity(m, num_bits)
  else:
    r = _affinity._label_set_affinity(item_labels, num_bits, metric)
  return m, r, item_labels, index


def row_items(level: str, item_labels: jax.Array, num_items: int, batch: dict) -> jax.Array:
  """The training item of each row of ``batch``: int32 [n].

  Args:
    level: as ``hbmp`` takes it.
    item_labels: the training items' labels (``items_and_affinity``).
    num_items: m, the number of training items.
    batch: its ``labels`` (class ids, or multi-hot rows); at instance level, the
      training set itself.
  """
  labels = batch.get("labels")
  if level == "instance":
    n = _api.view_features(batch, None).shape[0] if labels is None else np.shape(labels)[0]
    if n != num_items:
      raise ValueError(
        f"instance-level HBMP encodes its {num_items} training instances only; got a "
        f"batch of {n} rows (codes of new data come from hash functions, stage ii)."
      )
    return jnp.arange(num_items)
  if labels is None:
    raise ValueError(
      "batch must hold 'labels' to encode by item (codes from features "
      "come from hash functions, stage ii)."
    )
  if level == "class":
    return _class_of_rows(labels, num_items)
  return _nearest_label_set(labels, item_labels)


def _class_of_rows(labels, m: int) -> jax.Array:
  """Class ids in ``[0, m)``, checked: int32 [n]."""
  if _checks.label_array(labels, "labels") != "class_ids":
    raise ValueError(
      f"labels must be class ids [n] for level='class'; got {_checks.describe(labels)}."
    )
  if (
    _checks.is_concrete(labels) and np.size(labels) and (np.min(labels) < 0 or np.max(labels) >= m)
  ):
    raise ValueError(
      f"labels must be class ids in [0, {m}); got values in [{np.min(labels)}, {np.max(labels)}]."
    )
  return jnp.asarray(labels, jnp.int32)


def _nearest_label_set(labels, sets: jax.Array) -> jax.Array:
  """The training label set nearest to each row by Hamming distance: int32 [n].

  Args:
    labels: bool [n, C], multi-hot rows.
    sets: bool [m, C], the training label sets.
  """
  c = sets.shape[1]
  if _checks.label_array(labels, "labels") != "multi_hot" or np.shape(labels)[1] != c:
    raise ValueError(
      f"labels must be multi-hot bool [n, {c}] for level='label_sets'; "
      f"got {_checks.describe(labels)}."
    )
  shared = _affinity.shared_label_counts(labels, sets)
  sizes = jnp.sum(sets, axis=1, dtype=jnp.int32)
  own = jnp.sum(jnp.asarray(labels), axis=1, dtype=jnp.int32)
  differ = own[:, None] + sizes[None, :] - 2 * shared  # Hamming distance of label rows
  return jnp.argmin(differ, axis=1)
