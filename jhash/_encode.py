"""Codes of a trained state: ``jhash.encode`` and ``jhash.encode_multi``, jitted once per
method (and chunk size), with the batch and the state checked."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
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
  codes = _run(method, state, batch, lambda: _encoder(method.encode, chunk_size)(state, batch))
  _check_codes(method, codes, (n, method.num_bits), "[n, num_bits]")
  return codes


def _run(method, state, batch, encode: Callable):
  """``encode()``; when it fails on the state's fields (a state of another method that
  goes by the same name and length passes ``check``), a ValueError naming both states."""
  try:
    return encode()
  except (AttributeError, TypeError, KeyError, IndexError) as error:
    _check_state_kind(method, state, batch)
    raise error


def _check_state_kind(method, state, batch) -> None:
  """Raise unless ``state`` has the type and fields of a state ``method`` makes."""
  rows = method.num_bits + 2  # where the batch has no item, a sample to make a state from
  sample = jax.tree.map(
    lambda v: v if np.shape(v)[0] else _filler((rows,) + np.shape(v)[1:], np.asarray(v).dtype),
    dict(batch),
  )
  if sample.get("labels") is None:  # a query batch: class ids, as a training batch has
    sample["labels"] = np.zeros(
      np.shape(next(v for v in sample["views"] if v is not None))[0], np.int32
    )
  try:
    want = jax.eval_shape(lambda k: _fit.init(method, k, sample), jax.random.key(0))
  except Exception:  # a method that needs labels (or more) to make a state: no verdict
    return
  if type(state) is not type(want) or jax.tree.structure(state) != jax.tree.structure(want):
    raise ValueError(
      f"state must be a state {method.name} makes ({type(want).__name__}); got "
      f"{type(state).__name__}, a state of another method (its record names "
      f"{method.name}, {method.num_bits} bits, as two methods of one name= would). Encode "
      "with the method that trained the state."
    ) from None


def _filler(shape: tuple, dtype) -> np.ndarray:
  values = np.random.default_rng(0).integers(0, 2, shape) * 2 - 1  # +-1: a spread sample
  return values.astype(dtype)


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
    shapes = _run(
      method,
      state,
      batch,
      lambda: jax.eval_shape(
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
      ),
    )
    return (
      jnp.zeros((0,) + shapes[0].shape[1:], jnp.int8),
      jnp.zeros((0,) + shapes[1].shape[1:], bool),
    )
  codes, mask = _run(method, state, batch, lambda: _encoder(fn, chunk_size)(state, batch))
  m = np.shape(codes)[1] if np.ndim(codes) == 3 else 1
  _check_codes(method, codes, (n, m, method.num_bits), "[n, m, num_bits]")
  return codes, mask


def encode_stream(
  method: _api.HashingMethod,
  state,
  minibatches: Iterable[Mapping],
  num_items: int,
  *,
  multi: bool = False,
):
  """Codes of a set read as minibatches, in the order of its items: int8 [num_items,
  num_bits] in {-1, +1} (NumPy, on the host); with ``multi=True``, every code of each
  item as ``encode_multi`` gives them: (codes int8 [num_items, m, num_bits], mask bool
  [num_items, m]).

  For a database too large to hold as one batch: ``jhash.data.image_pipeline(...,
  train=False)`` reads it in order, its last minibatch padded to the same size (one
  compiled encoder for them all). Each minibatch is a batch dict with ``"index"``: int
  [b], the position of each row in the set, -1 for a padding row (dropped). Every
  position in [0, num_items) must come exactly once; each minibatch is checked as
  ``encode`` checks a batch.

  Example:
    >>> import jax, numpy as np, jhash
    >>> x = np.random.default_rng(0).normal(size=(10, 16)).astype(np.float32)
    >>> method = jhash.methods.lsh(8)
    >>> state, _ = jhash.fit(method, jax.random.key(0), {"views": (x,)}, progress=False)
    >>> rows = [np.arange(0, 4), np.arange(4, 8), np.array([8, 9, -1, -1])]
    >>> stream = ({"views": (x[np.maximum(r, 0)],), "index": r} for r in rows)
    >>> codes = jhash.encode_stream(method, state, stream, num_items=10)
    >>> bool((codes == np.asarray(jhash.encode(method, state, {"views": (x,)}))).all())
    True
  """
  _fit.check_method(method)
  num_items = _checks.positive_int(num_items, "num_items")
  multi = _checks.flag(multi, "multi")
  if isinstance(minibatches, Mapping) or not isinstance(minibatches, Iterable):
    got = (
      f"one batch dict (keys {', '.join(map(repr, minibatches))}; jhash.encode codes a batch)"
      if isinstance(minibatches, Mapping)
      else _checks.describe(minibatches)
    )
    raise ValueError(
      f"minibatches must be an iterable of batch dicts, each with 'index'; got {got}."
    )
  _checks.fits_in_memory(
    {"the codes": num_items * method.num_bits, "the positions seen": num_items},
    f"encode_stream of num_items={num_items:,} items",
    "code the set in parts of fewer items",
  )
  out = None  # the output arrays, made at the first minibatch (m is the method's)
  seen = np.zeros(num_items, bool)
  for step, minibatch in enumerate(minibatches):
    index = _stream_index(minibatch, step)
    batch = {k: v for k, v in minibatch.items() if k != "index"}
    got = encode_multi(method, state, batch) if multi else (encode(method, state, batch),)
    got = tuple(np.asarray(a) for a in got)
    if got[0].shape[0] != index.size:
      raise ValueError(
        f"minibatch {step}: 'index' has {index.size} entries for {got[0].shape[0]} rows."
      )
    if out is None:
      out = tuple(np.zeros((num_items,) + a.shape[1:], a.dtype) for a in got)
    elif got[0].shape[1:] != out[0].shape[1:]:
      raise ValueError(
        f"minibatch {step}: {method.name} gave codes of shape {got[0].shape[1:]} an item, "
        f"the earlier minibatches {out[0].shape[1:]}."
      )
    positions = _new_positions(index, seen, num_items, step)
    for whole, part in zip(out, got):
      whole[positions] = part[index >= 0]
    seen[positions] = True
  if not seen.all():
    raise ValueError(
      f"the minibatches gave {int(seen.sum())} of num_items={num_items} positions; the "
      f"first missing is {int(np.argmin(seen))}."
    )
  return out if multi else out[0]


def _stream_index(minibatch, step: int) -> np.ndarray:
  """A stream minibatch's ``"index"``: int [b], or an error naming the minibatch."""
  index = minibatch.get("index") if isinstance(minibatch, Mapping) else None
  if index is None or np.ndim(index) != 1 or np.asarray(index).dtype.kind not in "iu":
    raise ValueError(
      f"minibatch {step} must be a batch dict with 'index': int [b], each row's position "
      f"in the set (-1 for padding); got {_checks.describe(index if index is not None else minibatch)}."
    )
  index = np.asarray(index)
  if index.size and index.min() < -1:
    raise ValueError(
      f"minibatch {step}: 'index' holds {index.min()}; positions are >= 0, and -1 marks a "
      "padding row."
    )
  return index


def _new_positions(index: np.ndarray, seen: np.ndarray, num_items: int, step: int) -> np.ndarray:
  """The positions of a minibatch's real rows (``index >= 0``), each in [0, num_items) and
  not seen before; an error naming the first that is not."""
  positions = index[index >= 0]
  if positions.size and positions.max() >= num_items:
    raise ValueError(
      f"minibatch {step}: 'index' holds {positions.max()}, past num_items={num_items} "
      "(positions are in [0, num_items), -1 for padding)."
    )
  twice = positions[seen[positions] | (np.bincount(positions, minlength=num_items)[positions] > 1)]
  if twice.size:
    raise ValueError(
      f"minibatch {step}: position {int(twice[0])} comes a second time; every position "
      "must come once (an evaluation stream, not a training one?)."
    )
  return positions
