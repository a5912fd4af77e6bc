"""Input checks run at the door of public functions (never inside jit).

Every check raises a ``ValueError`` that names the argument, what was expected
and what was received, so a bad call fails loudly instead of giving a silently
wrong answer.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np


def describe(x: Any) -> str:
  """A short description of a value for an error message: shape and dtype, or type and repr."""
  shape = getattr(x, "shape", None)
  dtype = getattr(x, "dtype", None)
  if _is_tracer(x):
    return (
      f"a traced value of shape {tuple(shape)} and dtype {dtype} (inside jit or vmap, "
      "where its value is unknown)"
    )
  if isinstance(x, dict):  # its keys say more than the repr of its arrays
    return f"a dict with keys {sorted(map(str, x))}"[:200]
  if shape is None:
    return f"{type(x).__name__} {x!r}"[:120]
  return f"array of shape {tuple(shape)} and dtype {dtype}"


def folder_note(path: Any) -> str:
  """`` (a folder, not a file)`` when ``path`` names a folder, else ``""``: for the
  errors that say a file is missing."""
  try:
    return " (a folder, not a file)" if os.path.isdir(path) else ""
  except (TypeError, ValueError):
    return ""


def _is_tracer(x: Any) -> bool:
  import jax  # here: the checks module stays importable without initialising JAX

  return isinstance(x, jax.core.Tracer)


def dtype_of(x: Any) -> np.dtype:
  """The dtype of an array, or of what NumPy makes of a list or scalar."""
  return np.dtype(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype


def is_concrete(x: Any) -> bool:
  """True when ``x`` holds values (not a tracer inside jit / vmap)."""
  try:
    np.asarray(x)
    return True
  except Exception:  # jax.errors.TracerArrayConversionError and friends
    return False


def _static_hint(value: Any) -> str:
  return "; it sets shapes, so pass it as a static argument" if _is_tracer(value) else ""


def static_value(value: Any) -> str:
  """How an error shows a static option's bad value: its repr for a Python or NumPy
  scalar, else what it is (an array, with why a traced one cannot be used)."""
  if isinstance(value, (int, float, str, bool, np.generic)) or value is None:
    return repr(value)
  return f"{describe(value)}{_static_hint(value) or ' (not a Python int)'}"


def positive_int(value: Any, name: str) -> int:
  """``value`` as a Python int >= 1, or a ValueError naming ``name``."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(
      f"{name} must be a Python int >= 1; got {describe(value)}{_static_hint(value)}."
    )
  if value < 1:
    raise ValueError(f"{name} must be >= 1; got {value}.")
  return int(value)


#: The longest code a method makes (``num_bits``): 65,536 bits, 8 KiB per packed code.
#: Papers use 16 to 128 bits, and distances, top-k and metrics handle codes this long;
#: a larger ``num_bits`` is a slip (2**31 overflowed int32; 3e8 bits of LSH asked for
#: 9.6 GB of hyperplanes on 8 features).
MAX_NUM_BITS = 1 << 16


def code_length(value: Any, name: str = "num_bits") -> int:
  """``value`` as a code length: a Python int in [1, ``MAX_NUM_BITS``]."""
  value = positive_int(value, name)
  if value > MAX_NUM_BITS:
    raise ValueError(
      f"{name} must be at most {MAX_NUM_BITS:,} bits (jhash's longest code); got {value:,}."
    )
  return value


def nonneg_int(value: Any, name: str) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(
      f"{name} must be a Python int >= 0; got {describe(value)}{_static_hint(value)}."
    )
  if value < 0:
    raise ValueError(f"{name} must be >= 0; got {value}.")
  return int(value)


def scalar(value: Any, name: str, *, low: float | None = None, strict: bool = False) -> None:
  """A real scalar (a traced one included, so hyperparameters can be swept under vmap);
  concrete values must be finite and ``>= low`` (``> low`` when ``strict``)."""
  dtype = dtype_of(value) if np.ndim(value) == 0 else None
  if dtype is None or not (dtype.kind in "iuf" or _is_ml_float(dtype)) or dtype == np.bool_:
    raise ValueError(f"{name} must be a real scalar; got {describe(value)}.")
  if not is_concrete(value):
    return
  v = float(np.asarray(value, np.float64))
  bound = "" if low is None else f" {'>' if strict else '>='} {low:g}"
  bad = low is not None and (v <= low if strict else v < low)
  if not np.isfinite(v) or bad:
    raise ValueError(f"{name} must be a finite number{bound}; got {v!r}.")


def seed(value: Any, name: str = "seed") -> int:
  """A NumPy generator seed: a Python int >= 0."""
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
    raise ValueError(f"{name} must be an int >= 0 (a NumPy seed); got {describe(value)}.")
  return int(value)


def memory_bytes() -> int:
  """The machine's physical memory in bytes; 1 TiB where the system does not say."""
  try:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (AttributeError, ValueError, OSError):
    return 2**40


def fits_in_memory(parts: Mapping[str, int], what: str, remedy: str) -> None:
  """Refuse, before allocating, arrays that would exceed the machine's memory.

  ``parts`` maps what each array holds to its bytes (``{"the scenes": 1_000, ...}``);
  the ``ValueError`` names ``what`` asked for them, every part, the total, the machine's
  memory (``memory_bytes()``) and ``remedy`` (what to do instead).
  """
  total, limit = sum(parts.values()), memory_bytes()
  if total > limit:
    shown = ", ".join(f"{size:,} for {name}" for name, size in parts.items())
    raise ValueError(
      f"{what} would need {total:,} bytes ({shown}), more than this machine's memory "
      f"({limit:,} bytes): {remedy}."
    )


def widths(value: Any, name: str, *, allow_empty: bool = True) -> tuple[int, ...]:
  """Layer widths: a tuple (or list) of ints >= 1, as a tuple; empty only if allowed."""
  ok = isinstance(value, (tuple, list)) and all(
    isinstance(w, (int, np.integer)) and not isinstance(w, bool) and w >= 1 for w in value
  )
  if not ok or (not allow_empty and len(value) == 0):
    what = "a tuple of ints >= 1" if allow_empty else "a non-empty tuple of ints >= 1"
    raise ValueError(f"{name} must be {what} (layer widths); got {value!r}.")
  return tuple(int(w) for w in value)


def function(value: Any, name: str, what: str = "") -> None:
  """A callable, or a TypeError naming ``name`` (``what``: its signature, for the message)."""
  if not callable(value):
    raise TypeError(
      f"{name} must be a function{' ' + what if what else ''}; got {describe(value)}."
    )


def prng_key(key: Any, name: str = "key") -> None:
  """One PRNG key: a typed key of shape [] or a raw uint32 [2] key (a ValueError otherwise)."""
  import jax

  typed = isinstance(key, jax.Array) and jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
  if typed and key.shape == ():
    return
  if isinstance(key, jax.Array) and not typed and key.shape == (2,) and key.dtype == np.uint32:
    return
  hint = ""
  if typed or (isinstance(key, jax.Array) and key.ndim == 2 and key.shape[-1] == 2):
    hint = " (several keys, e.g. from jax.random.split: one call per key, or vmap)"
  raise ValueError(
    f"{name} must be one JAX PRNG key (jax.random.key(seed)); got {describe(key)}{hint}."
  )


def keywords(options: dict, target: Any, name: str, skip: Sequence[str] = ()) -> None:
  """``options``, passed on as ``target(**options)``, must be keywords ``target`` takes
  (less ``skip``); else the TypeError Python gives, naming ``name``, the public function
  the user called, and listing its options."""
  import inspect

  params = inspect.signature(target).parameters.values()
  allowed = [
    p.name
    for p in params
    if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in skip
  ]
  for key in options:
    if key not in allowed:
      raise TypeError(
        f"{name}() got an unexpected keyword argument {key!r}; its options: {', '.join(allowed)}."
      )


def view(value: Any) -> None:
  """``view``: None (every observed view) or the int index of a view."""
  if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
    raise ValueError(f"view must be None or a view's index (an int); got {describe(value)}.")


def flag(value: Any, name: str) -> bool:
  """``value`` as a bool: True or False only (not 'yes', 2 or None)."""
  if not isinstance(value, (bool, np.bool_)):
    raise ValueError(f"{name} must be True or False; got {describe(value)}.")
  return bool(value)


def rank(x: Any, expected: int | Sequence[int], name: str, what: str = "") -> None:
  ranks = (expected,) if isinstance(expected, int) else tuple(expected)
  nd = np.ndim(x)
  if nd not in ranks:
    want = " or ".join(f"{r}-D" for r in ranks)
    raise ValueError(f"{name} must be {want}{' ' + what if what else ''}; got {describe(x)}.")


def finite(x: Any, name: str) -> None:
  """Raise when a concrete floating array holds NaN or infinity."""
  if not is_concrete(x):
    return
  a = np.asarray(x)
  if np.issubdtype(a.dtype, np.floating) or a.dtype.kind == "V":
    # The usual case, without a copy: a sum is finite only when every entry is (NaN and
    # inf propagate; a sum that overflows is checked entry by entry). Half isfinite's time.
    if a.dtype.kind == "f" and (np.isfinite(a.sum()) or np.isfinite(a).all()):
      return
    bad = ~np.isfinite(a.astype(np.float64, copy=False))
    if bad.any():
      where = tuple(int(i) for i in np.argwhere(bad)[0])
      raise ValueError(
        f"{name} must hold finite values; found {int(bad.sum())} NaN or infinite "
        f"entries (first at index {where}) in {describe(a)}."
      )


def float32_range(x: Any, name: str) -> None:
  """Raise when a concrete float64 array holds a value float32 cannot (|x| > 3.4e38):
  JAX computes in float32, where it would become inf (and a code of -1, or a NaN loss)."""
  if not is_concrete(x) or dtype_of(x) != np.float64 or np.size(x) == 0:
    return
  a, top = np.asarray(x), float(np.finfo(np.float32).max)
  if a.max() <= top and a.min() >= -top:  # the usual case, without a copy
    return
  over = np.argwhere(np.abs(a) > top)
  if not len(over):  # NaN: finite's to name
    return
  where = tuple(int(i) for i in over[0])
  raise ValueError(
    f"{name} must hold values float32 can hold (|x| <= {top:.4g}; jhash computes in "
    f"float32, where larger ones become inf); found {a[where]:.4g} at index {where} in "
    f"{describe(a)}. Rescale the inputs."
  )


def signed_codes(codes: Any, name: str, num_bits: int | None = None) -> None:
  """Codes are an integer or float [n, K] array with entries in {-1, +1}."""
  rank(codes, 2, name, "with shape [n, num_bits]")
  if num_bits is not None and np.shape(codes)[1] != num_bits:
    raise ValueError(f"{name} must have {num_bits} columns (num_bits); got {describe(codes)}.")
  dtype = dtype_of(codes)
  if dtype == np.bool_:  # bits, even all True, are not signs
    raise ValueError(
      f"{name} must be signs -1 and +1 (integer or floating); got {describe(codes)}. Codes "
      "as bits (bool or 0/1): jhash.codes.from_bits(codes)."
    )
  if not (dtype.kind in "iuf" or _is_ml_float(dtype)):
    raise ValueError(f"{name} must be a real array of -1 and +1; got {describe(codes)}.")
  if is_concrete(codes):
    a = np.asarray(codes)
    bad = (a != 1) & (a != -1)
    if bad.any():
      vals = np.unique(a[bad])[:5]
      hint = " (packed codes? jhash.codes.unpack_bits gives signs)" if a.dtype == np.uint32 else ""
      raise ValueError(
        f"{name} must hold only -1 and +1; found values {vals.tolist()} in {describe(a)}{hint}."
      )


def same_length(arrays: Sequence[Any], names: Sequence[str]) -> int:
  lengths = [np.shape(a)[0] for a in arrays]
  if len(set(lengths)) > 1:
    got = ", ".join(f"{n}: {l}" for n, l in zip(names, lengths))
    raise ValueError(f"{', '.join(names)} must have the same number of rows; got {got}.")
  return lengths[0]


def label_array(labels: Any, name: str = "labels", num_items: int | None = None) -> str:
  """Labels are class ids, integer ``[n]`` (each >= 0: ``nonneg_ids``), or multi-hot,
  bool ``[n, C]``.

  Returns ``"class_ids"`` or ``"multi_hot"``. When ``num_items`` is given the
  array must have that many rows.
  """
  shape = tuple(np.shape(labels))
  dtype = np.dtype(labels.dtype if hasattr(labels, "dtype") else np.asarray(labels).dtype)
  want_n = "n" if num_items is None else str(num_items)
  expected = f"integer class ids [{want_n}] or multi-hot bool [{want_n}, C]"
  if len(shape) == 1 and dtype.kind in "iu":
    kind = "class_ids"
  elif len(shape) == 2 and dtype.kind == "b":
    kind = "multi_hot"
  else:
    hint = ""
    if len(shape) == 2 and dtype.kind in "iuf":
      hint = " (for 0/1 multi-hot labels, pass labels.astype(bool))"
    elif len(shape) == 1 and dtype.kind == "f" and not _whole(labels):
      hint = " (its values are not all whole numbers, so they are not class ids)"
    elif len(shape) == 1 and dtype.kind in "bf":
      hint = " (for class ids, pass labels.astype(np.int32))"
    raise ValueError(f"{name} must be {expected}; got {describe(labels)}{hint}.")
  if num_items is not None and shape[0] != num_items:
    raise ValueError(f"{name} must be {expected} (one row per item); got {describe(labels)}.")
  label_columns(labels, name)
  if kind == "class_ids":
    nonneg_ids(labels, name)
  return kind


def _whole(values: Any) -> bool:
  """Whether every value is a finite whole number (NaN or 1.5 are not)."""
  values = np.asarray(values, np.float64)
  return bool(np.all(np.isfinite(values) & (values == np.round(values))))


def label_columns(labels: Any, name: str = "labels") -> None:
  """Multi-hot labels ``[n, C]`` need ``C >= 1`` (no column: no class to share)."""
  if np.ndim(labels) == 2 and np.shape(labels)[1] == 0:
    raise ValueError(
      f"{name}: multi-hot labels need at least one column (class); got {describe(labels)}."
    )


def nonneg_ids(labels: Any, name: str = "labels") -> None:
  """Class ids are >= 0 (checked on concrete arrays): -1 often marks an unlabelled item,
  which as a class id would make every unlabelled item relevant to every other. One check
  for training (``label_array``, ``batch``) and the metrics (``jhash.metrics``)."""
  if np.size(labels) == 0 or not is_concrete(labels):
    return
  low = np.asarray(labels).min()
  if low < 0:
    raise ValueError(
      f"{name}: class ids must be >= 0; found {int(low)} in {describe(labels)}. "
      "A negative id (-1 for 'unlabelled', say) would be a class of its own, its items "
      "relevant to each other: drop those items, or give multi-hot labels, where an "
      "all-False row shares no label."
    )


def int32_ids(labels: Any, name: str = "labels") -> None:
  """Class ids must fit in int32 (checked on concrete arrays of a wider type): JAX keeps
  them as int32 (x64 off), where 2**32 would wrap to 0 and compare equal to class 0."""
  dtype = dtype_of(labels)
  if dtype.kind not in "iu" or dtype.itemsize < 4 or dtype == np.int32:
    return
  if not is_concrete(labels) or np.size(labels) == 0:
    return
  a = np.asarray(labels)
  low, high = np.iinfo(np.int32).min, np.iinfo(np.int32).max
  if a.min() < low or a.max() > high:
    raise ValueError(
      f"{name}: class ids must fit in int32 ([{low}, {high}]); got {a.min()}..{a.max()} "
      f"in {describe(a)}. Renumber the classes (np.unique(labels, return_inverse=True))."
    )


def _is_ml_float(dtype: np.dtype) -> bool:
  """bfloat16 and the float8 types, which NumPy sees as opaque ("V") dtypes."""
  return dtype.kind == "V" and dtype.name.startswith(("bfloat", "float"))


def batch(value: Any, name: str = "batch") -> int:
  """Check the library's batch dict ``{"views": (...), "labels": ...}``; return n.

  * ``views``: a non-empty tuple (or list) of arrays, each 2-D features
    ``[n, d]`` or images ``[n, H, W]`` / ``[n, H, W, C]``, all with the same
    ``n``. Views hold integers or floats (bfloat16 included); floating views
    must be finite, float64 ones within float32's range (checked on concrete arrays
    only, not under jit). An entry
    may be ``None`` (a view not observed for this batch), but not all of them.
  * ``labels`` (optional; absent or ``None`` for unsupervised data): integer
    class ids ``[n]`` (each >= 0) or multi-hot bool ``[n, C]``.
  * any other entry (``index``, ``targets``, ...): ``None`` or an array of numbers or
    bools (one row per item; the methods that read one check it).

  Errors name ``views``, ``views[i]`` or ``labels``.
  """
  from collections.abc import Mapping

  if not isinstance(value, Mapping) or "views" not in value:
    raise ValueError(
      f"{name} must be a dict with keys 'views' and optionally 'labels'; got {describe(value)}."
    )
  views = value["views"]
  if not isinstance(views, (tuple, list)) or len(views) == 0:
    raise ValueError(f"views must be a non-empty tuple of arrays; got {describe(views)}.")
  present = [i for i, v in enumerate(views) if v is not None]
  if not present:
    raise ValueError(f"views must hold at least one array; all {len(views)} entries are None.")
  for i in present:
    v = views[i]
    if not (hasattr(v, "shape") and hasattr(v, "dtype")):
      raise ValueError(
        f"views[{i}] must be an array (NumPy or JAX; np.asarray a list first); got {describe(v)}."
      )
    rank(v, (2, 3, 4), f"views[{i}]", "(features [n, d] or images [n, H, W] / [n, H, W, C])")
    dtype = np.dtype(v.dtype)
    if not (dtype.kind in "iuf" or _is_ml_float(dtype)):
      raise ValueError(
        f"views[{i}] must hold real numbers (integer or floating); got {describe(v)}."
      )
    finite(v, f"views[{i}]")
    float32_range(v, f"views[{i}]")
    if any(d == 0 for d in np.shape(v)[1:]):
      raise ValueError(f"views[{i}] must have a non-empty item shape; got {describe(v)}.")
  lengths = {i: np.shape(views[i])[0] for i in present}
  if len(set(lengths.values())) > 1:
    got = ", ".join(f"views[{i}]: {n}" for i, n in lengths.items())
    raise ValueError(f"views must all have the same number of items (rows); got {got}.")
  n = lengths[present[0]]
  labels = value.get("labels")
  if labels is not None:
    if not (hasattr(labels, "shape") and hasattr(labels, "dtype")):
      raise ValueError(
        f"labels must be an array (NumPy or JAX; np.asarray a list first); got {describe(labels)}."
      )
    label_array(labels, "labels", num_items=n)
    int32_ids(labels, "labels")
  for key, entry in value.items():  # other entries ("index", "targets", CDH's pairs ...)
    if key in ("views", "labels", "num_items") or entry is None:
      continue
    leaves = _leaves(entry)
    if not leaves or not all(
      hasattr(x, "shape") and hasattr(x, "dtype") and np.dtype(x.dtype).kind in "biuf"
      for x in leaves
    ):
      raise ValueError(
        f"{name}[{key!r}] must be an array of numbers or bools (or a tuple of them; NumPy "
        f"or JAX: np.asarray a list first); got {describe(entry)}."
      )
  return int(n)


def _leaves(entry: Any) -> list:
  """The arrays of a batch entry: itself, or those of a tuple or list of them (a dict, or
  any other container, is returned whole, so that the caller refuses it)."""
  if isinstance(entry, (tuple, list)):
    return [x for e in entry for x in _leaves(e)]
  return [] if entry is None else [entry]


def labelled_rows(labels: Any, name: str = "labels") -> None:
  """Multi-hot labels must give every item at least one label (concrete arrays only).

  An all-False row carries no supervision: a supervised method would train on it as
  dissimilar to everything, or learn nothing from it, without a word.
  """
  if not is_concrete(labels) or np.ndim(labels) != 2:
    return
  empty = ~np.asarray(labels).any(axis=1)
  if empty.any():
    first = np.flatnonzero(empty)[:5].tolist()
    raise ValueError(
      f"{name} must give every item at least one label; {int(empty.sum())} of "
      f"{empty.size} multi-hot rows are all False (items {first}...). Drop "
      "those items, or give them a label of their own."
    )


def as_array(x: Any, name: str):
  """``x`` as is when it is an array (NumPy, JAX or traced); a list or scalar through
  ``np.asarray`` (a ValueError naming ``name`` when NumPy cannot make an array of it)."""
  if hasattr(x, "shape") and hasattr(x, "dtype"):
    return x
  try:
    return np.asarray(x)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be an array; got {describe(x)}.") from None


def real_array(x: Any, name: str, what: str) -> None:
  """A real (integer or floating) array: not bool, string, complex or object (a ValueError
  saying ``name`` must be ``what``)."""
  dtype = dtype_of(x)
  if not (dtype.kind in "iuf" or _is_ml_float(dtype)):
    raise ValueError(f"{name} must be {what}; got {describe(x)}.")
