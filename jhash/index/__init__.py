"""Hash-bucket index: exact-match lookup and widening-radius bucket search (MCH's Algorithm 1).

``build_index(num_substrings=...)`` adds optional substring tables (multi-index
hashing; default 0, none; ``None`` for ``suggested_num_substrings(B, K)``; layout by
``substring_layout``): at 64 bits they replace radius 2's 2,081 probes per query by 3
lookups, for about the index's own memory again.

``bucket_search`` takes three tuning knobs as keyword arguments, ``probes_per_block``,
``searchsorted_method`` (one of ``SEARCHSORTED_METHODS``) and ``use_substrings``; they
change its speed, never its results. The defaults of the first two are per backend,
``default_probes_per_block()`` and ``default_searchsorted_method()``; ``use_substrings``
(default ``None``: decide by cost per call) chooses between probing every flip mask of
radii 1..r and looking the query's substrings up in the index's substring tables.

``searcher`` prepares a search once per index (checks, plan, one compiled program
returning only the fields asked for): the form for many small calls, where per-call
costs decide the rate.

FAISS export (``to_faiss_flat``, ``to_faiss_hash``, ``faiss_range_search``) imports
FAISS only when called.
"""

from jhash.index._build import BucketIndex
from jhash.index._build import MAX_BITS
from jhash.index._build import build_index
from jhash.index._build import suggested_num_substrings
from jhash.index._build import substring_layout
from jhash.index._faiss import faiss_dimension
from jhash.index._faiss import faiss_range_search
from jhash.index._faiss import to_faiss_flat
from jhash.index._faiss import to_faiss_hash
from jhash.index._probe import flip_masks
from jhash.index._probe import lookup
from jhash.index._search import SEARCHSORTED_METHODS
from jhash.index._search import SearchResults
from jhash.index._search import bucket_search
from jhash.index._search import default_probes_per_block
from jhash.index._search import default_searchsorted_method
from jhash.index._search import radius_search
from jhash.index._searcher import DEFAULT_OUTPUTS
from jhash.index._searcher import Searcher
from jhash.index._searcher import searcher

__all__ = [
  "BucketIndex",
  "SearchResults",
  "MAX_BITS",
  "SEARCHSORTED_METHODS",
  "build_index",
  "suggested_num_substrings",
  "substring_layout",
  "lookup",
  "bucket_search",
  "radius_search",
  "searcher",
  "Searcher",
  "DEFAULT_OUTPUTS",
  "flip_masks",
  "default_probes_per_block",
  "default_searchsorted_method",
  "faiss_dimension",
  "to_faiss_flat",
  "to_faiss_hash",
  "faiss_range_search",
]
