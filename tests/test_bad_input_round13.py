"""Bad input, round 13: what round 12 left (config keys accepted and ignored, flag errors of
one kind) and what the thirteenth probe found. Each case names what it did before."""

import jax
import numpy as np
import pytest

import _experiment_runs as runs
import jhash
from jhash import codes
from jhash import metrics
from experiments import harness
from experiments import quickstart


def _refused(validate, config, match):
  with pytest.raises(harness.ConfigError, match=match):
    validate(config)


@pytest.mark.parametrize(
  "part, key, value, match",
  [
    ("fashion", "trainer", "experiments.cdh_mfeat", r"config\.fashion\.trainer: .*retrieval"),
    ("cross_view.dataset", "validation_per_class", 3, r"validation_per_class: must be 0"),
  ],
)
def test_quickstart_refuses_keys_it_would_ignore(part, key, value, match):
  config = runs.load_config("quickstart", "tiny").unlock()
  node = config
  for name in part.split("."):
    node = node[name]
  node[key] = value  # was: accepted, and the part ran as if it were not there
  _refused(quickstart.validate, config, match)


def test_the_sharded_map_reads_labels_in_the_real_rows_only():
  rng = np.random.default_rng(0)
  mesh = jax.make_mesh((1,), ("db",))
  q = np.where(rng.random((5, 16)) < 0.5, -1, 1).astype(np.int8)
  db = np.where(rng.random((12, 16)) < 0.5, -1, 1).astype(np.int8)
  ql, dl = np.arange(5) % 3, np.arange(12) % 3
  padded = dl.copy()
  padded[9:] = -1  # the padding rows: "may hold anything", as their codes
  want = metrics.mean_average_precision(q, db[:9], ql, dl[:9])
  got = metrics.sharded_mean_average_precision(q, db, ql, padded, mesh=mesh, num_rows=9)
  assert got == pytest.approx(float(want), abs=1e-6)  # was: "db_labels ... >= 0" refused
  bad = padded.copy()
  bad[2] = -1  # a real row's label is still checked
  with pytest.raises(ValueError, match="db_labels"):
    metrics.sharded_mean_average_precision(q, db, ql, bad, mesh=mesh, num_rows=9)
  with pytest.raises(ValueError, match=r"db_labels must have shape \[12\]"):
    metrics.sharded_mean_average_precision(q, db, ql, dl[:9], mesh=mesh, num_rows=9)


def test_every_flag_is_refused_with_one_kind_of_error(tmp_path):
  signs = np.array([[1, -1, 1]], np.int8)
  with pytest.raises(ValueError, match="bits must be True or False; got str 'yes'"):
    codes.pack_bits(signs, bits="yes")
  with pytest.raises(ValueError, match="signed must be True or False; got str 'yes'"):
    codes.unpack_bits(codes.pack_bits(signs), 3, signed="yes")  # was: TypeError
  with pytest.raises(ValueError, match="overwrite must be True or False; got str 'yes'"):
    jhash.save(tmp_path / "s", {"a": np.zeros(2)}, overwrite="yes")  # was: TypeError


def test_a_stream_minibatch_naming_an_item_twice_is_refused():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(32, 6)).astype(np.float32)
  labels = np.arange(32) % 4
  method = jhash.methods.pairwise(8, batch_size=8, num_epochs=1, memory=True)

  def stream(repeat):
    for step in range(2):
      index = np.arange(8 * step, 8 * step + 8)
      if repeat and step == 1:
        index[3] = index[2]  # was: accepted; the memory bank got one of the two codes
      yield {"views": (x[index],), "labels": labels[index], "index": index}

  with pytest.raises(ValueError, match=r"minibatch of step 1: .*each position once.*\[10\]"):
    jhash.fit(method, jax.random.key(0), stream(True), 2, num_items=32, progress=False)
  state, _ = jhash.fit(method, jax.random.key(0), stream(False), 2, num_items=32, progress=False)
  assert state.memory.outputs.shape == (32, 8)


def test_a_state_of_another_method_of_the_same_name_is_named():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(40, 8)).astype(np.float32)
  batch, key = {"views": (x,), "labels": np.arange(40) % 4}, jax.random.key(0)
  net = jhash.models.backbone((8,), 4, hidden=(8,))
  itq = jhash.methods.itq(4, num_iters=2)
  same_name = jhash.methods.pairwise(4, backbone=net, batch_size=8, num_epochs=1, name="itq")
  states = {m: jhash.fit(m, key, batch, progress=False)[0] for m in (itq, same_name)}
  for method, other in ((itq, same_name), (same_name, itq)):
    for encode in (jhash.encode, jhash.encode_multi):  # was: AttributeError from inside
      with pytest.raises(ValueError, match=r"state must be a state itq makes .*another method"):
        encode(method, states[other], batch)
  query = {"views": (x[:0],)}  # no item, no labels: a state is still made to compare
  with pytest.raises(ValueError, match=r"\(PairwiseState\); got ITQState"):
    jhash.encode_multi(same_name, states[itq], query)


def test_fit_given_another_methods_state_says_how_to_resume():
  rng = np.random.default_rng(0)
  batch = {"views": (rng.normal(size=(40, 8)).astype(np.float32),), "labels": np.arange(40) % 4}
  net, key = jhash.models.backbone((8,), 4, hidden=(8,)), jax.random.key(0)
  options = dict(backbone=net, batch_size=8, num_epochs=1)
  state, _ = jhash.fit(jhash.methods.dch(4, **options), key, batch, progress=False)
  with pytest.raises(ValueError, match=r"Resume with the method that trained the state, or"):
    jhash.fit(jhash.methods.hashnet(4, **options), key, batch, state=state, progress=False)


@pytest.mark.parametrize("power", [0.0, -1.0])
def test_hashnet_refuses_a_continuation_that_runs_backwards(power):
  with pytest.raises(ValueError, match=r"power must be .*> 0"):
    jhash.methods.hashnet(4, power=power)  # was: accepted; beta fell towards 0
