"""Bad input, sixth round, the data layer: 16-bit and float images (PIL's conversion
saturated or blackened them), flags read by truthiness, negative class ids, empty CIFAR-10
splits, Fashion-MNIST labels over 9, path arguments of the wrong type or naming a folder,
and two messages of ``jhash evaluate``'s file reader. Each case gave a silently wrong
answer or pathlib's error; each is now read correctly or refused, naming the argument (or
the file) and what was expected."""

import jax
import numpy as np
import pytest
import scipy.io
from PIL import Image

from _data_files import write_idx
from _data_files import write_image_list
from jhash import _evaluate_files
from jhash import data
from jhash import metrics

CIFAR_FILES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
NEGATIVE_IDS = r"labels: class ids must be >= 0; found -1 in .*A negative id"


@pytest.fixture
def images(tmp_path):
  """A 16-bit grayscale PNG (values 0, 256, ..., 65535), a float TIFF in [0, 1] and a
  32-bit integer TIFF, each 4 x 5, with their 16-bit pixel values."""
  values = (np.arange(20, dtype=np.uint32).reshape(4, 5) * 3449).astype(np.uint16)
  Image.fromarray(values).save(tmp_path / "g16.png")
  Image.fromarray(values.astype(np.float32) / 65535).save(tmp_path / "f32.tif")
  Image.fromarray(values.astype(np.int32)).save(tmp_path / "i32.tif")
  return tmp_path, values


@pytest.fixture
def cifar(tmp_path):
  """A CIFAR-10 binary copy of 120 images (12 per class), and its labels."""
  rng = np.random.default_rng(0)
  labels = rng.permutation(np.arange(120) % 10).astype(np.uint8)
  records = np.concatenate([labels[:, None], rng.integers(0, 256, (120, 3072))], axis=1)
  for f, name in enumerate(CIFAR_FILES):
    (tmp_path / name).write_bytes(records[20 * f : 20 * (f + 1)].astype(np.uint8).tobytes())
  return tmp_path, labels.astype(np.int32)


# ----------------------------------------------------------------------------- S3: depth


def test_sixteen_bit_images_are_read_as_their_high_byte(images):
  folder, values = images
  high = (values >> 8).astype(np.uint8)  # was: 255 almost everywhere (PIL clips at 255)
  decoded = data.decode_image(folder / "g16.png")
  np.testing.assert_array_equal(decoded, np.repeat(high[..., None], 3, axis=2))
  gray = data.read_images([str(folder / "g16.png")], channels=1)
  np.testing.assert_array_equal(gray[0, ..., 0], high)
  rgb = data.read_images([str(folder / "g16.png")], size=(4, 5))
  np.testing.assert_array_equal(rgb[0], decoded)
  assert high.max() == 255 and high.min() == 0


@pytest.mark.parametrize("name, mode", [("f32.tif", "'F'"), ("i32.tif", "'I'")])
def test_float_and_32_bit_images_are_refused_naming_the_file_and_mode(images, name, mode):
  folder, _ = images
  path = str(folder / name)
  words = rf"{name} holds 32-bit .* pixels \(PIL mode {mode}\); jhash reads 8-bit .* 16-bit"
  with pytest.raises(data.DataFormatError, match=words):
    data.decode_image(path)  # was: all 0 for floats in [0, 1]
  for size in (None, (2, 2)):
    with pytest.raises(data.DataFormatError, match=words):
      data.read_images([path], size=size)
  listed = data.ImageList([path], np.ones((1, 1), bool))
  stream = data.image_stream(listed, 1, jax.random.key(0), 1, prefetch=0, num_threads=1)
  with pytest.raises(data.DataFormatError, match=words):
    next(iter(stream))


# ----------------------------------------------------------------------------- S5: flags


def test_flip_takes_a_bool_only():
  image = np.arange(18, dtype=np.uint8).reshape(2, 3, 3)
  with pytest.raises(ValueError, match="do must be True or False; got str 'no'"):
    data.flip(image, "no")  # was: flipped
  with pytest.raises(ValueError, match=r"do must be True or False; got array of shape \(2,\)"):
    data.flip(image, np.array([0, 1]))  # was: NumPy's "truth value ... is ambiguous"
  np.testing.assert_array_equal(data.flip(image, np.bool_(True)), image[:, ::-1])
  assert data.flip(image, False) is image


def test_data_flags_must_be_bools(tmp_path):
  listed = write_image_list(tmp_path / "list.txt", ["a.png 1 0", "b.png 0 1"])
  with pytest.raises(ValueError, match="check_files must be True or False; got str 'no'"):
    data.load_image_list(listed, check_files="no")  # was: files checked
  with pytest.raises(ValueError, match="check_files must be True or False; got str 'no'"):
    data.load_paper_lists("nuswide_21", tmp_path, check_files="no")  # was: files checked
  with pytest.raises(ValueError, match="standardize must be True or False; got str 'no'"):
    data.load_mfeat(standardize="no")  # was: standardised
  images = data.load_image_list(listed)
  with pytest.raises(ValueError, match="check_files must be True or False; got int 0"):
    data.image_stream(images, 1, jax.random.key(0), 1, check_files=0)


# ----------------------------------------------------------------------------- S6: class ids


def test_negative_class_ids_are_refused_as_the_metrics_refuse_them(cifar):
  _, labels = cifar
  codes = np.ones((3, 4), np.int8)
  with pytest.raises(ValueError) as by_metrics:
    metrics.mean_average_precision(codes, codes, np.array([0, -1, 1]), np.array([0, -1, 1]))
  wording = str(by_metrics.value).split(";")[0].split(": ", 1)[1]
  assert wording == "class ids must be >= 0"
  with pytest.raises(ValueError, match=NEGATIVE_IDS):
    data.cifar10_split(labels - 1, "cifar10", 0, 2, 3)  # was: -1 drawn as a class
  with pytest.raises(ValueError, match=NEGATIVE_IDS):
    data.image_pipeline(
      ["a.png", "b.png"],
      np.array([0, -1]),
      batch_size=1,
      key=jax.random.key(0),
      train=True,
      num_steps=1,
      check_files=False,
    )  # was: -1 trained on as a class
  with pytest.raises(ValueError, match="labels_b: class ids must be >= 0; found -1"):
    data.similarity(np.array([0, 1]), np.array([0, -1]))  # was: -1 items similar


# ----------------------------------------------------------------------------- S7: CIFAR-10


@pytest.mark.parametrize(
  "name, q, t, words",
  [
    ("cifar10", 2, 0, "train_per_class must be >= 1; got 0"),  # was: no training image
    ("cifar10", 0, 5, "query_per_class must be >= 1; got 0"),  # was: no query
    ("cifar10", 2, 10, r"cifar10: query_per_class \+ train_per_class = 12 must be below 12"),
    ("cifar10-2", 12, 1, r"cifar10-2: query_per_class \+ train_per_class = 13 exceeds 12"),
    ("cifar10-1", 13, 1, r"cifar10-1: .* = 14 exceeds 12, the images of the smallest class"),
  ],
)
def test_cifar10_splits_are_never_empty(cifar, name, q, t, words):
  root, labels = cifar
  with pytest.raises(ValueError, match=words):
    data.cifar10_split(labels, name, 0, query_per_class=q, train_per_class=t)
  options = dict(query_per_class=q, train_per_class=t, root=root, records_per_file=None)
  with pytest.raises(ValueError, match=words):
    data.load_protocol(name, 0, **options)


def test_cifar10_splits_that_fill_every_part_are_kept(cifar):
  root, labels = cifar
  sizes = {"cifar10": (2, 9, 10), "cifar10-1": (2, 10, 100), "cifar10-2": (2, 10, 100)}
  for name, (q, t, database) in sizes.items():
    train, query, db = data.load_protocol(
      name, 0, root=root, records_per_file=None, query_per_class=q, train_per_class=t
    )
    assert (len(query["labels"]), len(train["labels"]), len(db["labels"])) == (
      10 * q,
      10 * t,
      database,
    )


# ----------------------------------------------------------------------------- S10: labels


def test_fashion_mnist_labels_over_nine_are_refused(tmp_path):
  images = np.zeros((4, 2, 2), np.uint8)
  for stem in ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte"):
    write_idx(tmp_path, stem, images=images)
  write_idx(tmp_path, "train-labels-idx1-ubyte", labels=np.array([3, 9, 11, 12]))
  write_idx(tmp_path, "t10k-labels-idx1-ubyte", labels=np.array([0, 1, 2, 9]))
  with pytest.raises(
    data.DataFormatError,
    match=r"train-labels-idx1-ubyte\.gz: entry 2 has label 11; .* 0\.\.9 \(2 of 4 are out",
  ):
    data.load_fashion_mnist("train", root=tmp_path)  # was: labels 11 and 12 kept
  assert data.load_fashion_mnist("test", root=tmp_path).labels.tolist() == [0, 1, 2, 9]


# ----------------------------------------------------------------------------- R3, U5: paths


def test_path_arguments_of_the_wrong_type_name_the_argument(tmp_path):
  listed = write_image_list(tmp_path / "list.txt", ["a.png 1 0"])
  cases = [
    (lambda: data.read_cifar10_binary(None), "root must be a path .* got NoneType None"),
    (lambda: data.load_image_list(listed, root=5), "root must be a path .* got int 5"),
    (lambda: data.read_idx_images(None), "path must be a path .* of an IDX image file"),
    (lambda: data.load_fashion_mnist("train", root=5), "root must be a path .*Fashion-MNIST"),
    (lambda: data.decode_image(None), "path must be a path .* of an image file"),
    (lambda: data.read_images([str(listed), None]), r"paths\[1\] must be a path .* NoneType"),
    (lambda: data.load_cross_modal_mat(3), r"path must be a path .* of a \.mat file; got int"),
    (
      lambda: _evaluate_files.load_codes(None, "--query-codes"),
      r"path must be a path .* \.npy or \.mat file \(--query-codes\); got NoneType None",
    ),
  ]
  for call, words in cases:  # was: pathlib's "expected str, bytes or os.PathLike object"
    with pytest.raises(TypeError, match=words):
      call()


def test_paths_that_are_not_files_say_what_was_expected(tmp_path):
  with pytest.raises(IsADirectoryError, match="is a folder; expected an image list file"):
    data.load_image_list(tmp_path)  # was: "[Errno 21] Is a directory"
  with pytest.raises(FileNotFoundError, match="does not exist; expected an image list file"):
    data.load_image_list(tmp_path / "missing.txt")
  with pytest.raises(IsADirectoryError, match="is a folder; expected an IDX image file"):
    data.read_idx_images(tmp_path)
  with pytest.raises(FileNotFoundError, match="does not exist; expected an IDX label file"):
    data.read_idx_labels(tmp_path / "missing")


# ----------------------------------------------------------------------------- U1, U2: evaluate


def test_transposed_mat_codes_are_asked_about(tmp_path):
  signs = np.where(np.random.default_rng(0).random((6, 16)) < 0.5, 1.0, -1.0)
  scipy.io.savemat(tmp_path / "codes.mat", {"B": signs.T})  # MATLAB's [K, n]
  np.save(tmp_path / "labels.npy", np.arange(6))
  codes = _evaluate_files.load_codes(str(tmp_path / "codes.mat"), "--query-codes")
  with pytest.raises(
    _evaluate_files.InputError,
    match=r"6 label rows for 16 codes; .*\(are the codes transposed\? .*codes\.mat holds "
    r"\[16, 6\]",
  ):
    _evaluate_files.load_labels(
      str(tmp_path / "labels.npy"), "--query-labels", 16, codes=codes
    )  # was: the labels blamed alone


def test_mat_read_errors_name_the_file_once(tmp_path):
  path = tmp_path / "bad.mat"
  path.write_bytes(b"MATLAB 5.0 MAT-file garbage" * 3)
  with pytest.raises(_evaluate_files.InputError) as error:
    _evaluate_files.load_codes(str(path), "--query-codes")
  message = str(error.value)
  assert message.startswith(f"--query-codes {path}: could not be read as a MAT-file (")
  assert message.count(str(path)) == 1, message  # was: twice


def test_jhash_evaluate_asks_whether_mat_codes_are_transposed(tmp_path, capsys):
  from jhash import evaluate  # pylint: disable=import-outside-toplevel

  rng = np.random.default_rng(0)
  scipy.io.savemat(tmp_path / "q.mat", {"B": np.where(rng.random((6, 16)) < 0.5, 1.0, -1.0).T})
  np.save(tmp_path / "db.npy", np.where(rng.random((20, 16)) < 0.5, 1.0, -1.0))
  np.save(tmp_path / "ql.npy", np.arange(6) % 3)
  np.save(tmp_path / "dl.npy", np.arange(20) % 3)
  argv = ["--query-codes", str(tmp_path / "q.mat"), "--db-codes", str(tmp_path / "db.npy")]
  argv += ["--query-labels", str(tmp_path / "ql.npy"), "--db-labels", str(tmp_path / "dl.npy")]
  assert evaluate.main(argv) != 0
  assert "are the codes transposed?" in capsys.readouterr().err
