"""Two processes on the loopback address: jhash.distributed and the sharded paths over them.

Each test starts two copies of ``_distributed_worker.py`` (2 host devices each, 4 in the
run) and compares what each process gathered with the one-process result, bit for bit
(the same arithmetic: integer distances, CDH's integer Gram and float32 sums in the same
order).
"""

import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import warnings

import jax
import numpy as np
import pytest

import jhash
from jax.sharding import Mesh
from jhash import distributed

from _distributed_data import cdh_data
from _distributed_data import fit_data
from _distributed_data import map_data
from _distributed_data import stream_steps
from _distributed_data import multi_code_data
from _distributed_data import saved_state
from _distributed_data import search_data

WORKER = pathlib.Path(__file__).with_name("_distributed_worker.py")
TIMEOUT_S = 240


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def launch(case, out_dir, *extra):
  """Both processes of one run; returns their (return code, output, seconds) after both end."""
  return launch_command([str(WORKER), case, str(out_dir), *extra])


def launch_command(args, envs=({}, {}), cwd=None):
  """``python -u ARGS`` as both processes of one run (``envs``: each one's extra
  environment); returns their (return code, output, seconds) after both end."""
  port = free_port()
  procs = []
  for rank in range(2):
    env = dict(
      os.environ,
      JAX_PLATFORMS="cpu",
      JHASH_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
      JHASH_NUM_PROCESSES="2",
      JHASH_PROCESS_ID=str(rank),
      **envs[rank],
    )
    procs.append(
      subprocess.Popen(
        [sys.executable, "-u", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
      )
    )
  start, results = time.monotonic(), []
  try:
    for proc in procs:
      out, _ = proc.communicate(timeout=max(1, TIMEOUT_S - (time.monotonic() - start)))
      results.append((proc.returncode, out, time.monotonic() - start))
  finally:
    for proc in procs:
      proc.kill()
  return results


def test_search_over_two_processes_equals_one_and_a_dead_process_stops_the_other(tmp_path):
  (rc0, out0, _), (rc1, out1, _) = launch("search", tmp_path, "--then-die")
  assert os.path.exists(tmp_path / "search-0.npz"), out0[-3000:]
  assert os.path.exists(tmp_path / "search-1.npz"), out1[-3000:]
  queries, db, num_bits, k = search_data()
  d, idx = (np.asarray(x) for x in jhash.search.hamming_topk(queries, db, k, num_bits=num_bits))
  assert idx[0, 0] == 0 and (idx[0, 1:41] >= db.shape[0] - 40).all()  # then the last shard
  rows = []
  for rank in range(2):
    got = np.load(tmp_path / f"search-{rank}.npz")
    np.testing.assert_array_equal(got["d"], d)
    np.testing.assert_array_equal(got["idx"], idx)
    rows.append(tuple(got["rows"]))
  assert rows == [(0, 502), (502, 1001)]  # each loaded its own rows: 2 shards of 251
  queries, codes, held, num_bits, k = multi_code_data()
  want = jhash.search.multi_code_topk(queries, codes, held, k, num_bits=num_bits)
  for rank in range(2):
    got = np.load(tmp_path / f"search-{rank}.npz")
    np.testing.assert_array_equal(got["d_multi"], np.asarray(want[0]))
    np.testing.assert_array_equal(got["idx_multi"], np.asarray(want[1]))
  # The state process 0 saved, restored by each process: its codes are the state's.
  method, batch, state = saved_state()
  want = np.asarray(jhash.encode(method, state, batch))
  for rank in range(2):
    np.testing.assert_array_equal(np.load(tmp_path / f"search-{rank}.npz")["restored_codes"], want)
  assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".npz")) == ["state"]
  q, codes, q_labels, labels = map_data()
  one = jhash.metrics.mean_average_precision(q, codes, q_labels, labels, top_k=100)
  for rank in range(2):
    assert float(np.load(tmp_path / f"search-{rank}.npz")["mean_ap"]) == one
  curve = jhash.metrics.pr_curve_by_radius(q, codes, q_labels, labels, average="pooled")
  assert 0 < curve["precision"][4] < 1 and 0 < curve["recall"][4] < 1  # a radius that tells
  for rank in range(2):
    got = np.load(tmp_path / f"search-{rank}.npz")
    np.testing.assert_array_equal(got["precision"], curve["precision"])
    np.testing.assert_array_equal(got["recall"], curve["recall"])
  # Process 1 then died; process 0, inside a collective, stopped with an error naming it.
  assert rc1 == 3
  assert rc0 != 0 and "passed a collective" not in out0
  assert "stopped sending heartbeats" in out0 or "another task died" in out0, out0[-3000:]


@pytest.mark.slow  # ~30 s; test_cdh_exact's 8-device test covers the same shard_map code
def test_cdh_exact_b_step_over_two_processes_equals_one(tmp_path):
  results = launch("cdh", tmp_path)
  for rank, (rc, out, _) in enumerate(results):
    assert rc == 0, out[-3000:]
  batch, options = cdh_data()
  one, _ = jhash.fit(
    jhash.methods.cdh(16, chunk_size=301, **options),
    jax.random.key(0),
    batch,
    num_steps=1,
    progress=False,
  )
  for rank in range(2):
    np.testing.assert_array_equal(np.load(tmp_path / f"cdh-{rank}.npz")["codes"], one.codes)


@pytest.mark.slow  # ~15 s; test_training's 8-device test covers the same train step
def test_train_step_data_parallel_over_two_processes_equals_one(tmp_path):
  results = launch("fit", tmp_path)
  for rc, out, _ in results:
    assert rc == 0, out[-3000:]
  batch, method = fit_data()
  one, history = jhash.fit(method, jax.random.key(0), batch, progress=False)
  leaves = jax.tree.leaves(one)
  for rank in range(2):
    got = np.load(tmp_path / f"fit-{rank}.npz")
    # Float sums over 4 devices in another order: equal up to rounding.
    np.testing.assert_allclose(got["loss"], history["loss"], rtol=1e-5)
    for i, leaf in enumerate(leaves):
      np.testing.assert_allclose(got[f"leaf{i}"], np.asarray(leaf), rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # ~9 s; test_training's 8-device test runs the same code in one process
def test_a_stream_of_process_local_minibatches_trains_as_one_process(tmp_path):
  # Each process passes only its half of every global minibatch; the run equals one
  # process fed the whole minibatches (jhash.minibatches; its state made from the first).
  results = launch("stream", tmp_path)
  for rc, out, _ in results:
    assert rc == 0, out[-3000:]
  batch, method = fit_data()
  key, steps = jax.random.key(0), stream_steps()
  whole = jhash.minibatches(batch, method.phases[0].batch_size, key, steps)
  one, history = jhash.fit(method, key, whole, steps, progress=False, num_items=128)
  leaves = jax.tree.leaves(one)
  for rank in range(2):
    got = np.load(tmp_path / f"stream-{rank}.npz")
    # Float sums over 4 devices in another order: equal up to rounding.
    np.testing.assert_allclose(got["loss"], history["loss"], rtol=1e-5)
    for i, leaf in enumerate(leaves):
      np.testing.assert_allclose(got[f"leaf{i}"], np.asarray(leaf), rtol=1e-4, atol=1e-5)
  # The set split in memory (jhash.local_minibatches): process p's share of each
  # minibatch drawn from its own rows, an epoch a permutation by its own key (the rule,
  # written out here), trains as one process fed the minibatches side by side.
  rows = [tuple(np.load(tmp_path / f"stream-{rank}.npz")["rows"]) for rank in range(2)]
  assert rows == [(0, 64), (64, 128)]
  whole_history = history
  one, history = jhash.fit(
    method,
    key,
    local_rule_minibatches(batch, key, rows, 16, steps),
    steps,
    progress=False,
    num_items=128,
  )
  rule = [m["index"] for m in local_rule_minibatches(batch, key, rows, 16, steps)]
  for rank in range(2):
    got = np.load(tmp_path / f"stream-{rank}.npz")
    want = np.stack([index[16 * rank : 16 * (rank + 1)] for index in rule])
    np.testing.assert_array_equal(got["local_index"], want)  # positions in the whole set
    # Float sums over 4 devices in another order: 1.1e-5 of the loss measured (8 steps).
    np.testing.assert_allclose(got["local_loss"], history["loss"], rtol=1e-4)
    # ... while another order of the same items (the whole set's) is far off.
    assert np.abs(got["local_loss"] - whole_history["loss"]).max() > 1e-3
    for i, leaf in enumerate(jax.tree.leaves(one)):
      np.testing.assert_allclose(got[f"local_leaf{i}"], np.asarray(leaf), rtol=1e-4, atol=1e-5)


def local_rule_minibatches(batch, key, rows, share, steps, phase=0):
  """The global minibatches of a set split over processes by ``rows`` [(start, stop)],
  each process drawing ``share`` rows a step: for process p of P > 1, epoch e is
  ``permutation(fold_in(fold_in(fold_in(fold_in(key, 0xFFFFFFFE), p), 0xFFFFFFFF), e),
  phase)`` of its rows (with one process, ``key`` itself); blocks side by side."""
  perms = {}
  for step in range(steps):
    parts = []
    for p, (start, stop) in enumerate(rows):
      n, fold = stop - start, jax.random.fold_in
      per_epoch, e = n // share, step // (n // share)
      if (p, e) not in perms:
        pk = key if len(rows) == 1 else fold(fold(key, 0xFFFFFFFE), p)
        k = fold(fold(fold(pk, 0xFFFFFFFF), e), phase)
        perms[p, e] = np.asarray(jax.random.permutation(k, n))
      at = (step % per_epoch) * share
      parts.append(start + perms[p, e][at : at + share])
    index = np.concatenate(parts).astype(np.int32)
    yield {
      "views": tuple(v[index] for v in batch["views"]),
      "labels": batch["labels"][index],
      "index": index,
    }


def test_local_minibatches_on_one_process_is_fits_order_and_refuses_bad_input():
  batch, method = fit_data()
  key = jax.random.key(0)
  mesh = Mesh(np.array(jax.devices()), ("data",))
  local = jhash.local_minibatches(method, batch, key=key, num_items=128, mesh=mesh)
  assert len(local) == jhash.schedule(method, 128)
  got = list(local)
  want = list(local_rule_minibatches(batch, key, [(0, 128)], 32, len(local)))
  assert len(got) == len(want)
  for g, w in zip(got, want):
    np.testing.assert_array_equal(g["index"], w["index"])
    np.testing.assert_array_equal(g["views"][0], w["views"][0])
    np.testing.assert_array_equal(g["labels"], w["labels"])
  # Resumed at step 5: the last steps of the same order.
  later = jhash.local_minibatches(method, batch, key=key, num_items=128, mesh=mesh, start_step=5)
  assert [m["index"].tolist() for m in later] == [m["index"].tolist() for m in got[5:]]
  # fit reads it as it reads the in-memory order drawn on the host (bit for bit).
  a, _ = jhash.fit(method, key, local, mesh=mesh, num_items=128, progress=False)
  drawn = jhash.minibatches(batch, 32, key, len(local))
  b, _ = jhash.fit(method, key, drawn, len(local), mesh=mesh, num_items=128, progress=False)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
  with pytest.raises(ValueError, match=r"it starts at step 5, fit at start_step=0"):
    jhash.fit(method, key, later, mesh=mesh, num_items=128, progress=False)
  # Two processes' keys: each its own, neither the run's key.
  keys = [jax.random.key_data(jhash._order.process_key(key, p, 2)).tolist() for p in (0, 1)]
  assert keys[0] != keys[1] and jax.random.key_data(key).tolist() not in keys
  lm = jhash.local_minibatches
  cases = [
    (
      lambda: lm(method, jax.tree.map(lambda x: x[:100], batch), key=key, num_items=128, mesh=mesh),
      r"local must hold this process's rows 0 to 127 of the 128 items \(128 rows.*holds 100",
    ),
    (
      lambda: lm(
        method, batch, key=key, num_items=128, mesh=Mesh(np.array(jax.devices()), ("db",))
      ),
      r"mesh must be a jax.sharding.Mesh with a 'data' axis",
    ),
    (lambda: lm(method, batch, key=key, num_items=0, mesh=mesh), r"num_items"),
    (lambda: lm(method, {"x": 1}, key=key, num_items=128, mesh=mesh), r"local must be a dict"),
    (
      lambda: lm(jhash.methods.itq(8), batch, key=key, num_items=128, mesh=mesh),
      r"trains on the whole set at every step",
    ),
    (
      lambda: lm(
        jhash.methods.pairwise(8, backbone=jhash.models.backbone((20,), 8), batch_size=256),
        batch,
        key=key,
        num_items=128,
        mesh=mesh,
      ),
      r"more than the 128 rows it holds",
    ),
    (lambda: lm(method, batch, key=key, num_items=128, mesh=mesh, start_step=99), r"start_step"),
  ]
  for call, message in cases:
    with pytest.raises(ValueError, match=message):
      call()


def test_initialize_refuses_bad_arguments(monkeypatch):
  for var in distributed.ENV_VARS:
    monkeypatch.delenv(var, raising=False)
  cases = [
    (dict(), r"coordinator_address: give it, or set .*JHASH_COORDINATOR_ADDRESS"),
    (dict(coordinator_address="localhost"), r"coordinator_address must be 'host:port'"),
    (dict(coordinator_address="h:1"), r"num_processes: give it, or set .*JHASH_NUM_PROCESSES"),
    (dict(coordinator_address="h:1", num_processes=2, process_id=2), r"process_id must lie in"),
    (dict(coordinator_address="h:1", num_processes=0, process_id=0), r"num_processes be >= 1"),
  ]
  for kwargs, message in cases:
    with pytest.raises(ValueError, match=message):
      distributed.initialize(**kwargs)
  monkeypatch.setenv("JHASH_COORDINATOR_ADDRESS", "h:1")
  monkeypatch.setenv("JHASH_NUM_PROCESSES", "two")
  with pytest.raises(ValueError, match=r"JHASH_NUM_PROCESSES must be an integer in \[0, 2\*\*31"):
    distributed.initialize()
  # Round 8: each was passed on to JAX (a TypeError from its runtime, a server that never
  # started, or an abort after the start-up timeout for an empty host).
  for address in ("localhost:99999", ":2345", "localhost:abc", "localhost:0"):
    with pytest.raises(ValueError, match=r"coordinator_address must be 'host:port'"):
      distributed.initialize(address, 2, 0)
  with pytest.raises(ValueError, match=r"num_processes must be an integer in \[0, 2\*\*31 - 1\]"):
    distributed.initialize("localhost:1234", 2**40, 0)
  for name in ("heartbeat_timeout_s", "initialization_timeout_s"):
    with pytest.raises(ValueError, match=f"{name} must be at most 2\\*\\*31 - 1 seconds"):
      distributed.initialize("localhost:1234", 2, 0, **{name: 2**40})


def test_rows_per_process_on_one_process():
  mesh = distributed.process_mesh()
  n = 7
  assert distributed.row_range(n, mesh) == (0, n)  # one process holds every row
  table = distributed.global_rows(np.arange(n * 2).reshape(n, 2), n, mesh)
  shards = mesh.devices.size
  assert table.shape == (-(-n // shards) * shards, 2)
  np.testing.assert_array_equal(distributed.gather(table)[:n], np.arange(n * 2).reshape(n, 2))
  assert not distributed.gather(table)[n:].any()  # padding rows are zeros
  with pytest.raises(ValueError, match=r"local must hold this process's rows 0 to 6 \(7 rows"):
    distributed.global_rows(np.zeros((6, 2)), n, mesh)
  with pytest.raises(ValueError, match=r"mesh must be a 1-D"):
    distributed.row_range(n, "mesh")


def _sharded_metric_case(rng, multi_hot, num_bits, pad):
  """30 queries and 97 items (20 tied with query 0 at distance 0), class ids or multi-hot
  labels (query 1 with no relevant item), and the database padded by 3 rows of ``pad``."""
  q = np.where(rng.random((30, num_bits)) < 0.5, 1, -1).astype(np.int8)
  db = np.where(rng.random((97, num_bits)) < 0.5, 1, -1).astype(np.int8)
  db[:20] = q[0]  # a big tie group at distance 0 for query 0
  if multi_hot:
    q_labels, labels = rng.random((30, 4)) < 0.3, rng.random((97, 4)) < 0.3
    q_labels[1] = False  # a query with no relevant item
  else:
    q_labels, labels = rng.integers(0, 5, 30), rng.integers(0, 5, 97)
  padded = np.concatenate([db, np.full((3, num_bits), pad, np.int8)])
  return q, db, q_labels, labels, padded, np.concatenate([labels, labels[:3]])


@pytest.mark.parametrize("multi_hot", [False, True])
def test_sharded_map_equals_map_on_one_process(rng, multi_hot):
  mesh = distributed.process_mesh("db")
  # global_rows pads with zeros
  q, db, q_labels, labels, padded, padded_labels = _sharded_metric_case(rng, multi_hot, 12, 0)
  for options in (
    {},
    {"top_k": 10},
    {"top_k": 10, "normalizer": "min"},
    {"no_relevant": "skip"},
  ):
    want = jhash.metrics.mean_average_precision(q, db, q_labels, labels, **options)
    got = jhash.metrics.sharded_mean_average_precision(
      q, db, q_labels, labels, mesh=mesh, query_chunk=7, **options
    )
    assert got == want, options
    got = jhash.metrics.sharded_mean_average_precision(
      q, padded, q_labels, padded_labels, mesh=mesh, num_rows=97, **options
    )
    assert got == want, options


@pytest.mark.parametrize("multi_hot", [False, True])
def test_sharded_pr_curve_equals_pr_curve_on_one_process(rng, multi_hot):
  mesh = distributed.process_mesh("db")
  # padding rows of ones: they would count if read as items
  q, db, q_labels, labels, padded, padded_labels = _sharded_metric_case(rng, multi_hot, 10, 1)
  for options in (
    {},
    {"average": "pooled"},
    {"empty": "skip", "no_relevant": "skip"},
    {"average": "pooled", "empty": "skip"},
  ):
    with warnings.catch_warnings(record=True) as want_warned:
      warnings.simplefilter("always")
      want = jhash.metrics.pr_curve_by_radius(q, db, q_labels, labels, **options)
    with warnings.catch_warnings(record=True) as got_warned:
      warnings.simplefilter("always")
      got = jhash.metrics.sharded_pr_curve_by_radius(
        q, padded, q_labels, padded_labels, mesh=mesh, num_rows=97, query_chunk=7, **options
      )
    # The same counts; a mean over queries may sum in another order (float rounding).
    close = dict(rtol=0 if options.get("average") == "pooled" else 1e-6, atol=0)
    np.testing.assert_array_equal(got["radius"], want["radius"])
    for name in ("precision", "recall"):
      np.testing.assert_allclose(got[name], want[name], err_msg=f"{name} {options}", **close)
    assert [str(w.message).replace("sharded_", "") for w in got_warned] == [
      str(w.message) for w in want_warned
    ]
  assert np.isnan(want["precision"][0]) or want["precision"][0] > 0  # radius 0 found q[0]'s ties


def test_sharded_pr_curve_inside_jit_and_bad_input(rng):
  mesh = distributed.process_mesh("db")
  q = np.where(rng.random((5, 8)) < 0.5, 1, -1).astype(np.int8)
  db = np.where(rng.random((16, 8)) < 0.5, 1, -1).astype(np.int8)
  labels, q_labels = np.arange(16) % 3, np.arange(5) % 3
  curve = jax.jit(
    lambda a, b: jhash.metrics.sharded_pr_curve_by_radius(a, b, q_labels, labels, mesh=mesh)
  )(q, db)
  want = jhash.metrics.pr_curve_by_radius(q, db, q_labels, labels)
  np.testing.assert_array_equal(np.asarray(curve["precision"]), want["precision"])
  scurve = jhash.metrics.sharded_pr_curve_by_radius
  for call, message in [
    (lambda: scurve(q, db, q_labels, labels, mesh=mesh, average="mean"), r"average"),
    (lambda: scurve(q, db, q_labels, labels, mesh=mesh, empty="nan"), r"empty"),
    (lambda: scurve(q, db[:, :6], q_labels, labels, mesh=mesh), r"db_codes must be an array"),
    (lambda: scurve(q, db, q_labels, labels[:5], mesh=mesh), r"db_labels"),
  ]:
    with pytest.raises(ValueError, match=message):
      call()


def test_sharded_map_bad_input_names_the_argument(rng):
  mesh = distributed.process_mesh("db")
  q = np.where(rng.random((4, 8)) < 0.5, 1, -1).astype(np.int8)
  labels = np.arange(4)
  smap = jhash.metrics.sharded_mean_average_precision
  cases = [
    (lambda: smap(q, q, labels, labels, mesh="m"), r"mesh must be a 1-D"),
    (lambda: smap(q, q[:, :6], labels, labels, mesh=mesh), r"db_codes must be an array \[n, 8\]"),
    (lambda: smap(q, q * 2, labels, labels, mesh=mesh), r"db_codes"),
    (lambda: smap(q, q, labels, labels, mesh=mesh, num_rows=5), r"num_rows must be <= "),
    (lambda: smap(q, q, labels, labels[:3], mesh=mesh), r"db_labels"),
    (lambda: smap(q, q, labels, labels, mesh=mesh, top_k=5), r"top_k"),
    (lambda: smap(q, q, labels, labels, mesh=mesh, normalizer="retrieved"), r"normalizer"),
  ]
  for call, message in cases:
    with pytest.raises(ValueError, match=message):
      call()


# ----------------------------------------------------------------------------- the runner
REPO = pathlib.Path(__file__).resolve().parents[1]
RUN_TINY = ["-m", "experiments.main", "--config", "experiments/configs/baselines.py:tiny"]


def _metrics(workdir):
  return json.loads((workdir / "results.json").read_text())["metrics"]


@pytest.mark.slow
def test_the_experiment_runner_over_two_processes_resumes_and_equals_one(tmp_path):
  # The runner joins the run from the environment; process 1 dies right after its 4th save
  # (ITQ at 8 bits: checkpoints at steps 4 and 8, its result; then the 16-bit cell's
  # checkpoint at step 4), and process 0 stops with one line instead of hanging.
  workdir, crash = tmp_path / "two", {"JHASH_KILL_AFTER_SAVES": "4"}
  args = [*RUN_TINY, "--workdir", str(workdir)]
  (rc0, out0, _), (rc1, out1, _) = launch_command(args, ({}, crash), cwd=REPO)
  assert rc1 == -9, out1[-2000:]
  assert rc0 == 1 and "error: process 0 of 2 stopped" in out0, out0[-3000:]
  assert "Traceback" not in out0 and "start every process again" in out0, out0[-3000:]
  progress = json.loads((workdir / "progress.json").read_text())  # written by process 0
  assert list(progress["cells"]) == ["mfeat/itq/8/seed=0"]
  assert (workdir / "checkpoints" / "mfeat_itq_16_seed=0" / "4" / "jhash_files.json").is_file()
  # Both again: each restores the checkpoint and skips the finished cell; the results are
  # those of one process running the same command (the same arithmetic on every device).
  again = launch_command(args, cwd=REPO)
  for rc, out, _ in again:
    assert rc == 0 and "1 of 4 cells already done; running 3." in out, out[-3000:]
  one = subprocess.run(
    [sys.executable, *RUN_TINY, "--workdir", str(tmp_path / "one")],
    cwd=REPO,
    env=dict(os.environ, JAX_PLATFORMS="cpu"),
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
  )
  assert one.returncode == 0, one.stderr[-3000:]
  assert _metrics(workdir) == _metrics(tmp_path / "one")
  assert again[0][1].split("| dataset")[1] == again[1][1].split("| dataset")[1]  # both tables


def test_a_process_that_does_not_write_leaves_the_workdir_as_it_is(tmp_path, monkeypatch):
  # What the runner's processes other than 0 do: read the workdir, run the cells, save
  # checkpoints through orbax (whose primary process writes them) and write nothing.
  from experiments import _processes
  from experiments import harness

  config = {"seed": 0}
  with harness.Workdir(tmp_path, config) as wd:  # process 0's first cell
    harness.run_cells([("a", lambda: {"map": 0.5})], wd, progress=False)
  before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
  monkeypatch.setattr(_processes, "writes", lambda: False)
  ran = []
  with harness.Workdir(tmp_path, config) as wd:
    out = harness.run_cells(
      [("a", lambda: ran.append("a")), ("b", lambda: ran.append("b") or {"map": 0.25})],
      wd,
      progress=False,
    )
    wd.curve_writer("b").add_scalar("loss", 1.0, 1)
    harness.write_results(wd, config, out, time.time())
    harness.atomic_write_json(tmp_path / "x.json", {})
  assert ran == ["b"] and out["b"] == {"map": 0.25}  # it ran what was left, as process 0 does
  after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
  assert after == before
  # A run of one process trains as it always has; one asked of the environment must be whole.
  assert _processes.data_mesh() is None and _processes.join_if_asked() == 1
  monkeypatch.setenv("JHASH_NUM_PROCESSES", "2")
  monkeypatch.delenv("JHASH_COORDINATOR_ADDRESS", raising=False)
  with pytest.raises(ValueError, match="set the environment variable JHASH_COORDINATOR_ADDRESS"):
    _processes.join_if_asked()
