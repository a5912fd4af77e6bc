"""Bad input, round 15: what a re-run of the earlier probes still found.

Finished cells whose curves or histories were changed in ``progress.json`` (every trainer:
the digest written with each result), negative integer relevance, and arguments read
before they were checked.
"""

import json

import jax
import numpy as np
import pytest

import jhash
import _experiment_runs as runs
from experiments import harness


def _result():
  return {
    "map": 0.5,
    "pr_radius": {"radius": [0, 1, 2], "precision": [0.9, 0.8, 0.7], "recall": [0.1, 0.2, 0.3]},
    "history": {"loss": [1.0, 0.5]},
  }


def _finish(tmp_path):
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    harness.run_cells([("a", _result), ("b", _result)], wd, progress=False)


_edit = runs.edit_json


def _rerun(tmp_path):
  ran = []
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    cells = [(c, lambda c=c: ran.append(c) or _result()) for c in ("a", "b")]
    harness.run_cells(cells, wd, progress=False)
  return ran


@pytest.mark.parametrize(
  "edit",
  [
    lambda c: c["pr_radius"]["recall"].__setitem__(2, -4),  # was: published, exit 0
    lambda c: c.pop("pr_radius"),  # was: KeyError in the trainer
    lambda c: c["pr_radius"].update(precision=[0.9]),  # was: matplotlib's ValueError
    lambda c: c["history"].update(loss=["a"]),  # was: a plot with a category axis
    lambda c: c.update(extra=1),
  ],
)
def test_a_finished_cell_changed_anywhere_is_named_for_every_trainer(tmp_path, edit):
  _finish(tmp_path)
  assert _rerun(tmp_path) == []  # as written: finished, not run again
  _edit(tmp_path / "progress.json", lambda p: edit(p["cells"]["a"]))
  with pytest.raises(harness.WorkdirError) as error:
    _rerun(tmp_path)
  message = str(error.value)
  assert "is damaged: the result of cell 'a' differs from the digest" in message, message
  assert "delete the entry 'a' from its 'cells' and run again" in message, message
  _edit(tmp_path / "progress.json", lambda p: p["cells"].pop("a"))  # as the message says
  assert _rerun(tmp_path) == ["a"]
  assert _rerun(tmp_path) == []


def test_a_metric_changed_is_named_and_cells_without_digests_are_checked_as_before(tmp_path):
  _finish(tmp_path)
  _edit(tmp_path / "progress.json", lambda p: p["cells"]["a"].update(map="x"))
  with pytest.raises(harness.WorkdirError, match=r"has 'map' = \"x\"; expected a number"):
    _rerun(tmp_path)
  # The digests gone, or one cell's: damage (was: taken as a run from before digests).
  _edit(tmp_path / "progress.json", lambda p: p.pop("digests"))
  with pytest.raises(harness.WorkdirError, match=r"'digests' must be an object of strings"):
    _rerun(tmp_path)
  _edit(tmp_path / "progress.json", lambda p: p.update(digests={"b": "0" * 64}))
  with pytest.raises(harness.WorkdirError, match=r"has 'map' = \"x\""):
    _rerun(tmp_path)
  _edit(tmp_path / "progress.json", lambda p: p["cells"]["a"].update(map=0.5))
  with pytest.raises(harness.WorkdirError, match=r"cell 'a' has no digest"):
    _rerun(tmp_path)
  _edit(tmp_path / "progress.json", lambda p: p.update(digests=[1]))
  with pytest.raises(harness.WorkdirError, match=r"'digests' must be an object of strings"):
    _rerun(tmp_path)
  _edit(tmp_path / "progress.json", lambda p: p.update(version=6, digests={}))
  with pytest.raises(harness.WorkdirError, match=r"'version' must be 5; got 6"):
    _rerun(tmp_path)
  # A workdir from before digests (no version), or one whose version and digests were
  # removed: its results cannot be checked, so they are refused (round 19: adopting them
  # published an edited mAP); as the message says, deleting it trains the cells again.
  _edit(tmp_path / "progress.json", lambda p: (p.pop("version"), p.pop("digests")))
  _edit(tmp_path / "progress.json", lambda p: p["cells"]["a"].update(map=0.99))
  with pytest.raises(
    harness.WorkdirError, match=r"'version' must be 5; got none .*cannot be checked"
  ):
    _rerun(tmp_path)
  (tmp_path / "progress.json").unlink()
  assert _rerun(tmp_path) == ["a", "b"]
  written = json.loads((tmp_path / "progress.json").read_text())
  assert written["version"] == harness.PROGRESS_VERSION and written["cells"]["a"]["map"] == 0.5
  _edit(tmp_path / "progress.json", lambda p: p["seconds"].update(a="x"))
  with pytest.raises(harness.WorkdirError, match=r"'seconds' of cell 'a' is \"x\""):  # was: copied
    _rerun(tmp_path)


def test_what_a_trainer_does_with_the_results_leaves_the_digests_as_written(tmp_path):
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    out = harness.run_cells([("a", _result)], wd, progress=False)
    out["a"]["pr_radius"]["recall"][0] = 7  # a trainer's own use of its results
    harness.run_cells([("a", _result), ("b", _result)], wd, progress=False)  # writes again
  assert _rerun(tmp_path) == []


def test_negative_integer_relevance_is_refused_not_counted_relevant():
  d = np.array([[0, 1, 2]], np.int32)
  signed = np.array([[-1, -1, 1]], np.int32)  # a {-1, +1} similarity matrix S
  # was: 1.0 and [[1.]], every item relevant
  for call in (
    lambda: jhash.metrics.average_precision(d, signed),
    lambda: jhash.metrics.hits_at_k(d, signed, (1,)),
  ):
    with pytest.raises(ValueError, match=r"relevance.*>= 0.*-1"):
      call()
  ap, defined = jhash.metrics.average_precision(d, (signed > 0).astype(np.int32))
  assert float(ap[0]) == pytest.approx(1 / 3) and bool(defined[0])


def test_arguments_read_before_their_checks_are_named():
  codes = jhash.codes.pack_bits(np.where(np.eye(8, 16) > 0, 1, -1).astype(np.int8))
  search = jhash.index.searcher(
    jhash.index.build_index(codes, num_bits=16), max_radius=2, max_results=5
  ).search
  for bad in (np.uint32(3), None, [1, 2]):
    with pytest.raises(ValueError, match=r"query_packed"):  # was: IndexError
      search(bad)
  with pytest.raises(ValueError, match=r"query_labels"):  # was: IndexError
    jhash.metrics.relevance(np.int64(1), np.arange(5), "same_class")
  # was: PIL's own traceback ending in its FileNotFoundError
  with pytest.raises(FileNotFoundError, match=r"path: no image file 'zz.png'") as error:
    jhash.data.decode_image("zz.png")
  assert error.value.__suppress_context__


def test_messages_that_named_the_wrong_thing(tmp_path):
  # A list file that is a folder (was: "lacks database.txt").
  for name in ("train.txt", "test.txt"):
    (tmp_path / name).write_text("a.png 1 0\n")
  (tmp_path / "database.txt").mkdir()
  with pytest.raises(FileNotFoundError, match=r"database.txt is a folder, not a list file"):
    jhash.data.load_paper_lists("nuswide_21", root=tmp_path)
  # Fashion-MNIST's root= a file (was: "the directory good.txt").
  (tmp_path / "good.txt").write_text("x")
  with pytest.raises(jhash.data.DataNotFoundError, match=r"root= must be a directory.*is a file"):
    jhash.data.load_fashion_mnist(root=tmp_path / "good.txt")
  # Features of another item shape (was: "the batch's have width 1").
  rng = np.random.default_rng(0)
  x = rng.normal(size=(32, 8)).astype(np.float32)
  net = jhash.models.backbone((8,), 4, hidden=(8,))
  method = jhash.methods.dch(4, batch_size=16, num_epochs=1, backbone=net)
  train = {"views": (x,), "labels": np.arange(32) % 4}
  state, _ = jhash.fit(method, jax.random.key(0), train, progress=False)
  with pytest.raises(ValueError, match=r"items of shape \(2, 4\)"):
    jhash.encode(method, state, {"views": (x.reshape(32, 2, 4),)})


def test_a_checkpoint_without_its_file_list_is_not_trained_on(tmp_path, capsys):
  # A checkpoint without its file list (a kill between orbax's commit and the list, or
  # the list removed) whose data was also changed: was "training diverged ...", and, with
  # data changed in a way that restores, a wrong result published (round 21).
  rng = np.random.default_rng(0)
  batch = {"views": (rng.normal(size=(64, 6)).astype(np.float32),)}
  method = jhash.methods.itq(4, num_iters=6)
  key = jax.random.key(0)
  whole, _ = jhash.fit(method, key, batch, 6, progress=False)
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    state, history = jhash.fit(method, key, batch, 3, progress=False)
    broken = jax.tree.map(lambda x: x * 2 if x.dtype.kind == "f" else x, state)
    wd.save_state("cell", 3, broken, history)
    (tmp_path / "checkpoints" / "cell" / "3" / "jhash_files.json").unlink()
    got, _ = wd.fit("cell", method, key, batch, checkpoint_every=100, progress=False)
  assert (
    "note: checkpoint step(s) 3 of cell 'cell' have no jhash_files.json" in capsys.readouterr().out
  )
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(whole)):  # trained from step 0
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_tensorstore_error_is_named_without_the_repr_it_appends():
  error = ValueError(
    "OUT_OF_RANGE: Error reading chunk [source locations='x'] See full TensorStore "
    "details: <bound method pybind11_detail_function_record.spec of TensorStore({...})>"
  )
  assert harness.first_line(error) == "OUT_OF_RANGE: Error reading chunk [source locations='x']"


def _mfeat(n, seed):
  ds = jhash.data.load_mfeat(["fou", "kar"])
  idx = np.sort(np.random.default_rng(seed).choice(ds.labels.size, n, replace=False))
  return {"views": tuple(v[idx] for v in ds.views), "labels": ds.labels[idx]}


def test_a_sweep_whose_trajectory_checkpoint_is_gone_runs_the_sweeps_again(tmp_path):
  # cdh_figure1's sweep cells start from the state the previous one saved; with that
  # checkpoint deleted (as an error message advised), was: TypeError in sweep_cell.
  import types

  from experiments import cdh_common
  from experiments import cdh_figure1

  data = {"train": _mfeat(120, 0), "query": _mfeat(30, 1), "names": ("fou", "kar")}
  config = types.SimpleNamespace(train_queries=20, seed=0)
  method = cdh_common.cdh_method(8, {"w_iters": 10, "max_inner": 4}, 0.01)
  key = jax.random.key(0)
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    chained = [cdh_figure1.sweep_cell(wd, config, key, data, method, s) for s in range(3)]
    wd.remove_state("trajectory/1")
    again = cdh_figure1.sweep_cell(wd, config, key, data, method, 2)
  assert again == chained[2] and chained[2] != chained[1]


def test_a_rerun_save_replaces_the_step_and_unchecked_steps_are_not_used(tmp_path, capsys):
  state = {"w": np.arange(4096, dtype=np.float32)}
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    wd.save_state("cell", 1, state, {})
    folder = tmp_path / "checkpoints" / "cell" / "1"
    data = max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data.write_bytes(b"")
    # Saved again at the same step (a cell run again): was kept damaged and re-listed.
    wd.save_state("cell", 1, {"w": state["w"] + 1}, {})
    _, got, _ = wd.load_state("cell", jax.eval_shape(lambda: state))
    np.testing.assert_array_equal(np.asarray(got["w"]), state["w"] + 1)
    wd.save_state("cell", 2, state, {})
    for step in (1, 2):
      (tmp_path / "checkpoints" / "cell" / str(step) / "jhash_files.json").unlink()
    folder = tmp_path / "checkpoints" / "cell" / "2"
    data = max((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[:10])
    # Steps without their file lists cannot be checked (round 21: one whose data was then
    # changed was restored and trained on): not used, the cell starts again, with a note.
    assert wd.load_state("cell", jax.eval_shape(lambda: state)) is None
  out = capsys.readouterr().out
  assert "note: checkpoint step(s) 2, 1 of cell 'cell' have no jhash_files.json" in out, out
  assert "the cell starts from step 0" in out, out


def test_to_bytes_refuses_bits_or_signs_given_as_words():
  signs = np.where(np.random.default_rng(0).random((3, 12)) < 0.5, -1, 1).astype(np.int8)
  for bad in ((signs > 0).astype(np.uint8), (signs > 0).astype(np.int64)):
    with pytest.raises(ValueError, match=r"holding only bits or signs .*pack_bits"):
      jhash.codes.to_bytes(bad)  # was: bytes [3, 48], no error
  with pytest.raises(ValueError, match=r"packed must hold 32-bit words"):
    jhash.codes.to_bytes(signs)
  packed = jhash.codes.pack_bits(signs)
  want = jhash.codes.to_bytes(packed)
  assert want.shape == (3, 4)
  np.testing.assert_array_equal(jhash.codes.to_bytes(np.asarray(packed).astype(np.int64)), want)
  np.testing.assert_array_equal(jhash.codes.to_bytes(np.zeros((2, 1), np.int64)), 0)


def test_after_a_failed_restore_orbaxs_abandoned_reads_print_nothing(monkeypatch):
  # Was: up to 400 lines of "Exception ignored in: <coroutine ...>" after the message.
  import os
  import sys
  import types

  seen = []
  monkeypatch.setattr(sys, "unraisablehook", seen.append)
  harness.quiet_orbax_leftovers()
  harness.quiet_orbax_leftovers()  # once is enough: not wrapped twice
  code = types.SimpleNamespace(co_filename=os.sep.join(["", "site", "orbax", "x.py"]))
  orbax_read = types.SimpleNamespace(object=types.SimpleNamespace(cr_code=code), exc_value=None)
  closed = types.SimpleNamespace(object=None, exc_value=RuntimeError("Event loop is closed"))
  other = types.SimpleNamespace(object=None, exc_value=ValueError("mine"))
  for unraisable in (orbax_read, closed, other):
    sys.unraisablehook(unraisable)
  assert seen == [other]


def test_a_resize_past_any_image_is_refused_before_memory_runs_out(tmp_path):
  from PIL import Image

  Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "tiny.png")
  for resize in ((100_000, 100_000), 70_000):  # was: 15 GB, then killed for memory
    with pytest.raises(ValueError, match=r"resize must ask for sides of at most 65535"):
      jhash.data.decode_image(tmp_path / "tiny.png", resize=resize)
  assert jhash.data.decode_image(tmp_path / "tiny.png", resize=(8, 6)).shape == (8, 6, 3)


def test_round_17_leftovers(tmp_path, monkeypatch):
  from PIL import Image

  # A resize under the side cap whose image would not fit in memory names resize (was:
  # "could not be decoded as an image (MemoryError)").
  Image.fromarray(np.zeros((1, 4000, 3), np.uint8)).save(tmp_path / "wide.png")
  monkeypatch.setattr(jhash._checks, "memory_bytes", lambda: 10**9)
  with pytest.raises(ValueError, match=r"resize=2000 makes the 1 x 4000 image .*more than"):
    jhash.data.decode_image(tmp_path / "wide.png", resize=2000)
  monkeypatch.undo()
  # One-bit packed words of 0 and 1 are words (was: refused as bits).
  np.testing.assert_array_equal(
    jhash.codes.to_bytes(np.array([[1], [0], [1]])), [[1, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]]
  )
  # A batch dict with a misspelt key lists the keys (was: an array's repr).
  with pytest.raises(ValueError, match=r"got a dict with keys \[.view.\]\.$"):
    jhash.num_items({"view": (np.zeros((4, 3)),)})  # noqa


def test_round_17_workdir_leftovers(tmp_path):
  _finish(tmp_path)
  # A cross-view or training mAP past 1 (was: printed in a workdir from before digests).
  for name in ("pix->fou", "train_map"):
    _edit(tmp_path / "progress.json", lambda p: p["cells"]["a"].update({name: 7.5}))
    with pytest.raises(harness.WorkdirError, match=rf"it has '{name}' = 7.5; a mAP"):
      _rerun(tmp_path)
    _edit(tmp_path / "progress.json", lambda p: p["cells"]["a"].pop(name))
  # Negative seconds, named with the cell (was: copied into results.json); the remedy
  # drops the wall times only (was: delete progress.json, losing every cell).
  _edit(tmp_path / "progress.json", lambda p: p["seconds"].update(b=-1e6))
  with pytest.raises(harness.WorkdirError, match=r"'seconds' of cell 'b' is -1000000.0") as error:
    _rerun(tmp_path)
  assert "delete its keys 'seconds' (every cell's), 'wall_time_s' and 'time_digest'" in str(
    error.value
  )
  _edit(
    tmp_path / "progress.json",
    lambda p: [p.pop(k, None) for k in ("seconds", "wall_time_s", "time_digest")],
  )
  assert _rerun(tmp_path) == []
  # config.json's fingerprint changed while the work records this config's: damage, not
  # "a different config" (whose remedy, deleting the workdir, lost the work).
  _edit(tmp_path / "config.json", lambda c: c.update(fingerprint="0" * 16))
  with pytest.raises(harness.WorkdirError, match=r"config.json is damaged: .*delete it and run"):
    _rerun(tmp_path)
  (tmp_path / "config.json").unlink()
  assert _rerun(tmp_path) == []


def test_a_file_list_that_is_a_folder_is_named(tmp_path):
  with harness.Workdir(tmp_path, {"seed": 0}) as wd:
    wd.save_state("cell", 1, {"w": np.ones(3, np.float32)}, {})
    listed = tmp_path / "checkpoints" / "cell" / "1" / "jhash_files.json"
    listed.unlink()
    listed.mkdir()
    with pytest.raises(
      harness.WorkdirError, match=r"jhash_files.json \(the list of its files\) is not a file"
    ):
      wd.load_state("cell", jax.eval_shape(lambda: {"w": np.ones(3, np.float32)}))  # was: Errno 21
