"""Checks of arguments the data modules share: paths, files, and class ids.

Each raises an error that names the argument and says what was expected, where
pathlib or NumPy would raise one that names neither ("expected str, bytes or
os.PathLike object, not NoneType", "[Errno 21] Is a directory").
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from jhash import _checks


def path_argument(value: Any, name: str, what: str) -> pathlib.Path:
  """``value`` as a ``pathlib.Path``: a non-empty str or ``os.PathLike``, else a
  ``TypeError`` naming ``name`` and ``what`` it should name ("an IDX file")."""
  if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
    shown = repr(value) if isinstance(value, str) else _checks.describe(value)
    raise TypeError(f"{name} must be a path (str or os.PathLike) of {what}; got {shown}.")
  return pathlib.Path(value)


def image_paths(value: Any, name: str = "paths") -> list[str]:
  """A non-empty list (or other sequence) of image file paths, as a list of str (as
  written); an entry that is not a str or ``os.PathLike`` raises ``path_argument``'s
  ``TypeError``, naming ``paths[i]``."""
  if isinstance(value, (str, bytes, os.PathLike)) or not isinstance(value, Sequence):
    raise ValueError(f"{name} must be a list of image file paths; got {_checks.describe(value)}.")
  if not value:
    raise ValueError(f"{name} must name at least one image file; got an empty list.")
  for i, path in enumerate(value):
    if not isinstance(path, (str, os.PathLike)):  # (no pathlib.Path of each: lists are long)
      path_argument(path, f"{name}[{i}]", "an image file")
  return [os.fspath(p) for p in value]


def existing_file(value: Any, name: str, what: str) -> pathlib.Path:
  """``path_argument(value, name, what)`` that names a file: ``IsADirectoryError`` for a
  folder, ``FileNotFoundError`` for nothing there, each saying ``what`` was expected."""
  path = path_argument(value, name, what)
  if path.is_dir():
    raise IsADirectoryError(f"{name} {str(path)!r} is a folder; expected {what}.")
  if not path.is_file():
    raise FileNotFoundError(f"{name} {str(path)!r} does not exist; expected {what}.")
  return path


def nonneg_class_ids(labels: Any, name: str) -> None:
  """Class ids (int ``[n]``) must be >= 0, as the metrics require: the one check and
  wording they share (``jhash._checks.nonneg_ids``). Multi-hot labels pass."""
  if np.ndim(labels) == 1 and _checks.dtype_of(labels).kind in "iu":
    _checks.nonneg_ids(labels, name)
