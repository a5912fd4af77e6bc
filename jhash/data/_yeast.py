"""The yeast multi-label data set (gene functional classes)."""

from __future__ import annotations

import numpy as np

from jhash.data import _errors
from jhash.data._dataset import Dataset
from jhash.data._dataset import make_dataset

YEAST_NUM_FEATURES = 103
YEAST_NUM_LABELS = 14


def load_yeast() -> Dataset:
  """Yeast: 2417 genes, 103 expression / phylogenetic features, 14 functional classes.

  Source: A. Elisseeff and J. Weston, "A kernel method for multi-labelled
  classification", NIPS 2001; the MULAN version, as shipped by the PyPI
  package ``river`` (``river/datasets/yeast.csv.gz``, header ``Att1..Att103,
  Class1..Class14``; install with ``pip install river``). The file is read
  directly, river is never imported.

  About 4.24 labels per gene; 198 distinct label sets.

  Returns:
    ``Dataset`` with one view ``"features"``, float32 ``[2417, 103]`` (as
    shipped: each column roughly centred, std about 0.1), and labels multi-hot bool ``[2417, 14]``.
  """
  path = _errors.package_file("river", "datasets/yeast.csv.gz", "yeast")
  table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64)
  width = YEAST_NUM_FEATURES + YEAST_NUM_LABELS
  if table.ndim != 2 or table.shape[1] != width:
    raise _errors.DataFormatError(
      f"{path} should hold rows of {YEAST_NUM_FEATURES} features and {YEAST_NUM_LABELS} "
      f"labels; got a table of shape {table.shape}."
    )
  labels = table[:, YEAST_NUM_FEATURES:]
  if not np.isin(labels, (0.0, 1.0)).all():
    raise _errors.DataFormatError(f"{path}: the label columns must hold only 0 and 1.")
  features = table[:, :YEAST_NUM_FEATURES].astype(np.float32)
  return make_dataset((features,), labels.astype(bool), ("features",), name="yeast")
