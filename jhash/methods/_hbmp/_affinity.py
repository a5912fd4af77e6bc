"""HBMP's items and their affinity matrix ``R`` (Cakir et al., Eq. 2 and Section 3.2).

The pursuit fits an affinity between *items*: classes, the label combinations of a
multi-label training set, or the training instances themselves. With a metric ``d`` on
the items and ``b`` bits,

    R_ij = b - 2 gamma d(x_i, x_j),    gamma = b / d_max,                    (Eq. 2)

so ``R`` lies in ``[-b, b]``; for a 0/1 similarity ``S`` (``d = 1 - S``) this is
``R = b (2S - 1)``. Only the off-diagonal entries are fitted (see ``_pursuit``), so the
diagonal of ``R`` never matters.

Three families of items, each with its affinity:

* classes (``class_affinity``): ``R = b (2I - 1)``, the paper's Figure 1(a);
* label sets (``unique_label_sets`` then ``label_set_affinity``): the unique multi-hot
  rows of the training set; ``"share"`` is the binary "share at least one label",
  ``"shared_count"`` the number of shared labels scaled into ``[-b, b]``;
* instances (``instance_affinity``): the training rows, by class or label set, or
  ``feature_affinity`` from Euclidean distances of features (also usable on item
  centroids, ``item_centroids``, for class or label-set items).

Public functions check concrete inputs at the door and raise ``ValueError`` naming the
argument; they are traceable (except ``unique_label_sets``, whose output size depends on
the data).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jhash import _checks

METRICS = ("share", "shared_count", "euclidean")


def _check_square(x, name: str, what: str) -> int:
  _checks.rank(x, 2, name, f"(a square [n, n] {what})")
  n, m = np.shape(x)
  if n != m:
    raise ValueError(f"{name} must be a square [n, n] {what}; got {_checks.describe(x)}.")
  return int(n)


def check_affinity(affinity, name: str = "affinity") -> int:
  """Check an affinity matrix at the door; return the number of items ``n``.

  Expected: a real, finite, symmetric ``[n, n]`` array with ``n >= 2`` (the fit is on
  the off-diagonal entries, so one item has nothing to fit). Symmetry is checked to
  ``1e-5`` of the largest entry. Values are checked only on concrete arrays.

  Raises:
    ValueError: naming ``name``, with what was expected and what was received.
  """
  n = _check_square(affinity, name, "affinity matrix")
  if n < 2:
    raise ValueError(
      f"{name} must hold at least 2 items (the pursuit fits the off-diagonal "
      f"entries); got {_checks.describe(affinity)}."
    )
  dtype = np.dtype(affinity.dtype) if hasattr(affinity, "dtype") else np.asarray(affinity).dtype
  if dtype.kind not in "iuf":
    raise ValueError(f"{name} must hold real numbers; got {_checks.describe(affinity)}.")
  _checks.finite(affinity, name)
  if _checks.is_concrete(affinity):
    a = np.asarray(affinity, np.float64)
    asym = np.max(np.abs(a - a.T))
    scale = max(np.max(np.abs(a)), np.finfo(np.float32).tiny)
    if asym > 1e-5 * scale:
      i, j = np.unravel_index(np.argmax(np.abs(a - a.T)), a.shape)
      raise ValueError(
        f"{name} must be symmetric (R[i, j] == R[j, i]); got {_checks.describe(affinity)} "
        f"with R[{i}, {j}] = {a[i, j]:.6g} but R[{j}, {i}] = {a[j, i]:.6g}."
      )
  return n


def affinity_from_distances(distances, num_bits: int) -> jax.Array:
  """``R = b - 2 gamma d`` with ``gamma = b / d_max`` (Eq. 2).

  Args:
    distances: float [n, n], symmetric, non-negative, finite.
    num_bits: b, the code length the affinity is scaled to.
  Returns:
    float32 [n, n] in ``[-b, b]`` (all ``b`` when every distance is 0).
  """
  num_bits = _checks.positive_int(num_bits, "num_bits")
  check_affinity(distances, "distances")
  if _checks.is_concrete(distances) and np.min(np.asarray(distances)) < 0:
    raise ValueError(
      f"distances must be non-negative; got minimum "
      f"{np.min(np.asarray(distances)):.6g} in {_checks.describe(distances)}."
    )
  return _affinity_from_distances(jnp.asarray(distances, jnp.float32), num_bits)


def _affinity_from_distances(d: jax.Array, num_bits: int) -> jax.Array:
  d_max = jnp.max(d)
  gamma = jnp.where(d_max > 0, num_bits / jnp.where(d_max > 0, d_max, 1.0), 0.0)
  return num_bits - 2.0 * gamma * d


def affinity_from_similarity(similarity, num_bits: int) -> jax.Array:
  """``R = b (2S - 1)`` for a 0/1 (or bool) similarity ``S`` (Eq. 2 with ``d = 1 - S``).

  Args:
    similarity: bool or 0/1 [n, n], symmetric.
    num_bits: b.
  Returns:
    float32 [n, n] with entries in {-b, +b}.
  """
  num_bits = _checks.positive_int(num_bits, "num_bits")
  s = jnp.asarray(similarity, jnp.float32)
  check_affinity(s, "similarity")
  return num_bits * (2.0 * s - 1.0)


def class_affinity(num_classes: int, num_bits: int) -> jax.Array:
  """Class-level affinity ``R = b (2I - 1)`` (the paper's Figure 1(a)).

  Args:
    num_classes: n, the number of classes (items), at least 2.
    num_bits: b.
  Returns:
    float32 [n, n]: ``b`` on the diagonal, ``-b`` elsewhere.
  """
  n = _checks.positive_int(num_classes, "num_classes")
  if n < 2:
    raise ValueError(f"num_classes must be at least 2; got {n}.")
  num_bits = _checks.positive_int(num_bits, "num_bits")
  return num_bits * (2.0 * jnp.eye(n, dtype=jnp.float32) - 1.0)


class LabelSets(NamedTuple):
  """The unique label combinations of a multi-label set."""

  sets: np.ndarray  # bool [m, C], the unique rows, in lexicographic order
  index: np.ndarray  # int32 [n], the set of each input row: labels == sets[index]


def unique_label_sets(labels) -> LabelSets:
  """The unique multi-hot rows of a training set and each row's set (NumPy, eager).

  Args:
    labels: bool [n, C] multi-hot.
  Returns:
    ``LabelSets(sets bool [m, C], index int32 [n])`` with ``labels == sets[index]``;
    rows in lexicographic order (as ``np.unique(..., axis=0)`` and ``jnp.unique``).
  """
  if _checks.label_array(labels, "labels") != "multi_hot":
    raise ValueError(
      f"labels must be multi-hot bool [n, C] for label sets; got {_checks.describe(labels)}."
    )
  if not _checks.is_concrete(labels):
    raise ValueError(
      "unique_label_sets needs concrete labels (its output size depends on "
      "the data); call it outside jit."
    )
  a = np.asarray(labels, bool)
  if a.shape[0] == 0:
    raise ValueError(f"labels must hold at least one row; got {_checks.describe(a)}.")
  sets, index = np.unique(a, axis=0, return_inverse=True)
  return LabelSets(sets, index.reshape(-1).astype(np.int32))


def shared_label_counts(sets_a: jax.Array, sets_b: jax.Array) -> jax.Array:
  """Number of labels two multi-hot rows share, for all pairs: int32 [m, m']."""
  a = jnp.asarray(sets_a, jnp.float32)
  b = jnp.asarray(sets_b, jnp.float32)
  counts = lax.dot_general(a, b, (((1,), (1,)), ((), ())), precision=lax.Precision.HIGHEST)
  return jnp.round(counts).astype(jnp.int32)


def label_set_affinity(sets, num_bits: int, metric: str = "share") -> jax.Array:
  """Affinity between label sets (multi-hot rows).

  * ``"share"``: ``R = b (2S - 1)``, ``S_ij = 1`` when the sets share at least one label;
  * ``"shared_count"``: ``R_ij = b (2 s_ij / s_max - 1)`` with ``s_ij`` the number of
    shared labels and ``s_max`` its largest off-diagonal value (Eq. 2 with the metric
    ``d = s_max - s`` on the pairs; ``R = -b`` everywhere off the diagonal when no pair
    shares a label). The diagonal is set to ``b``.

  Args:
    sets: bool [m, C], one label set per row (e.g. ``unique_label_sets(labels).sets``).
    num_bits: b.
    metric: "share" or "shared_count".
  Returns:
    float32 [m, m].
  """
  num_bits = _checks.positive_int(num_bits, "num_bits")
  _check_metric(metric, ("share", "shared_count"))
  if _checks.label_array(sets, "sets") != "multi_hot":
    raise ValueError(f"sets must be multi-hot bool [m, C]; got {_checks.describe(sets)}.")
  return _label_set_affinity(jnp.asarray(sets), num_bits, metric)


def _label_set_affinity(sets: jax.Array, num_bits: int, metric: str) -> jax.Array:
  counts = shared_label_counts(sets, sets).astype(jnp.float32)
  m = counts.shape[0]
  eye = jnp.eye(m, dtype=bool)
  if metric == "share":
    r = num_bits * (2.0 * (counts > 0) - 1.0)
  else:
    s_max = jnp.max(jnp.where(eye, 0.0, counts))
    r = num_bits * (2.0 * counts / jnp.where(s_max > 0, s_max, 1.0) - 1.0)
    r = jnp.clip(r, -num_bits, num_bits)
  return jnp.where(eye, float(num_bits), r)


def euclidean_distances(features: jax.Array) -> jax.Array:
  """All-pairs Euclidean distances of rows: float [n, d] -> float32 [n, n], zero diagonal."""
  x = jnp.asarray(features, jnp.float32)
  x = x - jnp.mean(x, axis=0)[None, :]  # same distances, less cancellation
  sq = jnp.sum(x * x, axis=1)
  gram = lax.dot_general(x, x, (((1,), (1,)), ((), ())), precision=lax.Precision.HIGHEST)
  d2 = jnp.maximum(sq[:, None] + sq[None, :] - 2.0 * gram, 0.0)
  d = jnp.sqrt(d2)
  d = 0.5 * (d + d.T)
  return jnp.where(jnp.eye(x.shape[0], dtype=bool), 0.0, d)


def feature_affinity(features, num_bits: int) -> jax.Array:
  """Affinity from Euclidean distances of features: Eq. 2 with ``d = ||x_i - x_j||``.

  Args:
    features: float [n, d] (instances, or item centroids from ``item_centroids``).
    num_bits: b.
  Returns:
    float32 [n, n] in ``[-b, b]``.
  """
  num_bits = _checks.positive_int(num_bits, "num_bits")
  _checks.rank(features, 2, "features", "[n, d]")
  if np.shape(features)[0] < 2:
    raise ValueError(
      f"features must hold at least 2 rows (items); got {_checks.describe(features)}."
    )
  _checks.finite(features, "features")
  return _affinity_from_distances(euclidean_distances(features), num_bits)


def item_centroids(features: jax.Array, item_index: jax.Array, num_items: int) -> jax.Array:
  """Mean feature vector of the instances of each item (classes or label sets).

  Args:
    features: float [n, d].
    item_index: int [n], the item of each instance, in ``[0, num_items)``.
    num_items: m (static).
  Returns:
    float32 [m, d]; an item with no instance gets the zero vector.
  """
  x = jnp.asarray(features, jnp.float32)
  sums = jax.ops.segment_sum(x, item_index, num_segments=num_items)
  counts = jax.ops.segment_sum(
    jnp.ones(x.shape[0], jnp.float32), item_index, num_segments=num_items
  )
  return sums / jnp.maximum(counts, 1.0)[:, None]


def instance_affinity(labels, num_bits: int, metric: str = "share") -> jax.Array:
  """Instance-level affinity from labels (the paper's Figure 1(b)).

  Class ids: ``R = b (2 [y_i = y_j] - 1)``. Multi-hot labels: ``label_set_affinity`` of
  the rows (``"share"`` or ``"shared_count"``). Feature distances: ``feature_affinity``.

  Args:
    labels: int [n] class ids or bool [n, C] multi-hot.
    num_bits: b.
    metric: "share" (either kind) or "shared_count" (multi-hot only).
  Returns:
    float32 [n, n].
  """
  num_bits = _checks.positive_int(num_bits, "num_bits")
  kind = _checks.label_array(labels, "labels")
  if kind == "class_ids":
    _check_metric(metric, ("share",))
    y = jnp.asarray(labels)
    return num_bits * (2.0 * (y[:, None] == y[None, :]) - 1.0)
  return label_set_affinity(labels, num_bits, metric)


def _check_metric(metric, allowed) -> None:
  if metric not in allowed:
    raise ValueError(f"metric must be one of {', '.join(map(repr, allowed))} here; got {metric!r}.")
