"""The network inside a method's state: ``jhash.network``.

Every method that learns a network keeps one ``jhash.coder.Coder`` and its
``CoderState`` somewhere in the method's state (``state.coder`` for the deep pairwise
models and ADSH, ``state.hashing`` for HBMP's network hash functions, the base model's
for MCH). ``network(method)`` says where, so research code reaches the network's
outputs, features and parameters without knowing each state's layout:

    net = jhash.network(method)
    features = net.coder.features(net.get(state), batch)      # float32 [n, F]
    params = net.get(state).train.params                      # differentiate these:
    loss = lambda p: my_loss(net.coder.apply(net.get(state), p, net.coder.read(batch)))
    grads = jax.grad(loss)(params)
    state = net.set(state, net.get(state)._replace(...))      # put a coder state back
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from jhash import _api
from jhash import _checks
from jhash import coder as coder_lib


class Network(NamedTuple):
  """A method's network: its coder, and where its state lives in the method's state."""

  coder: coder_lib.Coder
  get: Callable[[Any], coder_lib.CoderState]  # method state -> the network's CoderState
  set: Callable[[Any, coder_lib.CoderState], Any]  # (method state, CoderState) -> state


def _field(name: str) -> tuple[Callable, Callable]:
  def get(state):
    if name not in getattr(state, "_fields", ()):
      raise ValueError(
        f"state must be the method's state, with a field {name!r} holding the network's "
        f"CoderState; got {_checks.describe(state)}."
      )
    return getattr(state, name)

  def set_(state, coder_state):
    _check_like(coder_state, get(state))
    return state._replace(**{name: coder_state})

  return get, set_


def _check_like(new, old) -> None:
  """``new`` is a ``CoderState`` of ``old``'s arrays' shapes and dtypes."""
  if not isinstance(new, coder_lib.CoderState) or jax.tree.structure(new) != jax.tree.structure(
    old
  ):
    raise ValueError(
      f"coder_state must be a jhash.coder.CoderState of this network (as get(state) gives); "
      f"got {_checks.describe(new)}."
    )
  for (where, a), b in zip(jax.tree_util.tree_leaves_with_path(new), jax.tree.leaves(old)):
    if np.shape(a) != np.shape(b) or _checks.dtype_of(a) != _checks.dtype_of(b):
      raise ValueError(
        f"coder_state{jax.tree_util.keystr(where)} must have shape {np.shape(b)} and dtype "
        f"{_checks.dtype_of(b)}, as the network's; got {_checks.describe(a)}."
      )


def network(method: _api.HashingMethod) -> Network:
  """The network ``method`` learns (``jhash.coder``'s pure functions over its state).

  Args:
    method: a network method: ``pairwise`` and its presets (DCH, HashNet, MMHH, KSH),
      ADSH, HBMP with network hash functions, MCH (its base model's network), or a
      ``classifier``.
  Returns:
    ``Network(coder, get, set)``: ``coder.outputs(get(state), x)`` gives the logits and
    the penultimate features of raw inputs ``x = coder.read(batch)``; ``coder.features`` /
    ``coder.scores`` of a whole batch (in chunks); ``coder.apply(get(state), params, x)``
    the outputs with other parameters (to differentiate); ``set(state, coder_state)`` the
    method's state with the network's replaced.
  Raises:
    ValueError: ``method`` learns no network (its codes come from a projection or a
      matrix, not a ``Coder``).

  Example:
    >>> import jax, numpy as np, jhash
    >>> rng = np.random.default_rng(0)
    >>> batch = {"views": (rng.normal(size=(32, 8)).astype("f4"),),
    ...          "labels": rng.integers(0, 2, 32).astype("i4")}
    >>> method = jhash.methods.dch(8, batch_size=16, num_epochs=1)
    >>> state, _ = jhash.fit(method, jax.random.key(0), batch, progress=False)
    >>> net = jhash.network(method)
    >>> net.coder.features(net.get(state), batch).shape[0]
    32
  """
  from jhash.methods import _classifier, _hbmp, _mch, _pairwise  # they import this package

  if not isinstance(method, _api.HashingMethod):
    raise TypeError(f"method must be a jhash.HashingMethod; got {type(method).__name__}.")
  extras = method.extras
  if isinstance(extras, (_pairwise.NetworkExtras, _classifier.ClassifierExtras)):
    return Network(extras.coder, *_field("coder"))
  if isinstance(extras, _hbmp.HBMPExtras) and extras.hash_functions is not None:
    return Network(extras.hash_functions, *_field("hashing"))
  if isinstance(extras, _mch.MCHExtras):
    base = network(extras.base)
    mch_get, _ = _field("base")
    return Network(
      base.coder,
      lambda s: base.get(mch_get(s)),
      lambda s, c: s._replace(base=base.set(mch_get(s), c)),
    )
  raise ValueError(
    f"method {method.name} learns no network: its codes come from its own arrays, not a "
    "jhash.coder.Coder. Network methods: pairwise (dch, hashnet, mmhh, ksh), adsh, hbmp "
    "with network hash functions, mch."
  )
