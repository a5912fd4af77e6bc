"""Bad input, round 14: the streaming surface (``jhash.training_pipeline``,
``encode_stream``, ``standardize``) and the metrics a phase reports. Each case names what
it did before."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jhash
from test_pipeline import SMALL
from test_pipeline import _Seen
from test_pipeline import _two_minibatch_phases
from test_pipeline import _write_images


@pytest.fixture(scope="module")
def images(tmp_path_factory):
  return _write_images(tmp_path_factory.mktemp("images"), n=12)


def test_a_training_pipeline_is_read_only_by_the_run_it_was_made_for(images):
  paths, labels = images
  method, key = _two_minibatch_phases(first=4, second=4), jax.random.key(5)
  made = lambda **o: jhash.training_pipeline(method, paths, labels, key=key, **SMALL, **o)
  state, _ = jhash.fit(method, key, made(), num_items=12, progress=False)  # the run it is for
  fit = lambda pipeline, **o: jhash.fit(method, key, pipeline, progress=False, **o)
  # was: trained steps 1.. on step 0's minibatches, with no error
  with pytest.raises(
    ValueError, match=r"made for another run: it starts at step 0, fit at start_step=1"
  ):
    fit(made(), state=state, start_step=1, num_items=12)
  with pytest.raises(ValueError, match=r"made for another run: its key is not fit's key"):
    jhash.fit(method, jax.random.key(6), made(), num_items=12, progress=False)
  # was: "the iterable of minibatches ended after 6 minibatches"
  with pytest.raises(ValueError, match=r"it reads 12 items, fit was given num_items=20"):
    fit(made(), num_items=20)
  with pytest.raises(ValueError, match=r"made by jhash.training_pipeline, not by hand"):
    list(jhash.TrainingPipeline("abc", 3, None))  # was: "not enough values to unpack"


def test_a_phase_batch_larger_than_the_images_names_the_phase(images):
  paths, labels = images
  method = _two_minibatch_phases(first=4, second=16)
  # was: "pass batch_size=12", an option training_pipeline refuses
  with pytest.raises(ValueError, match=r"phase 'second' reads minibatches of 16 .* the 12 images"):
    jhash.training_pipeline(method, paths, labels, key=jax.random.key(0))


def _lsh_state():
  x = np.random.default_rng(0).normal(size=(10, 6)).astype(np.float32)
  method = jhash.methods.lsh(8)
  state, _ = jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)
  return method, state, x


def test_encode_stream_names_a_batch_or_a_non_iterable_and_bad_positions():
  method, state, x = _lsh_state()
  one = {"views": (x,), "index": np.arange(10)}
  with pytest.raises(
    ValueError,
    match=r"an iterable of batch dicts.*one batch dict .keys .views., .index.; jhash.encode",
  ):
    jhash.encode_stream(method, state, one, 10)  # was: "got str 'views'" (its keys)
  with pytest.raises(ValueError, match=r"minibatches must be an iterable of batch dicts"):
    jhash.encode_stream(method, state, None, 10)  # was: TypeError, not iterable
  with pytest.raises(ValueError, match=r"encode_stream of num_items=1,000,000,000,000 items"):
    jhash.encode_stream(method, state, [one], 10**12)  # was: NumPy's MemoryError
  padded = [one, {"views": (x[:1],), "index": np.array([-2])}]
  with pytest.raises(ValueError, match=r"minibatch 1: 'index' holds -2; .* -1 marks a padding"):
    jhash.encode_stream(method, state, padded, 10)  # was: dropped as padding


def _one_phase(metric):
  def update(state, batch, key):
    del batch, key
    return state, {"m": metric}

  init = lambda key, batch: _Seen(jnp.zeros((), jnp.int32))
  encode = lambda state, batch: jnp.ones((batch["views"][0].shape[0], 1), jnp.int8)
  phases = (jhash.Phase("p", update, 4, num_steps=6),)
  return jhash.HashingMethod(init, encode, 1, "hand", phases)


@pytest.mark.parametrize(
  "metric, was",
  [
    ((jnp.float32(1), jnp.float32(2)), "a history of shape (4, 3), transposed"),
    ({"a": jnp.float32(1)}, "NumPy's cannot reshape array"),
  ],
)
def test_a_metric_that_is_not_an_array_is_named(metric, was):
  batch = {"views": (np.zeros((12, 2), np.float32),)}
  for log_every in (None, 2):
    with pytest.raises(ValueError, match=r"metric 'm' of phase 'p' must be an array"):
      jhash.fit(_one_phase(metric), jax.random.key(0), batch, progress=False, log_every=log_every)


def test_standardize_false_with_a_feature_state_takes_its_statistics():
  rng = np.random.default_rng(0)
  x = rng.normal(3, 5, (32, 6)).astype(np.float32)
  batch = {"views": (x,), "labels": (x[:, 0] > 3).astype(np.int32)}
  dch = functools.partial(jhash.methods.dch, 8, batch_size=16, num_epochs=1)
  trained, _ = jhash.fit(dch(), jax.random.key(0), batch, progress=False)
  # was: "its input mean has shape (6,) ... the weights were trained on other inputs"
  state = jhash.init(dch(standardize=False, init_variables=trained), jax.random.key(1), batch)
  np.testing.assert_array_equal(state.coder.mean, trained.coder.mean)
