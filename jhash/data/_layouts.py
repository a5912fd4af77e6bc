"""Readers for the dataset layouts that hashing papers' toolboxes ship.

The papers' own datasets (MIRFlickr, NUS-WIDE, MS-COCO, Wiki, CIFAR-10) are not
shipped by any package; users bring their copies in one of two layouts:

* cross-modal ``.mat`` files: image features ``I_*``, text features ``T_*`` and
  labels ``L_*`` for the splits ``tr`` (train), ``te`` (test = queries) and
  optionally ``db`` (database), as the cross-modal hashing toolboxes ship them;
* image lists: a text file with one line per image, ``path 0 1 0 0 1 ...``, as
  the deep hashing toolboxes' ``train.txt`` / ``test.txt`` / ``database.txt``.
"""

from __future__ import annotations

import codecs
import io
import os
import pathlib
from typing import Any, NamedTuple

import numpy as np

from jhash import _checks
from jhash.data import _arguments
from jhash.data import _errors
from jhash.data._dataset import Dataset
from jhash.data._dataset import make_dataset

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_MAT_SPLITS = {"tr": "train", "te": "test", "db": "database"}
_SHOWN_MISSING = 5  # missing image files named in the error
_IMAGE_LIST = "an image list file (one image a line: its path, then its 0/1 labels)"


def mat_file_format(path: str | os.PathLike) -> str:
  """``"hdf5"`` for a v7.3 MAT-file (or plain HDF5), else ``"classic"`` (v4 to v7).

  A v7.3 file's arrays are column-major (MATLAB's) and are read transposed; a plain HDF5
  file's (written by h5py from NumPy, with no MATLAB header and no ``MATLAB_class``
  attribute) are row-major and read as they are: rows are items in both.

  A v7.3 MAT-file is an HDF5 file with a 512-byte user block: it begins with the
  text ``MATLAB 7.3 MAT-file`` and has the HDF5 signature at byte 512.
  """
  path = _arguments.existing_file(path, "path", "a .mat file")
  with open(path, "rb") as f:
    head = f.read(520)
  if head[:8] == HDF5_SIGNATURE or head[512:520] == HDF5_SIGNATURE:
    return "hdf5"
  if head.startswith(b"MATLAB 7.3"):
    raise _errors.DataFormatError(
      f"{path} says it is a v7.3 MAT-file but has no HDF5 signature at byte 512: "
      f"the file is truncated or corrupt."
    )
  return "classic"


def _read_classic(path: pathlib.Path) -> dict[str, np.ndarray]:
  import scipy.io
  import scipy.sparse

  try:
    contents = scipy.io.loadmat(path)
  except Exception as e:  # scipy raises ValueError, TypeError, MatReadError...
    raise _errors.DataFormatError(f"{path} could not be read as a MAT-file ({e}).") from e
  out = {}
  for key, value in contents.items():
    if key.startswith("__"):
      continue
    out[key] = value.toarray() if scipy.sparse.issparse(value) else np.asarray(value)
  return out


def _read_hdf5_entry(path: pathlib.Path, key: str, entry: Any, matlab: bool) -> np.ndarray:
  import h5py

  if isinstance(entry, h5py.Dataset):
    # MATLAB writes column-major arrays, which h5py reads with the axes reversed; a plain
    # HDF5 file (h5py's, NumPy's row-major arrays) is read as it is.
    value = np.asarray(entry[()])
    return value.T if matlab or "MATLAB_class" in entry.attrs else value
  if isinstance(entry, h5py.Group) and {"data", "ir", "jc"} <= set(entry.keys()):
    import scipy.sparse

    # A MATLAB sparse matrix: compressed columns, ``MATLAB_sparse`` = row count.
    if "MATLAB_sparse" not in entry.attrs:
      raise _errors.DataFormatError(
        f"{path}: '{key}' looks like a MATLAB sparse matrix (data, ir, jc) but lacks its "
        "MATLAB_sparse attribute (the row count): the file is damaged or not MATLAB's."
      )
    num_rows = int(entry.attrs["MATLAB_sparse"])
    jc = np.asarray(entry["jc"][()]).ravel()
    matrix = scipy.sparse.csc_matrix(
      (np.asarray(entry["data"][()]).ravel(), np.asarray(entry["ir"][()]).ravel(), jc),
      shape=(num_rows, jc.size - 1),
    )
    return matrix.toarray()
  raise _errors.DataFormatError(f"{path}: '{key}' is not a numeric array (got {entry!r}).")


def _read_hdf5(path: pathlib.Path, keys: list[str]) -> dict[str, np.ndarray]:
  import h5py

  try:
    f = h5py.File(path, "r")
  except OSError as e:
    raise _errors.DataFormatError(f"{path} could not be read as a v7.3 MAT-file ({e}).") from e
  with open(path, "rb") as raw:
    matlab = raw.read(10) == b"MATLAB 7.3"  # the header of MATLAB's user block
  with f:
    return {k: _read_hdf5_entry(path, k, f[k], matlab) for k in keys if k in f}


def _read_mat(path: pathlib.Path, keys: list[str]) -> dict[str, np.ndarray]:
  if mat_file_format(path) == "hdf5":
    return _read_hdf5(path, keys)
  contents = _read_classic(path)
  return {k: contents[k] for k in keys if k in contents}


def _as_features(value: np.ndarray, key: str, path: pathlib.Path) -> np.ndarray:
  if value.ndim != 2 or value.dtype.kind not in "biuf":
    raise _errors.DataFormatError(
      f"{path}: '{key}' must be a 2-D numeric matrix [n, d]; got shape {value.shape}, "
      f"dtype {value.dtype}."
    )
  with np.errstate(over="ignore"):
    value = value.astype(np.float32)
  if not np.isfinite(value).all():
    row = int(np.flatnonzero(~np.isfinite(value).all(axis=1))[0])
    raise _errors.DataFormatError(
      f"{path}: '{key}' holds NaN or inf (or values beyond float32's range), first in row "
      f"{row}; features must be finite."
    )
  return value


def _label_matrix(
  value: np.ndarray, n: int, key: str, path: pathlib.Path
) -> tuple[str, np.ndarray]:
  """(``"ids"``, float [n]) for class indices, (``"multi_hot"``, [n, C]) otherwise."""
  if value.dtype.kind not in "biuf":  # a cell array reads as objects
    raise _errors.DataFormatError(
      f"{path}: '{key}' must be a numeric label matrix; got dtype {value.dtype} (a cell "
      "array? store the labels as a numeric matrix)."
    )
  if value.ndim == 1 and value.size == n:
    return "ids", value
  if value.ndim == 2 and value.shape[0] == n and value.shape[1] == 1:
    return "ids", value[:, 0]
  if value.ndim == 2 and value.shape == (1, n):
    return "ids", value[0]
  if value.ndim == 2 and value.shape[0] == n:
    if not np.isin(value, (0, 1)).all():
      raise _errors.DataFormatError(
        f"{path}: '{key}' has {value.shape[1]} columns, so it is read as multi-hot labels, "
        f"but it holds values other than 0 and 1."
      )
    return "multi_hot", value
  raise _errors.DataFormatError(
    f"{path}: '{key}' must be labels for the {n} items of the split: multi-hot [{n}, C] or "
    f"class indices [{n}] / [{n}, 1]; got shape {value.shape}."
  )


def _decode_class_ids(
  ids: dict[str, np.ndarray], path: pathlib.Path, class_index_base: int | None
) -> dict[str, np.ndarray]:
  values = np.concatenate(list(ids.values()))
  if values.size and not np.array_equal(values, np.round(values)):
    raise _errors.DataFormatError(f"{path}: class indices must be whole numbers.")
  if class_index_base is None:
    class_index_base = 0 if (values.size and values.min() == 0) else 1
  if values.size and values.min() < class_index_base:
    raise _errors.DataFormatError(
      f"{path}: class indices must be >= {class_index_base} (class_index_base); found "
      f"{values.min():g}."
    )
  return {k: (v - class_index_base).astype(np.int32) for k, v in ids.items()}


def _check_same_widths(path, splits, features, labels, kinds) -> None:
  """Every split of the file with the same feature widths per view and label columns."""
  first = splits[0]
  for s in splits[1:]:
    for v, name in enumerate("IT"):
      a, b = features[first][v].shape[1], features[s][v].shape[1]
      if a != b:
        raise _errors.DataFormatError(
          f"{path}: {name}_{s} has {b} columns but {name}_{first} has {a}; every split must "
          "describe its items with the same features."
        )
    if kinds[s] == kinds[first] == "multi_hot" and labels[s].shape[1] != labels[first].shape[1]:
      raise _errors.DataFormatError(
        f"{path}: L_{s} has {labels[s].shape[1]} label columns but L_{first} has "
        f"{labels[first].shape[1]}; every split must label the same classes."
      )


def load_cross_modal_mat(
  path: str | os.PathLike, *, class_index_base: int | None = None
) -> dict[str, Dataset]:
  """Image-text data from a cross-modal hashing ``.mat`` file (MIRFlickr, NUS-WIDE, Wiki).

  Reads ``I_tr``, ``T_tr``, ``L_tr`` (train), ``I_te``, ``T_te``, ``L_te``
  (test, the queries) and, when present, ``I_db``, ``T_db``, ``L_db``
  (database). Rows are items: ``I_*`` is ``[n, d_image]``, ``T_*`` is
  ``[n, d_text]``. Both MAT-file formats are read, told apart by the header:
  v4 to v7 with ``scipy.io.loadmat``, v7.3 (HDF5 with a 512-byte MATLAB header)
  with ``h5py``, transposing each array back, since MATLAB stores arrays
  column-major and h5py reads them with the axes reversed; a plain HDF5 file written
  from NumPy (no MATLAB header, no ``MATLAB_class`` attributes) is row-major and read
  as it is. Sparse matrices are made dense.

  Labels, one rule for all splits of the file:

  * ``L_*`` with one row per item and more than one column: multi-hot labels
    (entries 0 or 1), returned bool ``[n, C]``;
  * a vector or a single column (as Wiki ships them): class indices, returned
    int32 ``[n]`` from 0. With ``class_index_base=None`` they are taken as
    0-based if any split holds a 0, else as 1-based (MATLAB's habit, Wiki's
    1..10); pass ``class_index_base`` to say which. A one-column multi-hot
    matrix cannot be told from class indices; pass it as a vector of ids.

  Args:
    path: the ``.mat`` file.
    class_index_base: 0 or 1, the number of the first class in class-index
      labels; ``None`` to infer it as above.
  Returns:
    ``{"train": Dataset, "test": Dataset}`` plus ``"database"`` when the file
    has it; each with views ``("image", "text")`` float32 and the labels above.
  """
  path = _arguments.existing_file(path, "path", "a .mat file")
  if class_index_base is not None and (
    isinstance(class_index_base, bool)
    or class_index_base not in (0, 1)
    or not isinstance(class_index_base, (int, np.integer))
  ):
    raise ValueError(f"class_index_base must be None, 0 or 1; got {class_index_base!r}.")
  keys = [f"{p}_{s}" for s in _MAT_SPLITS for p in "ITL"]
  contents = _read_mat(path, keys)
  present = [s for s in _MAT_SPLITS if any(f"{p}_{s}" in contents for p in "ITL")]
  for split in ("tr", "te") + (("db",) if "db" in present else ()):
    missing = [f"{p}_{split}" for p in "ITL" if f"{p}_{split}" not in contents]
    if missing:
      raise _errors.DataFormatError(
        f"{path} has no variable {', '.join(missing)}; found {sorted(contents)} among {keys}."
      )
  splits = [s for s in _MAT_SPLITS if s in present]
  features, labels, kinds = {}, {}, {}
  for s in splits:
    image = _as_features(contents[f"I_{s}"], f"I_{s}", path)
    text = _as_features(contents[f"T_{s}"], f"T_{s}", path)
    if image.shape[0] != text.shape[0]:
      raise _errors.DataFormatError(
        f"{path}: I_{s} has {image.shape[0]} rows but T_{s} has "
        f"{text.shape[0]}; they must describe the same items."
      )
    features[s] = (image, text)
    kinds[s], labels[s] = _label_matrix(contents[f"L_{s}"], image.shape[0], f"L_{s}", path)
  _check_same_widths(path, splits, features, labels, kinds)
  if len(set(kinds.values())) > 1:
    raise _errors.DataFormatError(
      f"{path}: some splits hold multi-hot labels and others class indices ({kinds})."
    )
  if kinds[splits[0]] == "ids":
    labels = _decode_class_ids(labels, path, class_index_base)
  else:
    labels = {s: v.astype(bool) for s, v in labels.items()}
  return {
    _MAT_SPLITS[s]: make_dataset(
      features[s], labels[s], ("image", "text"), name=f"{path.stem}/{_MAT_SPLITS[s]}"
    )
    for s in splits
  }


class ImageList(NamedTuple):
  """An image list: image paths and their multi-hot labels.

  Attributes:
    paths: list of str, ``n`` image paths (joined to ``root`` when one was given).
    labels: bool ``[n, C]`` multi-hot labels.
  """

  paths: list[str]
  labels: np.ndarray


def load_image_list(
  path: str | os.PathLike,
  root: str | os.PathLike | None = None,
  *,
  encoding: str = "utf-8",
  check_files: bool = False,
) -> ImageList:
  """Read an image list as the deep hashing toolboxes ship them.

  One line per image: a path without spaces, then its multi-hot label vector
  as 0/1 tokens separated by whitespace, e.g. ``images/0001.jpg 0 1 0 0 1``.
  Blank lines are skipped. Every line must have the same number of labels.

  Args:
    path: the list file (``train.txt``, ``test.txt``, ``database.txt``).
    root: a directory to join in front of each path; ``None`` keeps the paths
      as written.
    encoding: the list's text encoding (``"latin-1"`` for lists written by
      older tools); a leading UTF-8 byte-order mark is dropped.
    check_files: True to check that every named image file exists (one error
      for all that are missing); False not to. ``jhash.data.read_images`` and
      ``image_stream`` check anyway before reading any image.
  Returns:
    ``ImageList(paths, labels)``: ``paths`` list of str, ``labels`` bool
    ``[n, C]``. A malformed line, or a byte the encoding cannot decode, raises
    ``DataFormatError`` naming the file and the line number; a ``path`` that is
    not a file, or missing images (with ``check_files``), ``FileNotFoundError``
    (``IsADirectoryError`` for a folder).
  """
  path = _arguments.existing_file(path, "path", _IMAGE_LIST)
  if root is not None:  # checked, joined as given
    _arguments.path_argument(root, "root", "a folder the listed paths are relative to")
  check_files = _checks.flag(check_files, "check_files")
  paths, rows = [], []
  for number, line in enumerate(_read_text_lines(path, encoding), start=1):
    tokens = line.split()
    if not tokens:
      continue
    values = tokens[1:]
    problem = ""
    if not values:
      problem = "a path but no labels"
    elif any(v not in ("0", "1") for v in values):
      bad = next(v for v in values if v not in ("0", "1"))
      problem = f"a label token {bad!r}; labels must be 0 or 1"
    elif rows and len(values) != len(rows[0]):
      problem = f"{len(values)} labels where the lines before have {len(rows[0])}"
    if problem:
      raise _errors.DataFormatError(
        f"{path}, line {number}: malformed image list entry ({problem}): {line.rstrip()[:200]!r}"
      )
    paths.append(tokens[0] if root is None else os.path.join(root, tokens[0]))
    rows.append(values)
  if not rows:
    raise _errors.DataFormatError(f"{path} holds no image list entries.")
  if check_files:
    check_image_files(paths, f"{path}" + ("" if root is None else f" (root={root})"))
  return ImageList(paths=paths, labels=np.asarray(rows) == "1")


def _read_text_lines(path: pathlib.Path, encoding: str) -> io.StringIO:
  """The file's lines (universal newlines), or a ``DataFormatError`` at the first byte
  ``encoding`` cannot decode, with its line and column."""
  try:
    codecs.lookup(encoding)
  except (LookupError, TypeError):
    raise ValueError(
      f"encoding must be the name of a text encoding (e.g. 'utf-8', 'latin-1'); got {encoding!r}."
    ) from None
  raw = path.read_bytes()
  try:
    text = raw.decode(encoding)
  except UnicodeDecodeError as e:
    line = raw.count(b"\n", 0, e.start) + 1
    column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
    raise _errors.DataFormatError(
      f"{path}, line {line}: not valid {encoding} text (byte {raw[e.start]:#04x} at "
      f"column {column}: {e.reason}). If the list was written in another encoding, say "
      "which with encoding= (e.g. encoding='latin-1'): load_image_list, load_paper_lists "
      "and the list protocols of load_protocol take it."
    ) from e
  return io.StringIO(text.removeprefix("\ufeff"), newline=None)


def check_image_files(paths: list[str], source: str = "the image list") -> None:
  """Raise one ``FileNotFoundError`` naming how many of ``paths`` are not files, and the
  first few, so a missing image stops a run before it starts rather than mid-epoch."""
  missing = [p for p in paths if not os.path.isfile(p)]
  if not missing:
    return
  shown = ", ".join(f"{p!r}{_checks.folder_note(p)}" for p in missing[:_SHOWN_MISSING])
  more = f" and {len(missing) - _SHOWN_MISSING} more" if len(missing) > _SHOWN_MISSING else ""
  hint = ""
  if not any(os.path.isabs(p) for p in missing[:_SHOWN_MISSING]):
    hint = f" Relative paths are read from {os.getcwd()!r}; pass root=... to say where."
  raise FileNotFoundError(
    f"{len(missing)} of the {len(paths)} image files named in {source} "
    f"do not exist: {shown}{more}.{hint}"
  )
