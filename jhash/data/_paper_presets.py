"""The papers' data sets as the field evaluates them: one preset each, citing its sources.

The facts come from the peers' code and papers, gathered in the project's
``PROTOCOLS.md``: split sizes, the K of mAP@K, the relevance rule. Where two peers
differ, a preset takes the common choice and names the other in its ``note``.
``PAPER_PRESETS`` holds the image sets (the deep hashing papers'), ``CROSS_VIEW_PRESETS``
the cross-view ``.mat`` sets of CDH (image and text features, ``load_cross_modal_mat``).
"""

from __future__ import annotations

from typing import NamedTuple


class PaperPreset(NamedTuple):
  """A paper data set's protocol as the field uses it.

  Attributes:
    layout: ``"cifar-binary"`` (CIFAR-10's binary release), ``"lists"`` (``train.txt``,
      ``test.txt``, ``database.txt`` under the root) or ``"cross-view-mat"`` (one ``.mat``
      file of image and text features, ``jhash.data.load_cross_modal_mat``).
    num_labels: the label columns the set may have (MIRFlickr: 24 or 38).
    num_query, num_train: queries and training items.
    num_database: database items; None where the field says only "the rest" (``note``).
    map_at: the K of mAP@K; None for the whole database.
    relevance: ``"same_class"`` or ``"share_label"`` (at least one label in common), as
      ``jhash.metrics.mean_average_precision``'s ``relevance`` option spells them.
    source: the peers' code and papers the numbers come from.
    note: where the peers differ, the other choice; how the database is made.
    file_name: the file's conventional name (layout ``"cross-view-mat"``: the root may
      be a folder holding it); None for the other layouts.
  """

  layout: str
  num_labels: tuple[int, ...]
  num_query: int
  num_train: int
  num_database: int | None
  map_at: int | None
  relevance: str
  source: str
  note: str
  file_name: str | None = None


_DEEPHASH = "DeepHash-pytorch (swuxyj)"
#: Data set name -> ``PaperPreset``: the papers' protocols (``PROTOCOLS.md`` gives sources).
PAPER_PRESETS = {
  "cifar10": PaperPreset(
    layout="cifar-binary",
    num_labels=(10,),
    num_query=1_000,
    num_train=5_000,
    num_database=54_000,
    map_at=None,
    relevance="same_class",
    source=f"{_DEEPHASH} utils/tools.py::cifar_dataset and README; thulab DeepHash",
    note="100 queries and 500 training images per class of the pooled 60,000, the database "
    "the other 54,000. K: the whole database, as DeepHash-pytorch (topK=-1); thulab's "
    "K = 54,000 is the same here.",
  ),
  "cifar10-1": PaperPreset(
    layout="cifar-binary",
    num_labels=(10,),
    num_query=1_000,
    num_train=5_000,
    num_database=59_000,
    map_at=None,
    relevance="same_class",
    source=f"{_DEEPHASH}; FIRe configs.py::R; HBMP / MIHash split 1 (+imdb/split_cifar.m)",
    note="100 queries and 500 training images per class; the database every non-query image "
    "(the training images included). K: all (FIRe's R = 59,000 is the same).",
  ),
  "cifar10-2": PaperPreset(
    layout="cifar-binary",
    num_labels=(10,),
    num_query=10_000,
    num_train=50_000,
    num_database=50_000,
    map_at=None,
    relevance="same_class",
    source=f"{_DEEPHASH}; GreedyHash; FIRe cifar10_2; HBMP split 2",
    note="1,000 queries and 5,000 training images per class; the database is the training "
    "set. K: all (FIRe's R = 50,000 is the same).",
  ),
  "nuswide_21": PaperPreset(
    layout="lists",
    num_labels=(21,),
    num_query=2_100,
    num_train=10_500,
    num_database=193_734,
    map_at=5_000,
    relevance="share_label",
    source=f"{_DEEPHASH} data/nuswide_21/code.py (topK=5000); HashNet R = 5000; thulab; FIRe; "
    "deep-mihash +imdb/split_nus.m",
    note="The 21 most frequent concepts: 100 queries and 500 training images per concept, "
    "the database the rest (195,834 - 2,100). HBMP's split 2 uses K = 50,000.",
  ),
  "nuswide_81": PaperPreset(
    layout="lists",
    num_labels=(81,),
    num_query=5_000,
    num_train=10_000,
    num_database=None,
    map_at=5_000,
    relevance="share_label",
    source=f"HashNet / thuml NUS-WIDE-m; {_DEEPHASH} nuswide_81_m",
    note="All 81 concepts; the database the rest of the 223,496 images.",
  ),
  "coco": PaperPreset(
    layout="lists",
    num_labels=(80,),
    num_query=5_000,
    num_train=10_000,
    num_database=None,
    map_at=5_000,
    relevance="share_label",
    source=f"HashNet; thulab; {_DEEPHASH} coco; FIRe",
    note="80 categories; the database the rest (about 117,000 after removing images with no "
    "category).",
  ),
  "imagenet100": PaperPreset(
    layout="lists",
    num_labels=(100,),
    num_query=5_000,
    num_train=13_000,
    num_database=None,
    map_at=1_000,
    relevance="same_class",
    source=f"HashNet test.py R = 1000; {_DEEPHASH} imagenet; FIRe",
    note="Queries: the 5,000 validation images of the 100 classes; training: 130 per class; "
    "the database about 128,500 training images of the 100 classes. One-hot lists.",
  ),
  "mirflickr": PaperPreset(
    layout="lists",
    num_labels=(24, 38),
    num_query=1_000,
    num_train=4_000,
    num_database=20_000,
    map_at=None,
    relevance="share_label",
    source=f"{_DEEPHASH} data/mirflickr/code.py (topK=-1); FIRe",
    note="MIRFlickr-25K with 24 or 38 labels. K: all, as DeepHash-pytorch; FIRe uses 1,000.",
  ),
  "mirflickr_21": PaperPreset(
    layout="lists",
    num_labels=(21,),
    num_query=5_000,
    num_train=10_000,
    num_database=20_000,
    map_at=None,
    relevance="share_label",
    source="MCH (Li, Jiang and Li), Sec. 5.1: 25,000 images of 21 classes, 5,000 queries "
    "drawn at random, the other 20,000 the database, 10,000 training images drawn from it",
    note="MIRFlickr-25K as MCH's paper splits it; no toolbox ships its lists: write them in "
    "the toolboxes' layout with 21 label columns (train.txt a subset of database.txt). K: "
    "the whole database (the paper's text names none).",
  ),
  "voc2012": PaperPreset(
    layout="lists",
    num_labels=(20,),
    num_query=1_000,
    num_train=4_000,
    num_database=6_540,
    map_at=None,
    relevance="share_label",
    source=_DEEPHASH,
    note="PASCAL VOC 2012, 20 classes. K: all.",
  ),
}


_CDH = "CDH (Mu et al., IJCAI 2016), Sec. 4 'Datasets'"
#: Data set name -> ``PaperPreset`` of layout ``"cross-view-mat"``: the cross-view sets of
#: CDH's Table 1. Named ``*_cv`` so that ``mirflickr_cv`` (the 25,000 pairs' edge and text
#: features) is not taken for ``mirflickr`` (the deep hashing papers' image lists), nor
#: ``nuswide_cv`` (186,577 pairs, 10 tags) for ``nuswide_21`` / ``nuswide_81``; with an
#: underscore, as a config override (``--config.datasets.NAME.root=``) must spell a Python
#: name (ml_collections parses the path as one: ``cifar10-1`` there fails). A file's own
#: ``tr`` / ``te`` / ``db`` splits are used as they are; a file without ``db`` has the
#: training set as its database (CDH: "all database samples are ranked", the training
#: items). mAP over the whole database, tie-aware.
CROSS_VIEW_PRESETS = {
  "wiki_cv": PaperPreset(
    layout="cross-view-mat",
    num_labels=(10,),
    num_query=693,
    num_train=2_173,
    num_database=2_173,
    map_at=None,
    relevance="same_class",
    source=f"{_CDH}: 2,866 pairs, 10 classes, 75% train / 25% queries; the split of "
    "Rasiwasia et al. (ACM MM 2010) that the cross-modal toolboxes' wikiData.mat ships",
    note="Images: 128-d SIFT; texts: 10-d LDA topics; class ids 1..10 (one label each). "
    "wikiData.mat has no database split: the 2,173 training pairs are the database.",
    file_name="wikiData.mat",
  ),
  "mirflickr_cv": PaperPreset(
    layout="cross-view-mat",
    num_labels=(24,),
    num_query=1_250,
    num_train=23_750,
    num_database=23_750,
    map_at=None,
    relevance="share_label",
    source=f"{_CDH}: 25,000 pairs, 24 categories, 95% train / 5% queries",
    note="Images: 150-d edge histogram; texts: 500-d tags; 24 multi-hot labels. Without a "
    "database split the training pairs are the database. Releases that drop pairs with no "
    "label or few tags hold fewer (16,738 in the MIRFLICKR.mat some toolboxes load): used as "
    "they are.",
    file_name="mirflickr25k.mat",
  ),
  "nuswide_cv": PaperPreset(
    layout="cross-view-mat",
    num_labels=(10,),
    num_query=1_866,
    num_train=184_711,
    num_database=184_711,
    map_at=None,
    relevance="share_label",
    source=f"{_CDH}: 186,577 images with one of the 10 most common tags, 99% train / 1% "
    "queries (1,866 after rounding), B-step on chunks of 10,000",
    note="Images: 500-d SIFT bag of words; texts: 1,000-d binary tags; 10 multi-hot tags. "
    "Without a database split the training pairs are the database; a file with one (I_db, "
    "as in the nuswide_lssh.mat some toolboxes load) keeps it.",
    file_name="nus-wide.mat",
  ),
}
