"""Bad input, third round: silent wrong answers and raw tracebacks found by probe 31, each
now a clear error at the door (naming the argument) or a documented result."""

import sys
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jhash
import jhash.evaluate
from jhash import codes as codes_lib
from jhash import data
from jhash import models
from jhash import search
from jhash import training
from jhash.data._dataset import make_dataset


def _codes(rng, n, k):
  return np.where(rng.random((n, k)) < 0.5, 1, -1).astype(np.int8)


def test_class_ids_beyond_int32_are_refused_by_metrics_and_batches():
  q = np.array([[1, 1, 1, 1]], np.int8)
  d = np.array([[1, 1, 1, 1], [-1, -1, -1, -1]], np.int8)
  wide, db = np.array([2**32]), np.array([0, 2**32])
  with pytest.raises(ValueError, match="query_labels: class ids must fit in int32"):
    jhash.metrics.mean_average_precision(q, d, wide, db)  # was: 1.0 (2**32 wrapped to 0)
  with pytest.raises(ValueError, match="class ids must fit in int32"):
    jhash.metrics.precision_at_k(q, d, wide, db, ks=1)  # was: [1.]
  x = np.zeros((4, 3), np.float32)
  with pytest.raises(ValueError, match="labels: class ids must fit in int32"):
    data.check_batch({"views": (x,), "labels": np.arange(4) + 2**33})  # was: accepted
  with pytest.raises(ValueError, match="class ids must fit in int32"):
    jhash.fit(
      jhash.methods.dch(4), jax.random.key(0), {"views": (x,), "labels": np.arange(4) + 2**33}
    )
  # int64 ids inside int32's range still work, as before.
  assert jhash.metrics.mean_average_precision(q, d, np.array([1]), np.array([0, 1])) == 0.5


def test_a_diverged_state_is_refused_by_fit_and_encode(rng):
  x = rng.normal(size=(40, 6)).astype(np.float32) * 1e20
  y = rng.normal(size=(40, 4)).astype(np.float32) * 1e20
  batch = {"views": (x, y), "labels": rng.integers(0, 3, 40)}
  with pytest.raises(
    FloatingPointError, match="training diverged: cvh's trained state holds NaN or inf"
  ):
    jhash.fit(jhash.methods.cvh(3), jax.random.key(0), batch, progress=False)  # was: NaN state
  itq = jhash.methods.itq(4, num_iters=2)
  small = {"views": (rng.normal(size=(40, 6)).astype(np.float32),)}
  state, _ = jhash.fit(itq, jax.random.key(0), small, progress=False)
  assert jhash.encode(itq, state, small).shape == (40, 4)
  with pytest.raises(
    ValueError, match=r"state must hold no NaN or inf; itq's state has them in \.rotation"
  ):
    jhash.encode(itq, state._replace(rotation=state.rotation * np.nan), small)  # was: all -1


def test_hash_function_settings_are_checked_when_built():
  hf = jhash.methods.hash_functions
  for bad in (float("nan"), float("inf")):  # was: trained to NaN, every code -1
    with pytest.raises(ValueError, match="weight_decay must be a finite float >= 0"):
      hf("mlp", 4, weight_decay=bad)
  with pytest.raises(ValueError, match="weight_decay must be a finite float >= 0; got inf"):
    jhash.methods.hbmp(4, hash_function="mlp", hash_options={"weight_decay": float("inf")})
  with pytest.raises(ValueError, match=r"channels must be a tuple of ints >= 1.*\(-1,\)"):
    hf("cnn", 4, channels=(-1,))  # was: jax TypeError at fit time
  with pytest.raises(ValueError, match=r"hidden must be a tuple of ints >= 1.*\(0,\)"):
    hf("mlp", 4, hidden=(0,))  # was: ZeroDivisionError at fit time
  with pytest.raises(ValueError, match="dense must be >= 1; got 0"):
    hf("cnn", 4, dense=0)  # was: ZeroDivisionError at fit time
  with pytest.raises(TypeError, match="functions must be hash functions"):
    jhash.methods.fit_to_targets(5)  # was: AttributeError
  x = np.zeros((4, 3), np.float32)
  with pytest.raises(ValueError, match="batch must be a dict whose 'views'"):
    jhash.methods.view_features(x, 0)  # was: numpy IndexError


def test_models_and_training_helpers_check_their_arguments():
  with pytest.raises(ValueError, match=r"hidden must be a tuple of ints >= 1.*\(-2,\)"):
    models.backbone((6,), 4, hidden=(-2,))  # was: accepted
  with pytest.raises(TypeError, match="module must be a Flax module"):
    models.model(5)  # was: accepted
  net = models.backbone((6,), 4)
  x = np.ones((3, 6), np.float32)
  with pytest.raises(ValueError, match="key must be one JAX PRNG key"):
    net.init(0, x)  # was: flax InvalidRngError
  with pytest.raises(ValueError, match="key must be one JAX PRNG key"):
    training.create(net, optax.adam(1e-3), 0, x)  # was: flax InvalidRngError
  with pytest.raises(TypeError, match="optimizer must be an optax GradientTransformation"):
    training.create(net, 5, jax.random.key(0), x)  # was: AttributeError
  with pytest.raises(TypeError, match="state must be a jhash.training.TrainState"):
    training.predict(net, {"a": 1}, x)  # was: AttributeError
  with pytest.raises(TypeError, match="state must be a jhash.training.TrainState"):
    training.variables(5)  # was: AttributeError
  with pytest.raises(ValueError, match="variables must be Flax variables, a dict with 'params'"):
    training.from_variables({"batch_stats": {}}, optax.adam(1e-3))  # was: KeyError
  with pytest.raises(TypeError, match="loss_fn must be a function"):
    training.make_step(net, optax.adam(1e-3), 5)  # was: accepted
  with pytest.raises(ValueError, match=r"mean must have the shape of x's trailing axes"):
    training.standardize(np.ones((3, 4)), np.zeros(5), np.ones(5))  # was: numpy broadcast error
  with pytest.raises(ValueError, match="x must hold at least one item"):
    training.input_statistics(x[:0])  # was: NaN statistics
  images = np.ones((2, 8, 8, 1), np.float32)
  with pytest.raises(ValueError, match="size must be >= 1; got 0"):
    models.strided_patches(images, 0, 1)  # was: jax "Need at least one array to concatenate"
  with pytest.raises(ValueError, match="stride must be >= 1; got 0"):
    models.strided_patches(images, 3, 0)  # was: ZeroDivisionError
  with pytest.raises(ValueError, match=r"x must be 4-D images \[n, H, W, C\]"):
    models.strided_patches(images[:, :, :, 0].reshape(2, 64), 3, 1)  # was: unpack ValueError


def test_ndcg_grades_and_hashnet_map_with_no_relevant_item(rng):
  d = np.array([[1, 2, 3]])
  with pytest.raises(ValueError, match=r"grades must be >= 0 \(relevance levels\); found -3"):
    jhash.metrics.ndcg(d, np.array([[-3, 2, 0]]), k=3, gain="linear")  # was: -3.476, defined
  with pytest.raises(ValueError, match=r"grades must be <= 100 with gain='exp'"):
    jhash.metrics.ndcg(d, np.array([[200, 0, 1]]), k=3)  # was: nan, defined
  value, defined = jhash.metrics.ndcg(d, np.array([[200, 0, 1]]), k=3, gain="linear")
  assert bool(defined[0]) and np.isfinite(value[0])
  q, db = _codes(rng, 5, 16), _codes(rng, 20, 16)
  with pytest.warns(RuntimeWarning, match="hashnet_map is NaN: no query has a relevant item"):
    value = jhash.evaluate.hashnet_map(q, db, np.ones(5, int), np.zeros(20, int), top_k=5)
  assert np.isnan(value)  # was: NaN with no warning


def test_search_static_checks_and_code_lengths(rng):
  s = _codes(rng, 6, 16)
  packed = codes_lib.pack_bits(s)
  with pytest.raises(
    ValueError, match=r"k must be an int in \[1, n\]; got 10 with a database of 6"
  ):
    search.hamming_topk_unchecked(packed, packed, k=10, num_bits=16)  # was: JaxRuntimeError
  wide = codes_lib.pack_bits(_codes(rng, 2, 40))
  with pytest.raises(ValueError, match="same number of words per code"):
    search.hamming_topk_unchecked(wide, packed, k=2)  # was: JaxRuntimeError
  with pytest.raises(ValueError, match=r"k must be an int in \[1, n\]"):
    search.weighted_hamming_topk_unchecked(s, s, np.ones(16, np.float32), k=7)
  d, _ = jax.jit(lambda q, b: search.hamming_topk_unchecked(q, b, 3, 16))(packed, packed)
  assert d.shape == (6, 3)  # static checks pass under jit
  with pytest.raises(ValueError, match=r"sum of \|weights\| must be finite in float32"):
    search.weighted_hamming_topk(s[:1], s, np.full(16, 1e38, np.float32), k=6)  # was: inf
  with pytest.raises(ValueError, match="num_bits must be >= 0; got -1"):
    codes_lib.padding_mask(-1)  # was: IndexError
  with pytest.raises(ValueError, match="num_bits must be >= 0; got -5"):
    codes_lib.num_words(-5)  # was: 0
  with pytest.raises(ValueError, match="num_bits must be a Python int >= 0; got str '8'"):
    codes_lib.num_words("8")  # was: 1
  assert codes_lib.num_words(33) == 2 and codes_lib.num_words(0) == 0


class _State(NamedTuple):
  w: jax.Array


def _hand_built(update, batch_size=4, num_bits=4, encode=None, **lengths):
  """A method built by hand from jhash.HashingMethod and jhash.Phase."""
  encode = encode or (lambda s, b: jnp.ones((b["views"][0].shape[0], num_bits), jnp.int8))
  phase = jhash.Phase("p", update, batch_size, **lengths)
  return jhash.HashingMethod(lambda k, b: _State(jnp.zeros(3)), encode, num_bits, "hand", (phase,))


def test_hand_built_phases_and_encoders_are_checked(rng):
  upd = lambda s, b, k: (s, {})
  with pytest.raises(ValueError, match="needs exactly one length"):
    jhash.one_phase("p", upd, batch_size=4, num_steps=1, num_epochs=1)  # was: num_steps dropped
  with pytest.raises(ValueError, match="needs exactly one length"):
    jhash.one_phase("p", upd)  # was: accepted
  with pytest.raises(ValueError, match="phase 'p': batch_size must be >= 1; got -3"):
    jhash.one_phase("p", upd, batch_size=-3, num_epochs=1)  # was: accepted
  with pytest.raises(ValueError, match="phase 'p': num_steps must be >= 0; got -1"):
    jhash.one_phase("p", upd, num_steps=-1)  # was: accepted
  with pytest.raises(ValueError, match="num_epochs must be a Python int >= 0; got float 1.5"):
    jhash.one_phase("p", upd, num_epochs=1.5)  # was: accepted
  batch = {"views": (rng.normal(size=(12, 3)).astype(np.float32),)}
  fit = lambda m: jhash.fit(m, jax.random.key(0), batch, progress=False)
  with pytest.raises(ValueError, match=r"hand.phases\[0\] 'p': batch_size must be >= 1; got 0"):
    fit(_hand_built(upd, 0, num_epochs=1))  # was: ZeroDivisionError
  with pytest.raises(TypeError, match=r"'p': update must be a function"):
    fit(_hand_built(5, num_epochs=1))  # was: jax TypeError
  with pytest.raises(ValueError, match=r"must return \(state, metrics\).*the state alone"):
    fit(_hand_built(lambda s, b, k: s, num_epochs=1))  # was: IndexError in _loops
  grow = lambda s, b, k: (_State(jnp.zeros(4)), {})
  with pytest.raises(ValueError, match="must return a state of the type, shapes and dtypes"):
    fit(_hand_built(grow, num_epochs=1))  # was: while_loop carry error
  method = _hand_built(upd, num_epochs=1)
  state, _ = fit(method)
  assert jhash.encode(method, state, batch).shape == (12, 4)
  logits = lambda s, b: jnp.ones((b["views"][0].shape[0], 4))
  with pytest.raises(ValueError, match=r"hand's encode must return int8 codes \[n, num_bits\]"):
    jhash.encode(_hand_built(upd, encode=logits, num_epochs=1), state, batch)  # was: floats
  with pytest.raises(ValueError, match=r"= \[12, 5\].*shape \(12, 4\)"):
    jhash.encode(_hand_built(upd, num_bits=5, encode=method.encode, num_epochs=1), state, batch)


def test_schedule_and_minibatch_arguments(rng):
  dch = jhash.methods.dch(4, batch_size=8, num_epochs=2)
  assert jhash.schedule(dch, 40) == 10
  with pytest.raises(ValueError, match="num_items must be >= 1; got -1"):
    jhash.schedule(dch, -1)  # was: 2
  with pytest.raises(ValueError, match="num_items must be a Python int >= 1; got float 40.5"):
    jhash.schedule(dch, 40.5)  # was: 10.0
  with pytest.raises(ValueError, match="num_items must be >= 1; got 0"):
    jhash.schedule(dch, 0)  # was: ZeroDivisionError
  key = jax.random.key(0)
  with pytest.raises(ValueError, match="num_items must be >= 0; got -1"):
    jhash.epoch_permutation(key, 0, -1)  # was: empty array
  with pytest.raises(ValueError, match="epoch must be a Python int >= 0; got float 1.5"):
    jhash.epoch_permutation(key, 1.5, 3)  # was: accepted
  with pytest.raises(ValueError, match="epoch must be >= 0; got -1"):
    jhash.epoch_permutation(key, -1, 5)  # was: OverflowError
  with pytest.raises(ValueError, match="key must be one JAX PRNG key"):
    jhash.epoch_permutation(0, 0, 5)  # was: jax TypeError
  batch = {"views": (rng.normal(size=(16, 3)).astype(np.float32),)}
  with pytest.raises(ValueError, match="batch_size must be >= 1; got 0"):
    next(jhash.minibatches(batch, 0, key, 2))  # was: ZeroDivisionError
  with pytest.raises(ValueError, match="key must be one JAX PRNG key"):
    next(jhash.minibatches(batch, 8, 0, 1))  # was: jax TypeError
  with pytest.raises(ValueError, match="start_step must be >= 0; got -3"):
    next(jhash.minibatches(batch, 8, key, 2, start_step=-3))  # was: OverflowError
  with pytest.raises(ValueError, match="phase must be >= 0; got -1"):
    next(jhash.minibatches(batch, 8, key, 2, phase=-1))  # was: OverflowError
  assert len(list(jhash.minibatches(batch, 8, key, 3))) == 3
  with pytest.raises(ValueError, match="batch must be a dict whose 'views' is a tuple"):
    jhash.num_items({"views": ()})  # was: StopIteration
  with pytest.raises(ValueError, match="batch must be a dict whose 'views' is a tuple"):
    jhash.num_items(batch["views"][0])  # was: AttributeError


def test_faiss_range_search_checks_the_index(rng):
  pytest.importorskip("faiss")
  d16 = codes_lib.pack_bits(_codes(rng, 5, 16))
  with pytest.raises(TypeError, match="index must be a FAISS binary index"):
    jhash.index.faiss_range_search(5, d16, 16, 1)  # was: AttributeError
  q40 = codes_lib.pack_bits(_codes(rng, 2, 40))
  flat = jhash.index.to_faiss_flat(d16, 16)
  with pytest.raises(ValueError, match="index holds codes of FAISS dimension d=16; num_bits=40"):
    jhash.index.faiss_range_search(flat, q40, 40, 1)  # was: bare AssertionError in faiss
  lims, _, _ = jhash.index.faiss_range_search(flat, d16, 16, 0)
  assert len(lims) == 6


def test_data_helpers_check_seeds_indices_and_scales():
  labels = np.arange(8) % 2
  with pytest.raises(ValueError, match="seed must be an int >= 0"):
    data.split_per_class(labels, 1, 1, seed=-1)  # was: numpy ValueError
  with pytest.raises(ValueError, match="seed must be an int >= 0.*float 1.5"):
    data.split_per_class(labels, 1, 1, seed=1.5)  # was: numpy TypeError
  ds = make_dataset((np.ones((6, 2), np.float32),), np.arange(6), ("x",), "six")
  with pytest.raises(ValueError, match=r"index must be .* in \[-6, 6\).*found 5000"):
    ds.batch(np.array([5000]))  # was: numpy IndexError
  with pytest.raises(ValueError, match="index must be .*dtype float64"):
    ds.batch(np.array([1.5]))  # was: numpy IndexError
  assert ds.batch(np.array([0, -1]))["labels"].tolist() == [0, 5]
  assert ds.batch([])["labels"].shape == (0,)
  with pytest.raises(ValueError, match="scale must be a finite number > 0; got -1.0"):
    data.make_two_view(np.ones((4, 4, 4)), np.arange(4), scale=-1.0)  # was: flipped pixels


def test_unknown_keywords_name_the_function_called(rng):
  for factory in (jhash.methods.dch, jhash.methods.ksh, jhash.methods.hashnet, jhash.methods.mmhh):
    name = factory.__name__
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'foo'"):
      factory(4, foo=1)  # was: pairwise() got an unexpected keyword argument
  with pytest.raises(TypeError, match=r"^dch\(\) got an unexpected keyword.*its options: backbone"):
    jhash.methods.mch_of(4, base_options={"foo": 1})  # was: pairwise() ...
  x = rng.normal(size=(10, 3)).astype(np.float32)
  batch = {"views": (x, x), "labels": np.arange(10) % 2}
  with pytest.raises(TypeError, match=r"^cdh_select_gamma\(\) got an unexpected keyword"):
    jhash.cdh_select_gamma(4, jax.random.key(0), batch, [1.0], foo=1)  # was: cdh() got ...


def test_experiment_config_errors_are_one_line_before_training(tmp_path):
  sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
  import _experiment_runs as runs
  from experiments import cdh_common
  from experiments import harness
  from experiments import retrieval
  from experiments import main

  config = runs.load_config("baselines", "tiny")
  with config.unlocked():
    config.datasets.mfeat.query_per_class = 0
  with pytest.raises(
    harness.ConfigError, match="config.datasets.mfeat: the split holds no queries"
  ):
    retrieval.train_and_evaluate(config, tmp_path / "a")  # was: trained every cell, then failed
  with config.unlocked():
    config.datasets.mfeat.query_per_class = 1000
  with pytest.raises(
    harness.ConfigError, match="config.datasets.mfeat: query_per_class must be below 200"
  ):
    retrieval.train_and_evaluate(config, tmp_path / "b")  # was: a traceback
  spec = {"views": ("pix",), "query_per_class": 20, "validation_per_class": 2}
  with pytest.raises(harness.ConfigError, match="config.dataset.views: must name two views"):
    cdh_common.mfeat_data(spec, 0)  # was: IndexError
  with pytest.raises(harness.ConfigError, match="config.dataset: views must be distinct names"):
    cdh_common.mfeat_data({**spec, "views": ("pix", "nope")}, 0)  # was: a traceback
  with pytest.raises(harness.ConfigError, match="config.dataset.validation_per_class: must be"):
    cdh_common.mfeat_data({**spec, "views": ("pix", "fou"), "validation_per_class": 500}, 0)
  cdh = runs.load_config("cdh_mfeat", "quick")
  with cdh.unlocked():
    cdh.gamma_grid = (-1.0,)
  with pytest.raises(harness.ConfigError, match="config.gamma_grid: must be a non-empty tuple"):
    cdh_common.validate(cdh, list(cdh.keys()))  # was: a traceback after loading the data
  assert main._last_line(ValueError("Error whilst parsing:\n\n  ...\nValueError: bad arg")) == (
    "ValueError: bad arg"
  )


def test_training_curves_of_a_run_with_no_step_are_skipped(tmp_path):
  from experiments import retrieval
  import ml_collections

  config = ml_collections.ConfigDict(
    {"datasets": {"d": {}}, "bits": (8,), "seed": 0, "methods": {"m": {}}}
  )
  spec = ml_collections.ConfigDict({"metric": "loss", "methods": ("m",)})
  metrics = {retrieval.cell_name("d", "m", 8): {"per_seed": {"0": {"history": {}}}}}
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # matplotlib: a legend with no line
    retrieval.curve_plot(config, metrics, spec, tmp_path / "loss.png")  # was: KeyError 'loss'
  assert (tmp_path / "loss.png").exists()


def test_database_limit_and_protocol_seed_are_checked():
  small = {"num_items": 40, "num_queries": 5, "num_train": 10, "size": 28}
  _, split = data.scene_split(0, **small, database_limit=1)
  assert len(split["database"]) == 1
  for bad in (0, -1):  # was: -1 dropped one item, 0 kept the whole database
    with pytest.raises(ValueError, match="database_limit must be >= 1"):
      data.scene_split(0, **small, database_limit=bad)
  for bad in (1.5, "5", True):  # was: TypeError from a slice or a comparison (True: 1)
    with pytest.raises(ValueError, match="database_limit must be a Python int >= 1"):
      data.load_protocol("mfeat", 0, database_limit=bad)
  for bad in (1.5, "0", True, "abc", None, -1):  # was: int(seed), or int()'s raw error
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
      data.load_protocol("mfeat", bad)


def test_scene_and_canvas_generators_check_seeds_images_and_class_ids(rng):
  img = rng.uniform(size=(30, 8, 8)).astype(np.float32)
  lab = rng.integers(0, 10, 30)
  small = {"num_items": 40, "num_queries": 5, "num_train": 10, "size": 28}
  for bad in (-1, 1.5, "0"):  # was: numpy's SeedSequence errors
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
      data.make_scene_dataset(img, lab, seed=bad, num_items=3, size=28)
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
      data.make_canvas_dataset(img, lab, seed=bad, num_items=3)
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
      data.scene_split(bad, **small)
  with pytest.raises(ValueError, match="labels: class ids must fit in int32"):
    data.make_scene_dataset(img, lab + 2**40, num_items=4, size=28)  # was: MemoryError 4 TiB
  with pytest.raises(ValueError, match="labels: class ids must fit in int32"):
    data.make_canvas_dataset(img, lab + 2**40, num_items=2)  # was: MemoryError 4 TiB
  with pytest.raises(ValueError, match="images must have sides >= 1"):
    data.make_scene_dataset(np.zeros((30, 0, 0), np.uint8), lab, num_items=3)  # was: empty scenes
  ds, split = data.scene_split(0, **small, num_objects=2)  # was: 'int' object is not iterable
  assert (ds.extras["num_objects"] == 2).all() and len(split["query"]) == 5


def test_multi_hot_labels_without_columns_are_refused(rng, tmp_path, capsys):
  q, d = _codes(rng, 3, 8), _codes(rng, 6, 8)
  with pytest.raises(ValueError, match="query_labels: multi-hot labels need at least one column"):
    jhash.metrics.mean_average_precision(q, d, np.zeros((3, 0), bool), np.zeros((6, 0), bool))
    # was: ZeroDivisionError (integer modulo by zero)
  x = rng.normal(size=(6, 4)).astype(np.float32)
  with pytest.raises(ValueError, match="labels: multi-hot labels need at least one column"):
    data.check_batch({"views": (x,), "labels": np.zeros((6, 0), bool)})  # was: accepted
  paths, empty = {}, lambda n: np.zeros((n, 0), bool)
  for name, a in {"q": q, "d": d, "ql": empty(3), "dl": empty(6)}.items():
    paths[name] = str(tmp_path / f"{name}.npy")
    np.save(paths[name], a)
  argv = ["--query-codes", paths["q"], "--db-codes", paths["d"]]
  argv += ["--query-labels", paths["ql"], "--db-labels", paths["dl"]]
  assert jhash.evaluate.main(argv) != 0  # was: a ZeroDivisionError traceback
  err = capsys.readouterr().err
  assert "multi-hot labels need at least one column" in err and "Traceback" not in err


def test_evaluate_cli_reads_bool_labels_as_multi_hot(rng, tmp_path, capsys):
  q, d = _codes(rng, 5, 8), _codes(rng, 20, 8)
  ql, dl = rng.random((5, 1)) < 0.5, rng.random((20, 1)) < 0.5
  ql[0], dl[0] = True, True
  paths = {}
  for name, a in {"q": q, "d": d, "ql": ql, "dl": dl, "q1": ql[:, 0], "d1": dl[:, 0]}.items():
    paths[name] = str(tmp_path / f"{name}.npy")
    np.save(paths[name], a)
  argv = ["--query-codes", paths["q"], "--db-codes", paths["d"], "--json", str(tmp_path / "r.json")]
  status = jhash.evaluate.main(argv + ["--query-labels", paths["ql"], "--db-labels", paths["dl"]])
  assert status == 0, capsys.readouterr().err
  out = capsys.readouterr().out
  assert "multi-hot, 1 labels" in out  # was: "bool [5, 1]: class ids" (mAP 0.4855, not 0.2694)
  report = (tmp_path / "r.json").read_text()
  want = float(jhash.metrics.mean_average_precision(q, d, ql, dl))
  assert f"{want:.4f}"[:5] in report
  status = jhash.evaluate.main(argv + ["--query-labels", paths["q1"], "--db-labels", paths["d1"]])
  assert status != 0  # was: 1-D bool labels read as class ids
  assert "bool labels must be multi-hot [n, C]" in capsys.readouterr().err


def test_ndcg_grades_and_harmonic_difference_arguments_are_checked():
  with pytest.raises(ValueError, match="grades must hold finite values"):
    jhash.metrics.ndcg(np.array([[1, 2]]), np.array([[np.inf, 0]]), k=2, gain="linear")
    # was: (nan, True)
  for a, b in ((0.5, 2), (2.5, 3.5), (1, np.inf), (np.nan, 1)):  # was: 0.886, 0.286, NaN, NaN
    with pytest.raises(ValueError, match="must be finite whole numbers"):
      jhash.metrics.harmonic_difference(a, b)
  assert float(jhash.metrics.harmonic_difference(1, 3)) == pytest.approx(1 / 2 + 1 / 3)
  assert float(jax.jit(jhash.metrics.harmonic_difference)(1.0, 3.0)) == pytest.approx(5 / 6)


def test_flags_and_names_of_mch_backbone_and_fit_are_checked(rng):
  base = jhash.methods.dch(4, batch_size=8, num_epochs=1)
  with pytest.raises(ValueError, match="memory must be True or False"):
    jhash.methods.mch(base, memory="no")  # was: accepted (truthy)
  with pytest.raises(ValueError, match="name must be a str or None"):
    jhash.methods.mch(base, name=5)  # was: method.name == 5
  with pytest.raises(ValueError, match="batch_norm must be True or False"):
    models.backbone((6,), 4, batch_norm="no")  # was: accepted (truthy)
  x = rng.normal(size=(40, 6)).astype(np.float32)
  with pytest.raises(ValueError, match="donate must be True or False"):
    jhash.fit(jhash.methods.itq(4), jax.random.key(0), {"views": (x,)}, donate="x")
    # was: accepted


def test_as_batch_standardize_columns_and_standardize_check_their_arguments(rng):
  x = rng.normal(size=(10, 3)).astype(np.float32)
  ds = make_dataset((x,), rng.integers(0, 3, 10), ("x",), "d")
  with pytest.raises(ValueError, match="dataset must be a jhash.data.Dataset"):
    data.as_batch(5, [0])  # was: AttributeError 'int' object has no attribute 'num_items'
  with pytest.raises(ValueError, match="index: a slice's step must not be 0"):
    data.as_batch(ds, slice(0, 5, 0))  # was: Python's "slice step cannot be zero"
  assert data.as_batch(ds, slice(0, 5, 2))["labels"].shape == (3,)
  with pytest.raises(ValueError, match="x must be a real array"):
    data.standardize_columns(np.array([["a"]]))  # was: numpy "could not convert string"
  with pytest.raises(ValueError, match="x must hold finite values"):
    data.standardize_columns(np.array([[1.0, np.inf], [2.0, 3.0]]))  # was: a NaN column
  mean, scale = np.zeros(3, np.float32), np.ones(3, np.float32)
  with pytest.raises(ValueError, match="scale must hold finite values"):
    training.standardize(x, mean, scale * np.nan)  # was: NaN
  with pytest.raises(ValueError, match="scale must be >= 0"):
    training.standardize(x, mean, -scale)  # was: accepted
  np.testing.assert_allclose(training.standardize(x, mean, scale), x)
