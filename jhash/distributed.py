"""Several processes, one program: ``jax.distributed`` set up for jhash, and rows per process.

A run over several processes (on one host or many) starts the same script in each, with
the coordinator's address, the process count and each process's id; ``initialize``
joins them (``jax.distributed.initialize``; on the CPU with the Gloo collectives JAX
ships). ``jax.devices()`` then lists every process's devices, and a ``Mesh`` over them
(``process_mesh``) spans the run. jhash's sharded functions take such a mesh as they take
one process's (``jhash.search.sharded_hamming_topk``, CDH's ``mesh=``).

Data per process: a database or training set split over a 1-D mesh is read by each
process for its own rows only, ``row_range(num_rows, mesh)``, and assembled into one
global array by ``global_rows`` (``jax.make_array_from_process_local_data``), padded at
its end to a multiple of the device count (``num_rows`` tells the sharded search which
rows are items). ``gather`` brings a global result to every process as NumPy. A
training set so split trains from ``jhash.local_minibatches`` (each process's share of every
minibatch drawn from its own rows) with ``jhash.fit(..., mesh=)``.

Failure: every process sends heartbeats to the coordinator; when one dies, the others
stop with an error within about ``heartbeat_timeout_s`` instead of waiting forever.

Launch (one command per process; the environment variables stand in for the arguments)::

  JHASH_COORDINATOR_ADDRESS=10.0.0.1:8476 JHASH_NUM_PROCESSES=2 JHASH_PROCESS_ID=0 python run.py
  JHASH_COORDINATOR_ADDRESS=10.0.0.1:8476 JHASH_NUM_PROCESSES=2 JHASH_PROCESS_ID=1 python run.py
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jhash import _checks

__all__ = [
  "ENV_VARS",
  "initialize",
  "process_mesh",
  "row_range",
  "global_rows",
  "gather",
]

#: The environment variables ``initialize`` reads for arguments left None.
ENV_VARS = ("JHASH_COORDINATOR_ADDRESS", "JHASH_NUM_PROCESSES", "JHASH_PROCESS_ID")
_MAX_PORT = 65535
_INT32_MAX = 2**31 - 1  # JAX's runtime takes counts and timeouts as int32


def _from_env(value: Any, var: str, name: str, integer: bool) -> Any:
  if value is None:
    value = os.environ.get(var)
    if value is None:
      raise ValueError(f"{name}: give it, or set the environment variable {var}.")
    where = f"the environment variable {var}"
  else:
    where = name
  if not integer:
    host, _, port = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    bad_host = not host or (":" in host and not (host.startswith("[") and host.endswith("]")))
    if bad_host or not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= _MAX_PORT:
      raise ValueError(
        f"{where} must be 'host:port' of process 0 (a host name or address, a port in "
        f"1..{_MAX_PORT}); got {value!r}."
      )
    return value
  try:
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
      raise ValueError(value)
    number = int(value) if isinstance(value, str) else _checks.nonneg_int(value, name)
  except ValueError:
    number = -1
  if not 0 <= number <= _INT32_MAX:
    raise ValueError(f"{where} must be an integer in [0, 2**31 - 1]; got {value!r}.")
  return number


def initialize(
  coordinator_address: str | None = None,
  num_processes: int | None = None,
  process_id: int | None = None,
  *,
  initialization_timeout_s: int = 300,
  heartbeat_timeout_s: int = 100,
) -> None:
  """Join a run of ``num_processes`` processes; call once, before any other JAX call.

  Args:
    coordinator_address: ``"host:port"`` where process 0 listens; default the
      environment variable ``JHASH_COORDINATOR_ADDRESS``.
    num_processes: processes in the run (>= 1); default ``JHASH_NUM_PROCESSES``.
    process_id: this process's id, 0 to ``num_processes - 1``; default
      ``JHASH_PROCESS_ID``.
    initialization_timeout_s: how long to wait for every process to join.
    heartbeat_timeout_s: how long a silent process is waited for before the others stop
      with an error.
  Raises:
    ValueError: an argument missing (and its variable unset) or out of range.
    RuntimeError: ``jax.distributed`` already initialised.
  """
  address = _from_env(coordinator_address, ENV_VARS[0], "coordinator_address", False)
  count = _from_env(num_processes, ENV_VARS[1], "num_processes", True)
  rank = _from_env(process_id, ENV_VARS[2], "process_id", True)
  if count < 1 or not 0 <= rank < count:
    raise ValueError(
      f"process_id must lie in [0, num_processes - 1] and num_processes be >= 1; got "
      f"process_id={rank}, num_processes={count}."
    )
  for name, value in (
    ("initialization_timeout_s", initialization_timeout_s),
    ("heartbeat_timeout_s", heartbeat_timeout_s),
  ):
    if _checks.positive_int(value, name) > _INT32_MAX:
      raise ValueError(f"{name} must be at most 2**31 - 1 seconds; got {value!r}.")
  if jax.distributed.is_initialized():
    raise RuntimeError("jax.distributed is already initialised in this process.")
  # The CPU client's collectives across processes (a no-op setting on GPUs and TPUs).
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  try:
    jax.distributed.initialize(
      address,
      num_processes=count,
      process_id=rank,
      initialization_timeout=int(initialization_timeout_s),
      heartbeat_timeout_seconds=int(heartbeat_timeout_s),
    )
  except RuntimeError as error:
    if "before any JAX" not in str(error):
      raise
    raise RuntimeError(
      "initialize must come before any other JAX call in the process (one already "
      "started JAX's backends: jax.devices(), an array, a jit call)."
    ) from None


def process_mesh(axis_name: str = "rows") -> Mesh:
  """A 1-D mesh over every process's devices, process 0's first, so each process's
  devices hold one contiguous run of rows."""
  if not isinstance(axis_name, str) or not axis_name:
    raise ValueError(f"axis_name must be a non-empty str; got {axis_name!r}.")
  devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
  return Mesh(np.asarray(devices), (axis_name,))


def _one_axis(mesh: Any) -> str:
  if not isinstance(mesh, Mesh) or len(mesh.axis_names) != 1:
    raise ValueError(f"mesh must be a 1-D jax.sharding.Mesh (process_mesh()); got {mesh!r}.")
  return mesh.axis_names[0]


def _padded(num_rows: int, mesh: Mesh) -> int:
  shards = mesh.devices.size
  return -(-num_rows // shards) * shards


def row_range(num_rows: int, mesh: Mesh) -> tuple[int, int]:
  """The rows ``[start, stop)`` of a ``num_rows``-row array this process loads.

  The array is split over the mesh's axis in equal shards of ``ceil(num_rows / D)``
  rows (D devices); the last shards hold fewer real rows, or none.

  Raises:
    ValueError: ``mesh`` not 1-D, or this process's devices not side by side in it
      (``process_mesh`` orders them so).
  """
  num_rows = _checks.positive_int(num_rows, "num_rows")
  axis = _one_axis(mesh)
  total = _padded(num_rows, mesh)
  held = NamedSharding(mesh, P(axis)).addressable_devices_indices_map((total,)).values()
  slices = sorted((s[0].start or 0, total if s[0].stop is None else s[0].stop) for s in held)
  for (_, stop), (start, _) in zip(slices, slices[1:]):
    if start != stop:
      raise ValueError(
        "mesh must hold this process's devices side by side (e.g. process_mesh()); its "
        f"shards here start at rows {[s for s, _ in slices]}."
      )
  return min(slices[0][0], num_rows), min(slices[-1][1], num_rows)


def _host_only(x: Any, function: str, name: str) -> None:
  if isinstance(x, jax.core.Tracer):
    raise TypeError(
      f"{function} runs on the host, outside jit and vmap: {name} is a tracer here; call "
      "it before the jitted function and pass it the result."
    )


def _check_fits(local: np.ndarray) -> None:
  """Refuse 64-bit values that JAX's 32-bit arrays (x64 off) would change."""
  to = jax.dtypes.canonicalize_dtype(local.dtype)
  if to == local.dtype or local.size == 0:
    return
  if local.dtype.kind in "iu":
    low, high = np.iinfo(to).min, np.iinfo(to).max
    bad = (local < low) | (local > high)
  else:
    bad = np.isfinite(local) & (np.abs(local) > np.finfo(to).max)
  if bad.any():
    raise ValueError(
      f"local holds {local[bad].ravel()[0]!r}, which {to} (JAX's {local.dtype} without "
      "jax_enable_x64) cannot hold: give values in its range, or enable x64."
    )


def global_rows(local: Any, num_rows: int, mesh: Mesh) -> jax.Array:
  """One global array of ``num_rows`` rows from each process's ``row_range`` rows.

  Args:
    local: this process's rows [stop - start, ...] (``row_range(num_rows, mesh)``).
    num_rows: the rows of the whole array.
    mesh: a 1-D mesh over every process's devices.
  Returns:
    A ``jax.Array`` [ceil(num_rows / D) * D, ...] split over the mesh's axis; the rows
    past ``num_rows`` are zeros (pass ``num_rows`` to the function that reads it).
  """
  _host_only(local, "global_rows", "local")
  start, stop = row_range(num_rows, mesh)
  try:
    local = np.asarray(local)
  except (ValueError, TypeError) as error:  # ragged rows
    raise ValueError(
      f"local must be an array of rows of one shape; got {_checks.describe(local)} ({error})."
    ) from None
  if local.dtype.kind not in "biuf" and local.dtype != jnp.bfloat16:
    raise ValueError(
      f"local must be an array of numbers or bools (codes, labels, features); got "
      f"{_checks.describe(local)}."
    )
  if local.ndim < 1 or local.shape[0] != stop - start:
    raise ValueError(
      f"local must hold this process's rows {start} to {stop - 1} ({stop - start} rows, "
      f"row_range(num_rows, mesh)); got {_checks.describe(local)}."
    )
  _check_fits(local)
  axis = _one_axis(mesh)
  total = _padded(num_rows, mesh)
  share = total // mesh.devices.size * len(mesh.local_devices)
  padded = np.zeros((share,) + local.shape[1:], local.dtype)
  padded[: local.shape[0]] = local
  return jax.make_array_from_process_local_data(
    NamedSharding(mesh, P(axis)), padded, (total,) + local.shape[1:]
  )


def gather(x: Any) -> np.ndarray:
  """A global array's whole value, as NumPy, on every process (a collective: every
  process must call it); a NumPy or local array as NumPy. Anything else is a ValueError."""
  _host_only(x, "gather", "x")
  if hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    raise ValueError(f"x holds PRNG keys ({x.dtype}); gather jax.random.key_data(x) instead.")
  if not isinstance(x, (np.ndarray, np.generic, jax.Array)) or np.dtype(x.dtype) == object:
    raise ValueError(
      f"x must be an array (a global jax.Array, a jax.Array or a NumPy array); got {_checks.describe(x)}."
    )
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    if x.is_fully_replicated:
      return np.asarray(x.addressable_data(0))
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return np.asarray(x)
