"""Hashing networks: Flax modules used through pure ``init`` / ``apply`` functions.

Every network maps a batch to ``HashOutputs(logits, features)``: the hash head's logits
float32 [n, num_bits] (the codes are their sign) and the penultimate features [n, F].

* ``_layers``: ``HashOutputs``, the linear hash head and the BatchNorm all networks share;
* ``_small``: ``MLP`` on feature vectors, ``SmallCNN`` on 28 x 28 / 56 x 56 images;
* ``_resnet``: ``ResNet`` (``resnet18``, ``resnet50``; "cifar" or "imagenet" stem), laid
  out as torchvision's;
* ``_classic``: ``AlexNet`` (``alexnet``) and ``VGG`` (``vgg16``), laid out as
  torchvision's, and ``adaptive_avg_pool`` as torch's;
* ``_model``: ``Model(init, apply, input_shape, module)``, ``model(module)`` and
  ``backbone(input_shape, num_bits)``, which picks the network from one item's shape
  (or its ``arch``);
* ``_policy``: ``PolicyMLP``, MCH's crop agent (five dense layers, two action logits);
* ``_torchvision``: ``load_torchvision`` (``load_torchvision_resnet``), torchvision's
  ImageNet weights for ResNet-18/50, AlexNet and VGG-16.
"""

from jhash.models._model import Model
from jhash.models._model import backbone
from jhash.models._model import check_input
from jhash.models._model import model
from jhash.models._layers import HashOutputs
from jhash.models._policy import NUM_ACTIONS
from jhash.models._policy import PolicyMLP
from jhash.models._resnet import BasicBlock
from jhash.models._resnet import Bottleneck
from jhash.models._resnet import ResNet
from jhash.models._resnet import resnet18
from jhash.models._resnet import resnet50
from jhash.models._small import MLP
from jhash.models._small import SmallCNN
from jhash.models._small import strided_patches
from jhash.models._classic import AlexNet
from jhash.models._classic import VGG
from jhash.models._classic import VGG16_LAYERS
from jhash.models._classic import adaptive_avg_pool
from jhash.models._classic import alexnet
from jhash.models._classic import vgg16
from jhash.models._torchvision import load_torchvision
from jhash.models._torchvision import load_torchvision_resnet
from jhash.models._resnet import ARCHS as RESNET_ARCHS
from jhash.models._classic import ARCHS as CLASSIC_ARCHS

__all__ = [
  "Model",
  "model",
  "backbone",
  "check_input",
  "HashOutputs",
  "MLP",
  "SmallCNN",
  "strided_patches",
  "ResNet",
  "BasicBlock",
  "Bottleneck",
  "resnet18",
  "resnet50",
  "RESNET_ARCHS",
  "AlexNet",
  "VGG",
  "alexnet",
  "vgg16",
  "VGG16_LAYERS",
  "CLASSIC_ARCHS",
  "adaptive_avg_pool",
  "load_torchvision",
  "load_torchvision_resnet",
  "PolicyMLP",
  "NUM_ACTIONS",
]
