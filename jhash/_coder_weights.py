"""A network coder's state (``CoderState``) and its weights: written to and read from
files (``save_weights``, ``load_weights``), and the variables a network starts from
(``initial_variables``: a Flax variables tree, a jhash state, torchvision weights or a
weights file). Public through ``jhash.coder``."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from jhash import _api
from jhash import _checks
from jhash import models
from jhash import training

HEAD = "projection"  #: the hash head's layer (``jhash.models``'s hash_head)


class CoderState(NamedTuple):
  """A network's train state and the standardisation of its inputs."""

  train: training.TrainState  # parameters, batch statistics, optimiser state, step
  mean: jax.Array  # float32 [d] (features) or [] (images): subtracted
  scale: jax.Array  # float32, as ``mean``: multiplies the centred inputs


def _network_variables(state, name: str) -> tuple[dict, tuple | None]:
  """The variables and input statistics of a jhash state that holds a network."""
  coder_state = state if isinstance(state, CoderState) else getattr(state, "coder", None)
  if not isinstance(coder_state, CoderState):
    raise ValueError(
      f"{name}: a state given as weights must hold a network "
      f"(a CoderState, or a state with a 'coder' field); got "
      f"{type(state).__name__}."
    )
  return training.variables(coder_state.train), (coder_state.mean, coder_state.scale)


def _torchvision_arch(model: models.Model) -> str:
  """The torchvision architecture whose state dict names this network's layers."""
  archs = {**models.RESNET_ARCHS, **models.CLASSIC_ARCHS}
  for arch, make in archs.items():
    if _same_layout(model.module, make(1)):
      return arch
  raise ValueError(
    f"init_variables: a torchvision weights file fits a ResNet, AlexNet or VGG-16 "
    f"({', '.join(archs)}); this network is {type(model.module).__name__}."
  )


def _same_layout(module, probe) -> bool:
  """Whether ``module`` has ``probe``'s layers (widths aside: the shapes are checked later)."""
  if not isinstance(module, type(probe)):
    return False
  if isinstance(probe, models.ResNet):
    return (module.stage_sizes, module.block_cls) == (probe.stage_sizes, probe.block_cls)
  if isinstance(probe, models.VGG):
    pools = [[layer == "M" for layer in net.layers] for net in (module, probe)]
    return pools[0] == pools[1]
  return True  # AlexNet: one layout


#: The array names of the input statistics in a weights file (``save_weights``).
_STATS = ("input/mean", "input/scale")
_INTEGER = "input/integer"  # 1: trained on integer inputs (pixels), 0: floats; absent: unknown


def save_weights(path, state) -> "os.PathLike":
  """Write a network's weights and input statistics to the ``.npz`` file ``path``.

  The file is what ``init_variables`` reads (``coder``, and every network method's
  ``init_variables`` option): a pretrained backbone saved once, fine-tuned by any method.
  It holds the Flax variables flattened to ``"params/LAYER/NAME"`` (and
  ``"batch_stats/..."``) arrays and the standardisation ``"input/mean"``,
  ``"input/scale"``: no code, read back without unpickling. Written through a temporary
  file and renamed into place, so it appears whole or not at all.

  Args:
    path: a file name ending in ``.npz`` (in any case: ``.NPZ`` too).
    state: a ``CoderState``, or a method's state holding one (a field ``coder``: a
      classifier's, a pairwise method's, ADSH's).
  Returns:
    ``path`` as a ``pathlib.Path``.
  """
  import io

  from jhash import files

  path = _weights_path(path, "path")
  variables, (mean, scale) = _network_variables(state, "state")
  flat = traverse_util.flatten_dict(jax.device_get(variables), sep="/")
  arrays = {key: np.asarray(value) for key, value in flat.items()}
  arrays.update(dict(zip(_STATS, (np.asarray(mean), np.asarray(scale)))))
  integer = _integer_inputs(state)
  if integer is not None:
    arrays[_INTEGER] = np.asarray(integer, np.int8)
  buffer = io.BytesIO()
  np.savez(buffer, **arrays)
  try:
    files.atomic_write_bytes(path, buffer.getvalue())
  except OSError as error:
    raise ValueError(f"path: could not write {str(path)!r} ({error.strerror or error}).") from None
  return path


def _weights_path(path, name: str):
  import pathlib

  if not isinstance(path, (str, os.PathLike)):
    raise ValueError(f"{name} must be a file name ending in .npz; got {_checks.describe(path)}.")
  path = pathlib.Path(os.fspath(path))
  if path.suffix.lower() != ".npz":
    raise ValueError(f"{name} must name a .npz file; got {str(path)!r}.")
  return path


def _is_npz(path) -> bool:
  """A ``.npz`` file name, in any case (``.NPZ`` too)."""
  name = os.fspath(path)
  return isinstance(name, str) and name.lower().endswith(".npz")


def _integer_inputs(state) -> bool | None:
  """Whether a method's state was trained on integer views (pixels), None if unknown."""
  trained = getattr(state, "trained", None)
  if trained is None:
    return None
  kinds = {_api.DTYPES[int(code)] for code in np.asarray(trained.dtypes)} - {"none"}
  if len(kinds) != 1 or kinds == {"bool"}:
    return None
  return kinds != {"float"}


class Weights(NamedTuple):
  """A weights file's contents (``load_weights``)."""

  variables: dict  # the Flax variables {"params": ..., ("batch_stats": ...)}
  statistics: tuple  # (mean, scale), float32: the pretraining inputs' standardisation
  integer_inputs: bool | None  # the pretraining inputs were integers (pixels); None: unknown


def load_weights(path) -> Weights:
  """The variables, input statistics ``(mean, scale)`` and input kind of a ``save_weights``
  file.

  ``path`` must end in ``.npz``, in any case (``.NPZ`` too).

  Raises:
    ValueError: the file is missing, damaged, or not one ``save_weights`` wrote (the
      error names it, and the array at fault): parameters that are not finite floats
      (finite in float32: 1e300 would read as inf),
      input statistics that are not real numbers, finite in float32 (a scale > 0 there:
      1e-300 would read as 0), ``input/integer`` other than a scalar 0 or 1, or an
      array name that is also a folder of others (``params/a`` and ``params/a/b``).
  """
  import zipfile

  path = _weights_path(path, "init_variables")
  where = f"init_variables: {str(path)!r}"
  if not path.is_file():
    raise ValueError(
      f"init_variables: no weights file at {str(path)!r}{_checks.folder_note(path)}."
    )
  try:
    with np.load(path, allow_pickle=False) as data:
      arrays = {name: np.asarray(data[name]) for name in data.files}
  except (OSError, ValueError, EOFError, TypeError, zipfile.BadZipFile) as error:
    raise ValueError(
      f"{where} is not a readable .npz weights file (damaged? {type(error).__name__}: {error})."
    ) from None
  if not all(name in arrays for name in _STATS) or not any(k.startswith("params/") for k in arrays):
    raise ValueError(
      f"{where} is not a jhash weights file (jhash.coder.save_weights "
      f"writes 'params/...' arrays and {', '.join(_STATS)}); it holds {sorted(arrays)[:5]}."
    )
  integer = _integer_flag(arrays.pop(_INTEGER, None), where)
  stats = tuple(_statistic(arrays.pop(name), name, where) for name in _STATS)
  bad = [k for k, v in arrays.items() if v.dtype.kind != "f" or not np.all(np.isfinite(v))]
  if bad:
    raise ValueError(f"{where} is damaged: {bad[0]!r} is not finite floats.")
  for k, v in arrays.items():  # the network computes in float32: 1e300 would read as inf
    with np.errstate(over="ignore"):
      cast = v.astype(np.float32)
    if not np.all(np.isfinite(cast)):
      raise ValueError(
        f"{where} is damaged: {k!r} reads as inf in float32 (it holds {v.dtype} values up "
        f"to {np.abs(v).max():g}, beyond float32's range); parameters must be finite in float32."
      )
  folders = {k.rsplit("/", i)[0] for k in arrays for i in range(1, k.count("/") + 1)}
  both = sorted(folders & set(arrays))
  if both:
    inner = next(k for k in sorted(arrays) if k.startswith(both[0] + "/"))
    raise ValueError(
      f"{where} is damaged: {both[0]!r} is an array and also a folder of others ({inner!r})."
    )
  return Weights(traverse_util.unflatten_dict(arrays, sep="/"), stats, integer)


def _shown(value: np.ndarray) -> str:
  """A file's array for an error message: its shape and dtype, and its values if few."""
  if value.size > 4:
    return _checks.describe(value)
  return f"{str(value.tolist())[:60]} ({_checks.describe(value)})"


def _integer_flag(value: np.ndarray | None, where: str) -> bool | None:
  """``input/integer``: a scalar 0 or 1 (or bool) as a bool; None when absent."""
  if value is None:
    return None
  if value.shape != () or value.dtype.kind not in "biuf" or value not in (0, 1):
    raise ValueError(
      f"{where} is damaged: {_INTEGER!r} must be a scalar 0 or 1 (or bool: the "
      f"pretraining inputs were integers); got {_shown(value)}."
    )
  return bool(value)


def _statistic(value: np.ndarray, key: str, where: str) -> jax.Array:
  """An input statistic as float32: real numbers, finite in float32 (the scale > 0)."""
  if value.dtype.kind not in "iuf":
    raise ValueError(f"{where} is damaged: {key!r} must hold real numbers; got {_shown(value)}.")
  with np.errstate(over="ignore"):
    cast = value.astype(np.float32)
  scale = key == _STATS[1]
  if not np.all(np.isfinite(cast)) or (scale and not np.all(cast > 0)):
    want = "finite numbers > 0" if scale else "finite numbers"
    raise ValueError(
      f"{where} is damaged: {key!r} must hold {want} in float32; got {value.min():g}.."
      f"{value.max():g} ({value.dtype}), which float32 reads as {cast.min():g}..{cast.max():g}."
    )
  return jnp.asarray(cast)


def initial_variables(given: Any, fresh: dict, model: models.Model, inputs: Any = None):
  """The variables a network starts from, checked against ``fresh`` (its own init).

  ``inputs`` (the training inputs, or their shape and dtype), when given, must be of the
  kind (integer pixels or floats) that the statistics of a weights file or method state
  were computed on, where that is recorded.

  Returns:
    (variables, statistics): the variables (float32, the fresh hash head where ``given``
    has none) and the input statistics ``(mean, scale)`` of a jhash state given, else None.
  """
  if given is None:
    return fresh, None
  stats = integer = None
  if isinstance(given, (str, os.PathLike)) and _is_npz(given):
    given, stats, integer = load_weights(given)
  elif isinstance(given, (str, os.PathLike)):
    if not os.fspath(given):
      raise ValueError(
        "init_variables must name a weights file (.npz, .safetensors, .pth or .pt); got ''."
      )
    path = pathlib.Path(given)
    if path.suffix.lower() not in (".safetensors", ".pth", ".pt"):
      raise ValueError(
        f"init_variables must name a weights file (.npz of save_weights, or torchvision's "
        f".safetensors, .pth or .pt); got {os.fspath(given)!r}."
      )
    if not path.is_file():
      raise ValueError(
        f"init_variables: no weights file at {os.fspath(given)!r}{_checks.folder_note(path)}."
      )
    given = models.load_torchvision(given, fresh, _torchvision_arch(model))
  elif isinstance(given, tuple) and hasattr(given, "_fields"):
    integer = _integer_inputs(given)
    given, stats = _network_variables(given, "init_variables")
  elif callable(given):
    given = given(fresh)
  _check_input_kind(integer, inputs)
  if not isinstance(given, Mapping):
    raise ValueError(
      f"init_variables must be a Flax variables dict, a jhash state, a "
      f"torchvision weights file or a function of the variables; got "
      f"{_checks.describe(given)}."
    )
  return check_variables(given, fresh), stats


def given_statistics(stats, own: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The input statistics ``init_variables`` brings, of the shape this network's own
  (``own``: [] for images, [d] for features) has; a ValueError otherwise."""
  for name, value in zip(("mean", "scale"), stats):
    if np.shape(value) != np.shape(own):
      raise ValueError(
        f"init_variables: its input {name} has shape {np.shape(value)}, but this network's "
        f"inputs take statistics of shape {np.shape(own)} ([] for images, [d] for d "
        "features): the weights were trained on other inputs."
      )
  return stats


def _check_input_kind(integer: bool | None, inputs: Any) -> None:
  """The inputs' kind (integer pixels or floats) must be the pretraining inputs', whose
  statistics standardise them."""
  if integer is None or inputs is None:
    return
  got = jnp.issubdtype(inputs.dtype, jnp.integer)
  if bool(got) != integer:
    had, has = ("integer", "floating") if integer else ("floating", "integer")
    raise ValueError(
      f"init_variables: its input statistics come from {had} inputs, and the batch's are "
      f"{has} ({inputs.dtype}): standardised by them, the inputs would be off by the pixel "
      "scale. Give the inputs as the pretraining had them (e.g. pixels / 255 as floats)."
    )


def check_variables(given: Mapping, fresh: dict) -> dict:
  """``given`` in the structure and shapes of ``fresh``, the head filled from ``fresh``.

  The hash head is taken from ``given`` only where its shapes are the network's: a head of
  another width (a pretrained classifier's, a state of another code length) is replaced
  by the fresh one. Raises a ValueError naming the first other variable (in the
  network's order) that is missing, unexpected, or of another shape.
  """
  if not isinstance(given, Mapping):
    raise ValueError(
      f"init_variables must be a Flax variables dict {{'params': ...}}; got "
      f"{_checks.describe(given)}."
    )
  want = traverse_util.flatten_dict(dict(fresh))
  got = traverse_util.flatten_dict(jax.tree.map(lambda v: v, dict(given)))
  out = {}
  for key, target in want.items():
    path = "/".join(key)
    if key not in got:
      if HEAD in key:
        out[key] = target
        continue
      raise ValueError(
        f"init_variables has no {path!r}, which the network has (shape {tuple(target.shape)})."
      )
    value = got[key]
    if HEAD in key and np.shape(value)[-1:] != tuple(target.shape)[-1:]:
      out[key] = target  # another task's head (a classifier's, another code length's)
      continue
    if tuple(np.shape(value)) != tuple(target.shape):
      raise ValueError(
        f"init_variables: {path!r} has shape {tuple(np.shape(value))}; the "
        f"network's is {tuple(target.shape)} (the first layer that differs)."
      )
    out[key] = jnp.asarray(value, target.dtype)
  extra = [k for k in got if k not in want]
  if extra:
    raise ValueError(
      f"init_variables has {'/'.join(extra[0])!r}, which the network does "
      f"not have ({len(extra)} such entries)."
    )
  return traverse_util.unflatten_dict(out)
