"""Multi-code hash-bucket search (MCH): jhash.index against FAISS's binary hash indexes, same run.

Command, from the repository root with jhash installed (``./install.sh bench``):
``python benchmarks/bench_multi_index.py`` (about 10 minutes on 2 busy CPU cores);
``--quick`` runs a small smoke version (100,000 codes, 200 queries) and only prints.
The full run writes its table into the ``## Multi-code hash-bucket search`` section
of ``benchmarks/RESULTS.md`` (only that section is replaced) and prints it.

Workload (Multiple Code Hashing: each database item has several codes, and a query
must find an item the first time any of its codes' buckets is visited, once):
250,000 items with 1 to 6 codes each, 1,000,000 codes in all, of 32 and 64 bits.
Every item has its whole-image code (uniformly random); 750,000 crop codes fill
random ones of the 1,250,000 other slots, each the item's whole-image code with 0 to
4 distinct random bits flipped (a fifth each; 0 flips: the crop falls in the whole
image's bucket, so an item has several codes in one bucket). 1,000 queries, each a
random database code with 0, 1 or 2 random bits flipped (a third each), so buckets
are hit. Measured, for all items within radius r = 0 and r = 2 (each item once):

* jhash: ``build_index(codes [n, 6, W], num_bits=K, mask=..., num_substrings=None)``
  (the suggested substring tables: 3 at 64 bits, none at 32), then ``bucket_search``
  without early stop (16 result slots, checked to be enough) and ``radius_search``,
  results copied to NumPy;
* FAISS ``IndexBinaryHash(d, b = K)`` holding every code (an item entered once per
  code): ``range_search(x, r + 1)`` with ``nflip = r``, then code ids mapped to item
  ids and de-duplicated per query (``np.unique`` over (query, item) pairs): that
  post-processing counts in FAISS's time, as jhash's de-duplication counts in its;
* FAISS ``IndexBinaryMultiHash(d, nhash, b = d // nhash)`` holding every code, the
  same post-processing, ``nflip = r // nhash`` (exact by pigeonhole: a code within r
  agrees with the query to within floor(r / nhash) bits on one of the substrings);
  nhash 2, 3 or 4, whichever ran fastest in 3 warm-up calls for this (K, r).

Both FAISS indexes run with their default threads (both cores) and with one thread.
Timings are medians over repeats, each repeat running every contender back to back
(in reverse order every other repeat) so all see the same load on this shared
machine: compare the ratios. Every query's
item set is checked to be the same on all sides.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time

import jax
import numpy as np

import _report
import bench_index
from jhash import index as index_lib

SECTION = "## Multi-code hash-bucket search"
SLOTS = 16
WARM_CALLS = 10  # calls in a row per contender and round in the back-to-back timing


def flip_distinct_bits(rng, packed, num_flips, num_bits):
  """Each row of ``packed`` with ``num_flips[i]`` distinct random bits flipped (at most 4)."""
  out = packed.copy()
  most = int(num_flips.max(initial=0))
  bits = rng.integers(0, num_bits, size=(packed.shape[0], most))
  while True:  # redraw rows that drew a bit twice
    repeated = np.zeros(packed.shape[0], bool)
    for a in range(most):
      for b in range(a + 1, most):
        repeated |= bits[:, a] == bits[:, b]
    if not repeated.any():
      break
    bits[repeated] = rng.integers(0, num_bits, size=(int(repeated.sum()), most))
  for a in range(most):
    rows = np.flatnonzero(num_flips > a)
    bit = bits[rows, a]
    out[rows, bit // 32] ^= np.uint32(1) << (bit % 32).astype(np.uint32)
  return out


def multi_code_database(rng, num_items, max_codes, num_codes, num_bits):
  """Packed codes [n, m, W], mask [n, m], the flat codes [N, W] and their item numbers [N]."""
  whole = bench_index.random_packed(rng, num_items, num_bits)
  codes = np.repeat(whole[:, None], max_codes, axis=1)
  crop_slots = np.zeros(num_items * (max_codes - 1), bool)
  crop_slots[rng.choice(crop_slots.size, size=num_codes - num_items, replace=False)] = True
  mask = np.concatenate(
    [np.ones((num_items, 1), bool), crop_slots.reshape(num_items, max_codes - 1)], axis=1
  )
  crops = codes[:, 1:].reshape(-1, codes.shape[-1])
  chosen = np.flatnonzero(crop_slots)
  crops[chosen] = flip_distinct_bits(
    rng, crops[chosen], rng.integers(0, 5, size=chosen.size), num_bits
  )
  codes[:, 1:] = crops.reshape(num_items, max_codes - 1, -1)
  item_of_code = np.broadcast_to(np.arange(num_items)[:, None], mask.shape)[mask]
  return codes, mask, codes[mask], item_of_code


def near_queries(rng, flat, num_bits, num_queries):
  """Random database codes with 0, 1 or 2 distinct random bits flipped."""
  picked = flat[rng.integers(0, flat.shape[0], size=num_queries)]
  return flip_distinct_bits(rng, picked, rng.integers(0, 3, size=num_queries), num_bits)


def faiss_items(findex, qbytes, radius, nflip, item_of_code, num_items):
  """FAISS range search, code ids mapped to items, each item once per query.

  Returns (lims int64 [q + 1], items int64 [...]): query i's items are
  ``items[lims[i]:lims[i + 1]]``, increasing.
  """
  findex.nflip = nflip
  lims, _, ids = findex.range_search(qbytes, radius + 1)
  query = np.repeat(np.arange(lims.size - 1, dtype=np.int64), np.diff(lims).astype(np.int64))
  pairs = np.unique(query * num_items + item_of_code[ids])
  return np.searchsorted(pairs // num_items, np.arange(lims.size)), pairs % num_items


def jhash_items(res):
  """(lims, items) of jhash results, as ``faiss_items`` gives them."""
  ids = np.asarray(res.item_ids).astype(np.int64)
  kept = ids >= 0
  counts = kept.sum(1)
  query = np.repeat(np.arange(ids.shape[0], dtype=np.int64), counts)
  pairs = np.sort((query << 32) | ids[kept])
  return np.concatenate([[0], np.cumsum(counts)]), pairs & 0xFFFFFFFF


def same_items(a, b):
  return all(np.array_equal(x, y) for x, y in zip(a, b))


def interleaved(contenders, repeats):
  """Median seconds of each contender, all run in every repeat, the order reversed every
  other repeat (a FAISS call on 2 threads leaves its threads spinning for a moment,
  which slows whatever runs next)."""
  times = {name: [] for name in contenders}
  order = list(contenders)
  for i in range(repeats):
    for name in order if i % 2 == 0 else order[::-1]:
      start = time.perf_counter()
      _report.block(contenders[name]())
      times[name].append(time.perf_counter() - start)
  return {name: float(np.median(t)) for name, t in times.items()}


def back_to_back(contenders, rounds, calls):
  """Median seconds of each contender called ``calls`` times in a row (its first call of
  each round dropped), the contenders taking turns for ``rounds`` rounds, the order
  reversed every other round: the speed of a caller that runs many searches, with its
  index and code in cache, where ``interleaved`` gives that of one search among others."""
  times = {name: [] for name in contenders}
  order = list(contenders)
  for i in range(rounds):
    for name in order if i % 2 == 0 else order[::-1]:
      for call in range(calls):
        start = time.perf_counter()
        _report.block(contenders[name]())
        if call:
          times[name].append(time.perf_counter() - start)
  return {name: float(np.median(t)) for name, t in times.items()}


def with_threads(faiss, count, fn):
  return bench_index.with_threads(faiss, count, fn)


def run_bits(num_bits, num_items, num_codes, num_queries, repeats, rng):
  import faiss

  codes, mask, flat, item_of_code = multi_code_database(rng, num_items, 6, num_codes, num_bits)
  queries = near_queries(rng, flat, num_bits, num_queries)
  qbytes = bench_index.to_faiss_bytes(queries, num_bits)
  fbytes = bench_index.to_faiss_bytes(flat, num_bits)
  d = 8 * fbytes.shape[1]
  rows = {"threads": faiss.omp_get_max_threads(), "load": [os.getloadavg()[0]]}

  def build_jhash():
    return jax.block_until_ready(
      index_lib.build_index(codes, num_bits=num_bits, mask=mask, num_substrings=None)
    )

  def build_hash():
    findex = faiss.IndexBinaryHash(d, min(num_bits, 64))
    findex.add(fbytes)
    return findex

  def build_multi(nhash):
    findex = faiss.IndexBinaryMultiHash(d, nhash, d // nhash)
    findex.add(fbytes)
    return findex

  index, fhash = build_jhash(), build_hash()
  fmulti = {nhash: build_multi(nhash) for nhash in (2, 3, 4)}
  t = interleaved(
    {"jhash": build_jhash, "hash": build_hash, "multi": lambda: build_multi(3)},
    max(1, repeats // 2),
  )
  rows["build"] = t
  rows["index"] = (index.num_buckets, int(index.bucket_items.shape[0]), index.num_substrings)

  for radius in (0, 2):

    def search():
      return index_lib.bucket_search(
        index, queries, num_wanted=num_items + 1, max_radius=radius, max_results=SLOTS
      )

    def search_jhash():
      return jax.tree.map(np.asarray, search())

    def radius_jhash():
      return jax.tree.map(np.asarray, index_lib.radius_search(index, queries, radius))

    def flips_jhash():  # the same search without the substring tables
      return jax.tree.map(
        np.asarray,
        index_lib.bucket_search(
          index,
          queries,
          num_wanted=num_items + 1,
          max_radius=radius,
          max_results=SLOTS,
          use_substrings=False,
        ),
      )

    res, full = search_jhash(), radius_jhash()  # compile + warm-up
    assert int(res.num_found.max()) <= SLOTS, "raise SLOTS: results were cut off"
    mine = jhash_items(res)
    # The fastest exact multi-hash configuration for this radius: the best of 3 warm-up
    # calls each (one where its first call took over 10x the best so far).
    warm = {}
    for nhash, findex in fmulti.items():
      best = min((w[0] for w in warm.values()), default=np.inf)
      for _ in range(3):
        start = time.perf_counter()
        out = faiss_items(findex, qbytes, radius, radius // nhash, item_of_code, num_items)
        took = time.perf_counter() - start
        warm[nhash] = (min(took, warm.get(nhash, (np.inf,))[0]), out)
        if took > 10 * best:
          break
    nhash = min(warm, key=lambda h: warm[h][0])
    findex = fmulti[nhash]
    hashed = faiss_items(fhash, qbytes, radius, radius, item_of_code, num_items)
    with_tables = index.num_substrings > 0 and radius > 0
    same = (
      same_items(mine, hashed)
      and same_items(mine, warm[nhash][1])
      and same_items(mine, jhash_items(full))
      and (not with_tables or same_items(mine, jhash_items(flips_jhash())))
      and np.array_equal(res.num_found, np.diff(hashed[0]))
    )
    contenders = {
      "bucket_search": search_jhash,
      "radius_search": radius_jhash,
      "hash": lambda: faiss_items(fhash, qbytes, radius, radius, item_of_code, num_items),
      "hash1": with_threads(
        faiss, 1, lambda: faiss_items(fhash, qbytes, radius, radius, item_of_code, num_items)
      ),
      "multi": lambda: faiss_items(
        findex, qbytes, radius, radius // nhash, item_of_code, num_items
      ),
      "multi1": with_threads(
        faiss,
        1,
        lambda: faiss_items(findex, qbytes, radius, radius // nhash, item_of_code, num_items),
      ),
    }
    if with_tables:
      contenders["flips"] = flips_jhash
    # Radius 0 takes about a millisecond: many more repeats against scheduling noise.
    t = interleaved(contenders, repeats * (10 if radius == 0 else 1))
    rows[f"radius {radius}"] = t
    rows[f"radius {radius} back to back"] = back_to_back(
      {name: contenders[name] for name in ("bucket_search", "hash", "multi")},
      rounds=4,
      calls=WARM_CALLS,
    )
    rows[f"radius {radius} same"] = same
    rows[f"radius {radius} nhash"] = nhash
    rows[f"radius {radius} stats"] = (
      float(res.buckets_nonempty.mean()),
      float(res.num_found.mean()),
      float(np.diff(hashed[0]).mean()),
      float(np.asarray(fhash.range_search(qbytes, radius + 1)[0])[-1] / num_queries),
    )
  rows["load"].append(os.getloadavg()[0])
  return rows


def fmt_rate(x):
  return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.1f} k"


def table(results, args, sizes, repeats):
  import faiss

  num_items, num_codes, num_queries = sizes
  threads = next(iter(results.values()))["threads"]
  loads = [x for rows in results.values() for x in rows["load"]]
  command = f"python benchmarks/bench_multi_index.py{' --quick' if args.quick else ''}"
  lines = [
    SECTION,
    "",
    f"Command: `{command}`. Machine: {_report.cores()} cores ({_report.cpu_model()}); "
    f"jax {jax.__version__} ({jax.default_backend()}), faiss {faiss.__version__}, "
    f"numpy {np.__version__}; {datetime.date.today().isoformat()}. Load average (1 min) "
    f"from {min(loads):.1f} to {max(loads):.1f} during the run (a shared machine: "
    "compare the ratios, measured in the same repeats, not the rates).",
    "",
    f"{num_items:,} items with 1 to 6 codes ({num_codes:,} codes: every whole-image code "
    "plus crop codes, each the whole-image code with 0 to 4 bits flipped), "
    f"{num_queries:,} queries (database codes with 0, 1 or 2 bits flipped); all items "
    "within radius r, each once. Median of "
    f"{repeats} interleaved repeats ({10 * repeats} at radius 0; the order reversed every "
    "other repeat). jhash: `build_index` with "
    "the mask and `num_substrings=None` (the suggested substring tables); `bucket_search` "
    f"without early stop ({SLOTS} result slots) or `radius_search`, one jitted call, "
    "results copied to NumPy. "
    "FAISS: every code added (an item once per code); `range_search(x, r + 1)`, then code "
    "ids mapped to items and de-duplicated per query in NumPy, counted in its time. "
    "`IndexBinaryHash(d, b = K)` with `nflip = r`; `IndexBinaryMultiHash(d, nhash, d / "
    "nhash)` with `nflip = r // nhash` (exact), nhash the fastest of 2, 3, 4 for that "
    "radius (best of 3 warm-up calls). "
    f"FAISS with its default {threads} threads, and with 1. Speeds in queries per "
    "second; ratio: jhash `bucket_search` speed / FAISS speed (> 1: jhash faster). Every "
    "query's item set was compared on all sides.",
    "",
    f"| K | radius | jhash `bucket_search` | jhash `radius_search` | FAISS hash ({threads} "
    f"threads) | FAISS hash (1) | FAISS multi-hash ({threads}) | FAISS multi-hash (1) | ratio "
    f"vs hash ({threads}) | vs hash (1) | vs multi-hash ({threads}) | vs multi-hash (1) "
    "| same item sets |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  builds = []
  for num_bits, rows in results.items():
    for radius in (0, 2):
      t = {name: num_queries / v for name, v in rows[f"radius {radius}"].items()}
      nhash = rows[f"radius {radius} nhash"]
      ratio = [t["bucket_search"] / t[name] for name in ("hash", "hash1", "multi", "multi1")]
      lines.append(
        f"| {num_bits} | {radius} | {fmt_rate(t['bucket_search'])} "
        f"| {fmt_rate(t['radius_search'])} | {fmt_rate(t['hash'])} | {fmt_rate(t['hash1'])} "
        f"| {fmt_rate(t['multi'])} (nhash {nhash}) | {fmt_rate(t['multi1'])} | "
        + " | ".join(f"**{r:.2f}**" if i in (0, 2) else f"{r:.2f}" for i, r in enumerate(ratio))
        + f" | {'yes' if rows[f'radius {radius} same'] else 'NO'} |"
      )
    b = rows["build"]
    buckets, stored, substrings = rows["index"]
    builds.append(
      f"K = {num_bits}: jhash {b['jhash']:.2f} s ({buckets:,} buckets, {stored:,} "
      f"stored (item, code) pairs, {substrings} substring tables), FAISS hash "
      f"{b['hash']:.2f} s, multi-hash (nhash 3) {b['multi']:.2f} s"
    )
  stats = []
  for num_bits, rows in results.items():
    for radius in (0, 2):
      nonempty, found, _, codes = rows[f"radius {radius} stats"]
      stats.append(
        f"K = {num_bits}, r = {radius}: {found:.2f} items per query from "
        f"{codes:.2f} codes, {nonempty:.2f} non-empty buckets"
      )
  flips = [
    f"{fmt_rate(num_queries / rows[f'radius {r}']['flips'])} at K = {k}, r = {r} "
    f"({rows[f'radius {r}']['flips'] / rows[f'radius {r}']['bucket_search']:.1f}x "
    "slower)"
    for k, rows in results.items()
    for r in (0, 2)
    if "flips" in rows[f"radius {r}"]
  ]
  warm = []
  for num_bits, rows in results.items():
    for radius in (0, 2):
      w = rows[f"radius {radius} back to back"]
      warm.append(
        f"K = {num_bits}, r = {radius}: x{w['hash'] / w['bucket_search']:.2f} vs "
        f"hash, x{w['multi'] / w['bucket_search']:.2f} vs multi-hash "
        f"({w['bucket_search'] * 1e3:.2f} / {w['hash'] * 1e3:.2f} / "
        f"{w['multi'] * 1e3:.2f} ms)"
      )
  lines += [
    "",
    f"Back to back (each called {WARM_CALLS} times in a row, its first call dropped, 4 "
    f"rounds taking turns; FAISS on {threads} threads; ratio as above; jhash / hash / "
    "multi-hash ms per call): " + "; ".join(warm) + ". Interleaved (the table), every "
    "call runs after another contender's, with its index and code partly out of cache; "
    "back to back is what a caller running many searches in a row sees.",
    "",
    "Build (median, default threads): " + "; ".join(builds) + ".",
    "",
    "Per query: " + "; ".join(stats) + ".",
    "",
    "Notes. The radius-2 speed at 64 bits comes from the substring tables (multi-index "
    "hashing: 3 lookups per query instead of 2,081 probes); without them "
    "(`use_substrings=False`, flip masks) jhash ran " + ("; ".join(flips) or "-") + ". "
    "On the CPU the whole search is one call of jhash's native kernel (`jhash.native`), "
    "its queries spread over XLA's thread pool on both cores. At radius 0 a call for "
    "1,000 queries takes well under a millisecond on both sides, so fixed costs decide: "
    "jhash's dispatch and result copies against FAISS's per-query C++ loop plus the NumPy "
    "mapping of codes to items. How the two compare depends on what else the machine "
    "runs: FAISS's 2 OpenMP threads wait for each other at every parallel region while "
    "another process holds a core. Before the native kernel (the array code, which GPUs "
    "and TPUs run), on nearly idle cores jhash was x0.79-1.16 against the hash index at "
    "radius 0 and x0.72-0.91 against the multi-hash index at radius 2 (2026-12-02).",
    "",
  ]
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="small smoke run; prints only")
  args = parser.parse_args()
  if args.quick:
    sizes, repeats = (25_000, 100_000, 200), 2
  else:
    sizes, repeats = (250_000, 1_000_000, 1_000), 7
  rng = np.random.default_rng(0)
  results = {num_bits: run_bits(num_bits, *sizes, repeats, rng) for num_bits in (32, 64)}
  text = table(results, args, sizes, repeats)
  print(text)
  if not args.quick:
    _report.replace_section(text)
  if not all(r["radius 0 same"] and r["radius 2 same"] for r in results.values()):
    raise SystemExit("jhash and FAISS returned different item sets")


if __name__ == "__main__":
  main()
