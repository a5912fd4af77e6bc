"""Writers of small data files in the layouts jhash.data reads (for tests)."""

from __future__ import annotations

import gzip
import pathlib
import struct

import numpy as np

MAT73_HEADER_TEXT = (
  b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 ."
)


def write_mat_classic(path: pathlib.Path, arrays: dict) -> pathlib.Path:
  """A MAT-file v5 (the format scipy.io.savemat writes)."""
  import scipy.io

  scipy.io.savemat(path, arrays, format="5")
  return path


def write_mat_v73(path: pathlib.Path, arrays: dict) -> pathlib.Path:
  """A MAT-file v7.3 as MATLAB writes one: HDF5 behind a 512-byte MATLAB header.

  MATLAB stores arrays column-major, so an ``[n, d]`` matrix is an HDF5 dataset
  of shape ``[d, n]``; a scipy sparse matrix becomes a group holding the
  compressed columns (``data``, ``ir``, ``jc``) with the row count in the
  ``MATLAB_sparse`` attribute.
  """
  import h5py
  import scipy.sparse

  with h5py.File(path, "w", userblock_size=512) as f:
    for key, value in arrays.items():
      if scipy.sparse.issparse(value):
        csc = scipy.sparse.csc_matrix(value)
        group = f.create_group(key)
        group.attrs["MATLAB_class"] = np.bytes_(b"double")
        group.attrs["MATLAB_sparse"] = np.uint64(csc.shape[0])
        group["data"] = csc.data.astype(np.float64)
        group["ir"] = csc.indices.astype(np.uint64)
        group["jc"] = csc.indptr.astype(np.uint64)
      else:
        value = np.atleast_2d(np.asarray(value, np.float64))
        f[key] = value.T
        f[key].attrs["MATLAB_class"] = np.bytes_(b"double")
  header = MAT73_HEADER_TEXT.ljust(116, b" ") + b"\x00" * 8 + struct.pack("<H", 0x0200) + b"IM"
  with open(path, "r+b") as f:
    f.write(header.ljust(512, b"\x00"))
  return path


def write_idx(
  folder: pathlib.Path,
  stem: str,
  images: np.ndarray | None = None,
  labels: np.ndarray | None = None,
  magic: int | None = None,
  count: int | None = None,
  compress: bool = True,
) -> pathlib.Path:
  """An IDX file (images uint8 [n, h, w] or labels uint8 [n]), gzip-compressed by default."""
  if images is not None:
    n, h, w = images.shape
    head = struct.pack(">4I", 2051 if magic is None else magic, n if count is None else count, h, w)
    body = images.astype(np.uint8).tobytes()
  else:
    head = struct.pack(
      ">2I", 2049 if magic is None else magic, labels.shape[0] if count is None else count
    )
    body = labels.astype(np.uint8).tobytes()
  path = folder / (stem + (".gz" if compress else ""))
  path.write_bytes(gzip.compress(head + body) if compress else head + body)
  return path


def write_image_list(path: pathlib.Path, lines: list[str]) -> pathlib.Path:
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return path


def cross_view_arrays(
  rng: np.random.Generator,
  sizes: dict,
  num_classes: int,
  dims: tuple = (16, 24),
  multi_hot: bool = False,
  noise: float = 1.0,
) -> dict:
  """A cross-modal ``.mat`` file's arrays (``I_*``, ``T_*``, ``L_*`` per split of ``sizes``,
  e.g. ``{"tr": 300, "te": 60}``) whose two views share the labels' structure: each view
  is the item's labels times a random matrix of that view, plus Gaussian noise.

  Labels: class ids 1..num_classes as a column (Wiki's way), or multi-hot float rows with
  one to three labels each (``multi_hot``).
  """
  mixing = [rng.normal(size=(num_classes, d)) * 2 for d in dims]
  arrays = {}
  for split, n in sizes.items():
    if multi_hot:
      hot = np.zeros((n, num_classes))
      for row in hot:
        row[rng.choice(num_classes, rng.integers(1, 4), replace=False)] = 1
      labels = hot
    else:
      ids = rng.permutation(np.arange(n) % num_classes)
      hot, labels = np.eye(num_classes)[ids], (ids + 1)[:, None].astype(np.float64)
    views = [hot @ m + noise * rng.normal(size=(n, m.shape[1])) for m in mixing]
    arrays.update({f"I_{split}": views[0], f"T_{split}": views[1], f"L_{split}": labels})
  return arrays


def resnet18_torchvision_state():
  """A ResNet-18's variables (shapes only) and a valid torchvision state dict for them
  (every entry 0.5, float32, in torchvision's OIHW layout)."""
  import jax
  from flax import traverse_util

  import jhash
  from jhash.models import _torchvision

  net = jhash.models.backbone((32, 32, 3), 4)
  variables = jax.eval_shape(
    net.init, jax.random.key(0), jax.ShapeDtypeStruct((1, 32, 32, 3), np.float32)
  )
  flat = traverse_util.flatten_dict(variables)
  state = {}
  for name in _torchvision._torchvision_names("resnet18"):
    shape = flat[_torchvision._flax_key(name)].shape
    if len(shape) == 4:  # HWIO -> OIHW
      shape = (shape[3], shape[2], shape[0], shape[1])
    state[name] = np.full(shape, 0.5, np.float32)
  return variables, state
