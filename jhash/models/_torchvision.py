"""torchvision's weights (ImageNet pretrained) into the Flax ``ResNet``, ``AlexNet``, ``VGG``.

A torchvision state dict names its entries by module path and stores convolutions as
OIHW and linear layers as [out, in]; the Flax networks (``_resnet``, ``_classic``) name
their layers after torchvision's and store HWIO and [in, out]:

==================================  ===========================================
torchvision                         Flax variables
==================================  ===========================================
conv1.weight [O, I, kh, kw]         params/conv1/kernel [kh, kw, I, O]
bn1.weight, bn1.bias                params/bn1/scale, params/bn1/bias
bn1.running_mean, bn1.running_var   batch_stats/bn1/mean, batch_stats/bn1/var
layer2.0.conv1.weight               params/layer2_0/conv1/kernel
layer2.0.downsample.0.weight        params/layer2_0/downsample_conv/kernel
layer2.0.downsample.1.*             params|batch_stats/layer2_0/downsample_bn/*
features.3.weight [O, I, kh, kw]    params/features_3/kernel [kh, kw, I, O]
features.3.bias                     params/features_3/bias
classifier.1.weight [out, in]       params/classifier_1/kernel [in, out] (AlexNet's
                                    fc6; VGG's fc6 and fc7 are classifier.0, .3)
fc.*, classifier.6.*                ignored: ResNet's fc, AlexNet's and VGG's fc8
                                    (the hash head stays as initialised)
*.num_batches_tracked               ignored
==================================  ===========================================

``.safetensors`` files are read with the ``safetensors`` package (NumPy, no torch);
``.pth`` / ``.pt`` files need torch. To convert once where torch is installed:
``safetensors.torch.save_file(torchvision.models.resnet50(weights="DEFAULT").state_dict(),
"resnet50.safetensors")`` (``alexnet``, ``vgg16`` alike).
"""

from __future__ import annotations

import os
import pathlib
from typing import Any
from typing import Mapping

import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from jhash import _checks
from jhash.models import _classic
from jhash.models._resnet import ARCHS as RESNET_ARCHS

#: name -> constructor of every architecture whose torchvision weights load.
ARCHS = {**RESNET_ARCHS, **_classic.ARCHS}
_BN_LEAVES = {
  "weight": ("params", "scale"),
  "bias": ("params", "bias"),
  "running_mean": ("batch_stats", "mean"),
  "running_var": ("batch_stats", "var"),
}
_HEAD = "projection"
_SHOWN = 8  # names listed in an error


def _bn_names(prefix: str) -> list[str]:
  return [f"{prefix}.{leaf}" for leaf in _BN_LEAVES]


def _torchvision_names(arch: str) -> list[str]:
  """The backbone entries of torchvision's ``arch`` state dict (no fc / fc8, no counters)."""
  if arch in _classic.ARCHS:
    layers = _classic.torchvision_layers(ARCHS[arch](1))
    return [f"{layer}.{leaf}" for layer in layers for leaf in ("weight", "bias")]
  net = ARCHS[arch](1)
  convs = 2 if net.block_cls.expansion == 1 else 3
  names = ["conv1.weight", *_bn_names("bn1")]
  for stage, num_blocks in enumerate(net.stage_sizes, start=1):
    for block in range(num_blocks):
      prefix = f"layer{stage}.{block}"
      for k in range(1, convs + 1):
        names += [f"{prefix}.conv{k}.weight", *_bn_names(f"{prefix}.bn{k}")]
      if block == 0 and (stage > 1 or net.block_cls.expansion > 1):
        names += [f"{prefix}.downsample.0.weight", *_bn_names(f"{prefix}.downsample.1")]
  return names


def _flax_key(name: str) -> tuple[str, ...]:
  """A torchvision entry's place in the Flax variables: (collection, *layers, leaf)."""
  *layers, leaf = name.split(".")
  if layers[0] in ("features", "classifier"):  # AlexNet's, VGG's
    return ("params", "_".join(layers), "kernel" if leaf == "weight" else "bias")
  if layers[0].startswith("layer"):
    block, layer = f"{layers[0]}_{layers[1]}", layers[2]
    if layer == "downsample":
      layer = "downsample_conv" if layers[3] == "0" else "downsample_bn"
    layers = [block, layer]
  if "conv" in layers[-1]:
    return ("params", *layers, "kernel")
  collection, flax_leaf = _BN_LEAVES[leaf]
  return (collection, *layers, flax_leaf)


def _ignored(name: str, arch: str) -> bool:
  """An entry the loader skips: the classifier's last layer, BatchNorm's step counters."""
  head = "fc." if arch in RESNET_ARCHS else "classifier.6."
  return name.startswith(head) or name.endswith("num_batches_tracked")


def _arch_of(state: dict) -> str | None:
  """The architecture whose entries ``state`` holds, if one of ``ARCHS``."""
  for arch in ARCHS:
    if {k for k in state if not _ignored(k, arch)} == set(_torchvision_names(arch)):
      return arch
  return None


def _read_state_dict(path: str | pathlib.Path) -> dict[str, np.ndarray]:
  """A state dict from ``.safetensors`` (no torch needed) or ``.pth`` / ``.pt`` (torch)."""
  if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
    shown = repr(path) if isinstance(path, str) else _checks.describe(path)
    raise TypeError(
      f"path must be a file name (str or path) of a .safetensors, .pth or .pt file; got {shown}."
    )
  path = pathlib.Path(path)
  if path.suffix.lower() == ".safetensors":
    try:
      from safetensors.numpy import load_file
    except ImportError:
      raise ImportError(
        "reading .safetensors weights needs the safetensors package (pip install safetensors)."
      ) from None
    if not path.is_file():
      raise ValueError(f"path: no weights file at {str(path)!r}{_checks.folder_note(path)}.")
    try:
      return dict(load_file(str(path)))
    except Exception as error:  # safetensors' own error types: a damaged or foreign file
      raise ValueError(
        f"{str(path)!r} is not a readable .safetensors file ({type(error).__name__}: "
        f"{error}); it may be truncated or of another format."
      ) from None
  if path.suffix.lower() in (".pth", ".pt"):
    return _read_torch(path)
  raise ValueError(f"path must name a .safetensors, .pth or .pt file; got {str(path)!r}.")


def _read_torch(path: pathlib.Path) -> dict[str, np.ndarray]:
  if not path.is_file():  # first: no package makes a missing file readable
    raise ValueError(f"path: no weights file at {str(path)!r}{_checks.folder_note(path)}.")
  try:
    import torch
  except ImportError:
    raise ImportError(
      f"reading {path.name} needs torch (pip install torch); or convert it "
      "once to .safetensors, which needs only the safetensors package."
    ) from None
  try:
    state = torch.load(path, map_location="cpu", weights_only=True)
  except Exception as error:  # torch's errors on a damaged or foreign file
    raise ValueError(
      f"{str(path)!r} is not a readable torch weights file ({type(error).__name__}: "
      f"{str(error)[:200] or 'no message'}); it may be empty, truncated, of another "
      "format, or hold more than tensors (only weights are read: weights_only=True)."
    ) from None
  if not isinstance(state, dict):
    raise ValueError(
      f"{path.name} must hold a state dict (a dict of name -> tensor, e.g. "
      f"net.state_dict()); got {type(state).__name__}."
    )
  for k, v in state.items():
    if not isinstance(k, str):
      raise ValueError(
        f"{path.name} must map parameter names (str) to tensors; it has the key {k!r} "
        f"({type(k).__name__})."
      )
    if torch.is_tensor(v) and (v.is_quantized or v.is_meta):
      raise ValueError(
        f"{path.name}: {k} is a {'quantized' if v.is_quantized else 'meta'} tensor; "
        "torchvision's weights are plain float32 tensors (save the float network's state dict)."
      )
    if torch.is_tensor(v) and v.layout != torch.strided:
      raise ValueError(
        f"{path.name}: {k} is a {v.layout} tensor; torchvision saves dense weights (save "
        "the state dict of the network itself, or .to_dense() it)."
      )
    if not torch.is_tensor(v):
      raise ValueError(
        f"{path.name} must hold a state dict (a dict of name -> tensor, e.g. "
        f"net.state_dict()); its key {k!r} holds a {type(v).__name__} (a checkpoint "
        "wrapping the state dict? save the state dict itself)."
      )
  # Floating point as float32; other dtypes kept, for _check_values to refuse by name.
  return {
    k: (v.detach().float() if v.is_floating_point() else v.detach()).numpy()
    for k, v in state.items()
  }


def _listed(names: Any) -> str:
  names = sorted(names)
  more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
  return ", ".join(names[:_SHOWN]) + more


def _check_names(state: dict, names: list[str], arch: str, path: Any) -> None:
  missing = set(names) - set(state)
  extra = {k for k in state if not _ignored(k, arch)} - set(names)
  if missing or extra:
    other = _arch_of(state)
    hint = f" It holds torchvision's {other} (build that network to load it)." if other else ""
    raise ValueError(
      f"{path} is not a torchvision {arch} state dict: "
      f"missing keys [{_listed(missing)}]; unexpected keys [{_listed(extra)}].{hint}"
    )


def _check_covers(flat: dict, wanted: dict, arch: str) -> None:
  backbone = {k for k in flat if k[1] != _HEAD}
  absent = set(wanted) - backbone
  unfilled = backbone - set(wanted)
  if absent or unfilled:
    absent, unfilled = (_listed("/".join(k) for k in keys) for keys in (absent, unfilled))
    raise ValueError(
      f"variables are not those of a Flax {arch}: it has no [{absent}] and "
      f"{arch} weights would not fill [{unfilled}]."
    )


def _check_values(name: str, value: Any, path: Any) -> np.ndarray:
  """An entry as float32: floating point (torchvision stores every weight so; integers
  mean a file of something else), finite in float32, a ``running_var`` >= 0."""
  value = np.asarray(value)
  if value.dtype.kind != "f" and value.dtype.name != "bfloat16":
    raise ValueError(
      f"{name} in {path} must hold floating-point weights (torchvision saves float32); "
      f"got {_checks.describe(value)}."
    )
  with np.errstate(over="ignore", invalid="ignore"):
    cast = value.astype(np.float32, copy=False)  # VGG's fc6 alone is 411 MB
  if not np.all(np.isfinite(cast)):
    bad = cast[~np.isfinite(cast)].ravel()[0]
    raise ValueError(
      f"{name} in {path} is damaged: it holds {bad} in float32 (NaN or infinity, or a "
      f"{value.dtype} value beyond float32's range); weights must be finite."
    )
  if name.endswith("running_var") and cast.size and cast.min() < 0:
    raise ValueError(
      f"{name} in {path} is damaged: a batch-norm variance must be >= 0; it holds {cast.min():g}."
    )
  return cast


def _to_flax(name: str, value: np.ndarray, target: Any, path: Any) -> jnp.ndarray:
  """One entry in Flax layout (OIHW -> HWIO, Linear's [out, in] -> [in, out]), its shape
  checked."""
  value = _check_values(name, value, path)
  torch_layout = value.shape
  if value.ndim == 4:
    value = np.transpose(value, (2, 3, 1, 0))
  elif value.ndim == 2:
    value = value.T
  if value.ndim == 4 and value.shape != tuple(target.shape) and torch_layout == tuple(target.shape):
    raise ValueError(
      f"{name} in {path} has shape {torch_layout}, the model's own (Flax's HWIO) layout; a "
      "torchvision file holds convolutions as [out, in, H, W] (OIHW). Give the file "
      "torchvision saved (state_dict()), not weights already converted for Flax."
    )
  if value.shape != tuple(target.shape):
    raise ValueError(
      f"{name} in {path} has shape {value.shape} in Flax layout; the model's "
      f"variable has shape {tuple(target.shape)}{_shape_hint(name, value, target)}."
    )
  return jnp.asarray(value)


def _shape_hint(name: str, value: np.ndarray, target: Any) -> str:
  """Why a first layer's shape may differ: the ResNet's stem, or the images' channels."""
  if name not in ("conv1.weight", "features.0.weight"):
    return ""
  if value.shape[2] != target.shape[2]:
    return (
      f" (the file's convolution reads {value.shape[2]}-channel images, the network's "
      f"{target.shape[2]})"
    )
  if name == "conv1.weight":
    return " (ImageNet weights have a 7 x 7 conv1: build the ResNet with stem='imagenet')"
  return ""


def load_torchvision(path: str | pathlib.Path, variables: dict, arch: str) -> dict:
  """Fill a Flax network's backbone with torchvision weights; keep its hash head.

  Args:
    path: a torchvision ``arch`` state dict (``torchvision.models.<arch>().state_dict()``),
      ``.safetensors`` or ``.pth`` / ``.pt`` (the latter needs torch); the suffix in any
      case. The classifier's last layer (ResNet's ``fc``, AlexNet's and VGG's
      ``classifier.6``) is not read.
    variables: the network's variables, {"params": ..., ("batch_stats": ...)}, e.g. from
      ``backbone((224, 224, 3), num_bits, arch=arch).init(key, x)``, or its
      ``jax.eval_shape`` (the values are not read; VGG-16 has 134 M).
    arch: "resnet18", "resnet50", "alexnet" or "vgg16" (``ARCHS``).
  Returns:
    New variables: every backbone variable from the file (float32), the hash head
    ("projection") as it was.
  Raises:
    ValueError: naming the file when it is missing or unreadable, the missing or
      unexpected keys (and the architecture the file is of, if another of ``ARCHS``), or
      an entry whose shape differs, that is not finite in float32 (NaN, infinity, or
      beyond float32's range), or a negative ``running_var``.
    TypeError: ``path`` is not a file name, or ``variables`` not a dict of variables.
  """
  if not isinstance(arch, str) or arch not in ARCHS:
    raise ValueError(f"arch must be one of {', '.join(map(repr, ARCHS))}; got {arch!r}.")
  if not isinstance(variables, Mapping) or not all(
    isinstance(v, Mapping) for v in variables.values()
  ):
    network = type(ARCHS[arch](1)).__name__
    raise TypeError(
      f"variables must be the {network}'s variables, a dict {{'params': ..., "
      f"('batch_stats': ...)}} (e.g. from backbone(...).init(key, x)); got "
      f"{_checks.describe(variables)}."
    )
  state = _read_state_dict(path)
  names = _torchvision_names(arch)
  _check_names(state, names, arch, path)
  flat = traverse_util.flatten_dict(variables)
  wanted = {_flax_key(name): name for name in names}
  _check_covers(flat, wanted, arch)
  new = dict(flat)
  for key, name in wanted.items():
    new[key] = _to_flax(name, state[name], flat[key], path)
  return traverse_util.unflatten_dict(new)


def load_torchvision_resnet(
  path: str | pathlib.Path, variables: dict, arch: str = "resnet18"
) -> dict:
  """``load_torchvision`` for a ResNet: fill its backbone, keep its hash head.

  Args:
    path: a torchvision ``resnet18`` / ``resnet50`` state dict, ``.safetensors`` or
      ``.pth`` / ``.pt`` (the latter needs torch); the suffix in any case.
    variables: the ResNet's variables, {"params": ..., "batch_stats": ...}, e.g. from
      ``backbone((224, 224, 3), num_bits, arch=arch).init(key, x)``.
    arch: "resnet18" or "resnet50".
  Returns:
    New variables: every backbone variable from the file (float32), the hash head
    ("projection") as it was.
  Raises:
    ValueError, TypeError: as ``load_torchvision``.
  """
  if not isinstance(arch, str) or arch not in RESNET_ARCHS:
    raise ValueError(f"arch must be one of {', '.join(map(repr, RESNET_ARCHS))}; got {arch!r}.")
  return load_torchvision(path, variables, arch)
