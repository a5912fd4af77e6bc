"""Input checks run at the door of public functions (never inside jit).

Every check raises a ``ValueError`` that names the argument, what was expected
and what was received, so a bad call fails loudly instead of giving a silently
wrong answer.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def _describe(x: Any) -> str:
  shape = getattr(x, "shape", None)
  dtype = getattr(x, "dtype", None)
  if shape is None:
    return f"{type(x).__name__} {x!r}"[:120]
  return f"array of shape {tuple(shape)} and dtype {dtype}"


def is_concrete(x: Any) -> bool:
  """True when ``x`` holds values (not a tracer inside jit / vmap)."""
  try:
    np.asarray(x)
    return True
  except Exception:  # jax.errors.TracerArrayConversionError and friends
    return False


def positive_int(value: Any, name: str) -> int:
  """``value`` as a Python int >= 1, or a ValueError naming ``name``."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"{name} must be a Python int >= 1; got {_describe(value)}.")
  if value < 1:
    raise ValueError(f"{name} must be >= 1; got {value}.")
  return int(value)


def nonneg_int(value: Any, name: str) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"{name} must be a Python int >= 0; got {_describe(value)}.")
  if value < 0:
    raise ValueError(f"{name} must be >= 0; got {value}.")
  return int(value)


def rank(x: Any, expected: int | Sequence[int], name: str, what: str = "") -> None:
  ranks = (expected,) if isinstance(expected, int) else tuple(expected)
  nd = np.ndim(x)
  if nd not in ranks:
    want = " or ".join(f"{r}-D" for r in ranks)
    raise ValueError(f"{name} must be {want}{' ' + what if what else ''}; got {_describe(x)}.")


def finite(x: Any, name: str) -> None:
  """Raise when a concrete floating array holds NaN or infinity."""
  if not is_concrete(x):
    return
  a = np.asarray(x)
  if np.issubdtype(a.dtype, np.floating) or a.dtype.kind == "V":
    bad = ~np.isfinite(a.astype(np.float64, copy=False))
    if bad.any():
      where = tuple(int(i) for i in np.argwhere(bad)[0])
      raise ValueError(
          f"{name} must hold finite values; found {int(bad.sum())} NaN or infinite "
          f"entries (first at index {where}) in {_describe(a)}.")


def signed_codes(codes: Any, name: str, num_bits: int | None = None) -> None:
  """Codes are an integer or float [n, K] array with entries in {-1, +1}."""
  rank(codes, 2, name, "with shape [n, num_bits]")
  if num_bits is not None and codes.shape[1] != num_bits:
    raise ValueError(f"{name} must have {num_bits} columns (num_bits); got {_describe(codes)}.")
  if is_concrete(codes):
    a = np.asarray(codes)
    bad = (a != 1) & (a != -1)
    if bad.any():
      vals = np.unique(a[bad])[:5]
      raise ValueError(f"{name} must hold only -1 and +1; found values {vals.tolist()} "
                       f"in {_describe(a)}.")


def same_length(arrays: Sequence[Any], names: Sequence[str]) -> int:
  lengths = [np.shape(a)[0] for a in arrays]
  if len(set(lengths)) > 1:
    got = ", ".join(f"{n}: {l}" for n, l in zip(names, lengths))
    raise ValueError(f"{', '.join(names)} must have the same number of rows; got {got}.")
  return lengths[0]
