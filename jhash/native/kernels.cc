// CPU kernels for Hamming search and ranking metrics, called from JAX through the XLA FFI.
//
// XLA's CPU backend runs a loop of array operations on one thread and lowers a
// selection to a sort; these kernels do the work of one query in one pass over
// the database, and spread queries over XLA's own intra-op thread pool (the
// FFI's ThreadPool context), so a call uses the cores JAX was given.
//
// Codes are packed uint32 words (jhash.codes.pack_bits); a Hamming distance is
// the popcount of XOR, read two words at a time as one 64-bit word.
//
// Kernels (each exported symbol is an XLA FFI handler):
//   JhashHammingTopk   exact k nearest by (distance, index), items of one or more codes
//                                                                  -> [q, k] x 2
//   JhashTieGroups     per query, items and relevant items per distance -> [q, K + 2] x 2
//   JhashIndexAp       AP over the ranking ordered by (distance, index) -> [q] x 3
//   JhashGradeGroups   per query, items per (distance, grade), for NDCG -> [q, K + 2, G]
//   JhashIndexDcg      DCG@k of the ranking ordered by (distance, index), grades -> [q], [q, G]
//   JhashBucketSearch  hash-bucket search with a widening radius      -> [q, R] x 2, [q] x 4
//   JhashLookup        exact-match bucket of each query (start, count) -> [q] x 2
//   JhashWeightedTopk  exact k nearest by (weighted distance, index)   -> [q, k] x 2
//   JhashWeightedAp    AP of the ranking by weighted distance          -> [q] x 3
//   JhashWeightedRanked  tie groups of its first k positions, grades   -> [q, k] x 2, [q, G]

#include <algorithm>
#include <climits>
#include <cmath>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// The AVX-512 path: on CPUs with VPOPCNTDQ, or, for tests on any x86-64, built
// with -DJHASH_EMULATE_AVX512 over SIMDe's portable definitions of the same
// intrinsics (header-only, Debian's libsimde-dev), so its results are checked on
// machines without AVX-512 too. Two intrinsics SIMDe 0.7 lacks are defined below
// as Intel's guide specifies them.
#if defined(JHASH_EMULATE_AVX512)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#define JHASH_AVX512 1
#if !defined(__AVX512F__)
inline __mmask8 jhash_cmplt_epi64_mask(__m512i a, __m512i b) {
  return _mm512_cmpgt_epi64_mask(b, a);
}
inline __m128i jhash_cvtepi64_epi16(__m512i a) {  // vpmovqw: the low 16 bits of each lane
  alignas(64) uint64_t lanes[8];
  alignas(16) uint16_t out[8];
  _mm512_store_si512(lanes, a);
  for (int u = 0; u < 8; ++u) out[u] = static_cast<uint16_t>(lanes[u]);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(out));
}
#define _mm512_cmplt_epi64_mask jhash_cmplt_epi64_mask
#define _mm512_cvtepi64_epi16 jhash_cvtepi64_epi16
#endif
#elif defined(__AVX512F__) && defined(__AVX512VPOPCNTDQ__)
#define JHASH_AVX512 1
#endif

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// ---------------------------------------------------------------------------------------------
// Parallel loop over tasks 0..tasks-1 on XLA's intra-op pool. The calling thread
// takes tasks too, so the loop finishes even when no pool thread is free; it
// then waits only for tasks that a helper has claimed. A helper that starts after
// every task is claimed touches nothing but the shared counters (kept alive by
// the shared_ptr), so returning early is safe.

struct LoopState {
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mu;
  std::condition_variable cv;
};

template <typename Body>
void ParallelFor(ffi::ThreadPool& pool, int64_t tasks, const Body& body) {
  if (tasks <= 0) return;
  auto state = std::make_shared<LoopState>();
  auto run = [state, tasks, &body]() {
    for (;;) {
      const int64_t t = state->next.fetch_add(1);
      if (t >= tasks) return;
      body(t);
      if (state->done.fetch_add(1) + 1 == tasks) {
        std::lock_guard<std::mutex> lock(state->mu);
        state->cv.notify_all();
      }
    }
  };
  const int64_t helpers = std::min<int64_t>(pool.num_threads(), tasks) - 1;
  for (int64_t h = 0; h < helpers; ++h) {
    auto task = run;  // Schedule takes ownership of a copy
    pool.Schedule(std::move(task));
  }
  run();
  std::unique_lock<std::mutex> lock(state->mu);
  state->cv.wait(lock, [&] { return state->done.load() == tasks; });
}

// ---------------------------------------------------------------------------------------------
// Distances, sixteen items at a time. The database is read in a transposed
// layout (word j of items i..i+15 side by side: soa[j * stride + i], words of 64
// bits, zero past the code), so one vector holds one word of 4 (AVX2) or 8
// (AVX-512) items. AVX-512 with VPOPCNTDQ counts bits per 64-bit lane; AVX2
// counts them per byte with a nibble table (vpshufb) and sums the bytes of each
// lane (vpsadbw); elsewhere a scalar loop. The byte counters take at most 31
// words (8 per word) before they are flushed.

constexpr int64_t kLanes = 16;

inline int Pop64(uint64_t x) { return __builtin_popcountll(x); }

// Distance of one item of the transposed layout (the scalar path and re-checks).
inline int DistSoa(const uint64_t* soa, int64_t stride, int64_t w64, const uint64_t* q,
                   int64_t i) {
  int d = 0;
  for (int64_t j = 0; j < w64; ++j) d += Pop64(soa[j * stride + i] ^ q[j]);
  return d;
}

#if defined(JHASH_AVX512)
inline void Dist16Vec(const uint64_t* soa, int64_t stride, int64_t w64, const uint64_t* q,
                      int64_t i, __m512i out[2]) {
  __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
  for (int64_t j = 0; j < w64; ++j) {
    const __m512i qj = _mm512_set1_epi64(static_cast<long long>(q[j]));
    const uint64_t* row = soa + j * stride + i;
    a0 = _mm512_add_epi64(a0, _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_loadu_si512(row), qj)));
    a1 = _mm512_add_epi64(a1,
                          _mm512_popcnt_epi64(_mm512_xor_si512(_mm512_loadu_si512(row + 8), qj)));
  }
  out[0] = a0;
  out[1] = a1;
}

inline uint32_t Below16(const uint64_t* soa, int64_t stride, int64_t w64, const uint64_t* q,
                        int64_t i, int thr) {
  __m512i d[2];
  Dist16Vec(soa, stride, w64, q, i, d);
  const __m512i t = _mm512_set1_epi64(thr);
  return static_cast<uint32_t>(_mm512_cmplt_epi64_mask(d[0], t)) |
         (static_cast<uint32_t>(_mm512_cmplt_epi64_mask(d[1], t)) << 8);
}

inline void Store16(const uint64_t* soa, int64_t stride, int64_t w64, const uint64_t* q,
                    int64_t i, uint16_t* out) {
  __m512i d[2];
  Dist16Vec(soa, stride, w64, q, i, d);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi64_epi16(d[0]));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8), _mm512_cvtepi64_epi16(d[1]));
}
#elif defined(__AVX2__)
inline __m256i PopBytes(__m256i x) {
  const __m256i table = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,
                                         0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i high = _mm256_and_si256(_mm256_srli_epi16(x, 4), low);
  return _mm256_add_epi8(_mm256_shuffle_epi8(table, _mm256_and_si256(x, low)),
                         _mm256_shuffle_epi8(table, high));
}

inline void Dist16Vec(const uint64_t* soa, int64_t stride, int64_t w64, const uint64_t* q,
                      int64_t i, __m256i out[4]) {
  const __m256i zero = _mm256_setzero_si256();
  for (int u = 0; u < 4; ++u) out[u] = zero;
  for (int64_t j0 = 0; j0 < w64; j0 += 31) {
    const int64_t j1 = std::min(w64, j0 + 31);
    __m256i b[4] = {zero, zero, zero, zero};
    for (int64_t j = j0; j < j1; ++j) {
      const __m256i qj = _mm256_set1_epi64x(static_cast<long long>(q[j]));
      const uint64_t* row = soa + j * stride + i;
      for (int u = 0; u < 4; ++u) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 4 * u));
        b[u] = _mm256_add_epi8(b[u], PopBytes(_mm256_xor_si256(x, qj)));
      }
    }
    for (int u = 0; u < 4; ++u) out[u] = _mm256_add_epi64(out[u], _mm256_sad_epu8(b[u], zero));
  }
}

inline uint32_t Below16(const uint64_t* soa, int64_t stride, int64_t w64, const uint64_t* q,
                        int64_t i, int thr) {
  __m256i d[4];
  Dist16Vec(soa, stride, w64, q, i, d);
  const __m256i t = _mm256_set1_epi64x(thr);
  __m256i below[4];
  for (int u = 0; u < 4; ++u) below[u] = _mm256_cmpgt_epi64(t, d[u]);
  const __m256i any = _mm256_or_si256(_mm256_or_si256(below[0], below[1]),
                                      _mm256_or_si256(below[2], below[3]));
  if (_mm256_testz_si256(any, any)) return 0;  // the common case: nothing below
  uint32_t mask = 0;
  for (int u = 0; u < 4; ++u) {
    mask |= static_cast<uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(below[u]))) << (4 * u);
  }
  return mask;
}

inline void Store16(const uint64_t* soa, int64_t stride, int64_t w64, const uint64_t* q,
                    int64_t i, uint16_t* out) {
  __m256i d[4];
  Dist16Vec(soa, stride, w64, q, i, d);
  alignas(32) uint64_t tmp[16];
  for (int u = 0; u < 4; ++u) _mm256_store_si256(reinterpret_cast<__m256i*>(tmp + 4 * u), d[u]);
  for (int u = 0; u < 16; ++u) out[u] = static_cast<uint16_t>(tmp[u]);
}
#else
inline uint32_t Below16(const uint64_t* soa, int64_t stride, int64_t w64, const uint64_t* q,
                        int64_t i, int thr) {
  uint32_t mask = 0;
  for (int u = 0; u < 16; ++u) {
    mask |= static_cast<uint32_t>(DistSoa(soa, stride, w64, q, i + u) < thr) << u;
  }
  return mask;
}

inline void Store16(const uint64_t* soa, int64_t stride, int64_t w64, const uint64_t* q,
                    int64_t i, uint16_t* out) {
  for (int u = 0; u < 16; ++u) {
    out[u] = static_cast<uint16_t>(DistSoa(soa, stride, w64, q, i + u));
  }
}
#endif

// Items t0..t1-1 of packed uint32 codes [n, w] into the transposed layout with
// `stride` items per word row (zero past t1 and past the code's last word). Item i's
// code starts at db + i * item_words (item_words = m * w picks one code slot of
// [n, m, W] codes, with db pointing at that slot of item 0).
void Transpose(const uint32_t* db, int64_t w, int64_t t0, int64_t t1, int64_t stride,
               uint64_t* soa, int64_t item_words = 0) {
  const int64_t w64 = (w + 1) / 2;
  const int64_t count = t1 - t0;
  const int64_t step = item_words > 0 ? item_words : w;
  for (int64_t j = 0; j < w64; ++j) {
    uint64_t* row = soa + j * stride;
    const bool pair = 2 * j + 1 < w;
    const uint32_t* x = db + t0 * step + 2 * j;
    for (int64_t i = 0; i < count; ++i, x += step) {
      row[i] = pair ? (static_cast<uint64_t>(x[1]) << 32 | x[0]) : x[0];
    }
    std::fill(row + count, row + stride, uint64_t{0});
  }
}

void QueryWords(const uint32_t* qv, int64_t w, uint64_t* q64) {
  for (int64_t j = 0; 2 * j < w; ++j) {
    q64[j] = 2 * j + 1 < w ? (static_cast<uint64_t>(qv[2 * j + 1]) << 32 | qv[2 * j]) : qv[2 * j];
  }
}

// Calls f.template operator()<N>() with N = words if 1..4, else <0> (a loop over any
// count): the code's 64-bit words for the Hamming kernels, its 32-bit words for the
// weighted ones.
template <typename F>
void WordsDispatch(int64_t words, F&& f) {
  switch (words) {
    case 1: f.template operator()<1>(); break;
    case 2: f.template operator()<2>(); break;
    case 3: f.template operator()<3>(); break;
    case 4: f.template operator()<4>(); break;
    default: f.template operator()<0>(); break;
  }
}

// ---------------------------------------------------------------------------------------------
// Top-k. Per query a buffer of keys (distance << 32 | index) is filled with every
// item whose distance is below the current threshold; when it is full, the k
// smallest keys are kept (nth_element) and the threshold becomes the distance of
// the k-th. The keys order items by (distance, index), so the k smallest keys
// are the exact answer, ties to the smaller index. Items come in index order, so
// one at exactly the threshold distance has a larger index than every kept key
// and could never be chosen: the strict test keeps it out of the buffer.

constexpr int64_t kQueryBlock = 64;   // most queries per task (they share each database tile)

struct Selection {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> q64;
  int64_t count = 0;
  int threshold;
};

inline int Shrink(Selection& s, int64_t k) {
  std::nth_element(s.keys.begin(), s.keys.begin() + (k - 1), s.keys.begin() + s.count);
  s.count = k;
  return static_cast<int>(s.keys[k - 1] >> 32);
}

// The database of a top-k call: codes [n, W], or [n, m, W] with held [n, m] (an
// item's distance is the least over the codes it holds; one holding none has the
// distance num_bits + 1, as in the array code).
struct TopkDb {
  const uint32_t* codes;
  const bool* held;  // null for one code per item
  int64_t m;
};

// The least distance over the codes item i (of the tile) holds; held_bits[j] has bit
// u set when item (group start + u) holds code j.
inline int MultiDist(const uint64_t* soa, int64_t tile, int64_t w64, int64_t m,
                     const uint16_t* held_bits, const uint64_t* q, int64_t i, int u,
                     int none) {
  int d = none;
  for (int64_t j = 0; j < m; ++j) {
    if (held_bits[j] >> u & 1) d = std::min(d, DistSoa(soa + j * w64 * tile, tile, w64, q, i + u));
  }
  return d;
}

// W64: 64-bit words per code when 1..4 (the loops unroll), 0 for any other length.
// cap: keys a query's buffer holds before it shrinks to k.
template <int W64>
void TopkBlock(const uint32_t* query, const TopkDb& db, int64_t w, int64_t q0, int64_t q1,
               int64_t num_valid, int64_t k, int64_t cap, int64_t num_bits, int32_t* out_d,
               int32_t* out_i) {
  const int64_t nq = q1 - q0;
  const int64_t w64 = W64 > 0 ? W64 : (w + 1) / 2;
  const int64_t m = db.m;
  const bool multi = db.held != nullptr;
  const int none = static_cast<int>(num_bits + 1);
  std::vector<Selection> sel(nq);
  for (int64_t a = 0; a < nq; ++a) {
    sel[a].keys.resize(cap);
    sel[a].q64.resize(w64);
    QueryWords(query + (q0 + a) * w, w, sel[a].q64.data());
    // Above every distance, even with stray bits past num_bits, and above num_bits + 1
    // (an item holding no code): admit all at first.
    sel[a].threshold = static_cast<int>(32 * w) + 2;
  }
  // A tile of about 32 KB per code slot in the transposed layout, a whole number of
  // 16-item groups.
  const int64_t tile = std::clamp<int64_t>(4096 / w64, 64, 4096) / kLanes * kLanes;
  std::vector<uint64_t> soa(m * tile * w64);
  // Multi-code: per 16-item group, bits of the items holding each code, and of those
  // holding none.
  const int64_t groups = tile / kLanes;
  std::vector<uint16_t> held_bits(multi ? groups * m : 0), none_bits(multi ? groups : 0);
  for (int64_t t0 = 0; t0 < num_valid; t0 += tile) {
    const int64_t t1 = std::min(num_valid, t0 + tile);
    const int64_t count = t1 - t0;
    for (int64_t j = 0; j < m; ++j) {
      Transpose(db.codes + j * w, w, t0, t1, tile, soa.data() + j * w64 * tile, m * w);
    }
    if (multi) {
      std::fill(held_bits.begin(), held_bits.end(), uint16_t{0});
      std::fill(none_bits.begin(), none_bits.end(), uint16_t{0});
      for (int64_t i = 0; i < count; ++i) {
        bool any = false;
        for (int64_t j = 0; j < m; ++j) {
          const bool h = db.held[(t0 + i) * m + j];
          held_bits[(i / kLanes) * m + j] |= static_cast<uint16_t>(h) << (i % kLanes);
          any = any || h;
        }
        none_bits[i / kLanes] |= static_cast<uint16_t>(!any) << (i % kLanes);
      }
    }
    for (int64_t a = 0; a < nq; ++a) {
      Selection& s = sel[a];
      const uint64_t* q = s.q64.data();
      int thr = s.threshold;
      for (int64_t i = 0; i < count; i += kLanes) {
        uint32_t mask;
        const uint16_t* hb = multi ? held_bits.data() + (i / kLanes) * m : nullptr;
        if (!multi) {
          mask = Below16(soa.data(), tile, w64, q, i, thr);
        } else {
          mask = none < thr ? none_bits[i / kLanes] : 0;
          for (int64_t j = 0; j < m; ++j) {
            // Only held codes admit an item (a filter: MultiDist re-checks).
            mask |= Below16(soa.data() + j * w64 * tile, tile, w64, q, i, thr) & hb[j];
          }
        }
        if (i + kLanes > count) mask &= (uint32_t{1} << (count - i)) - 1;  // past the tile's end
        while (mask) {
          const int u = __builtin_ctz(mask);
          mask &= mask - 1;
          const int d = multi ? MultiDist(soa.data(), tile, w64, m, hb, q, i, u, none)
                              : DistSoa(soa.data(), tile, w64, q, i + u);
          if (d >= thr) continue;  // the threshold fell inside this group
          s.keys[s.count++] = (static_cast<uint64_t>(d) << 32) | static_cast<uint64_t>(t0 + i + u);
          if (s.count == cap) thr = Shrink(s, k);
        }
      }
      s.threshold = thr;
    }
  }
  for (int64_t a = 0; a < nq; ++a) {
    Selection& s = sel[a];
    if (s.count > k) Shrink(s, k);
    std::sort(s.keys.begin(), s.keys.begin() + s.count);
    int32_t* od = out_d + (q0 + a) * k;
    int32_t* oi = out_i + (q0 + a) * k;
    for (int64_t j = 0; j < k; ++j) {
      if (j < s.count) {
        od[j] = static_cast<int32_t>(s.keys[j] >> 32);
        oi[j] = static_cast<int32_t>(s.keys[j] & 0xffffffffu);
      } else {  // fewer valid rows than k: padding rows at the sentinel distance
        od[j] = static_cast<int32_t>(num_bits + 1);
        oi[j] = static_cast<int32_t>(num_valid + (j - s.count));
      }
    }
  }
}

// db is [n, W] (one code per item; `mask` is then ignored) or [n, m, W] with mask [n, m].
ffi::Error HammingTopkImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> query,
                           ffi::Buffer<ffi::U32> db, ffi::Buffer<ffi::PRED> mask,
                           ffi::Buffer<ffi::S32> valid, int64_t k, int64_t num_bits,
                           ffi::ResultBuffer<ffi::S32> out_d, ffi::ResultBuffer<ffi::S32> out_i) {
  const auto qdims = query.dimensions();
  const auto ddims = db.dimensions();
  const auto mdims = mask.dimensions();
  const bool multi = ddims.size() == 3;
  if (qdims.size() != 2 || (ddims.size() != 2 && !multi) || qdims[1] != ddims[ddims.size() - 1] ||
      (multi && (mdims.size() != 2 || mdims[0] != ddims[0] || mdims[1] != ddims[1]))) {
    return ffi::Error::InvalidArgument(
        "jhash_hamming_topk: query [q, W] and db [n, W], or db [n, m, W] with mask [n, m], "
        "expected");
  }
  const int64_t q = qdims[0], w = qdims[1], n = ddims[0];
  const int64_t num_valid = std::clamp<int64_t>(valid.typed_data()[0], 0, n);
  if (k < 1 || k > n || n >= (int64_t{1} << 31) || num_bits < 0 || num_bits > 32 * w) {
    return ffi::Error::InvalidArgument("jhash_hamming_topk: need 1 <= k <= n < 2^31");
  }
  const TopkDb tdb{db.typed_data(), multi ? mask.typed_data() : nullptr,
                   multi ? ddims[1] : int64_t{1}};
  const uint32_t* qp = query.typed_data();
  int32_t* od = out_d->typed_data();
  int32_t* oi = out_i->typed_data();
  // Fewer queries per task when k is large: a task's buffers stay under about 16 MB.
  const int64_t cap = std::max<int64_t>(2 * k, k + 256);
  const int64_t block = std::clamp<int64_t>((int64_t{1} << 21) / cap, 1, kQueryBlock);
  const int64_t tasks = (q + block - 1) / block;
  WordsDispatch((w + 1) / 2, [&]<int W64>() {
    ParallelFor(pool, tasks, [&](int64_t t) {
      const int64_t q0 = t * block, q1 = std::min(q, q0 + block);
      TopkBlock<W64>(qp, tdb, w, q0, q1, num_valid, k, cap, num_bits, od, oi);
    });
  });
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------------------------
// Ranking metrics. The database is transposed once per call; per query, one pass
// computes every distance and each item's relevance from the labels, then a
// histogram of (distance, relevant) is counted with four histograms side by side
// (they break the chain of increments to one counter when neighbouring items share
// a distance). Labels are words per item: a relevant item has all words equal to the
// query's (class ids, or identical label sets) or, with `overlap`, shares a set bit
// with them (multi-hot label sets packed 32 to a word). An item may hold several
// codes (db [n, m, W] with a mask [n, m]): its distance is the least over its codes.

struct RankInputs {
  const uint32_t* query;
  const uint32_t* query_labels;  // [q, L]
  const uint32_t* db_labels;     // [n, L]
  int64_t q, n, w, w64, stride, bins, label_words, codes_per_item;
  bool overlap;
  std::vector<uint64_t> soa;   // the database, transposed: [codes_per_item, w64, stride]
  std::vector<uint8_t> held;   // [codes_per_item, n]: 1 where the item holds that code
};

// db is [n, W] (one code per item; `mask` is then ignored) or [n, m, W] with mask [n, m].
ffi::Error PrepareRank(const char* name, ffi::Buffer<ffi::U32>& query, ffi::Buffer<ffi::U32>& db,
                       ffi::Buffer<ffi::PRED>& mask, ffi::Buffer<ffi::U32>& query_labels,
                       ffi::Buffer<ffi::U32>& db_labels, int64_t num_bits, int64_t overlap,
                       RankInputs* in) {
  const auto qd = query.dimensions();
  const auto dd = db.dimensions();
  const auto md = mask.dimensions();
  const auto ql = query_labels.dimensions();
  const auto dl = db_labels.dimensions();
  const bool multi = dd.size() == 3;
  const int64_t m = multi ? dd[1] : 1;
  if (qd.size() != 2 || (dd.size() != 2 && !multi) || ql.size() != 2 || dl.size() != 2 ||
      qd[1] != dd[dd.size() - 1] || ql[0] != qd[0] || dl[0] != dd[0] || ql[1] != dl[1] ||
      (multi && (md.size() != 2 || md[0] != dd[0] || md[1] != m)) || num_bits < 0 ||
      num_bits > 32 * qd[1] || num_bits > 65534) {
    return ffi::Error::InvalidArgument(
        std::string(name) + ": query [q, W], db [n, W] or [n, m, W] with mask [n, m], labels "
        "[q, L] and [n, L] expected");
  }
  in->query = query.typed_data();
  in->query_labels = query_labels.typed_data();
  in->db_labels = db_labels.typed_data();
  in->q = qd[0];
  in->n = dd[0];
  in->w = qd[1];
  in->w64 = (in->w + 1) / 2;
  in->stride = (in->n + kLanes - 1) / kLanes * kLanes;
  in->bins = num_bits + 1;
  in->label_words = ql[1];
  in->overlap = overlap != 0;
  in->codes_per_item = m;
  in->soa.resize(m * in->w64 * in->stride);
  if (!multi) {
    Transpose(db.typed_data(), in->w, 0, in->n, in->stride, in->soa.data());
    return ffi::Error::Success();
  }
  // Code slot j of every item, as its own [n, W] array, then transposed.
  std::vector<uint32_t> slot(in->n * in->w);
  in->held.resize(m * in->n);
  for (int64_t j = 0; j < m; ++j) {
    for (int64_t i = 0; i < in->n; ++i) {
      std::memcpy(slot.data() + i * in->w, db.typed_data() + (i * m + j) * in->w, 4 * in->w);
      in->held[j * in->n + i] = mask.typed_data()[i * m + j];
    }
    Transpose(slot.data(), in->w, 0, in->n, in->stride,
              in->soa.data() + j * in->w64 * in->stride);
  }
  return ffi::Error::Success();
}

// rel[i] = 1 where item i is relevant to query a.
// An item's grade for a query: with `overlap`, the labels they share (set bits in
// common); else 1 when every label word is equal (the same class id or label set).
inline int Grade(const uint32_t* ql, const uint32_t* dl, int64_t lw, bool overlap) {
  int g = overlap ? 0 : 1;
  for (int64_t j = 0; j < lw; ++j) {
    if (overlap) {
      g += __builtin_popcount(dl[j] & ql[j]);
    } else {
      g &= dl[j] == ql[j];
    }
  }
  return g;
}

void Relevance(const RankInputs& in, int64_t a, uint8_t* rel) {
  const int64_t lw = in.label_words;
  const uint32_t* ql = in.query_labels + a * lw;
  const uint32_t* dl = in.db_labels;
  if (lw == 1 && !in.overlap) {  // class ids
    const uint32_t c = ql[0];
    for (int64_t i = 0; i < in.n; ++i) rel[i] = dl[i] == c;
    return;
  }
  for (int64_t i = 0; i < in.n; ++i) rel[i] = Grade(ql, dl + i * lw, lw, in.overlap) > 0;
}

// Distances of query a to every item (dist has in.stride entries), each item's
// relevance (rel, n entries), and the counts of items and of relevant items at each
// distance 0..num_bits + 1 (all and relevant have in.bins + 1 entries; the last is for
// items that hold no code).
template <int W64>
void QueryDistances(const RankInputs& in, int64_t a, uint16_t* dist) {
  const int64_t w64 = W64 > 0 ? W64 : in.w64;
  std::vector<uint64_t> q64(w64);
  QueryWords(in.query + a * in.w, in.w, q64.data());
  for (int64_t i = 0; i < in.stride; i += kLanes) {
    Store16(in.soa.data(), in.stride, w64, q64.data(), i, dist + i);
  }
  if (!in.held.empty()) {  // the least distance over the codes each item holds (a mask given:
                           // one code an item too, which may hold none)
    const uint8_t* held = in.held.data();
    // An item holding no code (only possible where the mask was not checked) gets the
    // distance num_bits + 1: counted apart, ranked last.
    const uint16_t none = static_cast<uint16_t>(in.bins);
    for (int64_t i = 0; i < in.n; ++i) dist[i] = held[i] ? dist[i] : none;
    uint16_t more[kLanes];
    for (int64_t j = 1; j < in.codes_per_item; ++j) {
      const uint64_t* soa = in.soa.data() + j * w64 * in.stride;
      const uint8_t* h = held + j * in.n;
      for (int64_t i = 0; i < in.stride; i += kLanes) {
        Store16(soa, in.stride, w64, q64.data(), i, more);
        const int64_t count = std::min<int64_t>(kLanes, in.n - i);
        for (int64_t u = 0; u < count; ++u) {  // branch-free: the mask is unpredictable
          const uint16_t d = h[i + u] ? more[u] : uint16_t{0xFFFF};
          dist[i + u] = std::min(dist[i + u], d);
        }
      }
    }
  }
}

template <int W64>
void CountQuery(const RankInputs& in, int64_t a, uint16_t* dist, uint8_t* rel, int64_t* all,
                int64_t* relevant) {
  QueryDistances<W64>(in, a, dist);
  Relevance(in, a, rel);
  const int64_t bins = in.bins + 1;
  std::vector<int32_t> hist4(4 * 2 * bins, 0);
  int64_t i = 0;
  for (; i + 4 <= in.n; i += 4) {
    for (int u = 0; u < 4; ++u) hist4[u * 2 * bins + 2 * dist[i + u] + rel[i + u]] += 1;
  }
  for (; i < in.n; ++i) hist4[2 * dist[i] + rel[i]] += 1;
  for (int64_t d = 0; d < bins; ++d) {
    int64_t total = 0, hits = 0;
    for (int u = 0; u < 4; ++u) {
      const int32_t* h = hist4.data() + u * 2 * bins + 2 * d;
      total += h[0] + h[1];
      hits += h[1];
    }
    all[d] = total;
    relevant[d] = hits;
  }
}

ffi::Error TieGroupsImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> query,
                         ffi::Buffer<ffi::U32> db, ffi::Buffer<ffi::PRED> mask,
                         ffi::Buffer<ffi::U32> query_labels, ffi::Buffer<ffi::U32> db_labels,
                         int64_t num_bits, int64_t overlap, ffi::ResultBuffer<ffi::S32> size,
                         ffi::ResultBuffer<ffi::S32> hits) {
  RankInputs in;
  if (auto err = PrepareRank("jhash_tie_groups", query, db, mask, query_labels, db_labels,
                             num_bits, overlap, &in);
      !err.success()) {
    return err;
  }
  int32_t* size_out = size->typed_data();
  int32_t* hits_out = hits->typed_data();
  WordsDispatch(in.w64, [&]<int W64>() {
    ParallelFor(pool, in.q, [&](int64_t a) {
      std::vector<uint16_t> dist(in.stride);
      std::vector<uint8_t> rel(in.n);
      std::vector<int64_t> all(in.bins + 1), relevant(in.bins + 1);
      CountQuery<W64>(in, a, dist.data(), rel.data(), all.data(), relevant.data());
      // Distances 0..num_bits, then the items holding no code.
      for (int64_t d = 0; d <= in.bins; ++d) {
        size_out[a * (in.bins + 1) + d] = static_cast<int32_t>(all[d]);
        hits_out[a * (in.bins + 1) + d] = static_cast<int32_t>(relevant[d]);
      }
    });
  });
  return ffi::Error::Success();
}

// NDCG's groups: per query, the items at each (distance, grade), distances 0..num_bits
// and num_bits + 1 for items holding no code; the grade is the number of labels shared
// with the query (overlap: multi-hot words), or 1 for the same class id and 0 otherwise.
ffi::Error GradeGroupsImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> query,
                           ffi::Buffer<ffi::U32> db, ffi::Buffer<ffi::PRED> mask,
                           ffi::Buffer<ffi::U32> query_labels, ffi::Buffer<ffi::U32> db_labels,
                           int64_t num_bits, int64_t overlap, ffi::ResultBuffer<ffi::S32> counts) {
  RankInputs in;
  if (auto err = PrepareRank("jhash_grade_groups", query, db, mask, query_labels, db_labels,
                             num_bits, overlap, &in);
      !err.success()) {
    return err;
  }
  const auto cd = counts->dimensions();
  const int64_t grades = in.overlap ? 32 * in.label_words + 1 : 2;
  if (cd.size() != 3 || cd[0] != in.q || cd[1] != in.bins + 1 || cd[2] < grades) {
    return ffi::Error::InvalidArgument("jhash_grade_groups: counts [q, K + 2, grades] expected");
  }
  const int64_t width = cd[2];
  int32_t* out = counts->typed_data();
  WordsDispatch(in.w64, [&]<int W64>() {
    ParallelFor(pool, in.q, [&](int64_t a) {
      std::vector<uint16_t> dist(in.stride);
      QueryDistances<W64>(in, a, dist.data());
      int32_t* c = out + a * (in.bins + 1) * width;
      std::fill(c, c + (in.bins + 1) * width, 0);
      const int64_t lw = in.label_words;
      const uint32_t* ql = in.query_labels + a * lw;
      for (int64_t i = 0; i < in.n; ++i) {
        c[dist[i] * width + Grade(ql, in.db_labels + i * lw, lw, in.overlap)] += 1;
      }
    });
  });
  return ffi::Error::Success();
}

// AP with ties ordered by database index, over the first top_k positions: an
// item at distance d and index i has rank N_d + (items at d before i), with N_d
// the items at smaller distances; a relevant one adds (relevant items ranked
// before it + 1) / (rank + 1). Two passes over the query's distances, no sort. Items
// holding no code are ranked last and never retrieved (they count only in the total).
ffi::Error IndexApImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> query, ffi::Buffer<ffi::U32> db,
                       ffi::Buffer<ffi::PRED> mask, ffi::Buffer<ffi::U32> query_labels,
                       ffi::Buffer<ffi::U32> db_labels, int64_t num_bits, int64_t overlap,
                       int64_t top_k, ffi::ResultBuffer<ffi::F32> numer,
                       ffi::ResultBuffer<ffi::F32> retrieved, ffi::ResultBuffer<ffi::F32> total) {
  RankInputs in;
  if (auto err = PrepareRank("jhash_index_ap", query, db, mask, query_labels, db_labels,
                             num_bits, overlap, &in);
      !err.success()) {
    return err;
  }
  float* numer_out = numer->typed_data();
  float* retrieved_out = retrieved->typed_data();
  float* total_out = total->typed_data();
  WordsDispatch(in.w64, [&]<int W64>() {
    ParallelFor(pool, in.q, [&](int64_t a) {
      std::vector<uint16_t> dist(in.stride);
      std::vector<uint8_t> rel(in.n);
      std::vector<int64_t> before(in.bins + 1), rel_before(in.bins + 1);
      CountQuery<W64>(in, a, dist.data(), rel.data(), before.data(), rel_before.data());
      // Counts per distance -> items (relevant items) ranked before each distance.
      int64_t all = 0, hits = 0;
      for (int64_t d = 0; d <= in.bins; ++d) {
        const int64_t c = before[d], h = rel_before[d];
        before[d] = all;
        rel_before[d] = hits;
        all += c;
        hits += h;
      }
      double sum = 0.0;
      int64_t found = 0;
      for (int64_t i = 0; i < in.n; ++i) {
        const int d = dist[i];
        const int64_t rank = before[d]++;
        if (rel[i] && d < in.bins) {  // an item holding no code (d = bins) is never retrieved
          const int64_t hit = rel_before[d]++;
          if (rank < top_k) {
            sum += static_cast<double>(hit + 1) / static_cast<double>(rank + 1);
            ++found;
          }
        }
      }
      numer_out[a] = static_cast<float>(sum);
      retrieved_out[a] = static_cast<float>(found);
      total_out[a] = static_cast<float>(hits);
    });
  });
  return ffi::Error::Success();
}

// DCG@k of the ranking ordered by (distance, index), as JhashIndexAp ranks items (no
// sort: an item's rank is the items at smaller distances plus those before it at its
// own), with gains[grade] for each item's grade (Grade) and the discount 1 / log2(rank
// + 2); and the items of each grade in all (NDCG's ideal ranking). Items holding no code
// are never retrieved but have a grade.
ffi::Error IndexDcgImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> query,
                        ffi::Buffer<ffi::U32> db, ffi::Buffer<ffi::PRED> mask,
                        ffi::Buffer<ffi::U32> query_labels, ffi::Buffer<ffi::U32> db_labels,
                        ffi::Buffer<ffi::F32> gains, int64_t num_bits, int64_t overlap, int64_t k,
                        ffi::ResultBuffer<ffi::F32> dcg, ffi::ResultBuffer<ffi::S32> per_grade) {
  RankInputs in;
  if (auto err = PrepareRank("jhash_index_dcg", query, db, mask, query_labels, db_labels,
                             num_bits, overlap, &in);
      !err.success()) {
    return err;
  }
  const int64_t grades = in.overlap ? 32 * in.label_words + 1 : 2;
  if (gains.dimensions().size() != 1 || gains.dimensions()[0] != grades || k < 1 || k > in.n) {
    return ffi::Error::InvalidArgument("jhash_index_dcg: gains [grades] and 1 <= k <= n expected");
  }
  std::vector<double> discount(k);
  for (int64_t r = 0; r < k; ++r) discount[r] = 1.0 / std::log2(static_cast<double>(r + 2));
  const float* gain = gains.typed_data();
  float* dcg_out = dcg->typed_data();
  int32_t* grade_out = per_grade->typed_data();
  WordsDispatch(in.w64, [&]<int W64>() {
    ParallelFor(pool, in.q, [&](int64_t a) {
      std::vector<uint16_t> dist(in.stride);
      QueryDistances<W64>(in, a, dist.data());
      const int64_t lw = in.label_words;
      const uint32_t* ql = in.query_labels + a * lw;
      const bool class_ids = lw == 1 && !in.overlap;
      auto grade_of = [&](int64_t i) {
        return class_ids ? static_cast<int>(in.db_labels[i] == ql[0])
                         : Grade(ql, in.db_labels + i * lw, lw, in.overlap);
      };
      // Items per distance and per grade, four histograms side by side (as in CountQuery).
      const int64_t bins = in.bins + 1;
      std::vector<int32_t> by_dist(4 * bins, 0), by_grade(4 * grades, 0);
      for (int64_t i = 0; i < in.n; ++i) {
        const int64_t u = i & 3;
        ++by_dist[u * bins + dist[i]];
        ++by_grade[u * grades + grade_of(i)];
      }
      int32_t* hist = grade_out + a * grades;
      for (int64_t g = 0; g < grades; ++g) {
        hist[g] = by_grade[g] + by_grade[grades + g] + by_grade[2 * grades + g] +
                  by_grade[3 * grades + g];
      }
      // Items ranked before each distance, and the distance of rank k - 1 (past it, no
      // item is within the top k).
      std::vector<int64_t> before(bins);
      int64_t all = 0, last = bins - 1;
      for (int64_t d = 0; d < bins; ++d) {
        before[d] = all;
        all += by_dist[d] + by_dist[bins + d] + by_dist[2 * bins + d] + by_dist[3 * bins + d];
        if (all >= k && last == bins - 1) last = d;
      }
      double sum = 0.0;
      for (int64_t i = 0; i < in.n; ++i) {
        const int d = dist[i];
        if (d > last) continue;
        const int64_t rank = before[d]++;
        if (rank < k && d < in.bins) sum += gain[grade_of(i)] * discount[rank];  // bins: no code
      }
      dcg_out[a] = static_cast<float>(sum);
    });
  });
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------------------------
// Weighted Hamming distance sum_k w_k [q_k != b_k] (HBMP's ranking), with the weights
// given as integers (jhash.search's weight units: each real weight rounded to a multiple
// of a power of two, so every sum is exact and ties are exact). Per query, a table per
// byte of the code holds the summed weight of every pattern of its 8 bits; an item's
// distance is the sum of one table entry per byte of query XOR item (bit j of the code
// is bit j % 8 of byte j / 8 of the little-endian words).

struct WeightTables {
  int64_t bytes;             // 4 W
  std::vector<int32_t> sum;  // [bytes, 256]
  int64_t lowest = 0;        // the least possible distance: the sum of the negative weights

  WeightTables(const int32_t* weights, int64_t num_bits, int64_t w)
      : bytes(4 * w), sum(bytes * 256, 0) {
    for (int64_t p = 0; p < bytes; ++p) {
      int32_t* t = sum.data() + p * 256;
      for (int x = 1; x < 256; ++x) {
        const int64_t bit = 8 * p + __builtin_ctz(x);
        t[x] = t[x & (x - 1)] + (bit < num_bits ? weights[bit] : 0);
      }
    }
    for (int64_t b = 0; b < num_bits; ++b) lowest += std::min(weights[b], 0);
  }
};

// The database of a weighted kernel, transposed once per call: word j of items
// i..i+7 side by side (soa[j * stride + i], zero past n), read eight items at a time.
// (AVX2 gathers from the byte tables measured slower than scalar loads on an AMD
// EPYC: 3.4 against 2.7 ns per query-item pair at 64 bits.)
struct WeightedDb {
  int64_t n, w, stride;
  std::vector<uint32_t> soa;

  WeightedDb(const uint32_t* db, int64_t n, int64_t w)
      : n(n), w(w), stride((n + 7) / 8 * 8), soa(w * stride, 0) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < w; ++j) soa[j * stride + i] = db[i * w + j];
    }
  }
};

// d[u] = the weighted distance of query qv [W] to item i + u (u < 8) plus `base` (W
// words: a template argument for 1..4, else 0 and `w` words).
template <int W>
inline void WeightedDistance8(const int32_t* s, const WeightedDb& db, const uint32_t* qv,
                              int64_t i, int32_t base, uint32_t* d) {
  const int64_t words = W > 0 ? W : db.w;
  const uint32_t* x = db.soa.data() + i;
  for (int u = 0; u < 8; ++u) {
    int32_t sum = base;
    for (int64_t j = 0; j < words; ++j) {
      const uint32_t v = qv[j] ^ x[j * db.stride + u];
      const int32_t* r = s + 4 * j * 256;
      sum += r[v & 255] + r[256 + (v >> 8 & 255)] + r[512 + (v >> 16 & 255)] + r[768 + (v >> 24)];
    }
    d[u] = static_cast<uint32_t>(sum);
  }
}

// dist[i] = the weighted distance of query qv [W] to item i, minus `lowest` (so >= 0);
// dist has db.stride entries.
void WeightedDistances(const WeightTables& t, const WeightedDb& db, const uint32_t* qv,
                       uint32_t* dist) {
  const int32_t base = static_cast<int32_t>(-t.lowest);
  WordsDispatch(db.w, [&]<int W>() {
    for (int64_t i = 0; i < db.n; i += 8) {
      WeightedDistance8<W>(t.sum.data(), db, qv, i, base, dist + i);
    }
  });
}

// Sorts keys[0..n) ascending by their low `bits` bits (the rest must be 0): least
// significant digit first, 11 bits a pass, a pass skipped when every key shares its digit.
void RadixSort(uint64_t* keys, uint64_t* tmp, int64_t n, int bits) {
  constexpr int kDigit = 11;
  if (n < 2) return;
  std::vector<int64_t> count(1 << kDigit);
  for (int shift = 0; shift < bits; shift += kDigit) {
    std::fill(count.begin(), count.end(), 0);
    const uint64_t mask = (uint64_t{1} << kDigit) - 1;
    for (int64_t i = 0; i < n; ++i) ++count[keys[i] >> shift & mask];
    if (count[keys[0] >> shift & mask] == n) continue;
    int64_t at = 0;
    for (auto& c : count) {
      const int64_t here = c;
      c = at;
      at += here;
    }
    for (int64_t i = 0; i < n; ++i) tmp[count[keys[i] >> shift & mask]++] = keys[i];
    std::copy(tmp, tmp + n, keys);
  }
}

inline int BitWidth(uint64_t x) { return x == 0 ? 0 : 64 - __builtin_clzll(x); }

// Checks of a weighted kernel's query [q, W], db [n, W] and weights [K].
ffi::Error CheckWeighted(const char* name, ffi::Buffer<ffi::U32>& query, ffi::Buffer<ffi::U32>& db,
                         ffi::Buffer<ffi::S32>& weights) {
  const auto qd = query.dimensions();
  const auto dd = db.dimensions();
  const auto wd = weights.dimensions();
  if (qd.size() != 2 || dd.size() != 2 || wd.size() != 1 || qd[1] != dd[1] ||
      wd[0] > 32 * qd[1] || dd[0] >= (int64_t{1} << 31)) {
    return ffi::Error::InvalidArgument(std::string(name) +
                                       ": query [q, W], db [n, W], weights [K <= 32 W] expected");
  }
  int64_t span = 0;
  for (int64_t b = 0; b < wd[0]; ++b) {
    span += std::abs(static_cast<int64_t>(weights.typed_data()[b]));
  }
  if (span >= (int64_t{1} << 30)) {
    return ffi::Error::InvalidArgument(std::string(name) + ": the weights' magnitudes must sum "
                                       "below 2^30");
  }
  return ffi::Error::Success();
}

// Exact k nearest by (weighted distance, index), as in JhashHammingTopk: a buffer of keys
// (distance - lowest) << 32 | index below a running threshold, cut to the k smallest
// (nth_element) when full. Distances are returned in weight units.
ffi::Error WeightedTopkImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> query,
                            ffi::Buffer<ffi::U32> db, ffi::Buffer<ffi::S32> weights, int64_t k,
                            ffi::ResultBuffer<ffi::S32> out_d, ffi::ResultBuffer<ffi::S32> out_i) {
  if (auto err = CheckWeighted("jhash_weighted_topk", query, db, weights); !err.success()) {
    return err;
  }
  const int64_t q = query.dimensions()[0], w = query.dimensions()[1], n = db.dimensions()[0];
  if (k < 1 || k > n) return ffi::Error::InvalidArgument("jhash_weighted_topk: need 1 <= k <= n");
  const WeightTables tables(weights.typed_data(), weights.dimensions()[0], w);
  const int64_t cap = std::max<int64_t>(2 * k, k + 256);
  int32_t* od = out_d->typed_data();
  int32_t* oi = out_i->typed_data();
  const int32_t base = static_cast<int32_t>(-tables.lowest);
  const WeightedDb wdb(db.typed_data(), n, w);
  WordsDispatch(w, [&]<int W>() {
    ParallelFor(pool, q, [&](int64_t a) {
      const uint32_t* qv = query.typed_data() + a * w;
      std::vector<uint64_t> keys(cap);
      int64_t count = 0;
      uint64_t threshold = UINT64_MAX;  // admit keys below it: (distance, index) order
      alignas(32) uint32_t d[8];
      for (int64_t i0 = 0; i0 < n; i0 += 8) {
        WeightedDistance8<W>(tables.sum.data(), wdb, qv, i0, base, d);
        uint32_t least = d[0];
        for (int u = 1; u < 8; ++u) least = std::min(least, d[u]);
        if (least > threshold >> 32) continue;  // every key of the eight is above the k-th
        const int64_t count8 = std::min<int64_t>(8, n - i0);
        for (int64_t u = 0; u < count8; ++u) {
          const uint64_t key = static_cast<uint64_t>(d[u]) << 32 | static_cast<uint64_t>(i0 + u);
          if (key >= threshold) continue;
          keys[count++] = key;
          if (count == cap) {
            std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.begin() + count);
            count = k;
            threshold = keys[k - 1];
          }
        }
      }
      std::sort(keys.begin(), keys.begin() + count);
      for (int64_t j = 0; j < k; ++j) {
        od[a * k + j] = static_cast<int32_t>(static_cast<int64_t>(keys[j] >> 32) + tables.lowest);
        oi[a * k + j] = static_cast<int32_t>(keys[j] & 0xFFFFFFFFu);
      }
    });
  });
  return ffi::Error::Success();
}

// AP of the ranking by weighted distance over the first top_k positions: with `aware`,
// the expected AP over orders of tied items (the closed form of jhash.metrics._ap.
// _tie_aware_sum, per group of equal distance, from a sort of (distance, relevant)
// keys), else ties ordered by index (a sort of (distance, index) keys). Outputs as
// JhashIndexAp's (with `aware`, relevant items in the top k are not defined: 0).
ffi::Error WeightedApImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> query,
                          ffi::Buffer<ffi::U32> db, ffi::Buffer<ffi::S32> weights,
                          ffi::Buffer<ffi::U32> query_labels, ffi::Buffer<ffi::U32> db_labels,
                          int64_t overlap, int64_t top_k, int64_t aware,
                          ffi::ResultBuffer<ffi::F32> numer, ffi::ResultBuffer<ffi::F32> retrieved,
                          ffi::ResultBuffer<ffi::F32> total) {
  if (auto err = CheckWeighted("jhash_weighted_ap", query, db, weights); !err.success()) {
    return err;
  }
  const auto ql = query_labels.dimensions();
  const auto dl = db_labels.dimensions();
  RankInputs in;
  in.q = query.dimensions()[0];
  in.n = db.dimensions()[0];
  in.w = query.dimensions()[1];
  if (ql.size() != 2 || dl.size() != 2 || ql[0] != in.q || dl[0] != in.n || ql[1] != dl[1]) {
    return ffi::Error::InvalidArgument("jhash_weighted_ap: labels [q, L] and [n, L] expected");
  }
  in.query_labels = query_labels.typed_data();
  in.db_labels = db_labels.typed_data();
  in.label_words = ql[1];
  in.overlap = overlap != 0;
  const int64_t n = in.n, w = in.w;
  const int64_t k = std::clamp<int64_t>(top_k, 0, n);
  const WeightTables tables(weights.typed_data(), weights.dimensions()[0], w);
  std::vector<double> harmonic(n + 1, 0.0);  // H(i) = sum_{j <= i} 1 / j
  for (int64_t i = 1; i <= n; ++i) harmonic[i] = harmonic[i - 1] + 1.0 / static_cast<double>(i);
  const int index_bits = BitWidth(static_cast<uint64_t>(std::max<int64_t>(n - 1, 0)));
  float* numer_out = numer->typed_data();
  float* retrieved_out = retrieved->typed_data();
  float* total_out = total->typed_data();
  const WeightedDb wdb(db.typed_data(), n, w);
  ParallelFor(pool, in.q, [&](int64_t a) {
    std::vector<uint32_t> dist(wdb.stride);
    std::vector<uint8_t> rel(n);
    std::vector<uint64_t> keys(n), tmp(n);
    WeightedDistances(tables, wdb, query.typed_data() + a * w, dist.data());
    Relevance(in, a, rel.data());
    uint32_t top = 0;
    int64_t hits = 0;
    for (int64_t i = 0; i < n; ++i) {
      top = std::max(top, dist[i]);
      hits += rel[i];
    }
    double sum = 0.0;
    int64_t found = 0;
    if (aware) {
      for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(dist[i]) << 1 | rel[i];
      RadixSort(keys.data(), tmp.data(), n, BitWidth(top) + 1);
      int64_t before = 0, rel_before = 0;  // N and P of the group
      for (int64_t i = 0; i < n && before < k;) {
        int64_t j = i, p = 0;
        for (; j < n && keys[j] >> 1 == keys[i] >> 1; ++j) p += keys[j] & 1;
        const int64_t size = j - i, cut = std::min(size, k - before);
        if (p > 0) {
          const double m = size > 1 ? static_cast<double>(p - 1) / static_cast<double>(size - 1)
                                    : 0.0;
          const double c = static_cast<double>(rel_before) + 1.0 - m;
          const double inner = m * static_cast<double>(cut) +
                               (c - m * static_cast<double>(before)) *
                                   (harmonic[before + cut] - harmonic[before]);
          sum += static_cast<double>(p) / static_cast<double>(size) * inner;
        }
        before += size;
        rel_before += p;
        i = j;
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        keys[i] = static_cast<uint64_t>(dist[i]) << index_bits | static_cast<uint64_t>(i);
      }
      RadixSort(keys.data(), tmp.data(), n, BitWidth(top) + index_bits);
      const uint64_t index_mask = (uint64_t{1} << index_bits) - 1;
      for (int64_t r = 0; r < k; ++r) {
        if (rel[keys[r] & index_mask]) {
          ++found;
          sum += static_cast<double>(found) / static_cast<double>(r + 1);
        }
      }
    }
    numer_out[a] = static_cast<float>(sum);
    retrieved_out[a] = static_cast<float>(found);
    total_out[a] = static_cast<float>(hits);
  });
  return ffi::Error::Success();
}

// The first k positions of the ranking by weighted distance, as tie groups: per query, the
// groups that start before position k in ranking order (aware: items of equal distance;
// else each position its own group, ties ordered by index), each group's size and summed
// gain (gains[grade], the grade as Grade gives it), and the items of each grade in the
// whole database (for NDCG's ideal ranking, and the relevant items in all). The items at
// most as far as the k-th are kept under a running bound (as in the top-k), then sorted.
ffi::Error WeightedRankedImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> query,
                              ffi::Buffer<ffi::U32> db, ffi::Buffer<ffi::S32> weights,
                              ffi::Buffer<ffi::U32> query_labels, ffi::Buffer<ffi::U32> db_labels,
                              ffi::Buffer<ffi::F32> gains, int64_t overlap, int64_t k,
                              int64_t aware, ffi::ResultBuffer<ffi::S32> size,
                              ffi::ResultBuffer<ffi::F32> value,
                              ffi::ResultBuffer<ffi::S32> per_grade) {
  if (auto err = CheckWeighted("jhash_weighted_ranked", query, db, weights); !err.success()) {
    return err;
  }
  const auto ql = query_labels.dimensions();
  const auto dl = db_labels.dimensions();
  const int64_t q = query.dimensions()[0], w = query.dimensions()[1], n = db.dimensions()[0];
  const int64_t grades = overlap ? 32 * (ql.size() == 2 ? ql[1] : 0) + 1 : 2;
  if (ql.size() != 2 || dl.size() != 2 || ql[0] != q || dl[0] != n || ql[1] != dl[1] ||
      gains.dimensions().size() != 1 || gains.dimensions()[0] != grades || k < 1 || k > n) {
    return ffi::Error::InvalidArgument(
        "jhash_weighted_ranked: labels [q, L] and [n, L], gains [grades], 1 <= k <= n expected");
  }
  const int64_t lw = ql[1];
  const WeightTables tables(weights.typed_data(), weights.dimensions()[0], w);
  const float* gain = gains.typed_data();
  int32_t* size_out = size->typed_data();
  float* value_out = value->typed_data();
  int32_t* grade_out = per_grade->typed_data();
  const WeightedDb wdb(db.typed_data(), n, w);
  ParallelFor(pool, q, [&](int64_t a) {
    std::vector<uint32_t> dist(wdb.stride);
    WeightedDistances(tables, wdb, query.typed_data() + a * w, dist.data());
    const uint32_t* qlab = query_labels.typed_data() + a * lw;
    auto grade_of = [&](int64_t i) {
      return Grade(qlab, db_labels.typed_data() + i * lw, lw, overlap);
    };
    int32_t* hist = grade_out + a * grades;
    std::fill(hist, hist + grades, 0);
    for (int64_t i = 0; i < n; ++i) ++hist[grade_of(i)];
    // The items at most as far as the k-th: (distance, index) keys of the items within a
    // running bound on the k-th distance (inclusive: the k-th item's tie group stays whole),
    // cut back to it when the buffer is full; the buffer grows for a large tie group.
    std::vector<uint64_t> keys;
    int64_t cap = std::max<int64_t>(2 * k, k + 256);
    keys.reserve(cap);
    uint32_t bound = UINT32_MAX;
    for (int64_t i = 0; i < n; ++i) {
      if (dist[i] > bound) continue;
      keys.push_back(static_cast<uint64_t>(dist[i]) << 32 | static_cast<uint64_t>(i));
      if (static_cast<int64_t>(keys.size()) == cap) {
        std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.end());
        bound = static_cast<uint32_t>(keys[k - 1] >> 32);
        keys.erase(std::partition(keys.begin(), keys.end(),
                                  [&](uint64_t key) { return key >> 32 <= bound; }),
                   keys.end());
        if (2 * static_cast<int64_t>(keys.size()) > cap) cap *= 2;
      }
    }
    std::sort(keys.begin(), keys.end());
    const int64_t m = static_cast<int64_t>(keys.size());
    int32_t* s = size_out + a * k;
    float* v = value_out + a * k;
    std::fill(s, s + k, 0);
    std::fill(v, v + k, 0.0f);
    int64_t g = 0;
    for (int64_t r = 0; r < m && r < k; ++g) {
      int64_t end = r + 1;
      if (aware) {
        while (end < m && keys[end] >> 32 == keys[r] >> 32) ++end;
      }
      double sum = 0.0;
      for (int64_t j = r; j < end; ++j) sum += gain[grade_of(keys[j] & 0xFFFFFFFFu)];
      s[g] = static_cast<int32_t>(end - r);
      v[g] = static_cast<float>(sum);
      r = end;
    }
  });
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------------------------
// Hash-bucket search (jhash.index.bucket_search's contract, MCH's Algorithm 1). Per
// query, every bucket within max_radius is found: through the substring tables
// (multi-index hashing: each substring looked up with up to `flips` flipped bits,
// each bucket counted from the first table it agrees with, then checked against the
// full key), or by probing every flip mask of 0..max_radius bits. The buckets are
// visited in order of (distance, query XOR key), their items in stored order, an
// item with several codes only at its first visit (no code of it has a smaller
// (distance, query XOR code)); the search stops after the first radius at which
// num_wanted distinct items are found. Keys have at most 64 bits (W <= 2).

struct BucketTables {
  const uint32_t* keys;
  const int32_t* offsets;
  const int32_t* bucket_items;
  const int32_t* item_ids;
  const uint32_t* item_codes;
  const bool* code_mask;
  const int32_t* directory;
  const int32_t* sub_offsets;
  const int32_t* sub_buckets;
  int64_t w, m, num_keys, num_bits, directory_bits, max_radius, flips, slots;
  std::vector<int64_t> sub_first, sub_length, sub_base;
};

inline uint64_t Key(const uint32_t* p, int64_t w) {
  return w == 1 ? p[0] : (static_cast<uint64_t>(p[1]) << 32 | p[0]);
}

inline uint64_t LowBits(int64_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

// Calls f(mask) for every mask of exactly r set bits among the low n bits.
template <typename F>
void ForEachMask(int64_t n, int64_t r, F&& f) {
  if (r > n) return;
  if (r == 0) {
    f(uint64_t{0});
    return;
  }
  int64_t pos[64];
  for (int64_t i = 0; i < r; ++i) pos[i] = i;
  for (;;) {
    uint64_t mask = 0;
    for (int64_t i = 0; i < r; ++i) mask |= uint64_t{1} << pos[i];
    f(mask);
    int64_t i = r - 1;
    while (i >= 0 && pos[i] == n - r + i) --i;
    if (i < 0) return;
    ++pos[i];
    for (int64_t j = i + 1; j < r; ++j) pos[j] = pos[j - 1] + 1;
  }
}

// The bucket holding `probe`, or -1: the directory's run of keys sharing its top
// bits, then a binary search.
inline int64_t FindBucket(const BucketTables& t, uint64_t probe) {
  const uint64_t slot = probe >> (t.num_bits - t.directory_bits);
  int64_t lo = t.directory[slot], hi = t.directory[slot + 1];
  while (lo < hi) {
    const int64_t mid = (lo + hi) >> 1;
    if (Key(t.keys + mid * t.w, t.w) < probe) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < t.num_keys && Key(t.keys + lo * t.w, t.w) == probe ? lo : -1;
}

struct Hit {
  uint64_t x;   // query XOR key: the visit order within a radius
  int64_t d;    // distance
  int64_t b;    // bucket
};

void FindHits(const BucketTables& t, uint64_t q, std::vector<Hit>& hits) {
  hits.clear();
  if (t.sub_first.empty()) {
    for (int64_t r = 0; r <= t.max_radius; ++r) {
      ForEachMask(t.num_bits, r, [&](uint64_t f) {
        const int64_t b = FindBucket(t, q ^ f);
        if (b >= 0) hits.push_back({f, r, b});
      });
    }
    return;
  }
  const int64_t s = static_cast<int64_t>(t.sub_first.size());
  for (int64_t j = 0; j < s; ++j) {
    const uint64_t value = (q >> t.sub_first[j]) & LowBits(t.sub_length[j]);
    for (int64_t r = 0; r <= t.flips; ++r) {
      ForEachMask(t.sub_length[j], r, [&](uint64_t f) {
        const int64_t pos = t.sub_base[j] + static_cast<int64_t>(value ^ f);
        for (int64_t e = t.sub_offsets[pos]; e < t.sub_offsets[pos + 1]; ++e) {
          const int64_t b = t.sub_buckets[e];
          const uint64_t x = q ^ Key(t.keys + b * t.w, t.w);
          const int64_t d = Pop64(x);
          if (d > t.max_radius) continue;
          bool earlier = false;  // found from an earlier table already
          for (int64_t i = 0; i < j && !earlier; ++i) {
            earlier = Pop64((x >> t.sub_first[i]) & LowBits(t.sub_length[i])) <= t.flips;
          }
          if (!earlier) hits.push_back({x, d, b});
        }
      });
    }
  }
}

// True when no code of `item` comes before (d, x) in visit order.
inline bool FirstVisit(const BucketTables& t, uint64_t q, int64_t item, int64_t d, uint64_t x) {
  for (int64_t c = 0; c < t.m; ++c) {
    if (!t.code_mask[item * t.m + c]) continue;
    const uint64_t xc = q ^ Key(t.item_codes + (item * t.m + c) * t.w, t.w);
    const int64_t dc = Pop64(xc);
    if (dc < d || (dc == d && xc < x)) return false;
  }
  return true;
}

struct BucketOut {
  int32_t* ids;
  int32_t* radii;
  int32_t* found;
  int32_t* visited;
  int32_t* nonempty;
  int32_t* radius;
};

void SearchQuery(const BucketTables& t, const uint32_t* query, int64_t a, int64_t num_wanted,
                 const std::vector<int32_t>& visited_by_radius, std::vector<Hit>& hits,
                 const BucketOut& out) {
  const uint64_t q = Key(query + a * t.w, t.w);
  FindHits(t, q, hits);
  std::sort(hits.begin(), hits.end(),
            [](const Hit& u, const Hit& v) { return u.d < v.d || (u.d == v.d && u.x < v.x); });
  int32_t* ids = out.ids + a * t.slots;
  int32_t* radii = out.radii + a * t.slots;
  int64_t found = 0, written = 0, nonempty = 0, reached = t.max_radius;
  size_t h = 0;
  for (int64_t r = 0; r <= t.max_radius; ++r) {
    for (; h < hits.size() && hits[h].d == r; ++h) {
      const Hit& hit = hits[h];
      ++nonempty;
      for (int64_t e = t.offsets[hit.b]; e < t.offsets[hit.b + 1]; ++e) {
        const int64_t item = t.bucket_items[e];
        // At radius 0 every item is new (an item's codes are distinct).
        if (t.m > 1 && r > 0 && !FirstVisit(t, q, item, r, hit.x)) continue;
        ++found;
        if (written < t.slots) {
          ids[written] = t.item_ids[item];
          radii[written] = static_cast<int32_t>(r);
          ++written;
        } else if (t.m == 1) {  // no slot left and every item is new: count the rest
          found += t.offsets[hit.b + 1] - e - 1;
          break;
        }
      }
    }
    if (found >= num_wanted) {
      reached = r;
      break;
    }
  }
  for (int64_t i = written; i < t.slots; ++i) ids[i] = radii[i] = -1;
  out.found[a] = static_cast<int32_t>(std::min<int64_t>(found, INT32_MAX));
  out.visited[a] = visited_by_radius[reached];
  out.nonempty[a] = static_cast<int32_t>(nonempty);
  out.radius[a] = static_cast<int32_t>(reached);
}

// Radius 0, for a group of queries at a time: each query's own bucket, its items
// all first visits. A lookup is a chain of dependent reads from large tables
// (directory, keys, offsets, items, ids), each likely a cache miss; the group takes
// each step for all its queries, prefetching the next step's lines, so the misses
// of different queries overlap instead of following one another.
// Queries g0..g0+count-1 (count <= 16): each query's bucket, or -1 (lo), and the bounds
// of its items in bucket_items (start, end; both the insertion point's offset when the
// bucket is absent, so start is what an exact-match lookup reports). Each step of the
// chain is taken for the whole group, prefetching the next step's lines.
constexpr int64_t kGroup = 16;

void FindOwnBuckets(const BucketTables& t, const uint32_t* query, int64_t g0, int64_t count,
                    uint64_t* q, int64_t* lo, int64_t* start, int64_t* end) {
  const int64_t shift = t.num_bits - t.directory_bits;
  int64_t hi[kGroup];
  for (int64_t i = 0; i < count; ++i) {
    q[i] = Key(query + (g0 + i) * t.w, t.w);
    __builtin_prefetch(t.directory + (q[i] >> shift));
  }
  for (int64_t i = 0; i < count; ++i) {
    lo[i] = t.directory[q[i] >> shift];
    hi[i] = t.directory[(q[i] >> shift) + 1];
    __builtin_prefetch(t.keys + ((lo[i] + hi[i]) >> 1) * t.w);
  }
  for (int64_t i = 0; i < count; ++i) {
    int64_t l = lo[i], h = hi[i];
    while (l < h) {
      const int64_t mid = (l + h) >> 1;
      if (Key(t.keys + mid * t.w, t.w) < q[i]) {
        l = mid + 1;
      } else {
        h = mid;
      }
    }
    const bool hit = l < t.num_keys && Key(t.keys + l * t.w, t.w) == q[i];
    hi[i] = l;  // the insertion point
    lo[i] = hit ? l : -1;
    __builtin_prefetch(t.offsets + l);
  }
  for (int64_t i = 0; i < count; ++i) {
    start[i] = t.offsets[hi[i]];
    end[i] = lo[i] < 0 ? start[i] : t.offsets[lo[i] + 1];
  }
}

// Radius 0, for a group of queries at a time: each query's own bucket, its items
// all first visits. A lookup is a chain of dependent reads from large tables
// (directory, keys, offsets, items, ids), each likely a cache miss; the group takes
// each step for all its queries, prefetching the next step's lines, so the misses
// of different queries overlap instead of following one another.
void SearchOwnBuckets(const BucketTables& t, const uint32_t* query, int64_t a0, int64_t a1,
                      const std::vector<int32_t>& visited_by_radius, const BucketOut& out) {
  for (int64_t g0 = a0; g0 < a1; g0 += kGroup) {
    const int64_t count = std::min(kGroup, a1 - g0);
    uint64_t q[kGroup];
    int64_t lo[kGroup], start[kGroup], end[kGroup];
    FindOwnBuckets(t, query, g0, count, q, lo, start, end);
    for (int64_t i = 0; i < count; ++i) __builtin_prefetch(t.bucket_items + start[i]);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t shown = std::min(end[i] - start[i], t.slots);
      for (int64_t e = 0; e < shown; ++e) {
        __builtin_prefetch(t.item_ids + t.bucket_items[start[i] + e]);
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      const int64_t a = g0 + i;
      const int64_t size = end[i] - start[i], shown = std::min(size, t.slots);
      int32_t* ids = out.ids + a * t.slots;
      int32_t* radii = out.radii + a * t.slots;
      for (int64_t e = 0; e < shown; ++e) {
        ids[e] = t.item_ids[t.bucket_items[start[i] + e]];
        radii[e] = 0;
      }
      for (int64_t e = shown; e < t.slots; ++e) ids[e] = radii[e] = -1;
      out.found[a] = static_cast<int32_t>(size);
      out.visited[a] = visited_by_radius[0];
      out.nonempty[a] = lo[i] >= 0;
      out.radius[a] = 0;
    }
  }
}

// Exact-match lookup (jhash.index.lookup): each query's bucket as (start, count) in
// bucket_items; count 0 and start the insertion point's offset when it is absent.
ffi::Error LookupImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> queries,
                      ffi::Buffer<ffi::U32> keys, ffi::Buffer<ffi::S32> offsets,
                      ffi::Buffer<ffi::S32> directory, int64_t num_bits, int64_t directory_bits,
                      ffi::ResultBuffer<ffi::S32> start_out, ffi::ResultBuffer<ffi::S32> count_out) {
  const auto qd = queries.dimensions();
  const auto kd = keys.dimensions();
  if (qd.size() != 2 || kd.size() != 2 || qd[1] != kd[1] || kd[1] > 2 || num_bits < 1 ||
      num_bits > 32 * kd[1] || directory_bits < 1 || directory_bits > num_bits) {
    return ffi::Error::InvalidArgument("jhash_lookup: inconsistent index or queries");
  }
  BucketTables t;
  t.keys = keys.typed_data();
  t.offsets = offsets.typed_data();
  t.directory = directory.typed_data();
  t.w = kd[1];
  t.num_keys = kd[0];
  t.num_bits = num_bits;
  t.directory_bits = directory_bits;
  const int64_t q = qd[0];
  int32_t* start = start_out->typed_data();
  int32_t* count = count_out->typed_data();
  constexpr int64_t kBlock = 256;
  ParallelFor(pool, (q + kBlock - 1) / kBlock, [&](int64_t task) {
    const int64_t a1 = std::min(q, (task + 1) * kBlock);
    for (int64_t g0 = task * kBlock; g0 < a1; g0 += kGroup) {
      const int64_t n = std::min(kGroup, a1 - g0);
      uint64_t qv[kGroup];
      int64_t lo[kGroup], s[kGroup], e[kGroup];
      FindOwnBuckets(t, queries.typed_data(), g0, n, qv, lo, s, e);
      for (int64_t i = 0; i < n; ++i) {
        start[g0 + i] = static_cast<int32_t>(s[i]);
        count[g0 + i] = static_cast<int32_t>(e[i] - s[i]);
      }
    }
  });
  return ffi::Error::Success();
}

// Fills the substring layout of t (num_bits cut into num_substrings runs, the longer
// ones first: jhash.index._build.substring_layout; each table's offsets follow the
// last's), then searches queries [q, W] into out, for_tasks(tasks, body) running
// body(task) for every task (in parallel where it can).
template <typename ForTasks>
void RunBucketSearch(BucketTables& t, const uint32_t* queries, int64_t q, int64_t num_substrings,
                     int64_t num_wanted, const BucketOut& out, ForTasks&& for_tasks) {
  int64_t first = 0, base = 0;
  for (int64_t j = 0; j < num_substrings; ++j) {
    const int64_t length = t.num_bits / num_substrings + (j < t.num_bits % num_substrings);
    t.sub_first.push_back(first);
    t.sub_length.push_back(length);
    t.sub_base.push_back(base);
    first += length;
    base += (int64_t{1} << length) + 1;
  }
  // Buckets visited through radius r: sum_{i <= r} C(K, i), at most INT32_MAX.
  std::vector<int32_t> visited_by_radius(t.max_radius + 1);
  unsigned __int128 total = 0, comb = 1;
  for (int64_t r = 0; r <= t.max_radius; ++r) {
    if (r > 0) comb = comb * (t.num_bits - r + 1) / r;
    total += comb;
    visited_by_radius[r] = static_cast<int32_t>(std::min<unsigned __int128>(total, INT32_MAX));
  }
  const int64_t wanted = std::max<int64_t>(1, num_wanted);
  constexpr int64_t kBlock = 64;
  for_tasks((q + kBlock - 1) / kBlock, [&](int64_t task) {
    const int64_t a0 = task * kBlock, a1 = std::min(q, (task + 1) * kBlock);
    if (t.max_radius == 0) {
      SearchOwnBuckets(t, queries, a0, a1, visited_by_radius, out);
      return;
    }
    std::vector<Hit> hits;
    for (int64_t a = a0; a < a1; ++a) {
      SearchQuery(t, queries, a, wanted, visited_by_radius, hits, out);
    }
  });
}

bool BadBucketShapes(int64_t w, int64_t num_bits, int64_t directory_bits, int64_t max_radius) {
  return w > 2 || w < 1 || num_bits < 1 || num_bits > 32 * w || directory_bits < 1 ||
         directory_bits > num_bits || max_radius < 0 || max_radius > num_bits;
}

ffi::Error BucketSearchImpl(
    ffi::ThreadPool pool, ffi::Buffer<ffi::U32> queries, ffi::Buffer<ffi::U32> keys,
    ffi::Buffer<ffi::S32> offsets, ffi::Buffer<ffi::S32> bucket_items,
    ffi::Buffer<ffi::S32> item_ids, ffi::Buffer<ffi::U32> item_codes,
    ffi::Buffer<ffi::PRED> code_mask, ffi::Buffer<ffi::S32> directory,
    ffi::Buffer<ffi::S32> sub_offsets, ffi::Buffer<ffi::S32> sub_buckets,
    ffi::Buffer<ffi::S32> num_wanted, int64_t num_bits, int64_t max_radius,
    int64_t directory_bits, int64_t num_substrings, int64_t flips,
    ffi::ResultBuffer<ffi::S32> ids, ffi::ResultBuffer<ffi::S32> radii,
    ffi::ResultBuffer<ffi::S32> found, ffi::ResultBuffer<ffi::S32> visited,
    ffi::ResultBuffer<ffi::S32> nonempty, ffi::ResultBuffer<ffi::S32> radius) {
  const auto qd = queries.dimensions();
  const auto kd = keys.dimensions();
  const auto cd = item_codes.dimensions();
  if (qd.size() != 2 || kd.size() != 2 || cd.size() != 3 || qd[1] != kd[1] || cd[2] != kd[1] ||
      BadBucketShapes(kd[1], num_bits, directory_bits, max_radius)) {
    return ffi::Error::InvalidArgument("jhash_bucket_search: inconsistent index or queries");
  }
  BucketTables t;
  t.keys = keys.typed_data();
  t.offsets = offsets.typed_data();
  t.bucket_items = bucket_items.typed_data();
  t.item_ids = item_ids.typed_data();
  t.item_codes = item_codes.typed_data();
  t.code_mask = code_mask.typed_data();
  t.directory = directory.typed_data();
  t.sub_offsets = sub_offsets.typed_data();
  t.sub_buckets = sub_buckets.typed_data();
  t.w = kd[1];
  t.m = cd[1];
  t.num_keys = kd[0];
  t.num_bits = num_bits;
  t.directory_bits = directory_bits;
  t.max_radius = max_radius;
  t.flips = flips;
  t.slots = ids->dimensions()[1];
  const BucketOut out{ids->typed_data(), radii->typed_data(), found->typed_data(),
                      visited->typed_data(), nonempty->typed_data(), radius->typed_data()};
  RunBucketSearch(t, queries.typed_data(), qd[0], num_substrings, num_wanted.typed_data()[0], out,
                  [&](int64_t tasks, const auto& body) { ParallelFor(pool, tasks, body); });
  return ffi::Error::Success();
}

}  // namespace

// The bucket search called from the host with plain buffers (jhash.index.searcher's host
// path: no JAX dispatch). The index is described once (JhashBucketIndex, filled by the
// caller); each call passes its queries [q, W] and the six result buffers. The tasks run
// on OpenMP's threads (at most `threads`) when the library is built with OpenMP, else in
// the calling thread. Returns 0, or 1 for an inconsistent index.
extern "C" {
struct JhashBucketIndex {
  const uint32_t* keys;
  const int32_t* offsets;
  const int32_t* bucket_items;
  const int32_t* item_ids;
  const uint32_t* item_codes;
  const bool* code_mask;
  const int32_t* directory;
  const int32_t* sub_offsets;
  const int32_t* sub_buckets;
  int64_t w, m, num_keys, num_bits, directory_bits, max_radius, flips, slots, num_substrings,
      num_wanted, threads;
};

int jhash_bucket_search_host(const JhashBucketIndex* index, const uint32_t* queries, int64_t q,
                             int32_t* ids, int32_t* radii, int32_t* found, int32_t* visited,
                             int32_t* nonempty, int32_t* radius) {
  const JhashBucketIndex& x = *index;
  if (BadBucketShapes(x.w, x.num_bits, x.directory_bits, x.max_radius) || q < 0) return 1;
  BucketTables t;
  t.keys = x.keys;
  t.offsets = x.offsets;
  t.bucket_items = x.bucket_items;
  t.item_ids = x.item_ids;
  t.item_codes = x.item_codes;
  t.code_mask = x.code_mask;
  t.directory = x.directory;
  t.sub_offsets = x.sub_offsets;
  t.sub_buckets = x.sub_buckets;
  t.w = x.w;
  t.m = x.m;
  t.num_keys = x.num_keys;
  t.num_bits = x.num_bits;
  t.directory_bits = x.directory_bits;
  t.max_radius = x.max_radius;
  t.flips = x.flips;
  t.slots = x.slots;
  const BucketOut out{ids, radii, found, visited, nonempty, radius};
  const int threads = static_cast<int>(std::max<int64_t>(1, x.threads));
  RunBucketSearch(t, queries, q, x.num_substrings, x.num_wanted, out,
                  [threads](int64_t tasks, const auto& body) {
                    if (tasks == 1 || threads == 1) {  // no team to start
                      for (int64_t task = 0; task < tasks; ++task) body(task);
                      return;
                    }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
                    for (int64_t task = 0; task < tasks; ++task) body(task);
                  });
  return 0;
}
}  // extern "C"

XLA_FFI_DEFINE_HANDLER_SYMBOL(JhashHammingTopk, HammingTopkImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // queries [q, W]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database [n, (m,) W]
                                  .Arg<ffi::Buffer<ffi::PRED>>()  // codes held [n, m]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // valid rows
                                  .Attr<int64_t>("k")
                                  .Attr<int64_t>("num_bits")
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JhashTieGroups, TieGroupsImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // queries [q, W]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database [n, (m,) W]
                                  .Arg<ffi::Buffer<ffi::PRED>>()  // codes held [n, m]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // query labels [q, L]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database labels [n, L]
                                  .Attr<int64_t>("num_bits")
                                  .Attr<int64_t>("overlap")
                                  .Ret<ffi::Buffer<ffi::S32>>()   // items per distance, no code
                                  .Ret<ffi::Buffer<ffi::S32>>()); // relevant items likewise

XLA_FFI_DEFINE_HANDLER_SYMBOL(JhashIndexAp, IndexApImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // queries [q, W]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database [n, (m,) W]
                                  .Arg<ffi::Buffer<ffi::PRED>>()  // codes held [n, m]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // query labels [q, L]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database labels [n, L]
                                  .Attr<int64_t>("num_bits")
                                  .Attr<int64_t>("overlap")
                                  .Attr<int64_t>("top_k")
                                  .Ret<ffi::Buffer<ffi::F32>>()   // sum of precisions
                                  .Ret<ffi::Buffer<ffi::F32>>()   // relevant in the top k
                                  .Ret<ffi::Buffer<ffi::F32>>()); // relevant in all

XLA_FFI_DEFINE_HANDLER_SYMBOL(JhashBucketSearch, BucketSearchImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // queries [q, W]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // keys [B, W]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // offsets [B + 1]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // bucket_items [S]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // item_ids [n]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // item_codes [n, m, W]
                                  .Arg<ffi::Buffer<ffi::PRED>>()  // item_code_mask [n, m]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // directory [2^p + 1]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // substring offsets
                                  .Arg<ffi::Buffer<ffi::S32>>()   // substring buckets (flat)
                                  .Arg<ffi::Buffer<ffi::S32>>()   // num_wanted []
                                  .Attr<int64_t>("num_bits")
                                  .Attr<int64_t>("max_radius")
                                  .Attr<int64_t>("directory_bits")
                                  .Attr<int64_t>("num_substrings")
                                  .Attr<int64_t>("flips")
                                  .Ret<ffi::Buffer<ffi::S32>>()   // item ids [q, R]
                                  .Ret<ffi::Buffer<ffi::S32>>()   // radii [q, R]
                                  .Ret<ffi::Buffer<ffi::S32>>()   // found [q]
                                  .Ret<ffi::Buffer<ffi::S32>>()   // buckets visited [q]
                                  .Ret<ffi::Buffer<ffi::S32>>()   // non-empty buckets [q]
                                  .Ret<ffi::Buffer<ffi::S32>>()); // radius reached [q]

XLA_FFI_DEFINE_HANDLER_SYMBOL(JhashLookup, LookupImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // queries [q, W]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // keys [b, W]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // offsets [b + 1]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // directory
                                  .Attr<int64_t>("num_bits")
                                  .Attr<int64_t>("directory_bits")
                                  .Ret<ffi::Buffer<ffi::S32>>()   // start [q]
                                  .Ret<ffi::Buffer<ffi::S32>>()); // count [q]

XLA_FFI_DEFINE_HANDLER_SYMBOL(JhashGradeGroups, GradeGroupsImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // queries [q, W]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database [n, (m,) W]
                                  .Arg<ffi::Buffer<ffi::PRED>>()  // codes held [n, m]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // query labels [q, L]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database labels [n, L]
                                  .Attr<int64_t>("num_bits")
                                  .Attr<int64_t>("overlap")
                                  .Ret<ffi::Buffer<ffi::S32>>()); // items [q, K + 2, grades]

XLA_FFI_DEFINE_HANDLER_SYMBOL(JhashWeightedTopk, WeightedTopkImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // queries [q, W]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database [n, W]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // weights in units [K]
                                  .Attr<int64_t>("k")
                                  .Ret<ffi::Buffer<ffi::S32>>()   // distances in units [q, k]
                                  .Ret<ffi::Buffer<ffi::S32>>()); // indices [q, k]

XLA_FFI_DEFINE_HANDLER_SYMBOL(JhashWeightedAp, WeightedApImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // queries [q, W]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database [n, W]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // weights in units [K]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // query labels [q, L]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database labels [n, L]
                                  .Attr<int64_t>("overlap")
                                  .Attr<int64_t>("top_k")
                                  .Attr<int64_t>("aware")
                                  .Ret<ffi::Buffer<ffi::F32>>()   // sum of precisions
                                  .Ret<ffi::Buffer<ffi::F32>>()   // relevant in the top k
                                  .Ret<ffi::Buffer<ffi::F32>>()); // relevant in all

XLA_FFI_DEFINE_HANDLER_SYMBOL(JhashWeightedRanked, WeightedRankedImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // queries [q, W]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database [n, W]
                                  .Arg<ffi::Buffer<ffi::S32>>()   // weights in units [K]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // query labels [q, L]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database labels [n, L]
                                  .Arg<ffi::Buffer<ffi::F32>>()   // gain of each grade [G]
                                  .Attr<int64_t>("overlap")
                                  .Attr<int64_t>("k")
                                  .Attr<int64_t>("aware")
                                  .Ret<ffi::Buffer<ffi::S32>>()   // group sizes [q, k]
                                  .Ret<ffi::Buffer<ffi::F32>>()   // group gains [q, k]
                                  .Ret<ffi::Buffer<ffi::S32>>()); // items per grade [q, G]

XLA_FFI_DEFINE_HANDLER_SYMBOL(JhashIndexDcg, IndexDcgImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()   // queries [q, W]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database [n, (m,) W]
                                  .Arg<ffi::Buffer<ffi::PRED>>()  // codes held [n, m]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // query labels [q, L]
                                  .Arg<ffi::Buffer<ffi::U32>>()   // database labels [n, L]
                                  .Arg<ffi::Buffer<ffi::F32>>()   // gain of each grade [G]
                                  .Attr<int64_t>("num_bits")
                                  .Attr<int64_t>("overlap")
                                  .Attr<int64_t>("k")
                                  .Ret<ffi::Buffer<ffi::F32>>()   // DCG@k [q]
                                  .Ret<ffi::Buffer<ffi::S32>>()); // items per grade [q, G]
