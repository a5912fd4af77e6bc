"""CDH's cross-view ``.mat`` sets as named protocols (``jhash.data.CROSS_VIEW_PRESETS``) and
their experiment (``experiments/configs/cdh_papers.py``), on small files written here."""

import warnings

import numpy as np
import pytest
from ml_collections.config_flags import config_path

import _data_files
import _experiment_runs as runs
import jhash
from experiments import cdh_common
from experiments import cdh_papers
from experiments import harness
from jhash.data import CROSS_VIEW_PRESETS
from jhash.data import PAPER_PRESETS
from jhash.data import DataFormatError
from jhash.data import load_protocol
from jhash.data import protocol_map_at

WRITERS = [_data_files.write_mat_classic, _data_files.write_mat_v73]


def _write(folder, file_name, arrays, writer=_data_files.write_mat_classic):
  folder.mkdir(parents=True, exist_ok=True)
  return writer(folder / file_name, arrays)


def _load_quietly(name, root, **options):
  """``load_protocol(name, 0, root=root)`` with its size warning, if any, recorded."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    batches = load_protocol(name, 0, root=root, **options)
  return batches, [str(w.message) for w in caught]


# ----------------------------------------------------------------------------- presets


def test_presets_hold_cdhs_sets_under_their_own_names():
  assert set(CROSS_VIEW_PRESETS) == {"wiki_cv", "mirflickr_cv", "nuswide_cv"}
  assert not set(CROSS_VIEW_PRESETS) & set(PAPER_PRESETS)  # "mirflickr" is the image lists
  sizes = {n: (p.num_query, p.num_train, p.num_database) for n, p in CROSS_VIEW_PRESETS.items()}
  # CDH Sec. 4: Wiki's 2,866 pairs (the 2,173 / 693 release), MIRFlickr 5% of 25,000,
  # NUS-WIDE 1% of 186,577; the database is the training set.
  assert sizes == {
    "wiki_cv": (693, 2_173, 2_173),
    "mirflickr_cv": (1_250, 23_750, 23_750),
    "nuswide_cv": (1_866, 184_711, 184_711),
  }
  labels = {n: (p.num_labels, p.relevance) for n, p in CROSS_VIEW_PRESETS.items()}
  assert labels == {
    "wiki_cv": ((10,), "same_class"),
    "mirflickr_cv": ((24,), "share_label"),
    "nuswide_cv": ((10,), "share_label"),
  }
  files = {n: p.file_name for n, p in CROSS_VIEW_PRESETS.items()}
  assert files == {
    "wiki_cv": "wikiData.mat",
    "mirflickr_cv": "mirflickr25k.mat",
    "nuswide_cv": "nus-wide.mat",
  }
  for name, preset in CROSS_VIEW_PRESETS.items():
    assert preset.layout == "cross-view-mat" and "CDH" in preset.source
    assert name in jhash.data.PROTOCOLS
    assert protocol_map_at(name) is None  # CDH ranks the whole database
    # --config.datasets.NAME.root=... parses (ml_collections reads the path as Python).
    assert config_path.split(f"datasets.{name}.root") == ("datasets", name, "root")


# ----------------------------------------------------------------------------- the files


@pytest.mark.parametrize("writer", WRITERS)
def test_wiki_layout_reads_the_files_splits(tmp_path, rng, writer):
  arrays = _data_files.cross_view_arrays(rng, {"tr": 40, "te": 12}, 10)
  path = _write(tmp_path / "copy", "wikiData.mat", arrays, writer)
  (train, query, database), notes = _load_quietly("wiki_cv", tmp_path / "copy")
  assert [len(b["labels"]) for b in (train, query, database)] == [40, 12, 40]
  np.testing.assert_array_equal(train["labels"], arrays["L_tr"][:, 0] - 1)  # ids from 0
  np.testing.assert_array_equal(query["labels"], arrays["L_te"][:, 0] - 1)
  assert train["labels"].dtype == np.int32
  for batch, split in ((train, "tr"), (query, "te"), (database, "tr")):  # no db: the training set
    image, text = batch["views"]
    assert image.dtype == text.dtype == np.float32
    np.testing.assert_allclose(image, arrays[f"I_{split}"], rtol=1e-6)
    np.testing.assert_allclose(text, arrays[f"T_{split}"], rtol=1e-6)
  # The sizes differ from CDH's: one warning names each and the preset's source.
  assert len(notes) == 1
  for part in ("query (te) 12 pairs, not 693", "train (tr) 40 pairs, not 2,173", "(tr, no db)"):
    assert part in notes[0]
  assert "CDH" in notes[0]
  # root may name the file itself, under any name.
  renamed = path.rename(tmp_path / "wiki_v7.mat")
  (train2, _, _), _ = _load_quietly("wiki_cv", renamed)
  np.testing.assert_array_equal(train2["views"][1], train["views"][1])


def test_a_file_of_the_presets_sizes_gives_no_warning(tmp_path, rng):
  arrays = _data_files.cross_view_arrays(rng, {"tr": 2_173, "te": 693}, 10, dims=(2, 2))
  _write(tmp_path, "wikiData.mat", arrays)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    train, query, database = load_protocol("wiki_cv", 0, root=tmp_path)
  assert [len(b["labels"]) for b in (train, query, database)] == [2_173, 693, 2_173]


@pytest.mark.parametrize("writer", WRITERS)
def test_mirflickr_layout_keeps_the_files_database(tmp_path, rng, writer):
  sizes = {"tr": 30, "te": 8, "db": 50}
  arrays = _data_files.cross_view_arrays(rng, sizes, 24, multi_hot=True)
  _write(tmp_path, "mirflickr25k.mat", arrays, writer)
  (train, query, database), notes = _load_quietly("mirflickr_cv", tmp_path)
  parts = {"tr": train, "te": query, "db": database}
  assert {s: len(b["labels"]) for s, b in parts.items()} == sizes
  for split, batch in parts.items():
    assert batch["labels"].dtype == bool and batch["labels"].shape[1] == 24
    np.testing.assert_array_equal(batch["labels"], arrays[f"L_{split}"] == 1)
    np.testing.assert_allclose(batch["views"][0], arrays[f"I_{split}"], rtol=1e-6)
  assert "database (db) 50 pairs, not 23,750" in notes[0]
  # database_limit draws from the file's database; the training split stays whole.
  (train, _, limited), _ = _load_quietly("mirflickr_cv", tmp_path, database_limit=20)
  assert len(limited["labels"]) == 20 and len(train["labels"]) == 30
  rows = {tuple(r) for r in arrays["I_db"].astype(np.float32)}
  assert all(tuple(r) in rows for r in limited["views"][0])


def test_a_missing_file_is_one_error_naming_the_path_and_the_file(tmp_path):
  (tmp_path / "copy").mkdir()  # a folder without the file
  with pytest.raises(FileNotFoundError, match=r"copy/nus-wide\.mat'; expected nus-wide\.mat"):
    load_protocol("nuswide_cv", 0, root=tmp_path / "copy")
  with pytest.raises(FileNotFoundError, match=r"no file .*absent\.mat'; expected wikiData\.mat"):
    load_protocol("wiki_cv", 0, root=tmp_path / "absent.mat")
  with pytest.raises(ValueError, match=r"needs root=.*wikiData\.mat"):
    load_protocol("wiki_cv", 0)


def test_a_file_of_another_set_is_refused(tmp_path, rng):
  wiki = _data_files.cross_view_arrays(rng, {"tr": 20, "te": 5}, 10)
  path = _write(tmp_path, "wikiData.mat", wiki)
  with pytest.raises(DataFormatError, match="class ids .*not the 24 multi-hot"):
    load_protocol("mirflickr_cv", 0, root=path)
  nus = _data_files.cross_view_arrays(rng, {"tr": 20, "te": 5}, 10, multi_hot=True)
  path = _write(tmp_path, "nus-wide.mat", nus)
  with pytest.raises(DataFormatError, match="other than one label"):
    load_protocol("wiki_cv", 0, root=path)
  with pytest.raises(DataFormatError, match="10 label columns, not 24"):
    load_protocol("mirflickr_cv", 0, root=path)


# ----------------------------------------------------------------------------- the experiment


def test_the_configs_need_a_root_and_name_the_file(tmp_path):
  for name in CROSS_VIEW_PRESETS:
    config = runs.load_config("cdh_papers", name)
    assert config.datasets[name].root is None and config.bits == (16, 32, 64)
    assert config.baselines == ("cvh", "scm", "cmfh")
  with pytest.raises(harness.ConfigError, match="config.datasets.wiki_cv: .*needs root"):
    runs.run_config(runs.load_config("cdh_papers", "wiki_cv"), tmp_path / "run")
  config = runs.load_config("cdh_papers", "nuswide_cv").unlock()
  config.datasets["nuswide_cv"].root = str(tmp_path)
  with pytest.raises(harness.ConfigError, match=r"nus-wide\.mat'; expected nus-wide\.mat"):
    runs.run_config(config.lock(), tmp_path / "run")
  with pytest.raises(ValueError, match="wiki_cv, mirflickr_cv, nuswide_cv or quick"):
    runs.load_config("cdh_papers", "wiki")


def test_the_quick_experiment_learns_cross_view_codes(tmp_path, rng):
  arrays = _data_files.cross_view_arrays(rng, {"tr": 300, "te": 60}, 10, noise=2.0)
  _write(tmp_path / "wiki", "wikiData.mat", arrays)
  config = runs.load_config("cdh_papers", "quick").unlock()
  config.datasets["wiki_cv"].root = str(tmp_path / "wiki")
  results = runs.run_config(config.lock(), tmp_path / "run")
  # Random codes: the mAP a method that learned nothing gets (about 0.1, ten classes).
  query, database = (arrays[k][:, 0].astype(np.int32) for k in ("L_te", "L_tr"))
  codes = lambda n: np.where(rng.random((n, 16)) < 0.5, -1, 1).astype(np.int8)
  random = jhash.metrics.mean_average_precision(codes(60), codes(300), query, database)
  protocol = results["protocol"]
  assert protocol["chance"] == pytest.approx(random, abs=0.05)
  cdh = results["metrics"]["cdh/16"]
  for direction in ("image->text", "text->image", "image->B", "text->B"):
    assert cdh[direction] > random + 0.3, (direction, cdh[direction], random)
  assert set(results["metrics"]) == {f"{m}/16" for m in ("cdh", "cdh-0", "cvh", "scm", "cmfh")}
  assert protocol["map_at"] is None and protocol["database"] == "the training set"
  assert (protocol["train"], protocol["query"], protocol["dims"]) == (300, 60, [16, 24])
  assert "query (te) 60 pairs, not 693" in protocol["notes"][0]
  runs.assert_pngs(tmp_path / "run", ["map_vs_bits.png"])


def test_a_separate_database_is_scored_at_the_presets_k_without_learned_codes(tmp_path, rng, key):
  sizes = {"tr": 40, "te": 10, "db": 60}
  arrays = _data_files.cross_view_arrays(rng, sizes, 24, multi_hot=True)
  _write(tmp_path, "mirflickr25k.mat", arrays)
  spec = {"root": str(tmp_path), "database_limit": None}
  data = cdh_papers.paper_data("mirflickr_cv", spec, 0)
  assert data["database"] is not data["train"] and data["map_at"] is None
  assert cdh_common.protocol(data)["database"] == 60
  method = jhash.methods.cvh(4)
  state, _ = jhash.fit(method, key, data["train"], progress=False)
  learned = np.ones((40, 4), np.int8)  # codes of the 40 training pairs, not the database's
  maps = cdh_common.scores(method, state, data, learned)
  assert sorted(maps) == ["image->text", "text->image"]
  # A preset's K reaches the metric: mAP over each query's first 5 database items.
  image = jhash.encode(method, state, {"views": (data["query"]["views"][0], None)})
  text = jhash.encode(method, state, {"views": (None, data["database"]["views"][1])})
  labels = data["query"]["labels"], data["database"]["labels"]
  at_5 = cdh_common.scores(method, state, dict(data, map_at=5), None)["image->text"]
  want = jhash.metrics.mean_average_precision(image, text, *labels, top_k=5)
  assert at_5 == pytest.approx(want) and at_5 != pytest.approx(maps["image->text"])
