"""Query / train / database splits as the hashing papers' protocols draw them.

Every split returns ``{"query", "train", "database"}``: sorted int64 index
arrays into the data set. ``database`` is every item that is not a query, and
``train`` is drawn from the database (the common protocol: training items are
also retrieved, queries never are). The same seed gives the same split.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jhash import _checks


def _result(n: int, query: np.ndarray, train: np.ndarray) -> dict[str, np.ndarray]:
  in_query = np.zeros(n, bool)
  in_query[query] = True
  return {
    "query": np.sort(query).astype(np.int64),
    "train": np.sort(train).astype(np.int64),
    "database": np.flatnonzero(~in_query).astype(np.int64),
  }


def split_per_class(
  labels: Any, num_query_per_class: int, num_train_per_class: int, seed: int = 0
) -> dict[str, np.ndarray]:
  """Queries and training items drawn per class (the CIFAR-10 protocol).

  From each class, ``num_query_per_class`` random items become queries and
  ``num_train_per_class`` other random items of the class become training items.
  CIFAR-10 as most papers use it: 100 and 500 per class, so 1000 queries, 5000
  training items, and a database of the other 59,000 images.

  Args:
    labels: int class ids ``[n]``.
    num_query_per_class: queries per class, >= 0.
    num_train_per_class: training items per class, >= 0.
    seed: seed of the NumPy generator.
  Returns:
    ``{"query", "train", "database"}``: sorted int64 indices; ``train`` is
    a subset of ``database``, which holds every non-query item. A class with
    fewer than ``num_query_per_class + num_train_per_class`` items raises
    ``ValueError``.
  """
  labels = np.asarray(labels)
  if _checks.label_array(labels, "labels") != "class_ids":
    raise ValueError(
      f"labels must be integer class ids [n]; got {_checks.describe(labels)} "
      f"(for multi-hot labels use split_per_label)."
    )
  q = _checks.nonneg_int(num_query_per_class, "num_query_per_class")
  t = _checks.nonneg_int(num_train_per_class, "num_train_per_class")
  classes, counts = np.unique(labels, return_counts=True)
  if counts.size and counts.min() < q + t:
    short = classes[counts < q + t]
    raise ValueError(
      f"labels: class {int(short[0])} has {int(counts[classes == short[0]][0])} "
      f"items, fewer than num_query_per_class + num_train_per_class = {q + t} "
      f"({short.size} classes are short)."
    )
  rng = np.random.default_rng(_checks.seed(seed))
  shuffled = rng.permutation(labels.shape[0])
  order = shuffled[np.argsort(labels[shuffled], kind="stable")]  # by class, random within
  start = np.searchsorted(labels[order], labels[order], side="left")
  rank = np.arange(order.size) - start  # position of each item within its class
  return _result(labels.shape[0], order[rank < q], order[(rank >= q) & (rank < q + t)])


def split_random(n: int, num_query: int, num_train: int, seed: int = 0) -> dict[str, np.ndarray]:
  """Queries and training items drawn uniformly (MS-COCO, MIRFlickr protocols).

  Args:
    n: number of items.
    num_query: queries (MS-COCO: 5000).
    num_train: training items, drawn from the non-queries (MS-COCO: 10,000).
    seed: seed of the NumPy generator.
  Returns:
    ``{"query", "train", "database"}``: sorted int64 indices, ``train`` a subset
    of ``database`` = every non-query item.
  """
  n = _checks.nonneg_int(n, "n")
  q = _checks.nonneg_int(num_query, "num_query")
  t = _checks.nonneg_int(num_train, "num_train")
  if q + t > n:
    raise ValueError(f"num_query + num_train = {q + t} exceeds n = {n}.")
  order = np.random.default_rng(_checks.seed(seed)).permutation(n)
  return _result(n, order[:q], order[q : q + t])


def split_per_label(
  labels: Any, num_query_per_label: int, num_train_per_label: int, seed: int = 0
) -> dict[str, np.ndarray]:
  """Queries and training items drawn per label of multi-label data (NUS-WIDE protocol).

  For each label in turn (column 0 first), ``num_query_per_label`` queries and
  then ``num_train_per_label`` training items are drawn at random among the
  items that carry the label and were not drawn before. An item carries
  several labels, so a label ends up with at least, and usually more than, the
  asked number of queries. NUS-WIDE (21 concepts) as the papers use it: 100
  queries and 500 training images per label.

  Args:
    labels: multi-hot bool ``[n, C]``.
    num_query_per_label: queries drawn per label, >= 0.
    num_train_per_label: training items drawn per label, >= 0.
    seed: seed of the NumPy generator.
  Returns:
    ``{"query", "train", "database"}``: sorted int64 indices; ``train`` is a
    subset of ``database`` = every non-query item. A label whose undrawn items
    run short raises ``ValueError``. Items with no label are never drawn.
  """
  labels = np.asarray(labels)
  if _checks.label_array(labels, "labels") != "multi_hot":
    raise ValueError(
      f"labels must be multi-hot bool [n, C]; got {_checks.describe(labels)} "
      f"(for class ids use split_per_class)."
    )
  q = _checks.nonneg_int(num_query_per_label, "num_query_per_label")
  t = _checks.nonneg_int(num_train_per_label, "num_train_per_label")
  rng = np.random.default_rng(_checks.seed(seed))
  drawn = np.zeros(labels.shape[0], bool)
  queries, train = [], []
  for c in range(labels.shape[1]):
    pool = np.flatnonzero(labels[:, c] & ~drawn)
    if pool.size < q + t:
      raise ValueError(
        f"labels: label {c} has only {pool.size} items not drawn for earlier "
        f"labels, fewer than num_query_per_label + num_train_per_label = {q + t}."
      )
    chosen = rng.choice(pool, size=q + t, replace=False)
    drawn[chosen] = True
    queries.append(chosen[:q])
    train.append(chosen[q:])
  empty = np.zeros(0, np.int64)
  return _result(
    labels.shape[0], np.concatenate(queries or [empty]), np.concatenate(train or [empty])
  )


def _check_limit(limit) -> None:
  """``database_limit``: None or an int >= 1 (checked before any data is read)."""
  if limit is not None:
    _checks.positive_int(limit, "database_limit")


def _limit(database: np.ndarray, limit: int | None, seed: int) -> np.ndarray:
  """A random subset of ``limit`` database indices (sorted), or all of them."""
  _check_limit(limit)
  if limit is None or limit >= database.size:
    return database
  keep = np.random.default_rng(seed).permutation(database.size)[:limit]
  return np.sort(database[keep])
