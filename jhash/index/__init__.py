"""Hash-bucket index: exact-match lookup and widening-radius bucket search (MCH's Algorithm 1).

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
from jhash.index._search import SearchResults
from jhash.index._search import bucket_search
from jhash.index._search import flip_masks
from jhash.index._search import radius_search
