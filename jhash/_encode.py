"""Codes of a trained state: ``jhash.encode`` and ``jhash.encode_multi``, jitted once per
method (and chunk size), with the batch and the state checked."""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jhash import _api
from jhash import _checks
from jhash import _fit


@functools.lru_cache(maxsize=64)
def _jit_encode(encode: Callable):
  return jax.jit(encode)


@functools.lru_cache(maxsize=64)
def _jit_chunked(fn: Callable, chunk: int):
  return jax.jit(lambda state, batch: _api.map_in_chunks(lambda b: fn(state, b), batch, chunk))


def _encoder(fn, chunk_size):
  if chunk_size is None:
    return _jit_encode(fn)
  return _jit_chunked(fn, _checks.positive_int(chunk_size, "chunk_size"))


def check(method, state, batch) -> int:
  """The method, the state (trained by it, on views of these dtypes) and the batch; the
  batch's item count."""
  _fit.check_method(method)
  _fit.check_some_state(state)
  return _api.check_encoding(method, state, batch)


def encode(
  method: _api.HashingMethod, state, batch: dict, *, chunk_size: int | None = None
) -> jax.Array:
  """``method.encode`` with the batch checked, jitted: int8 [n, num_bits] in {-1,+1}.

  ``chunk_size``: encode ``chunk_size`` items at a time (``lax.map``), bounding the
  memory of a network's activations on a large database.

  Example:
    >>> import jax, numpy as np, jhash
    >>> x = np.random.default_rng(0).normal(size=(50, 16)).astype(np.float32)
    >>> method = jhash.methods.lsh(8)
    >>> state, _ = jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)
    >>> jhash.encode(method, state, {"views": (x[:3],)}).shape
    (3, 8)
  """
  n = check(method, state, batch)
  if n == 0:
    return jnp.zeros((0, method.num_bits), jnp.int8)
  codes = _encoder(method.encode, chunk_size)(state, batch)
  _check_codes(method, codes, (n, method.num_bits), "[n, num_bits]")
  return codes


def _check_codes(method, codes, shape: tuple, layout: str) -> None:
  """A method's ``encode`` must give int8 codes of ``shape`` (a hand-built method's may not)."""
  if tuple(np.shape(codes)) != shape or getattr(codes, "dtype", None) != jnp.int8:
    raise ValueError(
      f"{method.name}'s encode must return int8 codes {layout} = {list(shape)} in {{-1, +1}} "
      f"(jhash.codes.sign of its scores); got {_checks.describe(codes)}."
    )


def encode_multi(method: _api.HashingMethod, state, batch: dict, *, chunk_size: int | None = None):
  """Every code a method gives each item: (codes int8 [n, m, K], mask bool [n, m]).

  ``m = 1`` (and an all-True mask) for single-code methods; multi-code methods (MCH)
  give their kept codes. The result goes straight to ``jhash.search.multi_code_topk``
  (after ``jhash.codes.pack_bits``), the bucket index and the multi-code metrics.
  ``chunk_size`` as in ``encode``.
  """
  n = check(method, state, batch)
  fn = method.encode_multi or _api.single_code(method.encode)
  if n == 0:
    shapes = jax.eval_shape(
      fn,
      state,
      jax.tree.map(
        lambda v: (
          jax.ShapeDtypeStruct((1,) + tuple(np.shape(v))[1:], np.asarray(v).dtype)
          if v is not None
          else None
        ),
        dict(batch),
      ),
    )
    return (
      jnp.zeros((0,) + shapes[0].shape[1:], jnp.int8),
      jnp.zeros((0,) + shapes[1].shape[1:], bool),
    )
  codes, mask = _encoder(fn, chunk_size)(state, batch)
  m = np.shape(codes)[1] if np.ndim(codes) == 3 else 1
  _check_codes(method, codes, (n, m, method.num_bits), "[n, m, num_bits]")
  return codes, mask
