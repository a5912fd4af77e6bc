"""Bad input, round 9: what a ninth probe round found (about 610 cases)."""

import subprocess
import sys

import jax
import numpy as np
import pytest
from jax.sharding import Mesh

import _data_files
import _experiment_runs as runs
import jhash
from experiments import cdh_common
from experiments import harness

ROOT = runs.REPO


def _wiki(folder, **changes):
  """A small wikiData.mat (20 training pairs, 6 queries, class ids 1..10), changed."""
  rng = np.random.default_rng(0)
  arrays = {
    "I_tr": rng.normal(size=(20, 8)),
    "T_tr": rng.normal(size=(20, 4)),
    "L_tr": (np.arange(20) % 10 + 1)[:, None],
    "I_te": rng.normal(size=(6, 8)),
    "T_te": rng.normal(size=(6, 4)),
    "L_te": (np.arange(6) % 10 + 1)[:, None],
    **changes,
  }
  folder.mkdir(parents=True, exist_ok=True)
  return _data_files.write_mat_classic(folder / "wikiData.mat", arrays)


def test_a_cross_view_file_whose_splits_differ_in_width_is_refused(tmp_path):
  cases = {  # each was returned as it was: queries unlike the training items
    "features": ({"I_te": np.ones((6, 5))}, r"I_te has 5 columns but I_tr has 8"),
    "labels": (
      {"L_tr": np.eye(10)[np.arange(20) % 10], "L_te": np.eye(12)[:6]},
      r"L_te has 12 label columns but L_tr has 10",
    ),
  }
  for case, (changes, match) in cases.items():
    path = _wiki(tmp_path / case, **changes)
    with pytest.raises(jhash.data.DataFormatError, match=match):
      jhash.data.load_cross_modal_mat(path)


def test_cell_array_labels_and_empty_splits_are_named(tmp_path):
  path = _wiki(tmp_path / "cells", L_tr=np.array([[1]] * 20, dtype=object))
  with pytest.raises(jhash.data.DataFormatError, match=r"'L_tr' must be a numeric label matrix"):
    jhash.data.load_cross_modal_mat(path)  # was: NumPy's "no callable rint method"
  path = _wiki(
    tmp_path / "empty", I_te=np.zeros((0, 8)), T_te=np.zeros((0, 4)), L_te=np.zeros((0, 1))
  )
  with pytest.raises(jhash.data.DataFormatError, match=r"test split holds no item"):
    jhash.data.load_protocol("wiki_cv", 0, root=path)  # was: empty batches
  for base in (True, 1.0):  # was: accepted
    with pytest.raises(ValueError, match=r"class_index_base must be None, 0 or 1"):
      jhash.data.load_cross_modal_mat(_wiki(tmp_path / "base"), class_index_base=base)


def test_a_v73_sparse_matrix_without_its_row_count_is_named(tmp_path):
  h5py = pytest.importorskip("h5py")
  path = _data_files.write_mat_v73(tmp_path / "s.mat", {"I_tr": np.ones((3, 2))})
  with h5py.File(path, "a") as f:
    group = f.create_group("L_tr")
    for name in ("data", "ir", "jc"):
      group.create_dataset(name, data=np.zeros(1))
  with pytest.raises(jhash.data.DataFormatError, match=r"lacks its MATLAB_sparse attribute"):
    jhash.data.load_cross_modal_mat(path)  # was: h5py's KeyError


def test_the_cdh_configs_check_lengths_options_and_intervals_before_any_data():
  cases = [
    ("bits", (0,), r"config.bits: code lengths must be ints in \[1, 65536\]"),
    ("bits", (16, 16), r"config.bits: each value once"),
    ("checkpoint_every", -1, r"config.checkpoint_every: must be an int >= 1"),  # was: ran
  ]
  for key, value, match in cases:
    config = runs.load_config("cdh_papers", "quick").unlock()
    config[key] = value
    with pytest.raises(harness.ConfigError, match=match):
      cdh_common.validate(config.lock(), tuple(config.keys()))
  config = runs.load_config("cdh_papers", "quick").unlock()
  config.cdh.chunk_size = 0  # was: a traceback after the data loaded
  with pytest.raises(harness.ConfigError, match=r"config.cdh: chunk_size must be >= 1"):
    cdh_common.validate(config.lock(), tuple(config.keys()))
  config = runs.load_config("cdh_papers", "quick").unlock()
  config.baseline_options.cmfh.num_iters = -1  # was: a traceback after CDH trained
  with pytest.raises(harness.ConfigError, match=r"config.baseline_options.cmfh: num_iters"):
    cdh_common.validate(config.lock(), tuple(config.keys()))


def test_a_constant_view_is_named_not_divided_by_zero():
  train = {"views": (np.ones((5, 3)), np.arange(10.0).reshape(5, 2)), "labels": np.arange(5)}
  with pytest.raises(ValueError, match=r"view 0 is the same for every one of the 5 training"):
    cdh_common.centre_and_scale(train)  # was: NaN features, then "must hold finite values"


def _refused(config: str, override: str) -> subprocess.CompletedProcess:
  """``python -m experiments.main`` with ``override``: refused with status 1, no traceback."""
  out = subprocess.run(
    [sys.executable, "-m", "experiments.main", "--config", config, override, "--workdir", "/no/w"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
  return out


def test_an_override_path_with_a_dash_names_the_python_name():
  out = _refused("experiments/configs/papers.py:cifar10-1", "--config.datasets.cifar10-1.root=/x")
  assert "'cifar10-1' is not a Python name" in out.stderr and "'cifar10_1'" in out.stderr


def _pairwise():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 12)).astype(np.float32)
  return jhash.methods.pairwise(8, batch_size=16), {"views": (x,), "labels": np.arange(64) % 3}


def test_fit_names_bad_batch_entries_meshes_and_states():
  method, batch = _pairwise()
  key = jax.random.key(0)
  with pytest.raises(ValueError, match=r"batch\['foo'\] must be an array of numbers or bools"):
    jhash.fit(method, key, {**batch, "foo": "x"}, progress=False)  # was: JAX's TypeError
  with pytest.raises(ValueError, match=r"mesh must have Auto axes"):
    jhash.fit(method, key, batch, progress=False, mesh=jax.make_mesh((1,), ("data",)))
  mesh = Mesh(np.array(jax.devices()[:1]), ("data",))

  def extra(rows):
    for minibatch in jhash.minibatches(batch, 16, key, 4):
      yield {**minibatch, "w": np.ones(rows)}

  with pytest.raises(ValueError, match=r"minibatch\['w'\] must hold one row per item \(16"):
    jhash.fit(method, key, extra(3), 4, num_items=64, mesh=mesh, progress=False)
  stream = jhash.minibatches(batch, 16, key, 4)
  with pytest.raises(ValueError, match=r"state must be a state pairwise makes"):
    jhash.fit(method, key, stream, 4, num_items=64, state={"a": 1}, progress=False)


def test_a_stream_whose_labels_change_layout_is_refused():
  method, batch = _pairwise()
  key = jax.random.key(0)

  def changing():
    for i, minibatch in enumerate(jhash.minibatches(batch, 16, key, 4)):
      labels = minibatch["labels"]
      yield {**minibatch, "labels": np.eye(3, dtype=bool)[labels] if i else labels}

  with pytest.raises(ValueError, match=r"minibatch of step 1: its labels .* differ"):
    jhash.fit(method, key, changing(), 4, num_items=64, progress=False)  # was: opt_einsum


def test_pth_files_with_foreign_keys_or_sparse_tensors_are_named(tmp_path):
  torch = pytest.importorskip("torch")
  variables = {"params": {}}
  for name, state, match in (
    ("int_key.pth", {0: torch.zeros(1)}, r"it has the key 0 \(int\)"),
    ("sparse.pth", {"fc.weight": torch.eye(3).to_sparse()}, r"fc.weight is a torch.sparse_coo"),
  ):
    torch.save(state, tmp_path / name)
    with pytest.raises(ValueError, match=match):  # was: AttributeError / torch's TypeError
      jhash.models.load_torchvision(tmp_path / name, variables, "resnet18")


def test_small_ones(tmp_path):
  mesh = jhash.distributed.process_mesh()
  rows = jhash.distributed.global_rows(np.ones(5, jax.numpy.bfloat16), 5, mesh)  # was refused
  assert rows.dtype == jax.numpy.bfloat16
  with pytest.raises(ValueError, match=r"coordinator_address must be 'host:port'"):
    jhash.distributed.initialize("h:\u0663", 2, 0)  # an Arabic-Indic digit: was accepted
  # CIFAR-10's files in root beside an empty cifar-10-batches-bin/: root's are read.
  names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
  for name in names:
    (tmp_path / name).write_bytes(b"")
  (tmp_path / "cifar-10-batches-bin").mkdir()
  with pytest.raises(jhash.data.DataFormatError) as error:  # was: "... lacks 6 files"
    jhash.data.read_cifar10_binary(tmp_path, records_per_file=None)
  assert "lacks" not in str(error.value)


# ----------------------------------------------------------------------------- round 10


def test_a_whole_set_tuple_entry_is_kept_by_the_minibatches():
  method, batch = _pairwise()
  pairs = (np.arange(64), np.arange(64))  # not per item: kept whole (was: a tracer error)
  state, _ = jhash.fit(method, jax.random.key(0), {**batch, "foo": pairs}, 4, progress=False)
  want, _ = jhash.fit(method, jax.random.key(0), batch, 4, progress=False)
  for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(want)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_the_cdh_configs_refuse_repeats_and_bad_gamma_or_selection_length():
  cases = [
    ("cdh_multilabel", "seeds", (0, 0), r"config.seeds: each value once"),  # was: ± 0.0000
    ("cdh_mfeat", "gamma_grid", (0.1, 0.1), r"config.gamma_grid: each value once"),
    ("cdh_fashion", "baselines", ("scm", "scm"), r"config.baselines: each value once"),
    ("cdh_fashion", "gamma", -1.0, r"config.gamma: must be a finite number >= 0"),  # was: ran
    (
      "cdh_mfeat",
      "select_bits",
      -4,
      r"config.select_bits: must be 0 \(choose at each length\) or a code length",
    ),
  ]
  for name, key, value, match in cases:
    config = runs.load_config(name, "quick").unlock()
    config[key] = value
    with pytest.raises(harness.ConfigError, match=match):
      cdh_common.validate(config.lock(), tuple(config.keys()))


def test_meshes_of_manual_axes_and_shape_only_gathers_are_named():
  method, batch = _pairwise()
  manual = Mesh(np.array(jax.devices()[:1]), ("data",), axis_types=(jax.sharding.AxisType.Manual,))
  with pytest.raises(ValueError, match=r"mesh must have Auto axes"):  # was: AssertionError
    jhash.fit(method, jax.random.key(0), batch, 1, progress=False, mesh=manual)
  with pytest.raises(ValueError, match=r"x must be an array"):  # was: an object array
    jhash.distributed.gather(jax.ShapeDtypeStruct((2,), np.float32))
  for address in ("h:1234:5",):  # was: tried to connect
    with pytest.raises(ValueError, match=r"coordinator_address must be 'host:port'"):
      jhash.distributed.initialize(address, 2, 0)
  for count in ("+2", "2_0"):
    with pytest.raises(ValueError, match=r"num_processes must be an integer in"):
      jhash.distributed.initialize("h:1234", count, 0)


def test_bracketed_override_paths_are_named_without_a_traceback():
  out = _refused("experiments/configs/cdh_papers.py:quick", "--config.datasets[wiki_cv].root=/x")
  assert "--config.datasets[wiki_cv].root=/x: no such key" in out.stderr


def test_quantized_and_meta_tensors_in_pth_files_are_named(tmp_path):
  torch = pytest.importorskip("torch")
  weight = torch.ones(4, 3)
  for name, tensor, match in (
    ("q.pth", torch.quantize_per_tensor(weight, 0.1, 0, torch.qint8), r"is a quantized tensor"),
    ("m.pth", torch.empty_like(weight, device="meta"), r"is a meta tensor"),
  ):
    torch.save({"fc.weight": tensor}, tmp_path / name)
    with pytest.raises(ValueError, match=match):  # was: torch's TypeError
      jhash.models.load_torchvision(tmp_path / name, {"params": {}}, "resnet18")


def test_nan_features_in_a_cross_view_file_name_the_file_and_variable(tmp_path):
  features = np.ones((6, 8))
  features[2, 3] = np.nan
  path = _wiki(tmp_path, I_te=features)
  with pytest.raises(jhash.data.DataFormatError, match=r"'I_te' holds NaN or inf .* row 2"):
    jhash.data.load_cross_modal_mat(path)  # was: "views[0] must hold finite values"


# ----------------------------------------------------------------------------- left from round 10


def test_a_dict_batch_entry_is_refused():
  method, batch = _pairwise()
  nested = {"a": np.zeros(64), "b": np.ones(64)}
  with pytest.raises(ValueError, match=r"batch\['foo'\] must be an array of numbers or bools"):
    jhash.fit(method, jax.random.key(0), {**batch, "foo": nested}, 4, progress=False)  # was kept


def test_a_stream_entry_that_appears_after_the_first_minibatch_is_refused():
  method, batch = _pairwise()
  key = jax.random.key(0)

  def growing():
    for i, minibatch in enumerate(jhash.minibatches(batch, 16, key, 4)):
      yield {**minibatch, "extra": np.zeros(16)} if i == 2 else minibatch

  with pytest.raises(ValueError, match=r"minibatch of step 2 adds \['extra'\] against"):
    jhash.fit(method, key, growing(), 4, num_items=64, progress=False)  # was: trained on


def test_an_override_path_with_spaces_or_quotes_suggests_the_configs_key():
  for override in ("--config.data sets.x=1", "--config.'datasets'.x=1"):
    out = _refused("experiments/configs/papers.py:cifar10-1", override)
    assert "did you mean 'datasets'?" in out.stderr, out.stderr  # was: 'data_sets', "'datasets'"


def test_list_protocols_read_lists_in_another_encoding(tmp_path):
  from PIL import Image

  (tmp_path / "imgs").mkdir()
  names = ["caf\u00e9_0.png", "caf\u00e9_1.png"]
  for i, name in enumerate(names):
    Image.new("RGB", (4, 4), (40 * i, 0, 0)).save(tmp_path / "imgs" / name)
  for part in ("train.txt", "test.txt", "database.txt"):
    lines = [
      f"imgs/{n} " + " ".join("1" if c == i else "0" for c in range(21))
      for i, n in enumerate(names)
    ]
    (tmp_path / part).write_bytes("\n".join(lines).encode("latin-1"))
  with pytest.raises(jhash.data.DataFormatError, match=r"the list protocols of load_protocol"):
    jhash.data.load_protocol("nuswide_21", 0, root=tmp_path, image_size=4)
  with pytest.warns(UserWarning):  # sizes unlike the preset's
    train, _, _ = jhash.data.load_protocol(
      "nuswide_21", 0, root=tmp_path, image_size=4, encoding="latin-1"
    )  # was: no way to say the encoding
  np.testing.assert_array_equal(train["views"][0][:, 0, 0, 0], [0, 40])
