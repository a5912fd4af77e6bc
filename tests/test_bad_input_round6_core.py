"""Bad input, sixth round, the core library: ``jhash.save(overwrite=True)`` deleting files
the user added, float64 features past float32's range, a divergence blamed on a learning
rate ITQ does not have, flags read by truthiness, negative class ids in training, radius
and recall metrics NaN with no warning, fractional relevance read as relevant, packed
codes of no words, huge ``num_bits``, ``check_padding`` past the words, a damaged state
behind a rewritten list of files, the unchecked sharded search without a mesh, a resume
past the schedule, and non-array parameters. Each gave a wrong answer, a silent one or a
library's raw error; each is now refused (or warned about), naming the argument."""

import shutil

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jhash
from jhash import _api
from jhash import codes
from jhash import metrics
from jhash import search
from jhash import training
from jhash.methods import cdh_parts
from jhash.methods import mch_parts

NEGATIVE_IDS = r"labels: class ids must be >= 0; found -1 in .*A negative id"


def _features(n=40, d=8, seed=0):
  return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)


@pytest.fixture(scope="module")
def itq():
  method, batch = jhash.methods.itq(4, num_iters=2), {"views": (_features(),)}
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  return method, batch, state


def _signs(rng, n, k):
  return np.where(rng.random((n, k)) < 0.5, 1, -1).astype(np.int8)


# ----------------------------------------------------------------------------- save


def test_save_overwrite_refuses_a_folder_holding_files_it_did_not_write(tmp_path):
  path = jhash.save(tmp_path / "s", {"a": np.ones(2)})
  (path / "my_notes.txt").write_text("precious")
  shutil.copytree(jhash.save(tmp_path / "other", {"b": np.ones(3)}), path / "inner")
  added = "holds 2 entries jhash.save did not write: inner/, my_notes.txt. overwrite=True"
  with pytest.raises(FileExistsError, match=added):
    jhash.save(path, {"a": np.zeros(2)}, overwrite=True)
  assert (path / "my_notes.txt").read_text() == "precious"
  assert (path / "inner" / "jhash_state.json").is_file()
  (path / "state" / "added.txt").write_text("in orbax's folder")
  with pytest.raises(FileExistsError, match="3 entries .*: inner/, my_notes.txt, state/added.txt"):
    jhash.save(path, {"a": np.zeros(2)}, overwrite=True)
  (path / "state" / "added.txt").unlink()
  with pytest.raises(FileExistsError, match="lies inside the saved state"):
    jhash.save(path / "nested", {"b": np.ones(3)})
  shutil.rmtree(path / "inner")
  (path / "my_notes.txt").unlink()
  (path / "empty").mkdir()  # nothing to lose
  jhash.save(path, {"a": np.zeros(2)}, overwrite=True)  # only its own files: replaced
  assert sorted(p.name for p in path.iterdir()) == ["jhash_files.json", "jhash_state.json", "state"]


# ----------------------------------------------------------------------------- inputs


def test_float64_views_past_float32_range_are_refused_by_fit_and_encode(itq):
  method, batch, state = itq
  big = batch["views"][0].astype(np.float64)
  big[3, 1] = -1e39
  match = r"views\[0\] must hold values float32 can hold .* found -1e\+39 at index \(3, 1\)"
  with pytest.raises(ValueError, match=match):
    jhash.encode(method, state, {"views": (big,)})
  with pytest.raises(ValueError, match=match):
    jhash.fit(method, jax.random.key(0), {"views": (big,)}, progress=False)


def test_a_divergence_names_the_inputs_not_a_learning_rate_itq_lacks(itq):
  method, batch, _ = itq
  huge = {"views": (batch["views"][0] * 1e20,)}  # finite in float32; their squares are not
  with pytest.raises(FloatingPointError, match="diverged") as error:
    jhash.fit(method, jax.random.key(0), huge, progress=False)
  message = str(error.value)
  assert r"Rescale the inputs: views[0] holds values up to" in message
  assert "learning rate" not in message
  assert "itq has no learning rate" in _api.divergence_remedy(method, batch)
  dch = jhash.methods.dch(4, batch_size=8, num_epochs=1)
  assert _api.divergence_remedy(dch, batch).startswith("lower the learning rate")


def test_flags_refuse_anything_but_true_or_false(itq):
  method, batch, _ = itq
  with pytest.raises(ValueError, match="progress must be True or False; got str 'no'"):
    jhash.fit(method, jax.random.key(0), batch, progress="no")
  model = jhash.models.backbone((8,), 4)
  variables = model.init(jax.random.key(0), batch["views"][0][:2])
  with pytest.raises(ValueError, match="train must be True or False; got str 'no'"):
    training.make_step(model, optax.adam(1e-3), lambda out, ctx: (0.0, {}), train="no")
  with pytest.raises(ValueError, match="train must be True or False; got str 'no'"):
    model.apply(variables, batch["views"][0][:2], train="no")
  with pytest.raises(ValueError, match="matrix_free must be True or False; got str 'no'"):
    cdh_parts.start_sweep(jnp.ones((4, 2), jnp.int8), "exponential", matrix_free="no")
  with pytest.raises(ValueError, match="verbose must be True or False; got str 'no'"):
    jhash.native.build("no")


def test_negative_class_ids_are_refused_for_training_as_by_the_metrics(itq, rng):
  method, batch, _ = itq
  labels = np.arange(40) % 3 - 1
  with pytest.raises(ValueError, match=NEGATIVE_IDS) as training_error:
    jhash.data.check_batch({"views": batch["views"], "labels": labels})
  with pytest.raises(ValueError, match=NEGATIVE_IDS):
    jhash.fit(method, jax.random.key(0), {**batch, "labels": labels}, progress=False)
  q = _signs(rng, 40, 8)
  with pytest.raises(ValueError) as metric_error:
    metrics.mean_average_precision(q, q, np.abs(labels), labels)
  assert str(metric_error.value) == "db_" + str(training_error.value)


def test_radius_and_recall_metrics_warn_when_skip_leaves_nan(rng):
  q, db = _signs(rng, 3, 16), _signs(rng, 5, 16)
  zeros_q, zeros_db, ones_db = np.zeros(3, int), np.zeros(5, int), np.ones(5, int)
  nothing_relevant = (q, db, zeros_q, ones_db)
  with pytest.warns(RuntimeWarning, match=r"radius 0\)'s precision is NaN: every query's ball"):
    p, _ = metrics.precision_recall_at_radius(q, db, zeros_q, zeros_db, 0, empty="skip")
  assert np.isnan(p)
  with pytest.warns(RuntimeWarning, match=r"recall is NaN: no query has a relevant item"):
    _, r = metrics.precision_recall_at_radius(*nothing_relevant, 16, no_relevant="skip")
  assert np.isnan(r)
  with pytest.warns(RuntimeWarning, match=r"pr_curve_by_radius's recall is NaN: no query"):
    metrics.pr_curve_by_radius(*nothing_relevant, no_relevant="skip")
  with pytest.warns(RuntimeWarning, match=r"recall_at_k is NaN: no query has a relevant"):
    assert np.isnan(metrics.recall_at_k(*nothing_relevant, (2,), no_relevant="skip")[0])
  with pytest.warns(RuntimeWarning, match=r"recall_at_k is 0: no query has a relevant"):
    metrics.recall_at_k(*nothing_relevant, (2,))  # "zero" counts them as 0, and says why
  with pytest.warns(RuntimeWarning, match=r"pr_curve_by_radius's recall is 0: no query"):
    metrics.pr_curve_by_radius(*nothing_relevant)  # "zero": 0 at every radius, and why


def test_average_precision_refuses_fractional_relevance():
  distances = np.array([[0, 1, 2]], np.int32)
  with pytest.raises(ValueError, match=r"relevance must be bool .* found 0.5 in .*ndcg"):
    metrics.average_precision(distances, np.array([[0.5, 0, 1]]))
  with pytest.raises(ValueError, match=r"relevance must be bool .* found 0.3 in"):
    metrics.hits_at_k(distances, np.array([[0.3, 0, 1]], np.float32), (2,))
  ap, _ = metrics.average_precision(distances, np.array([[1.0, 0, 1]]))  # 0/1 floats: fine
  assert float(ap[0]) == pytest.approx(5 / 6)


def test_packed_codes_of_no_words_are_refused():
  empty_q, empty_db = np.zeros((2, 0), np.uint32), np.zeros((3, 0), np.uint32)
  with pytest.raises(ValueError, match="query_packed must have at least one word per code"):
    search.hamming_distance(empty_q, empty_db)
  with pytest.raises(ValueError, match="at least one word per code"):
    search.hamming_topk(empty_q, empty_db, 1)


def test_num_bits_past_the_longest_code_is_refused():
  assert jhash.methods.MAX_NUM_BITS == 65536
  for bits in (2**31, 300_000_000):
    with pytest.raises(ValueError, match=r"num_bits must be at most 65,536 bits"):
      jhash.methods.lsh(bits)
  with pytest.raises(ValueError, match=r"num_bits must be at most 65,536 bits"):
    jhash.models.backbone((8,), 10**6)
  assert jhash.methods.lsh(65536).num_bits == 65536


def test_check_padding_names_the_words_num_bits_needs():
  with pytest.raises(ValueError, match=r"x must have 2 words for num_bits=40.*\(1, 1\)"):
    codes.check_padding(np.zeros((1, 1), np.uint32), 40, "x")


# ----------------------------------------------------------------------------- restore


def test_restore_names_the_damaged_file_behind_a_rewritten_file_list(itq, tmp_path):
  method, batch, state = itq
  saved = jhash.save(tmp_path / "itq", state)
  copy = shutil.copytree(saved, tmp_path / "copy")
  metadata = copy / "state" / "_METADATA"
  metadata.write_bytes(metadata.read_bytes()[:100])
  jhash.files.write_manifest(copy)  # a "repair" that hides the damage from the list
  with pytest.raises(ValueError, match=r"damaged or was written by another .*_METADATA cannot"):
    jhash.restore(copy, method, batch)
  shutil.rmtree(copy)
  copy = shutil.copytree(saved, tmp_path / "copy")
  data = sorted((copy / "state" / "d").iterdir())[0]
  data.write_bytes(bytes(data.stat().st_size))
  jhash.files.write_manifest(copy)
  with pytest.raises(ValueError, match=rf"damaged .*{data.name} cannot be read"):
    jhash.restore(copy, method, batch)


# ----------------------------------------------------------------------------- others


def test_unchecked_sharded_search_without_a_mesh_uses_every_device(rng):
  q, db = codes.pack_bits(_signs(rng, 3, 40)), codes.pack_bits(_signs(rng, 9, 40))
  d, idx = search.sharded_hamming_topk_unchecked(q, db, 2, None)
  want_d, want_idx = search.hamming_topk(q, db, 2)
  np.testing.assert_array_equal(d, want_d)
  np.testing.assert_array_equal(idx, want_idx)


def test_cdh_objective_and_dedupe_mask_name_their_arguments():
  cdh = jhash.methods.cdh(4, num_sweeps=1)
  batch = {"views": (_features(),), "labels": np.arange(40) % 3}
  with pytest.raises(TypeError, match="state must be a CDHState .*got NoneType"):
    cdh.extras.objective(None, batch)
  with pytest.raises(ValueError, match=r"keep must be bool of codes' \[n, m\] = \[3, 2\]"):
    mch_parts.dedupe_mask(jnp.ones((3, 2, 8), jnp.int8), jnp.ones((4, 5), bool))


def test_start_step_past_the_schedule_is_refused(itq):
  method, batch, state = itq
  with pytest.raises(ValueError, match=r"start_step=100 is past the end of itq's schedule, 2"):
    jhash.fit(method, jax.random.key(0), batch, state=state, start_step=100, progress=False)
  done, history = jhash.fit(  # a finished run, resumed: valid, no step runs
    method, jax.random.key(0), batch, state=state, start_step=2, progress=False
  )
  assert history == {}
  np.testing.assert_array_equal(done.rotation, state.rotation)


def test_from_variables_requires_a_tree_of_arrays():
  with pytest.raises(ValueError, match=r"variables\['params'\] must be a tree .* of arrays"):
    training.from_variables({"params": 5}, optax.adam(1e-3))
  with pytest.raises(ValueError, match=r"variables\['params'\] must be a tree"):
    training.from_variables({"params": {}}, optax.adam(1e-3))
  state = training.from_variables({"params": {"w": jnp.ones(3)}}, optax.adam(1e-3))
  assert int(state.step) == 0
