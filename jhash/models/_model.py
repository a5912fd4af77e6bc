"""Networks used through pure functions: ``Model(init, apply)`` and ``backbone``.

As in the Flax ImageNet example, the variables are a pytree the caller carries: a dict
with "params" and, for networks with BatchNorm, "batch_stats". ``apply(variables, x,
train=True)`` returns the variables with the new batch statistics (``mutable=
["batch_stats"]``); ``train=False`` returns them unchanged. ``train`` sets the graph, so
jit ``apply`` with ``static_argnames="train"``. Networks with dropout (AlexNet, VGG) drop
units only when ``train=True``, from ``apply``'s ``key`` (jhash's network methods pass
their step's key through ``coder.step``); without one, from a key folded from the
minibatch's bits: other masks for other minibatches, the same for the same one.

Inputs are checked at the door against the item shape the model was built for
(``Model.input_shape``; shapes are static, so the check also runs under jit, once per
trace), images ``[n, H, W]`` get a channel axis and everything is cast to float32 (no
scaling: standardise pixels before).

``backbone(input_shape, num_bits)`` picks the network from the shape of one item:

=====================================  ===========================================
one item                               network
=====================================  ===========================================
(d,)                                   ``MLP``
(28, 28) or (56, 56), C = 1 or 3       ``SmallCNN``
other images H, W >= 8, up to 64 px    ResNet-18, CIFAR stem (3 x 3, no pooling)
other images, a side over 64 px        ResNet-18, ImageNet stem (7 x 7 and pooling)
images, ``arch="resnet50"`` etc.       that ResNet (stem as above)
images, ``arch="alexnet"``             ``AlexNet`` (H, W >= 63)
images, ``arch="vgg16"``               ``VGG`` (VGG-16; H, W >= 32)
=====================================  ===========================================
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jhash import _checks
from jhash.models import _classic
from jhash.models._classic import AlexNet
from jhash.models._classic import VGG
from jhash.models._layers import HashOutputs
from jhash.models._resnet import ARCHS
from jhash.models._resnet import ResNet
from jhash.models._policy import PolicyMLP
from jhash.models._small import MLP
from jhash.models._small import SmallCNN

SMALL_IMAGES = ((28, 28), (56, 56))  # SmallCNN's sides; other images get a ResNet
MIN_SIDE = 8
CIFAR_MAX_SIDE = 64
CHANNELS = (1, 3)

_BACKBONE_SHAPES = (
  "(d,) for feature vectors, or (H, W) or (H, W, C) with C = 1 or 3 and "
  f"H, W >= {MIN_SIDE} for images"
)
_OPTIONS = {
  "MLP": ("hidden", "batch_norm"),
  "SmallCNN": ("channels", "dense", "batch_norm", "im2col"),
  "ResNet": ("arch", "stem"),
  "AlexNet": ("arch", "dropout"),
  "VGG": ("arch", "dropout"),
}


class Model(NamedTuple):
  """A network as pure functions of its variables.

  ``init(key, x) -> variables``; ``apply(variables, x, train=False, key=None) ->
  (HashOutputs, variables)``, where ``x`` is a batch ``[n, *input_shape]`` (images may
  omit a single channel), ``key`` draws dropout's masks in training (module docstring)
  and the outputs are float32 logits [n, num_bits] and features [n, F].
  """

  init: Callable[[jax.Array, Any], dict]
  apply: Callable[..., tuple[HashOutputs, dict]]
  input_shape: tuple[int, ...] | None  # one item's shape, images (H, W, C); None: any
  module: nn.Module  # the Flax module behind init and apply


def _item_rank(module: nn.Module) -> int | None:
  """The rank of one item a known module takes (1: features, 3: images), else None."""
  if isinstance(module, (MLP, PolicyMLP)):
    return 1
  if isinstance(module, (SmallCNN, ResNet, AlexNet, VGG)):
    return 3
  return None


def _shape_tuple(input_shape: Any, name: str = "input_shape") -> tuple[int, ...]:
  """``input_shape`` as a tuple of Python ints >= 1, or a ValueError naming it."""
  ok = isinstance(input_shape, (tuple, list)) and all(
    isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 1 for d in input_shape
  )
  if not ok:
    raise ValueError(
      f"{name} must be a tuple of ints >= 1, the shape of one item without "
      f"the batch axis; got {input_shape!r}."
    )
  return tuple(int(d) for d in input_shape)


def _expected(input_shape: tuple[int, ...] | None, rank: int | None) -> str:
  if input_shape is not None:
    full = f"[n, {', '.join(map(str, input_shape))}]"
    if len(input_shape) == 3 and input_shape[-1] == 1:
      return f"{full} or [n, {', '.join(map(str, input_shape[:-1]))}]"
    return full
  return {1: "[n, d]", 3: "[n, H, W] or [n, H, W, C]"}.get(rank, "an array")


def _shape_ok(
  shape: tuple[int, ...], input_shape: tuple[int, ...] | None, rank: int | None
) -> bool:
  """Whether a batch of ``shape`` holds items of ``input_shape`` (or of that rank)."""
  if input_shape is not None:
    one_channel = len(input_shape) == 3 and input_shape[-1] == 1
    return shape[1:] == input_shape or (one_channel and shape[1:] == input_shape[:-1])
  if rank is None:
    return True
  return len(shape) - 1 in ((2, 3) if rank == 3 else (rank,))


def _check_batch(module: nn.Module, input_shape: tuple[int, ...] | None, x: Any, name: str) -> None:
  rank = _item_rank(module)
  if not (
    hasattr(x, "shape") and np.ndim(x) >= 1 and _shape_ok(tuple(np.shape(x)), input_shape, rank)
  ):
    raise ValueError(
      f"{name} must be a batch of shape {_expected(input_shape, rank)} for "
      f"this {type(module).__name__}; got {_checks.describe(x)}."
    )
  if not (jnp.issubdtype(x.dtype, jnp.integer) or jnp.issubdtype(x.dtype, jnp.floating)):
    raise ValueError(
      f"{name} must hold real numbers (integer or floating); got {_checks.describe(x)}."
    )


def check_input(model: Model, x: Any, name: str = "x") -> None:
  """Raise a ValueError naming ``name`` unless ``x`` is a batch the model takes.

  Args:
    model: a Model; ``model.input_shape`` (when set) is one item's shape.
    x: integer or floating ``[n, *model.input_shape]``; images [n, H, W] when C = 1.
    name: the argument's name in the error.
  """
  _check_batch(model.module, model.input_shape, x, name)


def _prepare(module: nn.Module, input_shape: tuple[int, ...] | None, x: Any) -> jax.Array:
  """Check ``x``, add a missing single channel to images, cast to float32."""
  _check_batch(module, input_shape, x, "x")
  x = jnp.asarray(x, jnp.float32)
  image_rank = len(input_shape) if input_shape is not None else _item_rank(module)
  if image_rank == 3 and x.ndim == 3:
    if isinstance(module, (AlexNet, VGG)) and min(x.shape[1:]) < _classic.min_side(module):
      m = _classic.min_side(module)
      raise ValueError(
        f"x of shape {tuple(x.shape)} reads as {x.shape[0]} one-channel images of "
        f"{x.shape[1]} x {x.shape[2]} (a batch [n, H, W]); {type(module).__name__} takes "
        f"images [n, H, W, C] of at least {m} x {m}: give a batch axis."
      )
    x = x[..., None]
  return x


def _dropout_rngs(module: nn.Module, x: jax.Array, key: Any) -> dict:
  """The ``"dropout"`` stream of a training pass: ``key``; else, for AlexNet and VGG, a
  key folded from ``x``'s bits (jhash's train step has no key to give)."""
  if key is not None:
    if not isinstance(key, jax.core.Tracer):
      _checks.prng_key(key)
    return {"dropout": key}
  if not (isinstance(module, (AlexNet, VGG)) and module.dropout > 0):
    return {}
  bits = jnp.sum(jax.lax.bitcast_convert_type(x, jnp.uint32), dtype=jnp.uint32)
  return {"dropout": jax.random.fold_in(jax.random.key(0), bits)}


def model(module: nn.Module, input_shape: Sequence[int] | None = None) -> Model:
  """Wrap a Flax module ``__call__(x, *, train) -> HashOutputs`` as pure functions.

  Args:
    module: e.g. ``MLP``, ``SmallCNN``, ``ResNet``, ``AlexNet``, ``VGG``.
    input_shape: one item's shape without the batch axis, checked on every call; for the
      image networks (H, W) means (H, W, 1). None: only the rank is checked.
  Returns:
    Model(init, apply, input_shape, module).
  """
  if not isinstance(module, nn.Module):
    raise TypeError(
      f"module must be a Flax module (jhash.models.MLP, SmallCNN, ResNet ...); got "
      f"{_checks.describe(module)}."
    )
  shape = None if input_shape is None else _shape_tuple(input_shape)
  rank = _item_rank(module)
  if shape is not None and rank == 3 and len(shape) == 2:
    shape = shape + (1,)
  if shape is not None and rank is not None and len(shape) != rank:
    want = "(d,)" if rank == 1 else "(H, W) or (H, W, C)"
    raise ValueError(
      f"input_shape must be {want} for {type(module).__name__}; got {input_shape!r}."
    )

  def init(key, x):
    if not isinstance(key, jax.core.Tracer):
      _checks.prng_key(key)
    return dict(module.init(key, _prepare(module, shape, x), train=False))

  def apply(variables, x, train=False, key=None):
    train = _checks.flag(train, "train")
    x = _prepare(module, shape, x)
    if not train:
      return module.apply(variables, x, train=False), variables
    rngs = _dropout_rngs(module, x, key)
    outputs, updates = module.apply(variables, x, train=True, mutable=["batch_stats"], rngs=rngs)
    return outputs, {**variables, **updates}

  return Model(init, apply, shape, module)


def _backbone_shape(input_shape: Any) -> tuple[int, ...]:
  """One item's shape as backbone takes it, images as (H, W, C)."""
  try:
    shape = _shape_tuple(input_shape)
  except ValueError:
    raise ValueError(f"input_shape must be {_BACKBONE_SHAPES}; got {input_shape!r}.") from None
  if len(shape) == 1:
    return shape
  if len(shape) == 2:
    shape = shape + (1,)
  if len(shape) != 3 or shape[2] not in CHANNELS or min(shape[:2]) < MIN_SIDE:
    raise ValueError(f"input_shape must be {_BACKBONE_SHAPES}; got {input_shape!r}.")
  return shape


def _options(kind: str, shape: tuple[int, ...], kwargs: dict) -> dict:
  unknown = sorted(set(kwargs) - set(_OPTIONS[kind]))
  if unknown:
    small = " x ".join(map(str, shape[:2]))
    why = (
      f" (the SmallCNN is built for {' and '.join(f'{h} x {w}' for h, w in SMALL_IMAGES)} "
      f"images only; these are {small})"
      if kind == "ResNet" and set(unknown) & set(_OPTIONS["SmallCNN"])
      else ""
    )
    raise ValueError(
      f"backbone builds {kind} for input_shape {shape}{why}; its options are "
      f"{', '.join(_OPTIONS[kind])}; got unknown option(s) {', '.join(unknown)}."
    )
  out = dict(kwargs)
  for name in ("hidden", "channels"):
    if name in out:
      out[name] = _checks.widths(out[name], name)
  if "dense" in out:
    out["dense"] = _checks.positive_int(out["dense"], "dense")
  for name in ("batch_norm", "im2col"):
    if name in out:
      out[name] = _checks.flag(out[name], name)
  return out


def _resnet(
  num_bits: int, shape: tuple[int, ...], arch: str = "resnet18", stem: str | None = None
) -> ResNet:
  if not isinstance(arch, str) or arch not in ARCHS:
    raise ValueError(
      f"arch must be one of {', '.join(map(repr, ARCHS))}; got {arch!r} (or, for the "
      f"classic networks, {' or '.join(map(repr, _classic.ARCHS))})."
    )
  if stem is None:
    stem = "cifar" if max(shape[:2]) <= CIFAR_MAX_SIDE else "imagenet"
  return ARCHS[arch](num_bits, stem)


def _classic_net(
  num_bits: int, shape: tuple[int, ...], arch: str, dropout: float = 0.5
) -> AlexNet | VGG:
  module = _classic.ARCHS[arch](num_bits, dropout)
  side = _classic.min_side(module)
  if min(shape[:2]) < side:
    raise ValueError(
      f"input_shape: {arch} takes images of at least {side} x {side} (smaller ones leave a "
      f"max pool no full window); got {shape}."
    )
  return module


def _image_network(num_bits: int, shape: tuple[int, ...], kwargs: dict) -> nn.Module:
  """``arch`` names the network when given; else SmallCNN or ResNet-18 by the size."""
  arch = kwargs.get("arch")
  if isinstance(arch, str) and arch in _classic.ARCHS:
    kind = type(_classic.ARCHS[arch](1)).__name__
    return _classic_net(num_bits, shape, **_options(kind, shape, kwargs))
  if shape[:2] in SMALL_IMAGES and arch is None:
    return SmallCNN(num_bits, **_options("SmallCNN", shape, kwargs))
  return _resnet(num_bits, shape, **_options("ResNet", shape, kwargs))


def backbone(input_shape: Sequence[int], num_bits: int, **kwargs) -> Model:
  """The network for items of ``input_shape``: MLP, SmallCNN, ResNet, AlexNet or VGG-16
  (module docstring).

  Args:
    input_shape: one item's shape without the batch axis: (d,), (H, W) or (H, W, C).
    num_bits: K, the number of logits.
    **kwargs: options of the chosen network: ``hidden``, ``batch_norm`` (MLP);
      ``channels``, ``dense``, ``batch_norm``, ``im2col`` (SmallCNN); ``arch``
      ("resnet18" or "resnet50") and ``stem`` ("cifar" or "imagenet") (ResNet);
      ``arch`` ("alexnet" or "vgg16") and ``dropout`` (the rate in training, 0.5 by
      default as torchvision's) (AlexNet, VGG). ``arch`` picks the network for images
      of any size it takes.
  Returns:
    A Model whose ``input_shape`` is the item shape, images as (H, W, C).
  """
  shape = _backbone_shape(input_shape)
  num_bits = _checks.code_length(num_bits, "num_bits")
  if kwargs.get("arch", "") is None:  # the documented default: chosen by the shape
    kwargs = {k: v for k, v in kwargs.items() if k != "arch"}
  if len(shape) == 1:
    if "arch" in kwargs:
      raise ValueError(
        f"arch={kwargs['arch']!r} names an image network; items of input_shape {shape} "
        "(feature vectors) take the MLP: give images (H, W[, C]) or leave arch out."
      )
    module = MLP(num_bits, **_options("MLP", shape, kwargs))
  else:
    module = _image_network(num_bits, shape, kwargs)
  return model(module, shape)
