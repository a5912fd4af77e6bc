"""Hash-bucket index: exact-match lookup and widening-radius bucket search (MCH's Algorithm 1).

``bucket_search`` takes two tuning knobs as keyword arguments, ``probes_per_block`` and
``searchsorted_method`` (one of ``SEARCHSORTED_METHODS``); they change its speed, never
its results. Their per-backend defaults are ``default_probes_per_block()`` and
``default_searchsorted_method()``.

FAISS export (``to_faiss_flat``, ``to_faiss_hash``, ``faiss_range_search``) imports
FAISS only when called.
"""

from jhash.index._build import BucketIndex
from jhash.index._build import MAX_BITS
from jhash.index._build import build_index
from jhash.index._faiss import faiss_dimension
from jhash.index._faiss import faiss_range_search
from jhash.index._faiss import to_faiss_flat
from jhash.index._faiss import to_faiss_hash
from jhash.index._probe import lookup
from jhash.index._search import SEARCHSORTED_METHODS
from jhash.index._search import SearchResults
from jhash.index._search import bucket_search
from jhash.index._search import default_probes_per_block
from jhash.index._search import default_searchsorted_method
from jhash.index._search import flip_masks
from jhash.index._search import radius_search
