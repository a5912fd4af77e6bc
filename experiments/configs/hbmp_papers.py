"""HBMP on the data sets of its paper, from the user's copy: CIFAR-10 (splits 1 and 2) and
NUS-WIDE (split 1), beside ITQ and LSH.

Command:  python -m experiments.main --config experiments/configs/hbmp_papers.py:NAME \
              --config.datasets.KEY.root=/path/to/your/copy --workdir runs/hbmp_NAME
          NAME: cifar10-1 (HBMP's CIFAR-10 split 1), cifar10-2 (split 2), nuswide_21
          (NUS-WIDE split 1); KEY: NAME with ``_`` for ``-`` (cifar10_1, cifar10_2,
          nuswide_21: an override's path must parse as Python). Roots as ``papers.py``
          takes them (the binary release's folder ``cifar-10-batches-bin`` or its parent;
          the folder of the NUS-WIDE lists).
          ``--config.pretrained=FILE`` starts the hash functions' network from a weights
          file: torchvision's ImageNet VGG-16 (``.safetensors`` or ``.pth``, see
          ``jhash.models.load_torchvision``) or a ``jhash.coder.save_weights`` file.
          ``--config.arch=alexnet`` (or resnet18, resnet50) builds it as that network
          instead of VGG-16 (give the weights of the same architecture).
Quick:    ... hbmp_papers.py:quick --config.datasets.cifar10_1.root=DIR   (split 1 at 2
          queries and 5 training images per class of a cut-down binary release, 12 bits,
          HBMP with the small CNN beside LSH; the tests run it on a copy they write)
Runtime:  quick: seconds. The others train VGG-16 on 5,000 (split 1), 50,000 (split 2) or
          10,500 (NUS-WIDE) images: a GPU's work, out of reach of 2 CPU cores.
Expected: no result is reported from these configs (jhash ships none of these sets); the
          docs' guide to the papers' data sets says what the paper reports.
Protocol: the presets of ``jhash.data.PAPER_PRESETS``, which follow MIHash's and HBMP's
          splits (deep-mihash ``+imdb/split_cifar.m``, ``split_nus.m``):
          * CIFAR-10 split 1 = ``cifar10-1``: 100 queries and 500 training images per
            class, the database every non-query image (59,000, the training images
            included); mAP over the whole database.
          * CIFAR-10 split 2 = ``cifar10-2``: 1,000 queries per class, the other 50,000
            images are both the training set and the database; mAP over the whole database.
          * NUS-WIDE split 1 = ``nuswide_21``: the 21 most frequent concepts, 100 queries and
            500 training images per concept, the database the rest; mAP@5,000, the preset's
            K. The lists are the user's (``train.txt``, ``test.txt``, ``database.txt``).
          * NUS-WIDE split 2 (2,100 queries, every other image both training set and
            database, mAP@50,000) is no preset and has no argument here: the preset's
            training list is 10,500 images and its K 5,000. It can be run only from lists of
            one's own whose ``train.txt`` is the database (a warning names the sizes that
            differ) with ``--config.evaluation.map_at=50000``; at 224 x 224 its 193,734
            images need about 29 GB twice over (``database_limit``, ``image_size``).
          HBMP as the paper runs it on these sets: the items are the 10 classes (CIFAR-10,
          ``R = b (2I - 1)``) or the training set's unique label combinations (NUS-WIDE,
          4,850 in the paper; relevance: share a label), regress step sizes; then the hash
          functions, a deep network fitted to each image's target code by the hinge bound
          (Adam at 1e-3, batch 64, 50 epochs), ranking by the weighted Hamming distance
          (``map_weighted``) beside the plain one. The paper fine-tunes VGG-F pretrained on
          ImageNet; jhash has no VGG-F, so the network is VGG-16 (the nearest: 32 x 32
          CIFAR images are too small for AlexNet, the other VGG-F relative), from
          ``--config.pretrained`` when given (ImageNet weights, as the paper), else from
          a fresh start.
          ITQ (on the CIFAR-10 splits only: on NUS-WIDE's 224 x 224 pixels its 150,528 x
          150,528 covariance would take 90 GB) and LSH on the pixels, as baselines.
          Reported: ``map_at_k`` (tie-aware mAP over each query's first K; K the whole
          database on CIFAR-10), ``map`` (tie-aware, whole database), ``map_weighted``,
          P@1000, precision and recall within Hamming radius 2; at 32 bits the P@N and R@N
          curves for N = 100 to 5,000 (``topn.png``) and precision-recall within Hamming
          radius 0..K (``pr_radius.png``). Trainer: ``experiments.retrieval``.
"""

import ml_collections
from ml_collections import config_dict

from experiments.configs import _papers_common as common

ARGS = ("cifar10-1", "cifar10-2", "nuswide_21", "quick")
#: The items of HBMP's pursuit on each set: classes, or label combinations (multi-label).
LEVELS = {"cifar10-1": "class", "cifar10-2": "class", "nuswide_21": "label_sets"}


def hbmp(level: str, **hash_options) -> dict:
  """HBMP over ``level`` items (regress step sizes) with image hash functions."""
  return {
    "method": "hbmp",
    "level": level,
    "step_size": "regress",
    "hash_function": "cnn",
    "hash_options": hash_options,
  }


def get_config(arg=None):
  if arg not in ARGS:
    raise ValueError(f"unknown config argument {arg!r}; use one of {', '.join(ARGS)}.")
  name = "cifar10-1" if arg == "quick" else arg
  config = ml_collections.ConfigDict()
  config.trainer = "experiments.retrieval"
  config.seed = 0
  config.num_seeds = 1
  config.bits = (12, 24, 32, 48)  # as the other HBMP configs
  config.pretrained = config_dict.placeholder(str)
  config.arch = "vgg16"  # jhash's nearest to the paper's VGG-F
  config.datasets = {common.label(name): common.dataset(name)}
  config.methods = {
    "hbmp": hbmp(LEVELS[name], batch_size=64, num_epochs=50),
    **common.methods(("itq", "lsh") if LEVELS[name] == "class" else ("lsh",)),
  }
  config.evaluation = common.evaluation(weighted=True)
  config.tables = ("map_at_k", "map", "map_weighted", "precision_at_1000", "precision_radius_2")
  config.plots = {
    "pr_curve_bits": 32,
    "curves": {"training": {"metric": "bit_error", "methods": ("hbmp",)}},
  }
  config.checkpoint_every = 400
  if arg == "quick":
    config.bits = (12,)
    config.arch = config_dict.placeholder(str)  # the small CNN
    common.shrink_cifar10(config.datasets.cifar10_1)
    config.methods.hbmp.hash_options = {
      "channels": (8, 16),
      "dense": 32,
      "batch_size": 25,
      "num_epochs": 10,
    }
    del config.methods["itq"]  # its 3,072-d PCA took half the run; papers.py:quick has it
    config.evaluation.precision_at = (5,)
    config.evaluation.topn = (1, 5, 10, 20)
    config.tables = ("map_at_k", "map", "map_weighted", "precision_at_5", "precision_radius_2")
    config.plots.pr_curve_bits = 12
  common.link_networks(config)  # --config.pretrained and --config.arch reach the network
  return config.lock()
