"""The deep base models on the papers' own data sets, from the user's copy (never downloaded).

Command:  python -m experiments.main --config experiments/configs/papers.py:NAME \
              --config.datasets.KEY.root=/path/to/your/copy --workdir runs/NAME
          NAME is one of jhash.data.PAPER_PRESETS: cifar10, cifar10-1, cifar10-2 (the
          binary release's folder ``cifar-10-batches-bin`` or its parent), nuswide_21,
          nuswide_81, coco, imagenet100, mirflickr, mirflickr_21, voc2012 (a folder holding the toolboxes'
          ``train.txt``, ``test.txt`` and ``database.txt``, paths relative to it). KEY
          is NAME with ``_`` for ``-`` (``cifar10_1``): an override's path must parse.
          ``--config.pretrained=FILE`` starts every network from a weights file: a
          torchvision ResNet-18 state dict (``.safetensors``, or ``.pth`` with torch) or a
          ``jhash.coder.save_weights`` file. ``--config.arch=alexnet`` (or vgg16, resnet50;
          default: ResNet-18) builds every network as that architecture, the backbones of
          the DCH, HashNet and MCH papers and of the PyTorch toolboxes. ``NAME,stream``
          (a list set) reads the images from their files as each cell trains and codes,
          never holding them (``experiments.streaming``: the peers' crops, flips and
          per-channel statistics, which the networks read as they come:
          ``standardize=False``), and leaves out ADSH, which cannot stream.
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
from experiments.configs import _papers_common as common

DEEP = common.DEEP


def get_config(arg=None):
  names = tuple(jhash.data.PAPER_PRESETS)
  arg, stream = common.stream_arg(arg, names)
  if arg not in names + ("quick",):
    raise ValueError(
      f"unknown config argument {arg!r}; use one of {', '.join(names)} or quick (a list "
      f"set with {common.STREAM_SUFFIX} to stream it)."
    )
  name = "cifar10" if arg == "quick" else arg
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.retrieval"
  config.seed = 0
  config.num_seeds = 1
  config.bits = (16, 32, 64)
  config.pretrained = config_dict.placeholder(str)
  config.arch = config_dict.placeholder(str)
  config.datasets = {common.label(name): common.dataset(name)}
  config.methods = common.methods(DEEP)
  config.evaluation = common.evaluation()
  config.tables = ("map_at_k", "map", "precision_at_1000", "precision_radius_2")
  config.plots = {"pr_curve_bits": 32, "curves": {"training": {"metric": "loss", "methods": DEEP}}}
  config.checkpoint_every = 400
  if stream:
    config.methods = common.methods(common.STREAMABLE)
    config.plots.curves.training.methods = common.STREAMABLE
    common.stream(config, common.label(name))
  if arg == "quick":
    config.bits = (16,)
    common.shrink_cifar10(config.datasets.cifar10)
    config.methods = common.methods(("itq", "lsh"))
    config.evaluation.precision_at = (5,)
    config.evaluation.topn = (1, 5, 10, 20)
    config.tables = ("map_at_k", "map", "precision_at_5", "precision_radius_2")
    config.plots = {"pr_curve_bits": 16, "curves": {}}
  common.link_networks(config)  # one override moves every network's start (and kind)
  return config.lock()
