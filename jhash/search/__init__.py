"""Hamming ranking: distances, exact top-k, weighted and multi-code ranking, sharded search.

Empty inputs: no queries give empty results (distances [0, n], top-k [0, k]); a
top-k needs ``1 <= k <= n``, so an empty database is refused, naming ``k``.
"""

from jhash.search._distance import hamming_distance
from jhash.search._distance import hamming_one
from jhash.search._distance import multi_code_hamming
from jhash.search._distance import pairwise_hamming
from jhash.search._distance import weight_units
from jhash.search._distance import weighted_hamming_distance
from jhash.search._sharded import sharded_hamming_topk
from jhash.search._sharded import sharded_hamming_topk_unchecked
from jhash.search._sharded import sharded_multi_code_topk
from jhash.search._sharded import sharded_multi_code_topk_unchecked
from jhash.search._topk import hamming_topk
from jhash.search._topk import hamming_topk_unchecked
from jhash.search._topk import multi_code_topk
from jhash.search._topk import multi_code_topk_unchecked
from jhash.search._topk import weighted_hamming_topk
from jhash.search._topk import weighted_hamming_topk_unchecked

__all__ = [
  "hamming_distance",
  "hamming_one",
  "multi_code_hamming",
  "pairwise_hamming",
  "weighted_hamming_distance",
  "weight_units",
  "hamming_topk",
  "multi_code_topk",
  "weighted_hamming_topk",
  "sharded_hamming_topk",
  "sharded_multi_code_topk",
  "hamming_topk_unchecked",
  "multi_code_topk_unchecked",
  "weighted_hamming_topk_unchecked",
  "sharded_hamming_topk_unchecked",
  "sharded_multi_code_topk_unchecked",
]
