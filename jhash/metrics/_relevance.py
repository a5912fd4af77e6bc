"""Relevance of database items to queries, from labels.

Labels are class ids (int [n], each >= 0: a negative id, such as -1 for "unlabelled",
is refused) or multi-hot sets (bool [n, C]). Three rules:

* ``"same_class"``: relevant when the class ids are equal (multi-hot: the label sets equal);
* ``"share_label"``: relevant when the label sets share at least one label
  (for class ids this is the same as ``"same_class"``);
* ``"graded"``: the number of shared labels (int; 1 or 0 for class ids), for NDCG.

``"auto"`` is ``"same_class"`` for class ids and ``"share_label"`` for multi-hot labels.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks

KINDS = ("auto", "same_class", "share_label", "graded")
# What a metric of relevant / not relevant items takes (mAP, precision, recall, radius
# curves); "graded" is NDCG's own.
BINARY_KINDS = ("auto", "same_class", "share_label")


def resolve(kind: str, labels, allowed: tuple[str, ...] = BINARY_KINDS) -> str:
  """The concrete rule for ``kind`` (one of ``allowed``) given the label layout."""
  if not isinstance(kind, str) or kind not in allowed:
    raise ValueError(f"relevance must be one of {', '.join(map(repr, allowed))}; got {kind!r}.")
  if kind == "auto":
    return "same_class" if np.ndim(labels) == 1 else "share_label"
  return kind


def max_grade(labels) -> int:
  """Largest possible graded relevance: 1 for class ids, C for multi-hot [n, C]."""
  return 1 if np.ndim(labels) == 1 else int(np.shape(labels)[1])


def relevance(query_labels: jax.Array, db_labels: jax.Array, kind: str) -> jax.Array:
  """Relevance matrix of a chunk of queries against the database.

  Args:
    query_labels: int [q] or bool [q, C].
    db_labels: int [n] or bool [n, C] (the same layout).
    kind: "same_class", "share_label" or "graded" (already resolved).
  Returns:
    bool [q, n], or int32 [q, n] for "graded".
  """
  if kind not in KINDS[1:]:
    raise ValueError(f"kind must be one of {KINDS[1:]}; got {kind!r}.")
  rows = [
    np.shape(x)[0] if np.ndim(x) else name for x, name in ((query_labels, "q"), (db_labels, "n"))
  ]
  check_labels(query_labels, db_labels, *rows)
  return relevance_matrix(jnp.asarray(query_labels), jnp.asarray(db_labels), kind)


def relevance_matrix(query_labels: jax.Array, db_labels: jax.Array, kind: str) -> jax.Array:
  """``relevance`` without its checks, for the metrics' own chunks (checked once, up front)."""
  if query_labels.ndim == 1:
    same = query_labels[:, None] == db_labels[None, :]
    return same.astype(jnp.int32) if kind == "graded" else same
  if kind == "same_class":
    return jnp.all(query_labels[:, None, :] == db_labels[None, :, :], axis=-1)
  shared = jnp.dot(
    query_labels.astype(jnp.float32),
    db_labels.astype(jnp.float32).T,
    precision=jax.lax.Precision.HIGHEST,
  )
  if kind == "graded":
    return jnp.round(shared).astype(jnp.int32)
  return shared > 0.5


def check_labels(query_labels, db_labels, num_queries: int, num_items: int) -> None:
  """Labels must match the codes in count and each other in layout; class ids >= 0."""
  for name, lab, n in (
    ("query_labels", query_labels, num_queries),
    ("db_labels", db_labels, num_items),
  ):
    nd = np.ndim(lab)
    if nd not in (1, 2) or np.shape(lab)[0] != n:
      raise ValueError(
        f"{name} must have shape [{n}] (class ids) or [{n}, C] (multi-hot); "
        f"got shape {tuple(np.shape(lab))}."
      )
    dtype = np.dtype(lab.dtype if hasattr(lab, "dtype") else np.asarray(lab).dtype)
    if nd == 1 and not np.issubdtype(dtype, np.integer):
      raise ValueError(f"{name} as class ids must be integer; got dtype {dtype}.")
    if nd == 1:
      _checks.int32_ids(lab, name)
      _checks.nonneg_ids(lab, name)
    _checks.label_columns(lab, name)
    if nd == 2 and not (dtype == np.bool_ or np.issubdtype(dtype, np.integer)):
      raise ValueError(f"{name} as multi-hot must be bool (or 0/1 integers); got dtype {dtype}.")
    if nd == 2 and dtype != np.bool_ and not isinstance(lab, jax.core.Tracer):
      bad = np.asarray(lab)[(np.asarray(lab) != 0) & (np.asarray(lab) != 1)]
      if bad.size:
        raise ValueError(
          f"{name} as multi-hot [n, C] must hold only 0 and 1 (or be bool); found "
          f"{np.unique(bad)[:5].tolist()} in shape {tuple(np.shape(lab))}. Class ids go "
          "in a 1-D array [n]."
        )
  if np.ndim(query_labels) != np.ndim(db_labels) or (
    np.ndim(query_labels) == 2 and np.shape(query_labels)[1] != np.shape(db_labels)[1]
  ):
    raise ValueError(
      "query_labels and db_labels must have the same layout; got shapes "
      f"{tuple(np.shape(query_labels))} and {tuple(np.shape(db_labels))}."
    )
