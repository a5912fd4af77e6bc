"""Minibatch training: device-sampled epochs, the iterable path, resuming, the shared
train step (against an independent gradient step), data parallelism on 8 devices."""

import subprocess
import sys
import textwrap
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jhash


def _batch(rng, n=96, d=6, classes=3):
  x = rng.normal(size=(n, d)).astype(np.float32)
  return {"views": (x,), "labels": rng.integers(0, classes, n).astype(np.int32)}


class _Visits(NamedTuple):
  counts: jax.Array  # int32 [n]: how often each training item was in a minibatch


def _visit_counter(batch_size: int) -> jhash.HashingMethod:
  """A minibatch method that only records which items each step read."""

  def init(key, batch):
    del key
    return _Visits(jnp.zeros((jhash.num_items(batch),), jnp.int32))

  def update(state, batch, key):
    del key
    return _Visits(state.counts.at[batch["index"]].add(1)), {"index": batch["index"]}

  def encode(state, batch):
    return jnp.ones((batch["views"][0].shape[0], 1), jnp.int8)

  return jhash.HashingMethod(
    init, encode, 1, "visits", (jhash.Phase("visits", update, batch_size, num_epochs=1),)
  )


def test_device_minibatches_are_a_permutation_per_epoch(rng):
  batch = _batch(rng, n=100)
  method = _visit_counter(batch_size=24)  # 4 minibatches an epoch, 4 items left out
  key = jax.random.key(3)
  per_epoch = 4
  state, history = jhash.fit(method, key, batch, num_epochs=3, progress=False, log_every=5)
  index = history["index"]
  assert index.shape == (3 * per_epoch, 24)
  for e in range(3):
    seen = index[e * per_epoch : (e + 1) * per_epoch].reshape(-1)
    assert len(np.unique(seen)) == 96  # no item twice in an epoch
    perm = np.asarray(jhash.epoch_permutation(key, e, 100))
    np.testing.assert_array_equal(seen, perm[:96])  # the epoch's permutation
  assert not np.array_equal(index[:per_epoch], index[per_epoch : 2 * per_epoch])
  assert int(state.counts.sum()) == 3 * 96 and int(state.counts.max()) <= 3
  # The host sequence is the device sequence.
  host = np.stack(
    [np.asarray(mb["index"]) for mb in jhash.minibatches(batch, 24, key, 3 * per_epoch)]
  )
  np.testing.assert_array_equal(host, index)


@pytest.fixture(scope="module")
def pairwise_run():
  rng = np.random.default_rng(1)
  batch = _batch(rng, n=128, d=8)
  x = batch["views"][0]
  batch["labels"] = ((x[:, 0] > 0) + 2 * (x[:, 1] > 0)).astype(np.int32)  # learnable
  method = jhash.methods.pairwise(8, batch_size=32, num_epochs=3)
  key = jax.random.key(0)
  state, history = jhash.fit(method, key, batch, progress=False)
  return batch, method, key, state, history


def test_iterable_of_minibatches_trains_as_the_in_memory_path(pairwise_run):
  batch, method, key, state, history = pairwise_run
  start = jhash.init(method, key, batch)
  stream = jhash.minibatches(batch, 32, key, 12)
  streamed, hist = jhash.fit(method, key, stream, 12, state=start, progress=False)
  jax.tree.map(np.testing.assert_array_equal, state.coder.train.params, streamed.coder.train.params)
  np.testing.assert_array_equal(history["loss"], hist["loss"])


def test_resumed_minibatch_run_equals_uninterrupted(pairwise_run):
  batch, method, key, state, history = pairwise_run
  half, h1 = jhash.fit(method, key, batch, 5, progress=False)  # stops inside epoch 2
  saved = jax.tree.map(np.asarray, half)  # as if read from disk
  rest, h2 = jhash.fit(method, key, batch, 12, state=saved, start_step=5, progress=False)
  jax.tree.map(np.testing.assert_array_equal, state, rest)
  np.testing.assert_array_equal(history["loss"], np.concatenate([h1["loss"], h2["loss"]]))


def test_fit_leaves_the_callers_state_usable(pairwise_run):
  batch, method, key, _, _ = pairwise_run
  start = jhash.init(method, key, batch)
  jhash.fit(method, key, batch, 2, state=start, progress=False)
  jhash.fit(method, key, batch, 2, state=start, progress=False)  # not deleted by donation
  assert np.all(np.isfinite(np.asarray(start.coder.mean)))


def test_training_lowers_the_loss_and_learns_the_classes(pairwise_run):
  batch, method, key, state, history = pairwise_run
  assert history["loss"].shape == (12,)
  assert history["loss"][-4:].mean() < history["loss"][:4].mean()
  labels = batch["labels"]

  def train_map(st):
    codes = jhash.encode(method, st, batch)
    return jhash.metrics.mean_average_precision(codes, codes, labels, labels)

  before, after = train_map(jhash.init(method, key, batch)), train_map(state)
  assert after > before + 0.1 and after > 0.6, (before, after)


def test_metrics_come_every_log_every_steps(pairwise_run):
  batch, method, key, _, _ = pairwise_run
  calls = []
  jhash.fit(
    method,
    key,
    batch,
    10,
    progress=False,
    log_every=4,
    on_step=lambda step, state, metrics: calls.append((step, len(metrics["loss"]))),
  )
  assert calls == [(4, 4), (8, 4), (10, 2)]


def test_train_step_is_an_optax_step_on_the_loss_gradient(rng):
  net = jhash.models.backbone((5,), 3)
  x = jnp.asarray(rng.normal(size=(16, 5)), jnp.float32)
  target = jnp.asarray(rng.normal(size=(16, 3)), jnp.float32)
  loss_fn = lambda outputs, t: (jnp.mean((outputs.logits - t) ** 2), {})
  optimizer = optax.sgd(0.1)
  state = jhash.training.create(net, optimizer, jax.random.key(0), x)
  new, loss, _, _ = jhash.training.make_step(net, optimizer, loss_fn)(state, x, target)

  # Independently: the gradient of the same loss through apply, then p - 0.1 g.
  def direct(params):
    out, _ = net.apply({"params": params}, x, train=True)
    return jnp.mean((out.logits - target) ** 2)

  value, grads = jax.value_and_grad(direct)(state.params)
  np.testing.assert_allclose(loss, value, rtol=1e-6)
  expected = jax.tree.map(lambda p, g: p - 0.1 * g, state.params, grads)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), new.params, expected
  )
  assert int(new.step) == 1


def test_train_step_carries_the_optimizer_state_and_passes_it_the_parameters(rng):
  # AdamW: its moments go from step to step, and its weight decay reads the parameters.
  net = jhash.models.backbone((5,), 3)
  x = jnp.asarray(rng.normal(size=(16, 5)), jnp.float32)
  target = jnp.asarray(rng.normal(size=(16, 3)), jnp.float32)
  optimizer = optax.adamw(0.05, weight_decay=0.5)
  state = jhash.training.create(net, optimizer, jax.random.key(0), x)
  step = jax.jit(
    jhash.training.make_step(
      net, optimizer, lambda outputs, t: (jnp.mean((outputs.logits - t) ** 2), {})
    )
  )
  grad = jax.jit(
    jax.grad(lambda p: jnp.mean((net.apply({"params": p}, x, train=True)[0].logits - target) ** 2))
  )
  params, opt_state = state.params, state.opt_state
  for _ in range(3):
    # Independently: optax's own update on the gradient through apply.
    updates, opt_state = optimizer.update(grad(params), opt_state, params)
    params = optax.apply_updates(params, updates)
    state, *_ = step(state, x, target)
    jax.tree.map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), state.params, params
    )
  assert int(state.step) == 3


def test_train_step_updates_batch_statistics(rng):
  net = jhash.models.backbone((12,), 4, batch_norm=True)
  x = jnp.asarray(rng.normal(size=(8, 12)) + 3.0, jnp.float32)
  optimizer = optax.adam(1e-3)
  state = jhash.training.create(net, optimizer, jax.random.key(0), x)
  step = jhash.training.make_step(net, optimizer, lambda o, _: (jnp.mean(o.logits**2), {}))
  new, *_ = jax.jit(step)(state, x, None)
  changed = jax.tree.map(lambda a, b: not np.allclose(a, b), state.batch_stats, new.batch_stats)
  assert all(jax.tree.leaves(changed))


def test_predict_is_evaluation_mode(rng):
  # With running BatchNorm moments (after a step), an item's outputs do not depend on the
  # other items it is predicted with, and equal the network's evaluation-mode outputs.
  net = jhash.models.backbone((12,), 4, batch_norm=True)
  x = jnp.asarray(rng.normal(size=(8, 12)) + 3.0, jnp.float32)
  optimizer = optax.sgd(0.1)
  state = jhash.training.create(net, optimizer, jax.random.key(0), x)
  step = jhash.training.make_step(net, optimizer, lambda o, _: (jnp.mean(o.logits**2), {}))
  state, *_ = jax.jit(step)(state, x, None)
  predict = jax.jit(lambda s, x: jhash.training.predict(net, s, x).logits)
  out = predict(state, x)
  np.testing.assert_allclose(predict(state, x[:3]), out[:3], rtol=1e-5, atol=1e-6)
  evaluation, _ = net.apply(jhash.training.variables(state), x, train=False)
  np.testing.assert_allclose(out, evaluation.logits, rtol=1e-5, atol=1e-6)


def test_a_batch_size_over_the_set_reads_the_whole_set(rng):
  batch = _batch(rng, n=30)
  _, history = jhash.fit(
    _visit_counter(batch_size=64), jax.random.key(0), batch, num_epochs=2, progress=False
  )
  assert history["index"].shape == (2, 30)
  assert all(sorted(row) == list(range(30)) for row in history["index"].tolist())


def test_fit_rejects_bad_minibatch_inputs(rng, pairwise_run):
  batch, method, key, _, _ = pairwise_run
  with pytest.raises(ValueError, match="whole set"):
    jhash.fit(jhash.methods.itq(4), key, iter([batch]), 1, progress=False)
  with pytest.raises(ValueError, match="num_items"):
    jhash.fit(method, key, batch, 1, num_items=10, progress=False)
  with pytest.raises(ValueError, match="index"):
    jhash.fit(method, key, iter([batch]), 1, progress=False)
  with pytest.raises(ValueError, match="ended after 1"):
    jhash.fit(method, key, jhash.minibatches(batch, 32, key, 1), 3, progress=False)
  with pytest.raises(ValueError, match="num_steps or num_epochs"):
    jhash.fit(method, key, batch, 1, num_epochs=1, progress=False)
  with pytest.raises(ValueError, match="labels"):
    jhash.fit(method, key, {"views": batch["views"]}, 1, progress=False)


SHARDED_SCRIPT = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=8")
    import jax, numpy as np
    from jax.sharding import Mesh
    import jhash
    assert jax.device_count() == 8, jax.devices()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 20)).astype(np.float32)
    batch = {"views": (x,), "labels": rng.integers(0, 4, 128).astype(np.int32)}
    net = jhash.models.backbone((20,), 8, batch_norm=True)   # BatchNorm: moments over devices
    method = jhash.methods.pairwise(8, backbone=net, batch_size=32, num_epochs=2)
    key = jax.random.key(0)
    one, h1 = jhash.fit(method, key, batch, progress=False)
    mesh = Mesh(np.array(jax.devices()), ("data",))
    many, h8 = jhash.fit(method, key, batch, progress=False, mesh=mesh)
    assert len(many.coder.train.params["projection"]["kernel"].sharding.device_set) == 8
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(many)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(h1["loss"], h8["loss"], rtol=1e-5)
    # An iterable of minibatches over the mesh (this process's rows: all of them here).
    stream = lambda: jhash.minibatches(batch, 32, key, 8)
    one, h1 = jhash.fit(method, key, stream(), 8, progress=False, num_items=128)
    many, h8 = jhash.fit(method, key, stream(), 8, progress=False, num_items=128, mesh=mesh)
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(many)):
      np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(h1["loss"], h8["loss"], rtol=1e-5)
    try:
      jhash.fit(jhash.methods.pairwise(8, backbone=net, batch_size=20), key, batch, 1,
                progress=False, mesh=mesh)
      raise AssertionError("a batch_size that 8 devices cannot split was accepted")
    except ValueError as e:
      assert "multiple" in str(e)
    print("SHARDED OK")
""")


def test_train_step_on_8_host_devices_equals_one_device(tmp_path):
  script = tmp_path / "sharded.py"
  script.write_text(SHARDED_SCRIPT)
  out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "SHARDED OK" in out.stdout


def _two_phase(batch_size: int) -> jhash.HashingMethod:
  """Phase 0: three full-batch steps counting themselves; phase 1: minibatch visits."""

  def init(key, batch):
    del key
    return _Visits(jnp.zeros((jhash.num_items(batch) + 1,), jnp.int32))

  def whole(state, batch, key):
    del batch, key
    return _Visits(state.counts.at[-1].add(1)), {"whole_steps": state.counts[-1] + 1}

  def mini(state, batch, key):
    del key
    return _Visits(state.counts.at[batch["index"]].add(1)), {"index": batch["index"]}

  phases = (
    jhash.Phase("whole", whole, None, num_steps=3),
    jhash.Phase("mini", mini, batch_size, num_epochs=2),
  )
  encode = lambda state, batch: jnp.ones((batch["views"][0].shape[0], 1), jnp.int8)
  return jhash.HashingMethod(init, encode, 1, "two_phase", phases)


def test_phases_run_in_order_with_their_own_batches(rng):
  batch = _batch(rng, n=40)
  method = _two_phase(batch_size=10)  # 4 minibatches an epoch
  key = jax.random.key(5)
  assert jhash.schedule(method, 40) == 3 + 8
  state, history = jhash.fit(method, key, batch, progress=False, log_every=3)
  np.testing.assert_array_equal(history["whole_steps"], [1, 2, 3])
  assert history["index"].shape == (8, 10)
  for e in range(2):
    perm = np.asarray(jhash.epoch_permutation(key, e, 40, phase=1))
    np.testing.assert_array_equal(history["index"][4 * e : 4 * e + 4].reshape(-1), perm)
  np.testing.assert_array_equal(np.asarray(state.counts), [2] * 40 + [3])
  # Resumed across the phase boundary: identical.
  part, h1 = jhash.fit(method, key, batch, 2, progress=False)
  rest, h2 = jhash.fit(method, key, batch, state=part, start_step=2, progress=False)
  np.testing.assert_array_equal(rest.counts, state.counts)
  np.testing.assert_array_equal(np.concatenate([h1["whole_steps"], h2["whole_steps"]]), [1, 2, 3])
  np.testing.assert_array_equal(h2["index"], history["index"])
  # num_steps is the run's total: the last phase is cut.
  _, cut = jhash.fit(method, key, batch, 5, progress=False)
  assert cut["index"].shape == (2, 10)
  with pytest.raises(ValueError, match="num_steps, the total"):
    jhash.fit(method, key, batch, num_epochs=1, progress=False)
