"""Bad input, round 12: NDCG's gains, bfloat16 in the chunk kernels, the sharded mAP's
sizes, the unchecked searches' static facts, options given as arrays, packed words of
other integer types, subnormal weights and the index's small helpers. Each case names
what it did before."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jhash import codes
from jhash import index
from jhash import metrics
from jhash import search


def _signs(rng, n, k=16):
  return codes.sign(rng.normal(size=(n, k)))


def test_ndcg_of_many_label_columns_equals_its_class_id_form(rng):
  q, db = _signs(rng, 5), _signs(rng, 40)
  ql, dl = rng.integers(0, 100, 5), rng.integers(0, 100, 40)
  dl[:20] = np.repeat(ql, 4)
  one_hot = np.eye(100, dtype=bool)
  for ties in ("aware", "index"):  # was: 0.0 from 97 columns on (2**128 in a gain table)
    want = metrics.ndcg_at_k(q, db, ql, dl, 10, ties=ties)
    got = metrics.ndcg_at_k(q, db, one_hot[ql], one_hot[dl], 10, ties=ties)
    assert got == pytest.approx(want, rel=1e-6) and want > 0
  many = np.ones((5, 101), bool)
  with pytest.raises(ValueError, match=r"gain='exp' takes grades .* up to 100"):
    metrics.ndcg_at_k(q, db, many, np.ones((40, 101), bool), 10)
  with pytest.raises(ValueError, match=r"grades must be <= 100 with gain='exp'"):
    metrics.ndcg(np.array([[0, 1, 2, 3]]), np.full((1, 4), 127), k=3)  # was: nan, defined


def test_bfloat16_values_get_the_float32_checks():
  d = np.array([[0, 2, 1, 2, 3]], np.int32)
  relevant = np.array([[1, 0, 1, 0, 1]], bool)
  bf = jnp.bfloat16
  with pytest.raises(ValueError, match=r"relevance must be bool \(or 0 and 1\)"):
    metrics.average_precision(d, jnp.asarray(relevant * 0.5, bf))  # was: accepted
  with pytest.raises(ValueError, match=r"relevance must be bool \(or 0 and 1\)"):
    metrics.hits_at_k(d, jnp.asarray(relevant * 0.3, bf), (2,))  # was: 0.3 counted relevant
  with pytest.raises(ValueError, match=r"relevance must not be NaN"):
    metrics.average_precision(d, jnp.asarray(np.where(relevant, np.nan, 0), bf))
  with pytest.raises(ValueError, match=r"distances must not be NaN"):
    metrics.ranked_positions(jnp.asarray([[np.nan, 1, 0]], bf), 3)  # was: [[2, 1, 0]]
  np.testing.assert_array_equal(  # 0/1 bfloat16 relevance reads as bool
    metrics.average_precision(d, jnp.asarray(relevant, bf))[0],
    metrics.average_precision(d, relevant)[0],
  )


def test_the_sharded_map_refuses_an_empty_database_and_empty_codes(rng):
  mesh = jax.make_mesh((1,), ("db",))
  q, db = _signs(rng, 4), _signs(rng, 8)
  ql, dl = np.arange(4) % 2, np.arange(8) % 2
  with pytest.raises(ValueError, match=r"db_codes must hold at least one database item"):
    metrics.sharded_mean_average_precision(q, db[:0], ql, dl[:0], mesh=mesh)  # was: 0.0
  with pytest.raises(ValueError, match=r"must have a last axis of num_bits >= 1"):
    metrics.sharded_mean_average_precision(q[:, :0], db[:, :0], ql, dl, mesh=mesh)  # 0.439


def test_the_unchecked_searches_check_num_bits_and_dtypes(rng):
  qp, dp = codes.pack_bits(_signs(rng, 3, 40)), codes.pack_bits(_signs(rng, 7, 40))
  with pytest.raises(ValueError, match=r"num_bits must be an int in \[33, 64\]"):
    search.hamming_topk_unchecked(qp, dp, 4, 1, method="xor")  # was: indices past n
  with pytest.raises(ValueError, match=r"num_bits must be an int in \[33, 64\]"):
    search.sharded_hamming_topk_unchecked(qp, dp, 4, mesh=jax.make_mesh((1,), ("db",)), num_bits=1)
  with pytest.raises(ValueError, match=r"db_packed must be packed codes of dtype uint32"):
    search.hamming_topk_unchecked(qp, np.asarray(dp).astype(np.int32), 2)  # was: an FFI error
  multi = np.stack([np.asarray(dp)] * 2, axis=1)
  with pytest.raises(ValueError, match=r"db_mask must be boolean"):
    search.multi_code_topk_unchecked(qp, multi, np.ones((7, 2), np.int32), 2, 40)  # FFI error


def test_string_options_given_as_arrays_are_named(rng):
  q, db = _signs(rng, 4), _signs(rng, 8)
  ql, dl = np.arange(4) % 2, np.arange(8) % 2
  for option in ("ties", "normalizer", "no_relevant"):  # was: NumPy's "truth value" error
    with pytest.raises(ValueError, match=rf"{option} must be one of .*; got array of shape"):
      metrics.mean_average_precision(q, db, ql, dl, **{option: np.array(["index", "aware"])})


def test_packed_words_of_wider_integers_must_fit_32_bits():
  for words, bits in (([[-1]], 32), ([[2**40]], 32), ([[0, 2**40]], 33)):  # was: passed
    with pytest.raises(ValueError, match=r"p must hold 32-bit words"):
      codes.check_padding(np.array(words, np.int64), bits, "p")
  codes.check_padding(np.array([[5, 1]], np.int64), 33, "p")


def test_subnormal_weights_are_refused(rng):
  q, db = _signs(rng, 3, 8), _signs(rng, 20, 8)
  tiny = ((rng.random(8) + 0.5) * 1e-38).astype(np.float32)  # was: a wrong ranking
  with pytest.raises(ValueError, match=r"weights must be 0 or at least 1\.18e-38"):
    search.weighted_hamming_topk(q, db, tiny, 3)
  with pytest.raises(ValueError, match=r"weights must be 0 or at least"):
    metrics.mean_average_precision(q, db, np.arange(3) % 2, np.arange(20) % 2, weights=tiny)
  search.weighted_hamming_topk(q, db, tiny * 1e3, 3)  # scaled up: accepted


def test_small_index_helpers_name_their_arguments():
  with pytest.raises(ValueError, match=r"num_bits must be a Python int >= 1; got list"):
    index.flip_masks([4], 2)  # was: lru_cache's "unhashable type"
  ids = np.arange(6, dtype=np.uint64) + np.uint64(2**63)
  with pytest.raises(ValueError, match=r"got values from 9223372036854775808 to"):
    index.build_index(np.ones((6, 12), np.int8), num_bits=12, item_ids=ids)  # was: negative


# ----------------------------------------------------------------------------- data, models, fit


def _features(n=40, d=16):
  x = np.random.default_rng(0).normal(size=(n, d)).astype(np.float32)
  return {"views": (x,), "labels": np.arange(n) % 4}


def _memory_method():
  import jhash

  net = jhash.models.backbone((16,), 4, hidden=(8,))
  return jhash.methods.pairwise(4, backbone=net, batch_size=8, num_epochs=1, memory=True)


def test_num_items_is_bounded_by_the_sample_int32_and_memory():
  import jhash

  method, batch, key = _memory_method(), _features(), jax.random.key(0)
  for bad in (3_000_000_000, 10):  # was: a 48 GB bank, then a hang; a sample past its set
    with pytest.raises(ValueError, match=r"num_items \(the training set's size\) must be"):
      jhash.init(method, key, batch, num_items=bad)
  with pytest.raises(ValueError, match=r"state for num_items=2,000,000,000 would need"):
    jhash.init(method, key, batch, num_items=2_000_000_000)
  assert jhash.init(method, key, batch, num_items=40).memory.outputs.shape == (40, 4)


def test_stream_minibatches_name_their_step_and_int64_positions_pass_quietly():
  import warnings

  import jhash

  method, batch, key = _memory_method(), _features(), jax.random.key(0)

  def stream(bad_step=None):
    for i, minibatch in enumerate(jhash.minibatches(batch, 8, key, 3)):
      x = np.array(minibatch["views"][0])
      if i == bad_step:
        x[:] = np.nan
      yield {**minibatch, "views": (x,), "index": np.asarray(minibatch["index"], np.int64)}

  with warnings.catch_warnings():
    warnings.simplefilter("error")  # was: JAX's "int64 ... will be truncated" warning
    jhash.fit(method, key, stream(), 3, num_items=40, progress=False)
  with pytest.raises(ValueError, match=r"minibatch of step 2: views\[0\] must hold finite"):
    jhash.fit(method, key, stream(2), 3, num_items=40, progress=False)  # was: no step


def test_cdh_names_swapped_views_at_encode_without_speaking_of_tracing():
  import jhash

  rng = np.random.default_rng(0)
  wide, narrow = rng.normal(size=(40, 16)), rng.normal(size=(40, 6))
  batch = {
    "views": (wide.astype(np.float32), narrow.astype(np.float32)),
    "labels": np.arange(40) % 3,
  }
  for chunk in (None, 8):
    method = jhash.methods.cdh(8, num_sweeps=1, w_iters=3, chunk_size=chunk)
    state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
    with pytest.raises(ValueError, match=r"views\[0\] must have 16 .*got 6 \(shape \(40, 6\)\)"):
      jhash.encode(method, state, {"views": batch["views"][::-1]})  # was: "a traced value"


def test_list_sets_note_queries_in_the_database_and_queries_without_labels(tmp_path):
  import jhash
  from PIL import Image

  (tmp_path / "im").mkdir()
  lines = []
  for i in range(6):
    Image.new("RGB", (4, 4), (40 * i, 0, 0)).save(tmp_path / "im" / f"{i}.png")
    lines.append(f"im/{i}.png " + " ".join("1" if c == i % 3 else "0" for c in range(21)))
  (tmp_path / "train.txt").write_text("\n".join(lines[:4]))
  (tmp_path / "database.txt").write_text("\n".join(lines[:5]))
  unlabelled = "im/5.png " + " ".join(["0"] * 21)
  (tmp_path / "test.txt").write_text("\n".join([lines[0], lines[1], unlabelled]))
  notes = " ".join(jhash.data.load_paper_lists("nuswide_21", tmp_path).notes)
  assert "2 of the 3 queries (test.txt) are also in database.txt" in notes  # was: silent
  assert "1 queries in test.txt have no label" in notes


def test_small_ones_of_round_12(tmp_path):
  import jhash

  with pytest.raises(ValueError, match=r"images must hold at least one image"):
    jhash.data.make_two_view(np.zeros((0, 8, 8), np.uint8), np.zeros(0, np.int32))  # reshape
  net = jhash.models.backbone((16,), 8)
  for path in ("x", str(tmp_path), "mk.py"):  # was: "a torchvision weights file fits a ResNet"
    method = jhash.methods.pairwise(8, backbone=net, init_variables=path)
    with pytest.raises(ValueError, match=r"init_variables must name a weights file"):
      jhash.init(method, jax.random.key(0), _features())
  # A hash head of the code's width whose input width is not the network's is damage, not
  # another task's head (was: dropped without a word).
  method = jhash.methods.pairwise(8, backbone=net, batch_size=8, num_epochs=1)
  state = jhash.init(method, jax.random.key(0), _features())
  path = jhash.coder.save_weights(tmp_path / "w.npz", state)
  arrays = dict(np.load(path))
  name = next(k for k in arrays if "projection" in k and k.endswith("kernel"))
  arrays[name] = np.zeros((7, 8), np.float32)
  np.savez(tmp_path / "bad.npz", **arrays)
  bad = jhash.methods.pairwise(8, backbone=net, init_variables=str(tmp_path / "bad.npz"))
  with pytest.raises(ValueError, match=r"projection/kernel' has shape \(7, 8\)"):
    jhash.init(bad, jax.random.key(0), _features())
