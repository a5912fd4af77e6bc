"""``jhash.save`` / ``jhash.restore``: the exact state back (type, arrays, codes, training
that continues to the bit), and a clear error for a state of another method, bit length or
settings, a damaged folder, or a path that is taken."""

import jax
import numpy as np
import pytest

import jhash


def _features(n=100, d=12):
  rng = np.random.default_rng(0)
  return {"views": (rng.normal(size=(n, d)).astype(np.float32),)}


@pytest.fixture(scope="module")
def itq():
  method, batch = jhash.methods.itq(8, num_iters=3), _features()
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  return method, batch, state


def _same(a, b):
  assert type(a) is type(b) and jax.tree.structure(a) == jax.tree.structure(b)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    assert np.asarray(x).dtype == np.asarray(y).dtype
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_restored_state_is_the_saved_one_and_trains_on_to_the_bit(itq, tmp_path):
  method, batch, state = itq
  path = jhash.save(tmp_path / "itq", state)
  restored = jhash.restore(path, method, batch)
  _same(restored, state)
  np.testing.assert_array_equal(
    jhash.encode(method, restored, batch), jhash.encode(method, state, batch)
  )
  key = jax.random.key(1)
  more = jhash.fit(method, key, batch, 2, state=restored, progress=False)
  _same(more, jhash.fit(method, key, batch, 2, state=state, progress=False))


def test_a_network_state_round_trips(tmp_path):
  rng = np.random.default_rng(1)
  batch = {
    "views": (rng.uniform(size=(64, 28, 28)).astype(np.float32),),
    "labels": rng.integers(0, 4, 64).astype(np.int32),
  }
  method = jhash.methods.dch(8, batch_size=32, num_epochs=1)
  state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
  restored = jhash.restore(jhash.save(tmp_path / "dch", state), method, batch)
  _same(restored, state)
  np.testing.assert_array_equal(
    jhash.encode(method, restored, batch), jhash.encode(method, state, batch)
  )


def test_a_state_of_another_method_or_bit_length_is_refused(itq, tmp_path):
  _, batch, state = itq
  path = jhash.save(tmp_path / "itq", state)
  with pytest.raises(ValueError, match=r"trained by itq \(8 bits\).*itq \(16 bits\)"):
    jhash.restore(path, jhash.methods.itq(16), batch)
  with pytest.raises(ValueError, match=r"trained by itq \(8 bits\).*lsh \(8 bits\)"):
    jhash.restore(path, jhash.methods.lsh(8), batch)


def test_a_state_of_other_settings_is_refused_naming_the_array(itq, tmp_path):
  method, _, state = itq
  path = jhash.save(tmp_path / "itq", state)
  with pytest.raises(
    ValueError,
    match=r"does not fit itq.s state.*array .mean is float32 \(12,\) in the saved state and float32 \(10,\)",
  ):
    jhash.restore(path, method, _features(d=10))


def test_a_damaged_folder_is_named(itq, tmp_path):
  method, batch, state = itq
  path = jhash.save(tmp_path / "itq", state)
  data = max((p for p in path.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
  data.write_bytes(data.read_bytes()[:-1])
  with pytest.raises(ValueError, match=f"damaged: {data}"):
    jhash.restore(path, method, batch)
  with pytest.raises(ValueError, match="not a state written by jhash.save"):
    jhash.restore(tmp_path, method, batch)
  with pytest.raises(FileNotFoundError, match="not a folder written by jhash.save"):
    jhash.restore(tmp_path / "absent", method, batch)


def test_a_taken_path_is_refused_unless_overwritten(itq, tmp_path):
  method, batch, state = itq
  path = jhash.save(tmp_path / "itq", state)
  with pytest.raises(FileExistsError, match="overwrite=True"):
    jhash.save(path, state)
  other = jhash.fit(method, jax.random.key(5), batch, progress=False)[0]
  jhash.save(path, other, overwrite=True)
  _same(jhash.restore(path, method, batch), other)
  assert [p.name for p in tmp_path.iterdir()] == ["itq"]  # nothing left beside it
  with pytest.raises(TypeError, match="state must be a pytree of arrays"):
    jhash.save(tmp_path / "x", {"a": 1})
