"""``jhash evaluate``: the presets against slow transcriptions of the toolboxes, files as
PyTorch scripts save them, the JSON and curves written, and one clear line for bad input."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import _data_files
import _evaluate_reference as er
import _metrics_reference as ref
from jhash import _cli
from jhash import codes
from jhash import evaluate
from jhash import metrics

ROOT = pathlib.Path(__file__).resolve().parent.parent
Q, N, BITS = 30, 200, 8


def tied_data(multilabel=True, seed=0):
  """8-bit codes built from 6 distinct codes (a few bits flipped): large tie groups."""
  rng = np.random.default_rng(seed)
  base = np.where(rng.random((6, BITS)) < 0.5, 1, -1).astype(np.int8)
  query = base[rng.integers(0, 6, Q)]
  db = base[rng.integers(0, 6, N)]
  db = np.where(rng.random(db.shape) < 0.08, -db, db).astype(np.int8)
  if multilabel:
    return query, db, rng.random((Q, 5)) < 0.3, rng.random((N, 5)) < 0.3
  return query, db, rng.integers(0, 4, Q).astype(np.int32), rng.integers(0, 4, N).astype(np.int32)


# ------------------------------------------------------------------------------------------
# The presets


def _toolbox(name, data, k, argsort_kind=None):
  """The slow transcription of preset ``name`` at cut-off ``k`` (None: whole ranking)."""
  if name == "hashnet":
    return er.hashnet_map(*data, N if k is None else k, argsort_kind)
  if name == "deephash" or (name == "jiangqy" and k is not None):  # calc_topMap = CalcTopMap
    return ref.deephash_calc_top_map(*data, N if k is None else k, argsort_kind)
  return er.jiangqy_calc_map(*data, argsort_kind)


@pytest.mark.parametrize("multilabel", [True, False])
@pytest.mark.parametrize("name", ["deephash", "hashnet", "jiangqy"])
def test_toolbox_presets_equal_their_transcriptions_ties_included(name, multilabel):
  data = tied_data(multilabel)
  preset = evaluate.PRESETS[name]
  for k in (None, 20):
    want = _toolbox(name, data, k)
    by_index = _toolbox(name, data, k, argsort_kind="stable")
    assert abs(want - by_index) > 1e-4  # the data tell NumPy's tie order from the index order
    assert preset.compute(*data, k) == pytest.approx(want, abs=1e-12)
    # ... and the preset's documented options are the same rule with ties by index.
    assert metrics.mean_average_precision(*data, top_k=k, **preset.options) == pytest.approx(
      by_index, abs=1e-6
    )


@pytest.mark.parametrize("multilabel", [True, False])
def test_tie_aware_preset_is_the_expected_ap_over_tie_orders(multilabel):
  data = tied_data(multilabel)
  preset = evaluate.PRESETS["tie-aware"]
  for k in (None, 20):
    want = ref.mean_average_precision(*data, top_k=k)
    assert preset.compute(*data, k) == pytest.approx(want, abs=1e-6)


def test_hashnet_leaves_out_queries_with_nothing_relevant_retrieved():
  query, db, q_labels, db_labels = tied_data(multilabel=False)
  q_labels = q_labels.copy()
  q_labels[:5] = 9  # a class no database item has
  data = (query, db, q_labels, db_labels)
  got = evaluate.hashnet_map(*data, top_k=50)
  assert got == pytest.approx(er.hashnet_map(*data, 50), abs=1e-12)
  # Left out, not counted as 0: the mean over the other queries.
  others = (query[5:], db, q_labels[5:], db_labels)
  assert got == pytest.approx(er.hashnet_map(*others, 50), abs=1e-12)
  assert np.isnan(evaluate.hashnet_map(query[:5], db, q_labels[:5], db_labels, top_k=50))


# ------------------------------------------------------------------------------------------
# Files as PyTorch scripts save them


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  """The tied data saved several ways: {name: path}."""
  folder = tmp_path_factory.mktemp("evaluate")
  query, db, q_labels, db_labels = tied_data()
  arrays = {
    "q_float.npy": query.astype(np.float32),  # torch.sign(output).numpy()
    "db_float.npy": db.astype(np.float32),
    "ql_float.npy": q_labels.astype(np.float32),  # multi-hot float labels
    "dl_float.npy": db_labels.astype(np.float32),
    "q_bits.npy": (query > 0).astype(np.uint8),
    "db_bits.npy": db > 0,
    "q_packed.npy": np.asarray(codes.pack_bits(query)),
    "db_packed.npy": np.asarray(codes.pack_bits(db)),
  }
  for name, a in arrays.items():
    np.save(folder / name, a)
  return {name.removesuffix(".npy"): str(folder / name) for name in arrays} | {"dir": folder}


def _args(files, q="q_float", db="db_float", ql="ql_float", dl="dl_float"):
  return ["--query-codes", files[q], "--db-codes", files[db]] + [
    "--query-labels",
    files[ql],
    "--db-labels",
    files[dl],
  ]


def _run(argv, capsys):
  status = evaluate.main(argv)
  out, err = capsys.readouterr()
  return status, out, err


def _json_run(files, capsys, name, extra=(), **which):
  path = files["dir"] / f"{name}.json"
  status, out, err = _run(
    _args(files, **which) + ["--top-k", "20", "--json", str(path)] + list(extra), capsys
  )
  assert status == 0, err
  return json.loads(path.read_text()), out


def test_float_codes_and_labels_give_jhash_metrics_numbers(files, capsys):
  report, out = _json_run(files, capsys, "float")
  query, db, q_labels, db_labels = tied_data()
  m = report["metrics"]
  assert m["map"] == pytest.approx(metrics.mean_average_precision(query, db, q_labels, db_labels))
  assert m["map_at_k"] == {
    "k": 20,
    "value": pytest.approx(
      metrics.mean_average_precision(query, db, q_labels, db_labels, top_k=20)
    ),
  }
  p_at_k = metrics.precision_at_k(query, db, q_labels, db_labels, [100, 200])
  assert m["precision_at_k"] == {"100": pytest.approx(p_at_k[0]), "200": pytest.approx(p_at_k[1])}
  p, r = metrics.precision_recall_at_radius(query, db, q_labels, db_labels, 2)
  assert m["radius"] == {"radius": 2, "precision": pytest.approx(p), "recall": pytest.approx(r)}
  assert "mAP@20" in out and "precision (Hamming radius <= 2)" in out


def test_bits_and_packed_codes_give_the_same_numbers(files, capsys):
  # Each mixed with -1/+1 codes on the other side, so that a flipped polarity shows.
  want, _ = _json_run(files, capsys, "float")
  bits_q, out = _json_run(files, capsys, "bits_q", q="q_bits")
  bits_db, _ = _json_run(files, capsys, "bits_db", db="db_bits")
  packed, _ = _json_run(files, capsys, "packed", ["--num-bits", "8"], db="db_packed")
  both, _ = _json_run(files, capsys, "both", ["--num-bits", "8"], q="q_packed", db="db_packed")
  for got in (bits_q, bits_db, packed, both):
    assert got["metrics"] == want["metrics"]
  assert "bits 0/1" in bits_q["inputs"]["query_codes"]["read_as"] and "bits 0/1" in out
  assert "bits 0/1" in bits_db["inputs"]["db_codes"]["read_as"]  # a bool file
  assert "signs" in bits_db["inputs"]["query_codes"]["read_as"]
  assert "packed" in packed["inputs"]["db_codes"]["read_as"]


def test_json_holds_the_convention_and_every_preset(files, capsys):
  report, out = _json_run(files, capsys, "presets", ["--preset", "hashnet", "--compare-presets"])
  data = tied_data()
  assert (report["queries"], report["items"], report["bits"]) == (Q, N, BITS)
  assert report["convention"] == {
    "name": "hashnet",
    "source": evaluate.PRESETS["hashnet"].source,
    **evaluate.PRESETS["hashnet"].options,
    "top_k": 20,
  }
  assert report["metrics"]["map"] == pytest.approx(er.hashnet_map(*data, N), abs=1e-12)
  assert report["metrics"]["map_at_k"]["value"] == pytest.approx(
    er.hashnet_map(*data, 20), abs=1e-12
  )
  presets = report["metrics"]["presets"]
  assert list(presets) == list(evaluate.PRESETS)
  for name, row in presets.items():
    assert row["k"] == 20 and row["source"] == evaluate.PRESETS[name].source
    assert row["map"] == pytest.approx(evaluate.PRESETS[name].compute(*data, None), abs=1e-12)
  assert presets["jiangqy"]["map"] == pytest.approx(er.jiangqy_calc_map(*data), abs=1e-12)
  assert all(name in out for name in evaluate.PRESETS)


def test_a_toolbox_cut_off_past_the_database_is_clipped_and_said(files, capsys):
  status, out, err = _run(_args(files) + ["--preset", "deephash"], capsys)
  assert status == 0, err
  assert f"mAP@{N}" in out and "clipped" in out


def test_explicit_options_are_mean_average_precision_options(files, capsys):
  report, _ = _json_run(files, capsys, "options", ["--ties", "index", "--normalizer", "min"])
  data = tied_data()
  want = metrics.mean_average_precision(*data, top_k=20, ties="index", normalizer="min")
  assert report["metrics"]["map_at_k"]["value"] == pytest.approx(want)
  assert report["convention"]["ties"] == "index" and report["convention"]["name"] == "options"


def test_curves_are_written(files, capsys):
  path = files["dir"] / "curves.json"
  status, out, err = _run(_args(files) + ["--curves", str(path)], capsys)
  assert status == 0, err
  curves = json.loads(path.read_text())
  pr = metrics.pr_curve_by_radius(*tied_data())
  assert curves["pr_by_radius"]["radius"] == list(range(BITS + 1))
  np.testing.assert_allclose(curves["pr_by_radius"]["precision"], pr["precision"], atol=1e-6)
  ks = curves["precision_at_k"]["k"]
  assert ks[0] == 1 and ks[-1] == N and ks == sorted(set(ks))
  try:
    import matplotlib  # noqa: F401
  except ImportError:
    return
  assert path.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"


def test_mat_files_classic_and_v73(files, capsys, tmp_path):
  import h5py
  import scipy.io

  query, db, q_labels, db_labels = tied_data()
  both = tmp_path / "codes.mat"
  scipy.io.savemat(both, {"qB": query.astype(np.float64), "rB": db.astype(np.float64)})
  # v7.3 as MATLAB writes it (header, column-major arrays: read transposed), and a plain
  # HDF5 file written from NumPy (row-major: read as it is).
  matlab = _data_files.write_mat_v73(
    tmp_path / "labels.v73.mat", {"q_l": q_labels.astype(np.float64), "r_l": db_labels}
  )
  plain = tmp_path / "labels.h5.mat"
  with h5py.File(plain, "w") as f:
    f["q_l"] = q_labels.astype(np.float64)
    f["r_l"] = db_labels.astype(np.float64)
  want, _ = _json_run(files, capsys, "float")
  for labels in (matlab, plain):
    argv = ["--query-codes", str(both), "--query-key", "qB", "--db-codes", str(both)]
    argv += ["--db-key", "rB", "--query-labels", str(labels), "--query-labels-key", "q_l"]
    argv += ["--db-labels", str(labels), "--db-labels-key", "r_l"]
    argv += ["--json", str(tmp_path / "m.json")]
    status, _, err = _run(argv + ["--top-k", "20"], capsys)
    assert status == 0, err
    assert json.loads((tmp_path / "m.json").read_text())["metrics"] == want["metrics"]


# ------------------------------------------------------------------------------------------
# Bad input: exit status 2, one line on stderr naming the file


def _bad_files(folder: pathlib.Path) -> dict:
  rng = np.random.default_rng(1)
  signs = np.where(rng.random((N, BITS)) < 0.5, 1.0, -1.0).astype(np.float32)
  made = {
    "object.npy": np.array([1, "a", None], dtype=object),
    "rank1.npy": signs[:, 0],
    "twos.npy": signs * 2,
    "zeros.npy": np.where(np.arange(BITS) == 3, 0.0, signs),
    "short.npy": signs[:, :6],
    "labels7.npy": rng.integers(0, 3, 7),
    "uint32.npy": np.asarray(codes.pack_bits(signs)),
  }
  for name, a in made.items():
    np.save(folder / name, a, allow_pickle=True)
  (folder / "codes.txt").write_text("1 -1 1\n")
  import scipy.io

  scipy.io.savemat(folder / "two.mat", {"B": signs, "L": rng.integers(0, 3, N)})
  return {name: str(folder / name) for name in [*made, "codes.txt", "two.mat"]}


BAD = {
  # case: (option, file, extra args, words the message must hold)
  "missing file": ("--db-codes", "nothing.npy", [], ["no such file"]),
  "not npy or mat": ("--db-codes", "codes.txt", [], [".npy or .mat"]),
  "pickled npy": ("--db-codes", "object.npy", [], ["pickled", "object"]),
  "wrong rank": ("--db-codes", "rank1.npy", [], ["[n, K]", "(200,)"]),
  "not signs or bits": ("--db-codes", "twos.npy", [], ["-1/+1", "0/1", "2.0"]),
  "zero among signs": ("--db-codes", "zeros.npy", [], ["torch.sign", "0.0"]),
  "bit lengths differ": ("--db-codes", "short.npy", [], ["8-bit", "6-bit"]),
  "label rows": ("--db-labels", "labels7.npy", [], ["7 label rows", "200 codes"]),
  "packed without num-bits": ("--db-codes", "uint32.npy", [], ["--num-bits"]),
  "mat key absent": ("--db-codes", "two.mat", ["--db-key", "rB"], ["'rB'", "B, L"]),
  "mat key needed": ("--db-codes", "two.mat", [], ["--db-key", "B, L"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_naming_the_file(case, files, capsys, tmp_path):
  option, name, extra, words = BAD[case]
  paths = _bad_files(tmp_path)
  path = paths.get(name, str(tmp_path / name))
  argv = _args(files)
  argv[argv.index(option) + 1] = path
  status, out, err = _run(argv + extra, capsys)
  assert status == 2 and out == ""
  assert err.count("\n") == 1 and "Traceback" not in err, err
  assert err.startswith("python -m jhash.evaluate: error: ") and path in err and option in err
  for word in words:
    assert word in err, (word, err)


@pytest.mark.parametrize(
  "extra,words",
  [
    (["--preset", "deephash", "--ties", "index"], ["--preset", "--ties"]),
    (["--top-k", "201"], ["--top-k", "[1, 200]"]),
    (["--ks", "10,500"], ["--ks", "500"]),
    (["--ties", "aware", "--normalizer", "retrieved", "--top-k", "5"], ["retrieved"]),
    (["--preset", "nope"], ["invalid choice", "--help"]),
  ],
)
def test_bad_options_are_one_line(extra, words, files, capsys):
  status, out, err = _run(_args(files) + extra, capsys)
  assert status == 2 and err.count("\n") == 1, err
  for word in words:
    assert word in err, (word, err)


# ------------------------------------------------------------------------------------------
# The commands


def test_module_help_runs_in_a_subprocess():
  out = subprocess.run(
    [sys.executable, "-m", "jhash.evaluate", "--help"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert out.returncode == 0, out.stderr
  assert "--query-codes" in out.stdout and "hashnet" in out.stdout


def test_jhash_command_lists_and_dispatches_evaluate(files, capsys):
  with pytest.raises(SystemExit) as exit_:
    _cli.main(["--help"])
  assert exit_.value.code == 0 and "evaluate" in capsys.readouterr().out
  assert _cli.main(["evaluate", "--query-codes", "x.npy"]) == 2
  assert capsys.readouterr().err.startswith("jhash evaluate: error: ")
  assert _cli.main(["evaluate"] + _args(files) + ["--top-k", "20"]) == 0
  assert "mAP@20" in capsys.readouterr().out
