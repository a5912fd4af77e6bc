"""The papers' data sets from a user's copy: presets, CIFAR-10's binary release and its three
splits, the toolboxes' list files, and their protocols, on small files written here."""

import inspect
import itertools

import numpy as np
import pytest
from PIL import Image

from jhash import _checks
from jhash.data import DataFormatError
from jhash.data import PROTOCOLS
from jhash.data import load_protocol
from jhash.data import protocol_options
from jhash.data._papers import PAPER_PRESETS
from jhash.data._papers import cifar10_split
from jhash.data._papers import load_paper_lists
from jhash.data._papers import read_cifar10_binary
from jhash.data._protocols import protocol_map_at

RECORDS = 30  # records per batch file: 180 images, 18 per class
FILES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]


# ----------------------------------------------------------------------------- presets


def test_presets_hold_the_papers_protocols():
  assert set(PAPER_PRESETS) == {
    "cifar10", "cifar10-1", "cifar10-2", "nuswide_21", "nuswide_81", "coco", "imagenet100",
    "mirflickr", "mirflickr_21", "voc2012",
  }  # fmt: skip
  sizes = {name: (p.num_query, p.num_train, p.num_database) for name, p in PAPER_PRESETS.items()}
  assert sizes["cifar10"] == (1_000, 5_000, 54_000)
  assert sizes["cifar10-1"] == (1_000, 5_000, 59_000)
  assert sizes["cifar10-2"] == (10_000, 50_000, 50_000)
  assert sizes["nuswide_21"][:2] == (2_100, 10_500)
  assert sizes["imagenet100"][:2] == (5_000, 13_000)
  assert sizes["mirflickr"] == (1_000, 4_000, 20_000)
  assert sizes["voc2012"] == (1_000, 4_000, 6_540)
  assert sizes["mirflickr_21"] == (5_000, 10_000, 20_000)  # MCH's Sec. 5.1
  k = {name: p.map_at for name, p in PAPER_PRESETS.items()}
  assert k == {
    "cifar10": None, "cifar10-1": None, "cifar10-2": None, "nuswide_21": 5_000,
    "nuswide_81": 5_000, "coco": 5_000, "imagenet100": 1_000, "mirflickr": None, "mirflickr_21": None,
    "voc2012": None,
  }  # fmt: skip
  assert {p.relevance for n, p in PAPER_PRESETS.items() if n.startswith("cifar")} == {"same_class"}
  assert PAPER_PRESETS["imagenet100"].relevance == "same_class"
  assert PAPER_PRESETS["coco"].relevance == "share_label"
  assert PAPER_PRESETS["mirflickr"].num_labels == (24, 38)
  assert PAPER_PRESETS["mirflickr_21"].num_labels == (21,)
  assert PAPER_PRESETS["cifar10"].layout == "cifar-binary"
  assert PAPER_PRESETS["nuswide_81"].layout == "lists"
  assert all(
    any(peer in p.source for peer in ("DeepHash-pytorch", "HashNet", "MCH"))
    for p in PAPER_PRESETS.values()
  )
  # Where the peers differ, the other choice is named.
  assert "54,000" in PAPER_PRESETS["cifar10"].note
  assert "1,000" in PAPER_PRESETS["mirflickr"].note
  assert "50,000" in PAPER_PRESETS["nuswide_21"].note


def test_the_protocols_are_registered_with_root_required_and_their_k():
  for name in PAPER_PRESETS:
    assert name in PROTOCOLS
    assert protocol_options(name)["root"] is inspect.Parameter.empty
    assert protocol_map_at(name) == PAPER_PRESETS[name].map_at
  assert protocol_options("coco")["image_size"] == 224
  assert protocol_options("cifar10-2")["query_per_class"] == 1_000
  assert protocol_map_at("mfeat") is None
  with pytest.raises(ValueError, match="unknown protocol 'cifar'"):
    protocol_map_at("cifar")
  with pytest.raises(ValueError, match=r"protocol 'cifar10' needs root=.*data_batch_1\.bin"):
    load_protocol("cifar10", 0)
  with pytest.raises(ValueError, match=r"protocol 'coco' needs root=.*train\.txt, test\.txt"):
    load_protocol("coco", 0, root=None)


# ----------------------------------------------------------------------------- CIFAR-10


def _record_value(channel: int, row: int, col: int) -> int:
  return (row * 7 + col * 3 + channel * 101) % 256


def _hand_record(label: int) -> bytes:
  """One record written byte by byte: the label, then R, G, B planes, each row by row."""
  out = bytearray([label])
  for channel in range(3):
    for row in range(32):
      for col in range(32):
        out.append(_record_value(channel, row, col))
  return bytes(out)


def _write_cifar(folder, rng, records=RECORDS):
  """The six batch files of ``records`` records each; returns the pool (images, labels)."""
  folder.mkdir(parents=True, exist_ok=True)
  n = 6 * records
  images = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
  labels = rng.permutation(np.arange(n) % 10).astype(np.uint8)
  for f, name in enumerate(FILES):
    part = slice(f * records, (f + 1) * records)
    rows = [
      np.concatenate([[lab], img[:, :, 0].ravel(), img[:, :, 1].ravel(), img[:, :, 2].ravel()])
      for img, lab in zip(images[part], labels[part])
    ]
    (folder / name).write_bytes(np.asarray(rows, np.uint8).tobytes())
  return images, labels.astype(np.int32)


@pytest.fixture
def cifar(tmp_path, rng):
  return tmp_path, _write_cifar(tmp_path / "cifar-10-batches-bin", rng)


def test_cifar_binary_record_layout_by_hand(tmp_path, rng):
  folder = tmp_path / "cifar-10-batches-bin"
  _write_cifar(folder, rng)
  test_file = folder / "test_batch.bin"
  test_file.write_bytes(_hand_record(7) + test_file.read_bytes()[3073:])
  images, labels = read_cifar10_binary(folder, records_per_file=RECORDS)
  first = 5 * RECORDS  # the test batch follows the five training batches
  assert images.dtype == np.uint8 and images.shape == (6 * RECORDS, 32, 32, 3)
  assert labels.dtype == np.int32 and labels[first] == 7
  image = images[first]
  assert tuple(image[0, 0]) == (0, 101, 202)  # R, G, B of the top-left pixel
  assert tuple(image[0, 1]) == (3, 104, 205)  # one column right: + 3
  assert tuple(image[1, 0]) == (7, 108, 209)  # one row down: + 7
  assert tuple(image[31, 2]) == (223, 68, 169)
  expected = [[[_record_value(c, r, k) for c in range(3)] for k in range(32)] for r in range(32)]
  np.testing.assert_array_equal(image, np.asarray(expected, np.uint8))


def test_cifar_binary_reads_the_files_in_order_from_the_folder_or_its_parent(cifar):
  root, (images, labels) = cifar
  for where in (root, root / "cifar-10-batches-bin"):
    got_images, got_labels = read_cifar10_binary(where, records_per_file=RECORDS)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
  got = read_cifar10_binary(root, records_per_file=None)
  np.testing.assert_array_equal(got[0], images)


def test_cifar_binary_refuses_missing_files_and_wrong_sizes(cifar):
  root, _ = cifar
  folder = root / "cifar-10-batches-bin"
  with pytest.raises(DataFormatError, match=r"data_batch_1\.bin holds 30 records; .* 10,000"):
    read_cifar10_binary(root)  # the release's 10,000 records a file
  data = (folder / "data_batch_3.bin").read_bytes()
  (folder / "data_batch_3.bin").write_bytes(data[:-1])
  with pytest.raises(DataFormatError, match=r"data_batch_3\.bin holds 92,189 bytes, not a whole"):
    read_cifar10_binary(root, records_per_file=RECORDS)
  (folder / "data_batch_3.bin").write_bytes(data[:-3073])
  with pytest.raises(DataFormatError, match=r"data_batch_3\.bin holds 29 records; .* 30 \("):
    read_cifar10_binary(root, records_per_file=RECORDS)
  (folder / "data_batch_3.bin").write_bytes(data)
  (folder / "test_batch.bin").unlink()
  (folder / "data_batch_5.bin").unlink()
  with pytest.raises(FileNotFoundError, match=r"lacks 2 .*: data_batch_5\.bin, test_batch\.bin"):
    read_cifar10_binary(root, records_per_file=RECORDS)
  with pytest.raises(FileNotFoundError, match="is not a folder"):
    read_cifar10_binary(root / "nowhere")


def test_cifar_binary_refuses_a_label_byte_over_9(cifar):
  root, _ = cifar
  path = root / "cifar-10-batches-bin" / "data_batch_2.bin"
  data = bytearray(path.read_bytes())
  data[4 * 3073] = 10  # record 4's label byte
  path.write_bytes(bytes(data))
  with pytest.raises(DataFormatError, match=r"data_batch_2\.bin: record 4 has label byte 10; "):
    read_cifar10_binary(root, records_per_file=RECORDS)


@pytest.mark.parametrize(
  "name, per_class, database",
  [("cifar10", (2, 5), 110), ("cifar10-1", (2, 5), 160), ("cifar10-2", (3, 15), 150)],
)
def test_cifar_splits_per_class_and_disjoint(cifar, name, per_class, database):
  root, (images, labels) = cifar
  q, t = per_class
  split = cifar10_split(labels, name, 4, query_per_class=q, train_per_class=t)
  query, train, db = split["query"], split["train"], split["database"]
  np.testing.assert_array_equal(np.bincount(labels[query], minlength=10), [q] * 10)
  np.testing.assert_array_equal(np.bincount(labels[train], minlength=10), [t] * 10)
  assert db.size == database
  assert not set(query) & set(train) and not set(query) & set(db)
  rest = set(range(labels.size)) - set(query) - set(train)
  assert set(db) == {"cifar10": rest, "cifar10-1": rest | set(train), "cifar10-2": set(train)}[name]
  again = cifar10_split(labels, name, 4, query_per_class=q, train_per_class=t)
  other = cifar10_split(labels, name, 5, query_per_class=q, train_per_class=t)
  np.testing.assert_array_equal(again["query"], query)
  assert not np.array_equal(other["query"], query)
  options = dict(query_per_class=q, train_per_class=t, records_per_file=RECORDS)
  batches = load_protocol(name, 4, root=root, **options)
  for batch, idx in zip(batches, (train, query, db)):
    assert batch["views"][0].dtype == np.uint8 and batch["views"][0].shape[1:] == (32, 32, 3)
    np.testing.assert_array_equal(batch["views"][0], images[idx])
    np.testing.assert_array_equal(batch["labels"], labels[idx])
  limited = load_protocol(name, 4, root=root, database_limit=20, **options)
  assert limited[2]["labels"].size == 20 and limited[1]["labels"].size == 10 * q
  assert limited[0]["labels"].size == (20 if name == "cifar10-2" else 10 * t)


def test_cifar_splits_have_the_presets_sizes_by_default():
  labels = np.arange(60_000) % 10  # the release's 6,000 images per class
  for name in ("cifar10", "cifar10-1", "cifar10-2"):
    split = cifar10_split(labels, name, 0)
    preset = PAPER_PRESETS[name]
    sizes = (split["query"].size, split["train"].size, split["database"].size)
    assert sizes == (preset.num_query, preset.num_train, preset.num_database), name


# ----------------------------------------------------------------------------- list sets


def _color(i: int) -> tuple[int, int, int]:
  return (10 * i, 255 - 10 * i, (37 * i) % 256)


def _write_lists(root, width=21, rows=None):
  """12 solid-colour PNGs under images/; train 4, test 3, database 9 (the training ones
  included); labels: image i has columns i % width and (i + 1) % width."""
  (root / "images").mkdir(parents=True, exist_ok=True)
  for i in range(12):
    Image.new("RGB", (6, 5), _color(i)).save(root / "images" / f"img_{i:02d}.png")
  parts = {"train.txt": [0, 1, 2, 3], "test.txt": [9, 10, 11], "database.txt": list(range(9))}
  for name, items in parts.items():
    w = width if rows is None else rows.get(name, width)
    lines = []
    for i in items:
      row = ["1" if c in (i % w, (i + 1) % w) else "0" for c in range(w)]
      lines.append(f"images/img_{i:02d}.png {' '.join(row)}\n")
    (root / name).write_text("".join(lines))
  return parts


def test_lists_give_the_split_paths_joined_to_root_and_notes(tmp_path):
  parts = _write_lists(tmp_path)
  lists = load_paper_lists("nuswide_21", tmp_path)
  for got, name in zip((lists.train, lists.query, lists.database), parts):
    assert got.paths == [str(tmp_path / "images" / f"img_{i:02d}.png") for i in parts[name]]
    assert got.labels.dtype == bool and got.labels.shape == (len(parts[name]), 21)
  assert lists.query.labels[0].nonzero()[0].tolist() == [9, 10]
  assert len(lists.notes) == 3  # queries, training images and database differ from the preset's
  assert "test.txt lists 3 images; the preset's protocol has 2,100" in lists.notes[0]
  # MCH's FLICKR split reads lists of 21 columns; DeepHash-pytorch's 24 or 38.
  flickr = load_paper_lists("mirflickr_21", tmp_path)
  assert flickr.train.labels.shape == (4, 21)
  assert "test.txt lists 3 images; the preset's protocol has 5,000" in flickr.notes[0]
  with pytest.raises(DataFormatError, match="have 21 label columns; mirflickr has 24 or 38"):
    load_paper_lists("mirflickr", tmp_path)
  _write_lists(tmp_path, width=38)
  assert load_paper_lists("mirflickr", tmp_path).train.labels.shape == (4, 38)
  with pytest.raises(DataFormatError, match="have 38 label columns; mirflickr_21 has 21"):
    load_paper_lists("mirflickr_21", tmp_path)


def test_list_protocol_decodes_the_images(tmp_path):
  parts = _write_lists(tmp_path)
  with pytest.warns(UserWarning, match="the preset's protocol has 10,500"):
    train, query, database = load_protocol("nuswide_21", 0, root=tmp_path, image_size=8)
  for batch, name in zip((train, query, database), parts):
    pixels = batch["views"][0]
    assert pixels.dtype == np.uint8 and pixels.shape == (len(parts[name]), 8, 8, 3)
    colors = [_color(i) for i in parts[name]]
    np.testing.assert_array_equal(pixels[:, 3, 5], colors)
    assert batch["labels"].dtype == bool and batch["labels"].shape == (len(parts[name]), 21)
  with pytest.warns(UserWarning):
    limited = load_protocol("nuswide_21", 0, root=tmp_path, image_size=8, database_limit=4)[2]
  assert limited["views"][0].shape == (4, 8, 8, 3)
  colors = {_color(i) for i in parts["database.txt"]}
  assert {tuple(p) for p in limited["views"][0][:, 0, 0]} <= colors
  assert protocol_options("nuswide_21")["image_size"] == 224


def test_lists_refuse_missing_list_files_and_images(tmp_path):
  _write_lists(tmp_path)
  (tmp_path / "test.txt").unlink()
  (tmp_path / "database.txt").unlink()
  with pytest.raises(FileNotFoundError, match=r"nuswide_21: .* lacks test\.txt, database\.txt"):
    load_paper_lists("nuswide_21", tmp_path)
  _write_lists(tmp_path)
  (tmp_path / "images" / "img_01.png").unlink()
  (tmp_path / "images" / "img_10.png").unlink()
  with pytest.raises(FileNotFoundError, match=r"2 of the 12 image files .*img_01\.png'"):
    load_paper_lists("nuswide_21", tmp_path)
  assert len(load_paper_lists("nuswide_21", tmp_path, check_files=False).train.paths) == 4
  with pytest.raises(FileNotFoundError, match="protocol 'coco': root .* is not a folder"):
    load_paper_lists("coco", tmp_path / "nowhere")
  with pytest.raises(ValueError, match="name must be one of nuswide_21, .*voc2012; got 'cifar10'"):
    load_paper_lists("cifar10", tmp_path)


def test_lists_refuse_label_widths_that_change(tmp_path):
  _write_lists(tmp_path, rows={"test.txt": 20})
  with pytest.raises(DataFormatError, match="train.txt: 21, test.txt: 20, database.txt: 21"):
    load_paper_lists("nuswide_21", tmp_path)
  _write_lists(tmp_path, width=20)
  with pytest.raises(DataFormatError, match="have 20 label columns; nuswide_21 has 21"):
    load_paper_lists("nuswide_21", tmp_path)
  with pytest.raises(DataFormatError, match="have 20 label columns; mirflickr has 24 or 38"):
    load_paper_lists("mirflickr", tmp_path)
  _write_lists(tmp_path)
  with open(tmp_path / "database.txt", "a") as f:
    f.write("images/img_11.png" + " 0" * 20 + "\n")  # a line one label short
  with pytest.raises(DataFormatError, match=r"database\.txt, line 10: .*20 labels where"):
    load_paper_lists("nuswide_21", tmp_path)


def test_list_protocol_refuses_sizes_beyond_memory(tmp_path, monkeypatch):
  _write_lists(tmp_path)
  monkeypatch.setattr(_checks, "memory_bytes", lambda: 10_000)  # a machine of 10 kB
  # 16 images of 32 x 32 x 3 = 49,152 bytes, and 16 x 21 label bytes
  with pytest.raises(
    ValueError,
    match=r"image_size=32: 16 images .* 49,488 bytes .*stream=True.*jhash.training_pipeline",
  ):
    load_protocol("nuswide_21", 0, root=tmp_path, image_size=32)
  with pytest.warns(UserWarning):
    load_protocol("nuswide_21", 0, root=tmp_path, image_size=4)  # 16 x 48 + 336 bytes: read


def test_the_guide_table_is_the_presets():
  """docs/papers-datasets.md's table says what PAPER_PRESETS holds, row by row."""
  import pathlib

  page = pathlib.Path(__file__).resolve().parents[1] / "docs" / "papers-datasets.md"
  lines = page.read_text().splitlines()
  start = next(i for i, line in enumerate(lines) if line.startswith("| name"))
  table = itertools.takewhile(lambda line: line.startswith("|"), lines[start + 2 :])
  rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table]
  shown = lambda v, none: none if v is None else str(v)
  want = [
    [
      name,
      p.layout,
      " or ".join(map(str, p.num_labels)),
      str(p.num_query),
      str(p.num_train),
      shown(p.num_database, "the rest"),
      shown(p.map_at, "all"),
      p.relevance,
    ]
    for name, p in PAPER_PRESETS.items()
  ]
  assert rows == want
