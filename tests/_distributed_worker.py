"""One process of a two-process run (tests/test_distributed.py starts two of these).

``python tests/_distributed_worker.py CASE OUT_DIR [--then-die]``, with the process's place in the run
in ``JHASH_COORDINATOR_ADDRESS``, ``JHASH_NUM_PROCESSES`` and ``JHASH_PROCESS_ID``; each
process has 2 host devices. Writes ``OUT_DIR/CASE-<process id>.npz``.
"""

import os
import sys

os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
)

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jhash  # noqa: E402
from jhash import distributed  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # _distributed_data

HEARTBEAT_S = 5


def search_case():
  """The database split over the processes, each loading its rows only."""
  from _distributed_data import search_data  # pylint: disable=import-outside-toplevel

  queries, db, num_bits, k = search_data()
  mesh = distributed.process_mesh("db")
  start, stop = distributed.row_range(db.shape[0], mesh)
  table = distributed.global_rows(db[start:stop], db.shape[0], mesh)
  d, idx = jhash.search.sharded_hamming_topk(
    queries, table, k, mesh=mesh, num_bits=num_bits, num_rows=db.shape[0]
  )
  # Several codes an item, split by items the same way.
  from _distributed_data import multi_code_data  # pylint: disable=import-outside-toplevel

  queries, codes, held, num_bits, k = multi_code_data()
  start, stop = distributed.row_range(codes.shape[0], mesh)
  d_multi, idx_multi = jhash.search.sharded_multi_code_topk(
    queries,
    distributed.global_rows(codes[start:stop], codes.shape[0], mesh),
    distributed.global_rows(held[start:stop], codes.shape[0], mesh),
    k,
    mesh=mesh,
    num_bits=num_bits,
    num_rows=codes.shape[0],
  )
  # Tie-aware mAP@100 with the database codes and labels split the same way.
  from _distributed_data import map_data  # pylint: disable=import-outside-toplevel

  q, codes, q_labels, labels = map_data()
  start, stop = distributed.row_range(codes.shape[0], mesh)
  split = dict(
    db_codes=distributed.global_rows(codes[start:stop], codes.shape[0], mesh),
    db_labels=distributed.global_rows(labels[start:stop], codes.shape[0], mesh),
    query_codes=q,
    query_labels=q_labels,
    mesh=mesh,
    num_rows=codes.shape[0],
  )
  mean_ap = jhash.metrics.sharded_mean_average_precision(**split, top_k=100)
  # Precision and recall within each radius from the same split (pooled over queries).
  curve = jhash.metrics.sharded_pr_curve_by_radius(**split, average="pooled")
  # A state saved by process 0 and restored by each process (a shared folder).
  from _distributed_data import saved_state  # pylint: disable=import-outside-toplevel

  method, batch, state = saved_state()
  folder = os.path.join(sys.argv[2], "state")
  jhash.save(folder, state)
  restored = jhash.restore(folder, method, batch)
  return dict(
    restored_codes=np.asarray(jhash.encode(method, restored, batch)),
    d=distributed.gather(d),
    idx=distributed.gather(idx),
    d_multi=distributed.gather(d_multi),
    idx_multi=distributed.gather(idx_multi),
    rows=np.array([start, stop]),
    mean_ap=np.float64(mean_ap),
    precision=curve["precision"],
    recall=curve["recall"],
  )


def cdh_case():
  """CDH's exact B-step with its rows over both processes' devices."""
  from _distributed_data import cdh_data  # pylint: disable=import-outside-toplevel

  batch, options = cdh_data()
  method = jhash.methods.cdh(16, chunk_size=None, mesh=distributed.process_mesh(), **options)
  state, _ = jhash.fit(method, jax.random.key(0), batch, num_steps=1, progress=False)
  return dict(codes=distributed.gather(state.codes))


def fit_case():
  """The deep train step data-parallel over both processes' devices (every process holds
  the whole set; each minibatch is split over the 4 devices)."""
  from jax.sharding import Mesh  # pylint: disable=import-outside-toplevel

  from _distributed_data import fit_data  # pylint: disable=import-outside-toplevel

  batch, method = fit_data()
  mesh = Mesh(distributed.process_mesh().devices, ("data",))
  state, history = jhash.fit(method, jax.random.key(0), batch, progress=False, mesh=mesh)
  leaves = {f"leaf{i}": distributed.gather(x) for i, x in enumerate(jax.tree.leaves(state))}
  return dict(loss=np.asarray(history["loss"]), **leaves)


def stream_case():
  """The deep train step over both processes' devices from an iterable: each process
  passes only its own rows of every global minibatch (process p the p-th half)."""
  from jax.sharding import Mesh  # pylint: disable=import-outside-toplevel

  from _distributed_data import fit_data  # pylint: disable=import-outside-toplevel
  from _distributed_data import stream_steps  # pylint: disable=import-outside-toplevel

  batch, method = fit_data()
  size = method.phases[0].batch_size
  half = size // jax.process_count()
  rows = slice(jax.process_index() * half, (jax.process_index() + 1) * half)
  local = (
    jax.tree.map(lambda x: x[rows], m)
    for m in jhash.minibatches(batch, size, jax.random.key(0), stream_steps())
  )
  mesh = Mesh(distributed.process_mesh().devices, ("data",))
  state, history = jhash.fit(
    method, jax.random.key(0), local, stream_steps(), progress=False, mesh=mesh, num_items=128
  )
  leaves = {f"leaf{i}": distributed.gather(x) for i, x in enumerate(jax.tree.leaves(state))}
  # The set split over the processes in memory: each holds its row_range rows only and
  # draws its share of every minibatch from them.
  start, stop = distributed.row_range(128, mesh)
  mine = jax.tree.map(lambda x: x[start:stop], batch)
  local = jhash.local_minibatches(
    method, mine, key=jax.random.key(0), num_items=128, mesh=mesh, num_steps=stream_steps()
  )
  state, local_history = jhash.fit(
    method, jax.random.key(0), local, stream_steps(), progress=False, mesh=mesh, num_items=128
  )
  local_leaves = {
    f"local_leaf{i}": distributed.gather(x) for i, x in enumerate(jax.tree.leaves(state))
  }
  return dict(
    loss=np.asarray(history["loss"]),
    local_loss=np.asarray(local_history["loss"]),
    rows=np.array([start, stop]),
    local_index=np.stack([m["index"] for m in local]),
    **leaves,
    **local_leaves,
  )


def die():
  """Process 1 dies; process 0 then waits on it in a collective, which must end in an
  error within about the heartbeat timeout, not hang."""
  if jax.process_index() == 1:
    os._exit(3)
  mesh = distributed.process_mesh()
  table = distributed.global_rows(np.ones((2, 1), np.uint32), 4, mesh)
  distributed.gather(table + 1)
  print("process 0 passed a collective without process 1", flush=True)


def main():
  case, out_dir = sys.argv[1], sys.argv[2]
  distributed.initialize(heartbeat_timeout_s=HEARTBEAT_S, initialization_timeout_s=120)
  assert jax.process_count() == 2 and jax.device_count() == 4, jax.devices()
  cases = {"search": search_case, "cdh": cdh_case, "fit": fit_case, "stream": stream_case}
  out = cases[case]()
  path = os.path.join(out_dir, f"{case}-{jax.process_index()}.npz")
  np.savez(path + ".tmp.npz", **out)
  os.replace(path + ".tmp.npz", path)
  if "--then-die" in sys.argv:
    die()


if __name__ == "__main__":
  main()
