"""``jhash.fit``: key schedule, resuming, and bad input at the door."""

import jax
import numpy as np
import pytest

import jhash
from jhash import methods


def _batch(rng, n=80, d=10):
  return {"views": (rng.normal(size=(n, d)).astype(np.float32),),
          "labels": rng.integers(0, 3, n).astype(np.int32)}


def test_resumed_fit_equals_uninterrupted(rng):
  batch = _batch(rng)
  method = methods.itq(6, num_iters=10)
  key = jax.random.key(7)
  full, full_hist = jhash.fit(method, key, batch, progress=False)
  half, hist1 = jhash.fit(method, key, batch, 4, progress=False)
  half = jax.tree.map(lambda x: np.array(x), half)  # as if read back from disk
  rest, hist2 = jhash.fit(method, key, batch, 10, state=jax.tree.map(jax.numpy.asarray, half),
                          start_step=4, progress=False)
  jax.tree.map(np.testing.assert_array_equal, full, rest)
  np.testing.assert_array_equal(
      full_hist["quantization_loss"],
      np.concatenate([hist1["quantization_loss"], hist2["quantization_loss"]]))


def test_on_step_sees_every_step(rng):
  seen = []
  jhash.fit(methods.itq(4, num_iters=5), jax.random.key(0), _batch(rng), progress=False,
            on_step=lambda step, state, metrics: seen.append(step))
  assert seen == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("bad, match", [
    ({"views": (np.zeros((5, 3)), np.zeros((6, 3)))}, "views"),
    ({"views": (np.array([[0.0, np.nan]] * 4),)}, r"views\[0\]"),
    ({"views": (np.array([[0.0, np.inf]] * 4),)}, r"views\[0\]"),
    ({"views": (np.zeros((4, 3)),), "labels": np.zeros((5,), np.int32)}, "labels"),
    ({"views": (np.zeros((4, 3)),), "labels": np.zeros((4,), np.float32)}, "labels"),
    ({"views": (np.zeros((4, 3)),), "labels": np.zeros((4, 2, 2), bool)}, "labels"),
    ({"views": ()}, "views"),
    ({"views": (None, None)}, "views"),
    ({"labels": np.zeros(3)}, "batch"),
])
def test_bad_batches_raise_naming_the_argument(bad, match):
  with pytest.raises(ValueError, match=match):
    jhash.fit(methods.lsh(4), jax.random.key(0), bad, progress=False)


def test_error_message_has_expected_and_received_shapes():
  with pytest.raises(ValueError) as info:
    jhash.fit(methods.lsh(4), jax.random.key(0),
              {"views": (np.zeros((4, 3)),), "labels": np.zeros((5,), np.int32)}, progress=False)
  assert "[4]" in str(info.value) and "(5,)" in str(info.value)


def test_bad_key_and_steps(rng):
  with pytest.raises(ValueError, match="key"):
    jhash.fit(methods.lsh(4), 0, _batch(rng), progress=False)
  with pytest.raises(ValueError, match="num_steps"):
    jhash.fit(methods.lsh(4), jax.random.key(0), _batch(rng), num_steps=-1, progress=False)
