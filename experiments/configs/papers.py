"""The deep base models on the papers' own data sets, from the user's copy (never downloaded).

Command:  python -m experiments.main --config experiments/configs/papers.py:NAME \
              --config.datasets.NAME.root=/path/to/your/copy --workdir runs/NAME
          NAME is one of jhash.data.PAPER_PRESETS: cifar10, cifar10-1, cifar10-2 (the
          binary release's folder ``cifar-10-batches-bin`` or its parent), nuswide_21,
          nuswide_81, coco, imagenet100, mirflickr, voc2012 (a folder holding the toolboxes'
          ``train.txt``, ``test.txt`` and ``database.txt``, paths relative to it).
          ``--config.pretrained=FILE`` starts every network from a weights file: a
          torchvision ResNet-18 state dict (``.safetensors``, or ``.pth`` with torch) or a
          ``jhash.coder.save_weights`` file. ``--config.arch=alexnet`` (or vgg16, resnet50;
          default: ResNet-18) builds every network as that architecture, the backbones of
          the DCH, HashNet and MCH papers and of the PyTorch toolboxes.
Quick:    ... papers.py:quick --config.datasets.cifar10.root=DIR   (CIFAR-10's protocol at 2
          queries and 5 training images per class, ITQ and LSH on the pixels at 16 bits:
          the data, split and metric path without a ResNet to train; the tests run it on a
          cut-down copy they write, ``records_per_file=None``)
Protocol: each set's split, relevance and K of mAP@K as ``jhash.data.PAPER_PRESETS`` gives
          them, with their sources (CIFAR-10 drawn per class by seed as DeepHash-pytorch
          does unseeded; the list sets as the lists say). Reported: ``map_at_k`` (mAP over
          each query's first K, tie-aware; K = 5,000 on NUS-WIDE and MS-COCO, 1,000 on
          ImageNet-100, the whole database on CIFAR-10, MIRFlickr and VOC), the tie-aware mAP
          over the whole database, P@1000 and precision/recall within Hamming radius 2;
          at 32 bits the curves as DeepHash-pytorch draws them: precision-recall within
          Hamming radius 0..K (``pr_radius.png``) and P@N, R@N for N = 100 to 5,000
          (``topn.png``).
          Networks: chosen by the input (``jhash.models.backbone``): ResNet-18 with the CIFAR
          stem on 32 x 32, with the ImageNet stem on the list sets' images, decoded in memory
          at ``image_size`` (default 224; a set that does not fit in memory is refused with
          the bytes it needs: lower ``database_limit`` or ``image_size``). Adam at 1e-3,
          batch 64, 50 epochs (ADSH: 50 rounds of 100 network steps over 2,000 drawn items).
Status:   no result is reported from these configs: jhash ships none of these sets, and on
          2 CPU cores a ResNet-18 at 224 x 224 is out of reach. The papers' numbers to
          compare with are in the docs' guide to the papers' data sets.
"""

import ml_collections
from ml_collections import config_dict

import jhash

DEEP = ("ksh", "hashnet", "adsh", "dch", "mmhh")


def _methods(names, epochs: int, adsh_rounds: int, adsh_steps: int, adsh_samples: int):
  out = {}
  for name in names:
    if name == "adsh":
      out[name] = {
        "method": "adsh",
        "batch_size": 64,
        "rounds": adsh_rounds,
        "steps_per_round": adsh_steps,
        "num_samples": adsh_samples,
      }
    elif name == "itq":
      out[name] = {"method": "itq", "num_iters": 50}
    elif name == "lsh":
      out[name] = {"method": "lsh"}
    else:
      out[name] = {"method": name, "batch_size": 64, "num_epochs": epochs}
  return out


def get_config(arg=None):
  names = tuple(jhash.data.PAPER_PRESETS)
  if arg not in names + ("quick",):
    raise ValueError(f"unknown config argument {arg!r}; use one of {', '.join(names)} or quick.")
  name = "cifar10" if arg == "quick" else arg
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.retrieval"
  config.seed = 0
  config.num_seeds = 1
  config.bits = (16, 32, 64)
  config.pretrained = config_dict.placeholder(str)
  config.arch = config_dict.placeholder(str)
  spec = {"protocol": name, "root": config_dict.placeholder(str)}
  if jhash.data.PAPER_PRESETS[name].layout == "lists":
    spec["image_size"] = 224
  spec["database_limit"] = config_dict.placeholder(int)
  config.datasets = {name: spec}
  config.methods = _methods(DEEP, epochs=50, adsh_rounds=50, adsh_steps=100, adsh_samples=2000)
  config.evaluation = {
    "map_ties": ("aware",),
    "map_at": "protocol",
    "precision_at": (1000,),
    "radius": 2,
    "ndcg_at": config_dict.placeholder(int),
    "weighted": False,
    "topn": (100, 200, 500, 1000, 2000, 5000),
  }
  config.tables = ("map_at_k", "map", "precision_at_1000", "precision_radius_2")
  config.plots = {"pr_curve_bits": 32, "curves": {"training": {"metric": "loss", "methods": DEEP}}}
  config.checkpoint_every = 400
  if arg == "quick":
    config.bits = (16,)
    config.datasets.cifar10.query_per_class = 2
    config.datasets.cifar10.train_per_class = 5
    config.datasets.cifar10.records_per_file = config_dict.placeholder(int)
    config.methods = _methods(("itq", "lsh"), 1, 1, 1, 10)
    config.evaluation.precision_at = (5,)
    config.evaluation.topn = (1, 5, 10, 20)
    config.tables = ("map_at_k", "map", "precision_at_5", "precision_radius_2")
    config.plots = {"pr_curve_bits": 16, "curves": {}}
  for label in config.methods:  # one override moves every network's start (and kind)
    if label in DEEP:
      config.methods[label].init_variables = config.get_ref("pretrained")
      config.methods[label].backbone = config.get_ref("arch")
  return config.lock()
