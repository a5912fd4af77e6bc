"""``jhash.fit``: key schedule, resuming, and bad input at the door."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash
from jhash import methods


def _batch(rng, n=80, d=10):
  return {
    "views": (rng.normal(size=(n, d)).astype(np.float32),),
    "labels": rng.integers(0, 3, n).astype(np.int32),
  }


def test_resumed_fit_equals_uninterrupted(rng):
  batch = _batch(rng)
  method = methods.itq(6, num_iters=10)
  key = jax.random.key(7)
  full, full_hist = jhash.fit(method, key, batch, progress=False)
  half, hist1 = jhash.fit(method, key, batch, 4, progress=False)
  half = jax.tree.map(lambda x: np.array(x), half)  # as if read back from disk
  rest, hist2 = jhash.fit(
    method,
    key,
    batch,
    10,
    state=jax.tree.map(jax.numpy.asarray, half),
    start_step=4,
    progress=False,
  )
  jax.tree.map(np.testing.assert_array_equal, full, rest)
  np.testing.assert_array_equal(
    full_hist["quantization_loss"],
    np.concatenate([hist1["quantization_loss"], hist2["quantization_loss"]]),
  )


def test_on_step_sees_every_step(rng):
  seen = []
  jhash.fit(
    methods.itq(4, num_iters=5),
    jax.random.key(0),
    _batch(rng),
    progress=False,
    on_step=lambda step, state, metrics: seen.append(step),
  )
  assert seen == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
  "bad, match",
  [
    ({"views": (np.zeros((5, 3)), np.zeros((6, 3)))}, "views"),
    ({"views": (np.array([[0.0, np.nan]] * 4),)}, r"views\[0\]"),
    ({"views": (np.array([[0.0, np.inf]] * 4),)}, r"views\[0\]"),
    ({"views": (np.zeros((4, 3)),), "labels": np.zeros((5,), np.int32)}, "labels"),
    ({"views": (np.zeros((4, 3)),), "labels": np.zeros((4,), np.float32)}, "labels"),
    ({"views": (np.zeros((4, 3)),), "labels": np.zeros((4, 2, 2), bool)}, "labels"),
    ({"views": ()}, "views"),
    ({"views": (None, None)}, "views"),
    ({"labels": np.zeros(3)}, "batch"),
    ({"views": (np.zeros((4, 3), bool),)}, r"views\[0\]"),
    ({"views": (np.zeros((4, 3), np.complex64),)}, r"views\[0\]"),
    ({"views": (np.array([[0.0, np.nan]] * 4, dtype=jnp.bfloat16),)}, r"views\[0\]"),
    ({"views": (np.zeros((4, 3)), None, np.zeros((4, 2)), np.zeros((5, 2)))}, r"views\[3\]: 5"),
  ],
)
def test_bad_batches_raise_naming_the_argument(bad, match):
  with pytest.raises(ValueError, match=match):
    jhash.fit(methods.lsh(4), jax.random.key(0), bad, progress=False)


def test_error_message_has_expected_and_received_shapes():
  with pytest.raises(ValueError) as info:
    jhash.fit(
      methods.lsh(4),
      jax.random.key(0),
      {"views": (np.zeros((4, 3)),), "labels": np.zeros((5,), np.int32)},
      progress=False,
    )
  assert "[4]" in str(info.value) and "(5,)" in str(info.value)


def test_bad_key_and_steps(rng):
  with pytest.raises(ValueError, match="key"):
    jhash.fit(methods.lsh(4), 0, _batch(rng), progress=False)
  for bad in (jnp.zeros((3,), jnp.uint32), jnp.zeros((2, 2), jnp.uint32)):  # no key data
    with pytest.raises(ValueError, match="key"):
      jhash.fit(methods.lsh(4), bad, _batch(rng), progress=False)
  with pytest.raises(ValueError, match="num_steps"):
    jhash.fit(methods.lsh(4), jax.random.key(0), _batch(rng), num_steps=-1, progress=False)
  for name, value in (
    ("num_steps", True),
    ("log_every", 0),
    ("log_every", True),
    ("num_epochs", 1.0),
  ):
    with pytest.raises(ValueError, match=name):
      jhash.fit(methods.lsh(4), jax.random.key(0), _batch(rng), progress=False, **{name: value})


class _Keys(NamedTuple):
  init_key: jax.Array  # uint32 key data of the key init was given
  steps: jax.Array  # int32 []: steps run


def _key_recorder(batch_size=None, num_steps=4, phases=None) -> jhash.HashingMethod:
  """A method whose state records its init key and whose metrics are each step's key."""

  def init(key, batch):
    del batch
    return _Keys(jax.random.key_data(key), jnp.zeros((), jnp.int32))

  def update(state, batch, key):
    del batch
    return (
      state._replace(steps=state.steps + 1),
      {"key": jax.random.key_data(key), "step": state.steps},
    )

  encode = lambda state, batch: jnp.ones((batch["views"][0].shape[0], 1), jnp.int8)
  if phases is not None:
    phases = tuple(jhash.Phase(name, update, size, num_steps=steps) for name, size, steps in phases)
  else:
    phases = (jhash.Phase("keys", update, batch_size, num_steps=num_steps),)
  return jhash.HashingMethod(init, encode, 1, "keys", phases)


def _step_keys(key, steps):
  return np.stack([np.asarray(jax.random.key_data(jax.random.fold_in(key, s + 1))) for s in steps])


@pytest.mark.parametrize("batch_size, log_every", [(None, None), (None, 3), (8, None)])
def test_step_s_trains_with_the_key_fold_in_s_plus_1(rng, batch_size, log_every):
  # The documented key schedule, on each path of the in-memory runner: init gets
  # fold_in(key, 0), step s gets fold_in(key, s + 1); also when resumed at step 2.
  batch = _batch(rng, n=32)
  method = _key_recorder(batch_size)
  key = jax.random.key(11)
  state, history = jhash.fit(method, key, batch, 5, progress=False, log_every=log_every)
  want_init = np.asarray(jax.random.key_data(jax.random.fold_in(key, 0)))
  np.testing.assert_array_equal(state.init_key, want_init)
  np.testing.assert_array_equal(jhash.init(method, key, batch).init_key, want_init)
  np.testing.assert_array_equal(history["key"], _step_keys(key, range(5)))
  np.testing.assert_array_equal(history["step"], np.arange(5))
  _, rest = jhash.fit(
    method,
    key,
    batch,
    5,
    state=state._replace(steps=jnp.int32(2)),
    start_step=2,
    progress=False,
    log_every=log_every,
  )
  np.testing.assert_array_equal(rest["key"], _step_keys(key, range(2, 5)))


def test_every_phase_continues_the_global_step_keys(rng):
  # A later phase's steps are global steps: its first step's key is fold_in(key, 3 + 1)
  # after a phase of 3, not that phase's own step 0 again.
  batch = _batch(rng, n=32)
  method = _key_recorder(phases=(("whole", None, 3), ("mini", 8, 4)))
  key = jax.random.key(2)
  _, history = jhash.fit(method, key, batch, progress=False)
  np.testing.assert_array_equal(history["key"], _step_keys(key, range(7)))


def test_a_stream_trains_with_the_same_step_keys(rng):
  batch = _batch(rng, n=32)
  method = _key_recorder(batch_size=8, phases=(("a", 8, 3), ("b", 8, 4)))
  key = jax.random.key(4)
  start = jhash.init(method, key, batch)
  stream = jhash.minibatches(batch, 8, key, 7)
  _, history = jhash.fit(method, key, stream, state=start, progress=False, log_every=2)
  np.testing.assert_array_equal(history["key"], _step_keys(key, range(7)))
  np.testing.assert_array_equal(history["step"], np.arange(7))
  # Resumed at step 5 (inside phase "b") with the stream positioned there.
  stream = jhash.minibatches(batch, 8, key, 2, start_step=5)
  _, rest = jhash.fit(method, key, stream, state=start, start_step=5, progress=False)
  np.testing.assert_array_equal(rest["key"], _step_keys(key, range(5, 7)))


def test_a_run_total_cuts_or_extends_the_phases(rng):
  # Phases of 3 and 4 steps: a total of 2 runs 2 steps of the first phase, 0 runs
  # nothing, 9 extends the last phase to 6.
  batch = _batch(rng, n=32)
  method = _key_recorder(phases=(("whole", None, 3), ("mini", 8, 4)))
  key = jax.random.key(1)
  for total in (0, 2, 9):
    assert jhash.schedule(method, 32, num_steps=total) == total
    state, history = jhash.fit(method, key, batch, total, progress=False)
    assert int(state.steps) == total
    np.testing.assert_array_equal(history.get("step", np.zeros((0,))), np.arange(total))
  assert jhash.schedule(method, 32) == 7


@pytest.mark.parametrize(
  "n, batch_size, num_steps, calls",
  [
    (250, 1, 250, [100, 200, 250]),  # an epoch is 250 steps: capped at 100
    (30, 8, 7, [3, 6, 7]),  # an epoch is 3 steps
  ],
)
def test_minibatch_metrics_come_once_an_epoch_up_to_100_steps(rng, n, batch_size, num_steps, calls):
  seen = []
  _, history = jhash.fit(
    _key_recorder(batch_size),
    jax.random.key(0),
    _batch(rng, n=n, d=2),
    num_steps,
    progress=False,
    on_step=lambda step, state, metrics: seen.append(step),
  )
  assert seen == calls
  np.testing.assert_array_equal(history["step"], np.arange(num_steps))


def test_a_stream_checks_its_minibatches_and_may_be_empty_when_nothing_is_left(rng):
  batch = _batch(rng, n=32)
  method = _key_recorder(batch_size=8)
  key = jax.random.key(0)
  start = jhash.init(method, key, batch)
  with pytest.raises(ValueError, match="batch_size = 8"):
    jhash.fit(method, key, jhash.minibatches(batch, 4, key, 4), state=start, progress=False)
  flat = next(jhash.minibatches(batch, 8, key, 1))
  with pytest.raises(ValueError, match="index"):  # positions int [b], not [b, 1]
    jhash.fit(
      method, key, iter([{**flat, "index": flat["index"][:, None]}]), 1, state=start, progress=False
    )
  with pytest.raises(ValueError, match="index"):  # one position per item
    jhash.fit(
      method, key, iter([{**flat, "index": flat["index"][:7]}]), 1, state=start, progress=False
    )
  # Resumed at its last step, a run has nothing left to read.
  state, history = jhash.fit(method, key, iter([]), 4, state=start, start_step=4, progress=False)
  assert history == {} and int(state.steps) == 0
  with pytest.raises(ValueError, match="empty"):
    jhash.fit(method, key, iter([]), 4, state=start, start_step=3, progress=False)


def test_an_empty_batch_encodes_to_no_codes_with_or_without_chunks(rng):
  batch = _batch(rng, n=20)
  method = methods.lsh(6)
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  empty = {"views": (batch["views"][0][:0],)}
  for chunk_size in (None, 4):
    codes = jhash.encode(method, state, empty, chunk_size=chunk_size)
    assert codes.shape == (0, 6) and codes.dtype == jnp.int8
    multi, mask = jhash.encode_multi(method, state, empty, chunk_size=chunk_size)
    assert multi.shape == (0, 1, 6) and mask.shape == (0, 1) and mask.dtype == jnp.bool_


def test_a_minibatch_takes_the_per_item_arrays_and_keeps_the_rest(rng):
  batch = _batch(rng, n=20)
  batch = {**batch, "views": (batch["views"][0], None), "prior": np.arange(3.0)}
  key = jax.random.key(6)
  for step, mb in enumerate(jhash.minibatches(batch, 8, key, 3)):
    index = np.asarray(jhash.epoch_permutation(key, step // 2, 20))[8 * (step % 2) :][:8]
    np.testing.assert_array_equal(mb["index"], index)
    np.testing.assert_array_equal(mb["views"][0], batch["views"][0][index])
    np.testing.assert_array_equal(mb["labels"], batch["labels"][index])
    assert mb["views"][1] is None
    np.testing.assert_array_equal(mb["prior"], np.arange(3.0))  # not one per item
