"""CIFAR-10 from a user's copy of its binary release, and the papers' three splits of it.

The binary release (``cifar-10-batches-bin/``) is read byte for byte: each record is 1
label byte then 3,072 pixel bytes (1,024 red, 1,024 green, 1,024 blue, each plane
row-major 32 x 32), 10,000 records a file. The python release is pickled; jhash never
unpickles, so it reads this one. Nothing is downloaded.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np

from jhash import _checks
from jhash.data import _arguments
from jhash.data import _errors
from jhash.data._splits import split_per_class

CIFAR10_FOLDER = "cifar-10-batches-bin"
#: The binary release's files, in the order their records are pooled (train, then test).
CIFAR10_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6)) + ("test_batch.bin",)
CIFAR10_RECORD = 1 + 3 * 32 * 32  # bytes: the label, then the R, G and B planes
CIFAR10_LAYOUT = (
  f"{CIFAR10_FOLDER}/ holding {', '.join(CIFAR10_FILES)} (CIFAR-10's binary release; "
  "root may be that folder or its parent)"
)

#: CIFAR-10 split name -> (queries, training images) per class; the database rule is in
#: ``cifar10_split``. DeepHash-pytorch ``utils/tools.py::cifar_dataset``.
CIFAR10_SPLITS = {"cifar10": (100, 500), "cifar10-1": (100, 500), "cifar10-2": (1_000, 5_000)}


def _batches_folder(root: str | os.PathLike) -> pathlib.Path:
  """``root`` itself or its ``cifar-10-batches-bin`` child, whichever holds the files."""
  root = _arguments.path_argument(root, "root", f"the folder {CIFAR10_FOLDER} (or its parent)")
  if not root.is_dir():
    raise FileNotFoundError(
      f"CIFAR-10 root {str(root)!r} is not a folder; expected {CIFAR10_LAYOUT}."
    )
  lacking = lambda folder: [name for name in CIFAR10_FILES if not (folder / name).is_file()]
  child = root / CIFAR10_FOLDER
  # The child when it is there, unless it lacks files that root itself holds.
  folder = child if child.is_dir() and (lacking(root) or not lacking(child)) else root
  missing = lacking(folder)
  if missing:
    raise FileNotFoundError(
      f"{folder} lacks {len(missing)} of CIFAR-10's binary batch files: "
      f"{', '.join(name + _checks.folder_note(folder / name) for name in missing)}; "
      f"expected {CIFAR10_LAYOUT}."
    )
  return folder


def _read_batch(path: pathlib.Path, records: int | None) -> tuple[np.ndarray, np.ndarray]:
  """One batch file: uint8 images [m, 32, 32, 3] and int32 labels [m]."""
  size = path.stat().st_size
  if size == 0 or size % CIFAR10_RECORD:
    raise _errors.DataFormatError(
      f"{path} holds {size:,} bytes, not a whole number of CIFAR-10 records of "
      f"{CIFAR10_RECORD:,} bytes (1 label byte + 3,072 pixel bytes); is it the binary "
      "release's file, whole?"
    )
  if records is not None and size != records * CIFAR10_RECORD:
    raise _errors.DataFormatError(
      f"{path} holds {size // CIFAR10_RECORD:,} records; a CIFAR-10 batch file holds "
      f"{records:,} ({records * CIFAR10_RECORD:,} bytes)."
    )
  raw = np.fromfile(path, np.uint8).reshape(-1, CIFAR10_RECORD)
  labels = raw[:, 0].astype(np.int32)
  if labels.max() > 9:
    bad = int(np.argmax(labels > 9))
    raise _errors.DataFormatError(
      f"{path}: record {bad} has label byte {labels[bad]}; CIFAR-10's labels are 0..9 "
      f"({int((labels > 9).sum())} records are out of range)."
    )
  images = raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # planes -> [H, W, RGB]
  return np.ascontiguousarray(images), labels


def read_cifar10_binary(
  root: str | os.PathLike, *, records_per_file: int | None = 10_000
) -> tuple[np.ndarray, np.ndarray]:
  """CIFAR-10's 60,000 images from a user's copy of the binary release (module docstring).

  Args:
    root: the ``cifar-10-batches-bin`` folder, or the folder that holds it.
    records_per_file: the records each file must hold: 10,000 in the release; ``None``
      accepts any whole number (a cut-down copy).
  Returns:
    ``(images, labels)``: uint8 ``[n, 32, 32, 3]`` (RGB) and int32 ``[n]`` in 0..9, the
    five training batches then the test batch (60,000 items from the release). A
    missing file, a file that is not whole records (or not ``records_per_file`` of
    them), or a label byte over 9 raises an error naming the file and what was expected.
  """
  if records_per_file is not None:
    records_per_file = _checks.positive_int(records_per_file, "records_per_file")
  folder = _batches_folder(root)
  parts = [_read_batch(folder / name, records_per_file) for name in CIFAR10_FILES]
  return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _split_sizes(labels: np.ndarray, name: str, query_per_class, train_per_class):
  """``(q, t)`` per class, defaults from ``CIFAR10_SPLITS``, refused (naming the options
  and the sizes) when a split would be empty: no query, no training image, or a class
  left without database images (``cifar10``'s database is the rest)."""
  q, t = CIFAR10_SPLITS[name]
  q = _checks.positive_int(q if query_per_class is None else query_per_class, "query_per_class")
  t = _checks.positive_int(t if train_per_class is None else train_per_class, "train_per_class")
  counts = np.unique(labels, return_counts=True)[1]
  smallest = int(counts.min()) if counts.size else 0
  if name == "cifar10" and q + t >= smallest:
    raise ValueError(
      f"cifar10: query_per_class + train_per_class = {q + t} must be below {smallest}, the "
      "images of the smallest class, so that every class keeps database images (cifar10's "
      f"database is the rest); got query_per_class={q} and train_per_class={t}."
    )
  if q + t > smallest:
    raise ValueError(
      f"{name}: query_per_class + train_per_class = {q + t} exceeds {smallest}, the images "
      f"of the smallest class; got query_per_class={q} and train_per_class={t}."
    )
  return q, t


def cifar10_split(
  labels: np.ndarray,
  name: str,
  seed: int,
  query_per_class: int | None = None,
  train_per_class: int | None = None,
) -> dict[str, np.ndarray]:
  """The ``cifar10`` / ``cifar10-1`` / ``cifar10-2`` split of the pooled images.

  As DeepHash-pytorch (``utils/tools.py::cifar_dataset``): each class shuffled, its first
  ``query_per_class`` images the queries, the next ``train_per_class`` the training
  images, the rest the "rest". The database: the rest (``cifar10``: 54,000), the training
  images and the rest (``cifar10-1``: 59,000), the training images (``cifar10-2``:
  50,000). DeepHash-pytorch's shuffle is unseeded (``np.random.permutation``); this one
  is drawn by ``seed`` (``split_per_class``), so the same seed gives the same split.

  Args:
    labels: int class ids [n] of the pooled images (``read_cifar10_binary``).
    name: "cifar10", "cifar10-1" or "cifar10-2".
    seed: the split's seed.
    query_per_class, train_per_class: per class, each >= 1; None: the split's
      (``CIFAR10_SPLITS``). Their sum may not exceed the smallest class (``cifar10``: it
      must leave that class a database image): no split is ever empty.
  Returns:
    ``{"query", "train", "database"}``: sorted int64 indices; queries are in neither of
    the others. Class ids must be >= 0 (as the metrics'), else a ``ValueError``.
  """
  if name not in CIFAR10_SPLITS:
    raise ValueError(f"name must be one of {', '.join(CIFAR10_SPLITS)}; got {name!r}.")
  labels = np.asarray(labels)
  if _checks.label_array(labels, "labels") != "class_ids":
    raise ValueError(f"labels must be integer class ids [n]; got {_checks.describe(labels)}.")
  _arguments.nonneg_class_ids(labels, "labels")
  q, t = _split_sizes(labels, name, query_per_class, train_per_class)
  split = split_per_class(labels, q, t, seed=seed)
  rest = np.setdiff1d(split["database"], split["train"], assume_unique=True)
  database = {"cifar10": rest, "cifar10-1": split["database"], "cifar10-2": split["train"]}
  return {"query": split["query"], "train": split["train"], "database": database[name]}
