"""Reading the files ``jhash evaluate`` scores: codes and labels from ``.npy`` or ``.mat``,
checked, with errors that name the file and the option (``InputError``)."""

from __future__ import annotations

import pathlib
from typing import NamedTuple

import numpy as np

from jhash import _checks
from jhash import codes as codes_lib
from jhash.metrics import _relevance

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
DEFAULT_KS = (100, 1000)
RADIUS = 2
TOOLBOX_K = 5000  # HashNet's R and DeepHash-pytorch's topK for NUS-WIDE and MS-COCO
# Queries whose distances the NumPy presets hold at once (float32: about 32 MB).
_CHUNK_ELEMENTS = 1 << 23
_CURVE_POINTS = 60


class InputError(Exception):
  """A bad file or option: the one-line message the command prints before exiting with 2."""


# ------------------------------------------------------------------------------------------
# Reading files


def _read_npy(path: pathlib.Path, option: str) -> np.ndarray:
  """A numeric array from a ``.npy`` file, never unpickled."""
  with open(path, "rb") as f:
    head = f.read(6)
  if head != NPY_MAGIC:
    what = "a ZIP archive (.npz?)" if head[:4] == ZIP_MAGIC else f"bytes {head!r}"
    if head[:1] == b"\x80":
      what = "a Python pickle"
    raise InputError(f"{option} {path}: expected a .npy file (NumPy header); found {what}.")
  try:
    return np.load(path, allow_pickle=False)
  except ValueError as e:
    if "allow_pickle" in str(e):
      raise InputError(
        f"{option} {path}: holds a pickled object array (dtype=object); expected a numeric "
        "array (jhash never unpickles: save e.g. tensor.numpy(), not a list or object array)."
      ) from None
    raise InputError(f"{option} {path}: could not be read as a .npy file ({e}).") from None
  except (OSError, EOFError) as e:
    raise InputError(f"{option} {path}: could not be read as a .npy file ({e}).") from None


def _hdf5_variables(path: pathlib.Path) -> list[str]:
  import h5py

  with h5py.File(path, "r") as f:
    return sorted(k for k in f.keys() if not k.startswith("#"))


def _read_mat(path: pathlib.Path, option: str, key: str | None, key_option: str) -> np.ndarray:
  """One variable of a ``.mat`` file, through ``jhash.data``'s reader (scipy or h5py)."""
  from jhash.data import _layouts

  try:
    if _layouts.mat_file_format(path) == "hdf5":
      names, contents = _hdf5_variables(path), None
    else:
      contents = _layouts._read_classic(path)
      names = sorted(contents)
    if key is None and len(names) == 1:
      key = names[0]
    if not names:
      raise InputError(f"{option} {path}: the .mat file holds no variables.")
    if key is None or key not in names:
      asked = f"no variable {key!r}" if key is not None else f"{len(names)} variables"
      raise InputError(
        f"{option} {path}: {asked}; name one with {key_option}. Variables there: "
        f"{', '.join(names) or '(none)'}."
      )
    return contents[key] if contents is not None else _layouts._read_hdf5(path, [key])[key]
  except (ValueError, OSError) as e:  # DataFormatError is a ValueError
    raise InputError(f"{option} {path}: {_mat_error(e, path)}.") from None


def _mat_error(e: Exception, path: pathlib.Path) -> str:
  """The reader's message without the path it starts with (the ``InputError`` names the
  file once), or "could not be read as a MAT-file (...)" around one that does not."""
  text = str(e).rstrip(".")
  if text.startswith(str(path)):
    return text[len(str(path)) :].lstrip(":").strip()
  return f"could not be read as a MAT-file ({text})"


def key_option(option: str) -> str:
  """The option naming the ``.mat`` variable of a file option: ``--query-codes`` ->
  ``--query-key``, ``--query-labels`` -> ``--query-labels-key``."""
  return option.removesuffix("-codes") + "-key" if option.endswith("-codes") else option + "-key"


def read_array(path: str, option: str, key: str | None = None) -> np.ndarray:
  """The array in ``path`` (``.npy``, or a ``.mat`` variable): any error an ``InputError``
  (a ``path`` that is not a str or ``os.PathLike``: a ``TypeError``)."""
  from jhash.data import _arguments

  p = _arguments.path_argument(path, "path", f"a .npy or .mat file ({option})")
  if not p.exists():
    raise InputError(f"{option} {path}: no such file.")
  if not p.is_file():
    raise InputError(f"{option} {path}: not a file.")
  suffix = p.suffix.lower()
  if suffix == ".npy":
    if key is not None:
      raise InputError(
        f"{key_option(option)} {key}: names a variable of a .mat file; {path} is .npy."
      )
    return _read_npy(p, option)
  if suffix == ".mat":
    return _read_mat(p, option, key, key_option(option))
  raise InputError(f"{option} {path}: expected a .npy or .mat file; got {suffix or 'no'} suffix.")


# ------------------------------------------------------------------------------------------
# Codes and labels


class Loaded(NamedTuple):
  """An input file as the metrics take it, and how it was read (for the report)."""

  array: np.ndarray  # codes int8 [n, K] in {-1, +1}, or labels int32 [n] / bool [n, C]
  path: str
  read_as: str


def _check_numeric(a: np.ndarray, option: str, path: str, what: str) -> None:
  if a.dtype.kind not in "biuf":
    raise InputError(f"{option} {path}: expected {what} of numbers; got dtype {a.dtype}.")


def _unpack(a: np.ndarray, option: str, path: str, num_bits: int | None) -> np.ndarray:
  """int8 {-1,+1} [n, K] from packed uint32 words [n, W]."""
  if num_bits is None:
    raise InputError(
      f"{option} {path}: holds uint32 words {list(a.shape)}, i.e. packed codes "
      "(jhash.codes.pack_bits); pass --num-bits K, the code length, to unpack them."
    )
  try:
    return np.asarray(codes_lib.unpack_bits(a, num_bits))
  except ValueError as e:
    raise InputError(f"{option} {path}: {e}") from None


def _signs(a: np.ndarray, option: str, path: str) -> tuple[np.ndarray, str]:
  """int8 {-1,+1} codes from signs or bits, and which of the two the file held."""
  if a.dtype != np.bool_ and np.isin(a, (-1, 1)).all():
    return np.where(a > 0, 1, -1).astype(np.int8), "signs -1/+1"
  if a.dtype == np.bool_ or np.isin(a, (0, 1)).all():
    return np.asarray(codes_lib.from_bits(a)), "bits 0/1, read as 1 -> +1, 0 -> -1"
  try:
    codes_lib.check_signs(a, "codes")
  except ValueError as e:
    zero = " torch.sign maps 0 to 0: binarise with x >= 0 instead." if (a == 0).any() else ""
    words = (
      " Packed codes must be saved as uint32 words (a.astype(np.uint32)) to be read as packed."
      if a.dtype.kind in "iu" and a.size and a.min() >= 0 and a.max() > 1
      else ""
    )
    raise InputError(
      f"{option} {path}: expected -1/+1 signs or 0/1 bits; {e}{zero}{words}"
    ) from None
  raise AssertionError("unreachable: check_signs accepts only -1/+1")


def load_codes(
  path: str, option: str, key: str | None = None, num_bits: int | None = None
) -> Loaded:
  """Codes from a file: signs, bits or packed words (module docstring) as int8 [n, K]."""
  a = read_array(path, option, key)
  _check_numeric(a, option, path, "codes [n, K]")
  if a.ndim != 2:
    raise InputError(f"{option} {path}: expected codes [n, K] (2-D); got shape {a.shape}.")
  if a.shape[0] < 1 or a.shape[1] < 1:
    raise InputError(f"{option} {path}: expected at least one code of K >= 1 bits; got {a.shape}.")
  described = f"{a.dtype} {list(a.shape)}"
  if a.dtype == np.uint32:
    out = _unpack(a, option, path, num_bits)
    return Loaded(out, path, f"{described}: packed words, unpacked to {num_bits} bits")
  out, read_as = _signs(a, option, path)
  if num_bits is not None and out.shape[1] != num_bits:
    raise InputError(
      f"{option} {path}: --num-bits {num_bits} is for packed uint32 codes, but this file "
      f"holds {described} ({read_as}): {out.shape[1]}-bit codes."
    )
  return Loaded(out, path, f"{described}: {read_as}")


def _class_ids(a: np.ndarray, option: str, path: str) -> np.ndarray:
  if a.dtype.kind == "f" and not (np.isfinite(a).all() and (a == np.round(a)).all()):
    raise InputError(f"{option} {path}: class ids must be whole numbers; got {a.dtype} values.")
  if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
    raise InputError(f"{option} {path}: class ids must fit in int32; got {a.min()}..{a.max()}.")
  return a.astype(np.int32)


def load_labels(
  path: str, option: str, num_rows: int, key: str | None = None, *, codes: Loaded | None = None
) -> Loaded:
  """Labels for ``num_rows`` codes: class ids int32 [n] or multi-hot bool [n, C].

  ``codes``: the codes the labels go with (``load_codes``), when known: a row count that
  matches their other axis then asks whether the codes were saved transposed, [K, n].
  """
  if isinstance(num_rows, bool) or not isinstance(num_rows, (int, np.integer)) or num_rows < 1:
    raise ValueError(
      f"num_rows must be a Python int >= 1 (the codes' rows); got {_checks.describe(num_rows)}."
    )
  a = read_array(path, option, key)
  _check_numeric(a, option, path, "labels")
  described = f"{a.dtype} {list(a.shape)}"
  vector = a.ndim == 2 and (a.shape[1] == 1 or (a.shape[0] == 1 and num_rows > 1))
  if vector and a.dtype != np.bool_:
    a = a.reshape(-1)  # a column or row vector (MATLAB's vectors): class ids
  if a.ndim == 1 and a.dtype == np.bool_:
    raise InputError(
      f"{option} {path}: bool labels must be multi-hot [n, C]; got shape {a.shape} "
      "(save class ids as integers)."
    )
  if a.ndim == 2 and a.shape[1] == 0:
    raise InputError(
      f"{option} {path}: multi-hot labels need at least one column; got {described}."
    )
  if a.ndim not in (1, 2):
    raise InputError(
      f"{option} {path}: expected class ids [n] or multi-hot [n, C]; got shape {a.shape}."
    )
  if a.shape[0] != num_rows:
    raise InputError(
      f"{option} {path}: {a.shape[0]} label rows for {num_rows} codes; expected one row per "
      f"code{_transposed_hint(codes, a.shape[0])}."
    )
  if a.ndim == 1:
    return Loaded(_class_ids(a, option, path), path, f"{described}: class ids")
  bad = a[(a != 0) & (a != 1)]
  if bad.size:
    raise InputError(
      f"{option} {path}: multi-hot labels [n, C] must hold only 0 and 1; found values "
      f"{np.unique(bad)[:5].tolist()} (class ids go in a 1-D array [n])."
    )
  return Loaded(a.astype(bool), path, f"{described}: multi-hot, {a.shape[1]} labels")


def _transposed_hint(codes: Loaded | None, rows: int) -> str:
  """A hint, "(are the codes transposed? ...)", when the codes' other axis has ``rows``
  entries; "" otherwise."""
  if codes is None or codes.array.shape[1] != rows:
    return ""
  n, k = codes.array.shape
  return (
    f" (are the codes transposed? {codes.path} holds [{n}, {k}], read as {n} codes of {k} "
    f"bits; save them as [n, K], one row per item: MATLAB's B' for a [K, n] B)"
  )


def check_corpus(qc: Loaded, dc: Loaded, ql: Loaded, dl: Loaded) -> None:
  """Query and database codes of one length, labels of one layout (jhash's own checks)."""
  kq, kd = qc.array.shape[1], dc.array.shape[1]
  if kq != kd:
    raise InputError(
      f"--query-codes {qc.path} holds {kq}-bit codes but --db-codes {dc.path} holds "
      f"{kd}-bit codes; expected codes of one length."
    )
  try:
    _relevance.check_labels(ql.array, dl.array, len(qc.array), len(dc.array))
  except ValueError as e:
    raise InputError(f"--query-labels {ql.path}, --db-labels {dl.path}: {e}") from None
