"""``jhash evaluate``: jhash's exact retrieval metrics for codes made anywhere.

Run as ``jhash evaluate ...`` or ``python -m jhash.evaluate ...``::

    jhash evaluate --query-codes q.npy --db-codes db.npy \\
        --query-labels q_labels.npy --db-labels db_labels.npy --compare-presets

Files (``.npy`` is read with ``allow_pickle=False``: never unpickled):

* codes ``[n, K]``: ``.npy`` or ``.mat`` of -1/+1 (any integer or float dtype, e.g. the
  float32 of ``torch.sign``), of bits (bool, or only 0 and 1: 1 is +1; the table says
  when a file was read as bits), or packed ``uint32`` words ``[n, ceil(K / 32)]`` in
  ``jhash.codes.pack_bits``'s layout, with ``--num-bits K``;
* labels: class ids ``[n]`` (integers; also a ``[n, 1]`` or ``[1, n]`` matrix, as MATLAB
  saves vectors) or multi-hot ``[n, C]`` (0/1 numbers or bool), one row per code;
* a ``.mat`` file (v4 to v7 through scipy, v7.3 through h5py, with ``jhash.data``'s own
  reader) names its variable with ``--query-key``, ``--db-key``, ``--query-labels-key``,
  ``--db-labels-key``; a file holding a single variable needs none.

Conventions: ``--preset`` (``PRESETS``: jhash's tie-aware mAP and three toolboxes',
each with its source), or explicit ``--ties``, ``--normalizer``, ``--no-relevant`` for
``jhash.metrics.mean_average_precision``; ``--top-k K`` adds mAP@K. The table gives mAP
over the whole ranking, mAP@K, precision@k for ``--ks`` and precision and recall within
Hamming radius 2; ``--compare-presets`` adds mAP under every preset, for these codes.
``--json PATH`` writes the numbers, ``--curves PATH`` the precision-recall curve by
radius and the precision@k curve (and a PNG beside it when matplotlib imports).

A bad file or option ends the command with one line on stderr naming the file or option,
what was expected and what came, and exit status 2.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.metadata
import io
import json
import math
import pathlib
import sys
from typing import Callable, NamedTuple

import numpy as np

from jhash import codes as codes_lib
from jhash import files
from jhash import metrics
from jhash.metrics import _inputs
from jhash.metrics import _relevance

__all__ = [
  "main",
  "PRESETS",
  "Preset",
  "hashnet_map",
  "InputError",
  "Loaded",
  "load_codes",
  "load_labels",
]

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
    if key is None or key not in names:
      asked = f"no variable {key!r}" if key is not None else f"{len(names)} variables"
      raise InputError(
        f"{option} {path}: {asked}; name one with {key_option}. Variables there: "
        f"{', '.join(names) or '(none)'}."
      )
    return contents[key] if contents is not None else _layouts._read_hdf5(path, [key])[key]
  except (ValueError, OSError) as e:  # DataFormatError is a ValueError
    raise InputError(f"{option} {path}: could not be read as a MAT-file ({e}).") from None


def key_option(option: str) -> str:
  """The option naming the ``.mat`` variable of a file option: ``--query-codes`` ->
  ``--query-key``, ``--query-labels`` -> ``--query-labels-key``."""
  return option.removesuffix("-codes") + "-key" if option.endswith("-codes") else option + "-key"


def read_array(path: str, option: str, key: str | None = None) -> np.ndarray:
  """The array in ``path`` (``.npy``, or a ``.mat`` variable): any error an ``InputError``."""
  p = pathlib.Path(path)
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
    raise InputError(f"{option} {path}: expected -1/+1 signs or 0/1 bits; {e}{zero}") from None
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


def load_labels(path: str, option: str, num_rows: int, key: str | None = None) -> Loaded:
  """Labels for ``num_rows`` codes: class ids int32 [n] or multi-hot bool [n, C]."""
  a = read_array(path, option, key)
  _check_numeric(a, option, path, "labels")
  described = f"{a.dtype} {list(a.shape)}"
  if a.ndim == 2 and (a.shape[1] == 1 or (a.shape[0] == 1 and num_rows > 1)):
    a = a.reshape(-1)  # a column or row vector (MATLAB's vectors): class ids
  if a.ndim not in (1, 2):
    raise InputError(
      f"{option} {path}: expected class ids [n] or multi-hot [n, C]; got shape {a.shape}."
    )
  if a.shape[0] != num_rows:
    raise InputError(
      f"{option} {path}: {a.shape[0]} label rows for {num_rows} codes; expected one row per code."
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


# ------------------------------------------------------------------------------------------
# Presets


def _shares_label(query_labels: np.ndarray, db_labels: np.ndarray) -> np.ndarray:
  """bool [q, n]: the items share a label with the query (class ids as one-hot rows)."""
  if query_labels.ndim == 1:
    return query_labels[:, None] == db_labels[None, :]
  return (query_labels.astype(np.float32) @ db_labels.astype(np.float32).T) > 0


def _hashnet_ap(hits: np.ndarray) -> float | None:
  """AP of one ranked relevance list [R] over the relevant items in it; None when none is."""
  found = int(hits.sum())
  if found == 0:
    return None
  precision = np.cumsum(hits) / np.arange(1, hits.size + 1, dtype=np.float64)
  return float(np.sum(precision * hits) / found)


def hashnet_map(query_codes, db_codes, query_labels, db_labels, top_k: int) -> float:
  """mAP@R as thuml/HashNet's PyTorch test script (``pytorch/src/test.py``,
  ``mean_average_precision(params, R)``) computes it.

  Per query: items ranked by ``np.argsort(-sim, axis=0)`` of the float32 inner products
  ``sim = db_codes @ query_codes.T`` [n, q] (its codes are float32 ``torch.sign``
  outputs); relevance = the labels share a label; AP = ``sum_{i<=R} rel_i P@i`` over the
  relevant items among the first R (``normalizer="retrieved"``); a query with none there
  is left out of the mean (``no_relevant="skip"``; NaN when every query is).

  Ties: NumPy's default (unstable) argsort orders tied items, as in the script, computed
  here with the installed NumPy (see ``jhash.metrics.deephash_map`` on why that order
  differs between NumPy builds and CPUs). With ties by index this is
  ``mean_average_precision(top_k=R, ties="index", relevance="share_label",
  normalizer="retrieved", no_relevant="skip")``.

  Args:
    query_codes, db_codes: {-1,+1} [q, K], [n, K].
    query_labels, db_labels: class ids [q] / [n] or multi-hot [q, C] / [n, C].
    top_k: R, an int in [1, n] (the script fails for R > n).
  Returns:
    mAP as a float.
  """
  _inputs.check_codes_and_labels(query_codes, db_codes, query_labels, db_labels, db_ranks=2)
  q_b = np.asarray(query_codes, np.float32)
  r_b = np.asarray(db_codes, np.float32)
  top_k = _inputs.check_cutoff(top_k, "top_k", r_b.shape[0])
  q_l, r_l = np.asarray(query_labels), np.asarray(db_labels)
  chunk = max(1, min(len(q_b), _CHUNK_ELEMENTS // r_b.shape[0]))
  values = []
  for start in range(0, len(q_b), chunk):
    sim = r_b @ q_b[start : start + chunk].T  # [n, c], exact for +-1 codes
    order = np.argsort(-sim, axis=0)[:top_k]
    rel = _shares_label(q_l[start : start + chunk], r_l)
    values += [_hashnet_ap(rel[i][order[:, i]]) for i in range(rel.shape[0])]
  kept = [v for v in values if v is not None]
  return float(np.mean(kept)) if kept else math.nan


class Preset(NamedTuple):
  """A convention of mAP: how to compute it, where it comes from, its usual cut-off."""

  name: str
  source: str
  summary: str
  default_k: int | None  # the cut-off the source uses (None: the whole ranking)
  options: dict  # mean_average_precision options of the same rule (ties by index for toolboxes)
  compute: Callable  # (query_codes, db_codes, query_labels, db_labels, top_k | None) -> float


def _tie_aware(qc, dc, ql, dl, top_k, **options) -> float:
  return float(metrics.mean_average_precision(qc, dc, ql, dl, top_k=top_k, **options))


def _argsort_map(qc, dc, ql, dl, top_k) -> float:
  """``CalcTopMap`` / ``calc_topMap`` (``calc_map`` over the whole ranking)."""
  return float(metrics.deephash_map(qc, dc, ql, dl, top_k=len(dc) if top_k is None else top_k))


def _hashnet(qc, dc, ql, dl, top_k) -> float:
  return hashnet_map(qc, dc, ql, dl, top_k=len(dc) if top_k is None else top_k)


_TOOLBOX_OPTIONS = {"ties": "index", "relevance": "share_label", "normalizer": "retrieved"}
#: ``--preset`` name -> ``Preset``: jhash's tie-aware mAP and the toolboxes' (``PRESETS_DOC``).
PRESETS = {
  "tie-aware": Preset(
    "tie-aware",
    "jhash.metrics.mean_average_precision (He et al., CVPR 2018)",
    "expected AP over every order of tied items; AP over all relevant items",
    None,
    {"ties": "aware", "relevance": "auto", "normalizer": "relevant", "no_relevant": "zero"},
    _tie_aware,
  ),
  "deephash": Preset(
    "deephash",
    "swuxyj/DeepHash-pytorch utils/tools.py CalcTopMap",
    "NumPy argsort order of ties; AP over relevant items retrieved; none retrieved: 0",
    TOOLBOX_K,
    {**_TOOLBOX_OPTIONS, "no_relevant": "zero"},
    _argsort_map,
  ),
  "hashnet": Preset(
    "hashnet",
    "thuml/HashNet pytorch/src/test.py mean_average_precision",
    "NumPy argsort of -inner product; AP over relevant items retrieved; none: skipped",
    TOOLBOX_K,
    {**_TOOLBOX_OPTIONS, "no_relevant": "skip"},
    _hashnet,
  ),
  "jiangqy": Preset(
    "jiangqy",
    "jiangqy/DPSH-pytorch utils/CalcHammingRanking.py CalcMap; "
    "jiangqy/ADSH-AAAI2018 ADSH_pytorch/utils/calc_hr.py calc_map",
    "whole ranking, NumPy argsort order of ties; AP over all relevant items; none: 0",
    None,
    {**_TOOLBOX_OPTIONS, "no_relevant": "zero"},
    _argsort_map,
  ),
}
PRESETS_DOC = """Presets (``--preset``), each mAP as its source computes it:

* ``tie-aware`` (the default): ``jhash.metrics.mean_average_precision`` with
  ``ties="aware"``: the expected AP over every order of tied items, normalised by all
  relevant items; a query with none counts 0.
* ``deephash``: DeepHash-pytorch's ``CalcTopMap`` (swuxyj/DeepHash-pytorch,
  ``utils/tools.py``), ``jhash.metrics.deephash_map``: ties in NumPy's default argsort
  order, AP@K over the relevant items retrieved, a query with none retrieved counts 0.
  Its ``topK`` is per dataset (5000 NUS-WIDE and MS-COCO, 1000 ImageNet, the whole
  ranking CIFAR-10); here 5000 unless ``--top-k``.
* ``hashnet``: HashNet's ``mean_average_precision`` (thuml/HashNet,
  ``pytorch/src/test.py``), ``hashnet_map``: ties in NumPy's argsort order of the negated
  inner products, AP@R over the relevant items retrieved, a query with none retrieved left
  out of the mean. R is 5000 (NUS-WIDE, MS-COCO; 1000 ImageNet) unless ``--top-k``.
* ``jiangqy``: Qing-Yuan Jiang's ``calc_map`` (jiangqy/DPSH-pytorch
  ``utils/CalcHammingRanking.py`` ``CalcMap``; jiangqy/ADSH-AAAI2018
  ``ADSH_pytorch/utils/calc_hr.py``): the whole ranking, ties in NumPy's argsort order of
  float32 distances (DPSH's codes are float32; ADSH's database codes are float64, the
  same ranking but for the order NumPy may give tied float64 keys), AP over all relevant
  items, a query with none counts 0 in the mean. That is ``CalcTopMap`` with the whole
  database as ``topk``, so this preset is ``deephash_map(top_k=n)``; with ``--top-k`` it is
  Jiang's ``calc_topMap``, which computes what ``CalcTopMap`` does.

A toolbox preset's cut-off larger than the database is clipped to it (the table says so);
an explicit ``--top-k`` must lie in [1, n].
"""


# ------------------------------------------------------------------------------------------
# The evaluation


class Convention(NamedTuple):
  """The mAP rule of a run: a preset, or explicit options (name "options")."""

  preset: Preset
  top_k: int | None  # mAP@K's K (None: no mAP@K row)
  note: str  # how K was chosen, when it was not given


def _custom_preset(args) -> Preset:
  options = {
    "ties": args.ties or "aware",
    "relevance": "auto",
    "normalizer": args.normalizer or "relevant",
    "no_relevant": args.no_relevant or "zero",
  }
  return Preset(
    "options",
    "jhash.metrics.mean_average_precision",
    ", ".join(f"{k}={v}" for k, v in options.items()),
    None,
    options,
    functools.partial(_tie_aware, **options),
  )


def _cutoff(preset: Preset, top_k: int | None, n: int) -> tuple[int | None, str]:
  """mAP@K's K for ``preset``: --top-k, else the preset's own (clipped to n), else None."""
  if top_k is not None:
    return top_k, ""
  if preset.default_k is None:
    return None, ""
  if preset.default_k > n:
    return n, f"{preset.name}'s K={preset.default_k} clipped to the {n} database items"
  return preset.default_k, ""


def resolve_convention(args, n: int) -> Convention:
  """The mAP rule ``args`` ask for: ``--preset`` or explicit options (not both), and mAP@K's K."""
  names = ("ties", "normalizer", "no_relevant")
  given = [f"--{o.replace('_', '-')}" for o in names if getattr(args, o) is not None]
  if given and args.preset is not None:
    raise InputError(f"--preset {args.preset} and {', '.join(given)}: give one or the other.")
  if args.top_k is not None and not 1 <= args.top_k <= n:
    raise InputError(f"--top-k {args.top_k}: expected an int in [1, {n}], the database size.")
  preset = _custom_preset(args) if given else PRESETS[args.preset or "tie-aware"]
  return Convention(preset, *_cutoff(preset, args.top_k, n))


def _ks(text: str | None, n: int) -> list[int]:
  """precision@k's ks: ``--ks`` (each in [1, n]), else 100 and 1000 clipped to n."""
  if text is None:
    return sorted({min(k, n) for k in DEFAULT_KS})
  try:
    ks = [int(k) for k in text.split(",") if k.strip()]
  except ValueError:
    raise InputError(f"--ks {text}: expected comma-separated ints, e.g. 100,1000.") from None
  bad = [k for k in ks if not 1 <= k <= n]
  if not ks or bad:
    raise InputError(f"--ks {text}: expected ints in [1, {n}], the database size; got {bad}.")
  return ks


def _run(preset: Preset, data: tuple, top_k: int | None) -> float:
  try:
    return preset.compute(*data, top_k)
  except ValueError as e:  # jhash's checks of an option combination
    raise InputError(f"{preset.name} ({preset.summary}): {e}") from None


def compute(data: tuple, convention: Convention, ks: list[int], compare: bool, top_k=None) -> dict:
  """Every number of the report.

  Args:
    data: (query codes int8 [q, K], db codes int8 [n, K], query labels, db labels).
    convention: the mAP rule; ks: precision@k's cut-offs; compare: add every preset's mAP,
      at ``top_k`` (--top-k) or each preset's own cut-off.
  Returns:
    dict: ``map``, ``map_at_k`` ({k, value} or None), ``precision_at_k`` {k: value},
    ``radius`` {radius, precision, recall}, ``presets`` {name: {map, map_at_k, k}}.
  """
  preset, k = convention.preset, convention.top_k
  ties = preset.options["ties"]
  radius = min(RADIUS, data[0].shape[1])
  p_at_k = metrics.precision_at_k(*data, ks, ties=ties)
  p_r, r_r = metrics.precision_recall_at_radius(*data, radius)
  out = {
    "map": _run(preset, data, None),
    "map_at_k": None if k is None else {"k": k, "value": _run(preset, data, k)},
    "precision_at_k": {str(kk): float(v) for kk, v in zip(ks, np.asarray(p_at_k))},
    "radius": {"radius": radius, "precision": float(p_r), "recall": float(r_r)},
  }
  if compare:
    out["presets"] = compare_presets(data, top_k)
  return out


def compare_presets(data: tuple, top_k: int | None) -> dict:
  """mAP and mAP@K of every preset on the same codes: {name: {map, map_at_k, k, source}}.

  K is ``top_k`` (--top-k) when given, else each preset's own cut-off (clipped to n).
  """
  table = {}
  for p in PRESETS.values():
    k, _ = _cutoff(p, top_k, len(data[1]))
    table[p.name] = {
      "map": _run(p, data, None),
      "map_at_k": None if k is None else _run(p, data, k),
      "k": k,
      "source": p.source,
    }
  return table


# ------------------------------------------------------------------------------------------
# Output


def _number(v) -> str:
  return "-" if v is None else ("nan" if math.isnan(v) else f"{v:.4f}")


def _format_table(rows: list[tuple[str, ...]]) -> str:
  widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
  return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _metric_rows(result: dict, convention: Convention) -> list[tuple[str, str]]:
  ties = convention.preset.options["ties"]
  rows = [("metric", "value"), ("mAP (whole ranking)", _number(result["map"]))]
  if result["map_at_k"] is not None:
    rows.append((f"mAP@{result['map_at_k']['k']}", _number(result["map_at_k"]["value"])))
  for k, v in result["precision_at_k"].items():
    rows.append((f"precision@{k} (ties {ties})", _number(v)))
  r = result["radius"]
  rows.append((f"precision (Hamming radius <= {r['radius']})", _number(r["precision"])))
  rows.append((f"recall (Hamming radius <= {r['radius']})", _number(r["recall"])))
  return rows


def _delta(value, base) -> str:
  if value is None or base is None or math.isnan(value) or math.isnan(base):
    return "-"
  return f"{value - base:+.4f}"


def _preset_rows(presets: dict) -> list[tuple[str, ...]]:
  """One row per preset: mAP and mAP@K, each with its change from tie-aware's."""
  base = presets["tie-aware"]
  rows = [("preset", "mAP", "change", "mAP@K", "change", "K", "source")]
  for name, p in presets.items():
    cells = (_number(p["map"]), _delta(p["map"], base["map"]), _number(p["map_at_k"]))
    k = "-" if p["k"] is None else str(p["k"])
    at_k = _delta(p["map_at_k"], base["map_at_k"] if base["k"] == p["k"] else None)
    rows.append((name, *cells, at_k, k, p["source"]))
  return rows


def format_report(report: dict, convention: Convention) -> str:
  """The table printed to stdout."""
  shape = f"{report['queries']} queries, {report['items']} database items, {report['bits']} bits"
  lines = [f"jhash evaluate: {shape}"]
  for option, entry in report["inputs"].items():
    lines.append(f"  --{option.replace('_', '-')} {entry['path']}: {entry['read_as']}")
  c = convention.preset
  lines.append(f"convention: {c.name} ({c.summary}); source: {c.source}")
  if convention.note:
    lines.append(f"  note: {convention.note}")
  lines += ["", _format_table(_metric_rows(report["metrics"], convention))]
  if "presets" in report["metrics"]:
    lines += [
      "",
      "mAP of the same codes under each preset (change: from tie-aware's at the same K; "
      "K: --top-k, else the preset's own):",
    ]
    lines.append(_format_table(_preset_rows(report["metrics"]["presets"])))
  return "\n".join(lines)


def _jsonable(value):
  """NaN as null (JSON has no NaN), recursively."""
  if isinstance(value, dict):
    return {k: _jsonable(v) for k, v in value.items()}
  if isinstance(value, float) and math.isnan(value):
    return None
  return value


def _write(path: str, option: str, data: bytes) -> None:
  try:
    files.atomic_write_bytes(path, data)
  except OSError as e:
    raise InputError(f"{option} {path}: cannot write ({e.strerror or e}).") from None


def curve_ks(n: int) -> list[int]:
  """The k of the precision@k curve: about 60 values from 1 to n, spaced evenly in log k."""
  return sorted({int(k) for k in np.round(np.geomspace(1, n, _CURVE_POINTS))})


def curves(data: tuple, ties: str) -> dict:
  """``pr_by_radius`` {radius, precision, recall} and ``precision_at_k`` {k, precision}."""
  pr = metrics.pr_curve_by_radius(*data)
  ks = curve_ks(len(data[1]))
  p_at_k = metrics.precision_at_k(*data, ks, ties=ties)
  return {
    "pr_by_radius": {key: np.asarray(v).tolist() for key, v in pr.items()},
    "precision_at_k": {"k": ks, "precision": np.asarray(p_at_k).tolist(), "ties": ties},
  }


def _png(curve: dict) -> bytes | None:
  """The two curves as a PNG, or None when matplotlib does not import."""
  try:  # optional: by name, so the library never imports matplotlib unasked
    agg = importlib.import_module("matplotlib.backends.backend_agg")
    figure = importlib.import_module("matplotlib.figure")
  except ImportError:
    return None
  fig = figure.Figure(figsize=(9, 3.6))
  agg.FigureCanvasAgg(fig)
  left, right = fig.subplots(1, 2)
  pr = curve["pr_by_radius"]
  left.plot(pr["recall"], pr["precision"], marker="o")
  left.set(xlabel="recall", ylabel="precision", title="within Hamming radius r")
  pk = curve["precision_at_k"]
  right.plot(pk["k"], pk["precision"])
  right.set(xscale="log", xlabel="k", ylabel="precision@k", title="Hamming ranking")
  fig.tight_layout()
  buffer = io.BytesIO()
  fig.savefig(buffer, format="png", dpi=100)
  return buffer.getvalue()


def write_curves(path: str, data: tuple, ties: str) -> list[str]:
  """Write the curves' JSON (and a PNG beside it when matplotlib imports): paths written."""
  curve = curves(data, ties)
  _write(path, "--curves", json.dumps(_jsonable(curve), indent=2).encode())
  png = _png(curve)
  if png is None:
    return [path]
  p = pathlib.Path(path)
  png_path = str(p.with_suffix(".png") if p.suffix == ".json" else p.with_name(p.name + ".png"))
  _write(png_path, "--curves", png)
  return [path, png_path]


# ------------------------------------------------------------------------------------------
# The command


class _Parser(argparse.ArgumentParser):
  """argparse that raises ``InputError`` (one line) instead of printing usage and exiting."""

  def error(self, message):
    raise InputError(f"{message} (see {self.prog} --help)")


def build_parser(prog: str) -> argparse.ArgumentParser:
  parser = _Parser(
    prog=prog,
    description="Exact retrieval metrics (mAP, precision@k, precision/recall within a "
    "Hamming radius) of binary codes saved as .npy or .mat files.",
    epilog=PRESETS_DOC.replace("``", "'"),
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  files_group = parser.add_argument_group("files")
  for name, what in (
    ("query-codes", "query codes [q, K]: -1/+1, 0/1 bits or packed uint32 words"),
    ("db-codes", "database codes [n, K], as the query codes"),
    ("query-labels", "query labels: class ids [q] or multi-hot [q, C]"),
    ("db-labels", "database labels: class ids [n] or multi-hot [n, C]"),
  ):
    files_group.add_argument(f"--{name}", required=True, metavar="FILE", help=what + ".")
    files_group.add_argument(
      f"--{name.replace('-codes', '')}-key" if name.endswith("codes") else f"--{name}-key",
      metavar="NAME",
      help=f"the variable of a .mat {name.replace('-', ' ')} file.",
    )
  files_group.add_argument(
    "--num-bits", type=int, metavar="K", help="code length of packed uint32 codes."
  )
  rule = parser.add_argument_group("convention")
  rule.add_argument("--preset", choices=list(PRESETS), help="default: tie-aware.")
  rule.add_argument("--ties", choices=["aware", "index"])
  rule.add_argument("--normalizer", choices=["relevant", "min", "retrieved"])
  rule.add_argument("--no-relevant", choices=["zero", "skip"])
  rule.add_argument("--top-k", type=int, metavar="K", help="also report mAP@K.")
  out = parser.add_argument_group("output")
  out.add_argument("--ks", metavar="K,K", help="precision@k cut-offs (default 100,1000).")
  out.add_argument("--compare-presets", action="store_true", help="mAP under every preset.")
  out.add_argument("--json", metavar="PATH", help="write the numbers as JSON.")
  out.add_argument("--curves", metavar="PATH", help="write PR-by-radius and P@k curves (JSON).")
  return parser


def load_inputs(args) -> tuple[Loaded, Loaded, Loaded, Loaded]:
  """The four files, checked against each other."""
  if args.num_bits is not None and args.num_bits < 1:
    raise InputError(f"--num-bits {args.num_bits}: expected the code length, an int >= 1.")
  qc = load_codes(args.query_codes, "--query-codes", args.query_key, args.num_bits)
  dc = load_codes(args.db_codes, "--db-codes", args.db_key, args.num_bits)
  ql = load_labels(args.query_labels, "--query-labels", len(qc.array), args.query_labels_key)
  dl = load_labels(args.db_labels, "--db-labels", len(dc.array), args.db_labels_key)
  check_corpus(qc, dc, ql, dl)
  return qc, dc, ql, dl


def _versions() -> dict:
  """jhash's and NumPy's versions (NumPy's argsort sets the toolbox presets' tie order)."""
  try:
    version = importlib.metadata.version("jhash")
  except importlib.metadata.PackageNotFoundError:
    version = "unknown"
  return {"jhash": version, "numpy": np.__version__}


def evaluate(args) -> tuple[dict, Convention]:
  """Read, check, compute and write what ``args`` asks for; return the report."""
  loaded = load_inputs(args)
  data = tuple(x.array for x in loaded)
  n = len(data[1])
  convention = resolve_convention(args, n)
  ks = _ks(args.ks, n)
  c = convention.preset
  report = {
    "versions": _versions(),
    "inputs": {
      name: {"path": x.path, "read_as": x.read_as}
      for name, x in zip(("query_codes", "db_codes", "query_labels", "db_labels"), loaded)
    },
    "queries": len(data[0]),
    "items": n,
    "bits": int(data[0].shape[1]),
    "convention": {"name": c.name, "source": c.source, **c.options, "top_k": convention.top_k},
    "metrics": compute(data, convention, ks, args.compare_presets, args.top_k),
  }
  if args.json:
    _write(args.json, "--json", json.dumps(_jsonable(report), indent=2).encode())
  if args.curves:
    report["curves_written"] = write_curves(args.curves, data, c.options["ties"])
  return report, convention


def main(argv=None, prog: str = "python -m jhash.evaluate") -> int:
  """Run the command on ``argv`` (default ``sys.argv[1:]``); return the exit status."""
  parser = build_parser(prog)
  try:
    args = parser.parse_args(argv)
    report, convention = evaluate(args)
  except InputError as e:
    print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
    return 2
  print(format_report(report, convention))
  for path in report.get("curves_written", []):
    print(f"wrote {path}")
  if args.json:
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
