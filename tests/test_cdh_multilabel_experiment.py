"""cdh_multilabel end to end on its quick config (the canvases, 2 seeds, 16 bits): what
CDH and CDH-0 learned against random codes, the choice of gamma, the summary and table
over seeds; and the two views of each data set.

About 19 CPU-s on 2 cores, mostly compiling CDH's sweep (once) and its initial state.
"""

import numpy as np
import pytest

import _experiment_runs as runs
from jhash import data as jdata
from experiments import cdh_common as common
from experiments import cdh_multilabel
from experiments import harness


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("cdh_multilabel")
  with runs.xla_optimized():  # CDH's fits: running them takes longer than compiling
    return (workdir,) + runs.run("cdh_multilabel", workdir, ("summary", "protocol"))


def cell_names(config):
  return sorted(
    cdh_multilabel.cell_name(name, seed, bits)
    for name in config.datasets
    for seed in config.seeds
    for bits in config.bits
  )


def random_code_map(query, database, bits: int, seed: int) -> float:
  """mAP of random codes (query against database labels), one draw."""
  rng = np.random.default_rng(seed)
  codes = lambda batch: rng.choice(np.array([-1, 1], np.int8), (batch["labels"].shape[0], bits))
  return common.mean_ap(codes(query), codes(database), query["labels"], database["labels"])


def test_cdh_and_cdh0_codes_far_above_random_codes_in_every_cell(quick):
  _, config, results = quick
  cells = results["metrics"]
  assert sorted(cells) == cell_names(config)
  for name, spec in config.datasets.items():
    for seed in config.seeds:
      data = cdh_multilabel.load_data(name, spec, seed)
      for bits in config.bits:
        cell = cells[cdh_multilabel.cell_name(name, seed, bits)]
        baseline = random_code_map(data["query"], data["train"], bits, seed)
        # Random codes score the expected AP of a random ranking, which ``chance`` is.
        assert cell["chance"] == pytest.approx(baseline, abs=0.03)
        a, b = cell["names"]
        # Measured (quick): cross-view 0.41-0.45 and against the learned codes 0.49-0.52,
        # chance 0.34-0.36.
        for method in ("cdh", "cdh-0"):
          for proto in (f"{a}->{b}", f"{b}->{a}"):
            assert cell[method][proto] > baseline + 0.04, (seed, method, proto, baseline)
          for proto in (f"{a}->B", f"{b}->B"):
            assert cell[method][proto] > baseline + 0.1, (seed, method, proto, baseline)


def test_cdh_is_the_validation_choice_and_cdh0_is_gamma_zero(quick):
  _, config, results = quick
  for cell in results["metrics"].values():
    grid, scores = cell["grid"], cell["validation_map"]
    assert grid == [0.0] + list(config.gamma_grid)
    assert scores == pytest.approx([np.mean(list(m.values())) for m in cell["validation_maps"]])
    chosen = 1 + int(np.argmax(scores[1:]))  # gamma = 0 never wins CDH's place
    assert cell["gamma"] == grid[chosen] > 0
    assert cell["cdh"] == cell["query_maps"][chosen] and cell["cdh-0"] == cell["query_maps"][0]
    # The generative term is in J at every gamma but 0.
    assert cell["generative"][0] == 0 and min(cell["generative"][1:]) > 0
    assert cell["objective"] == pytest.approx(np.add(cell["semantic"], cell["generative"]))


def test_a_cell_is_its_key_and_data(quick):
  # Rerun one cell from its key and data: the same choice and the same scores.
  _, config, results = quick
  name, seed, bits = next(iter(config.datasets)), config.seeds[-1], config.bits[0]
  data = cdh_multilabel.load_data(name, config.datasets[name], seed)
  again = cdh_multilabel.gamma_cell(config, harness.cell_key(seed, name, bits), data, bits)
  cell = results["metrics"][cdh_multilabel.cell_name(name, seed, bits)]
  assert again["gamma"] == cell["gamma"]
  assert again["query_maps"] == pytest.approx(cell["query_maps"])


def table_rows(table: str) -> dict:
  """(data set, method, direction) -> the other cells of each row of a markdown table."""
  rows = {}
  for line in table.splitlines()[2:]:
    cells = [c.strip() for c in line.strip("|").split("|")]
    rows[tuple(cells[:3])] = cells[3:]
  return rows


def test_summary_and_table_hold_every_direction_and_length(quick):
  workdir, config, results = quick
  cells, summary = results["metrics"], results["summary"]
  rows = table_rows(results["table"])
  n = len(config.seeds)
  assert sorted(summary) == sorted(config.datasets)
  for name, entry in summary.items():
    a, b = cells[cdh_multilabel.cell_name(name, config.seeds[0], config.bits[0])]["names"]
    assert entry["directions"] == [f"{a}->{b}", f"{b}->{a}", f"{a}->B", f"{b}->B"]
    for proto in entry["directions"]:
      for i, bits in enumerate(config.bits):
        column = [cells[cdh_multilabel.cell_name(name, s, bits)] for s in config.seeds]
        cdh = np.asarray([c["cdh"][proto] for c in column])
        zero = np.asarray([c["cdh-0"][proto] for c in column])
        got = entry[proto][str(bits)]
        assert got["cdh"]["mean"] == pytest.approx(cdh.mean())
        assert got["cdh-0"]["std"] == pytest.approx(zero.std(ddof=1))
        assert got["difference"]["values"] == pytest.approx((cdh - zero).tolist())
        assert got["wins"] == int(np.sum(cdh > zero))
        pm = lambda s, sign="": f"{s['mean']:{sign}.4f} ± {s['std']:.4f}"
        assert rows[(name, "CDH", proto)][i] == pm(got["cdh"])
        assert rows[(name, "CDH-0", proto)][i] == pm(got["cdh-0"])
        assert rows[(name, "CDH - CDH-0 (wins)", proto)][i] == (
          f"{pm(got['difference'], '+')} ({got['wins']}/{n})"
        )
    gammas = [
      cells[cdh_multilabel.cell_name(name, s, config.bits[0])]["gamma"] for s in config.seeds
    ]
    assert entry["gamma"][str(config.bits[0])] == gammas
    assert rows[(name, "CDH gamma per seed", "")][0] == ", ".join(f"{g:g}" for g in gammas)
  assert len(rows) == sum(3 * 4 + 2 for _ in summary)  # nothing else in the table
  runs.assert_pngs(workdir, ("map_vs_bits.png",))


def test_the_two_views_of_each_data_set():
  full = runs.load_config("cdh_multilabel", None)
  spec = full.datasets.yeast
  data = cdh_multilabel.load_data("yeast", spec, 0)
  train, held_out, _ = jdata.load_protocol(
    "yeast", 0, num_train=spec.num_train, num_queries=spec.num_queries + spec.num_validation
  )
  x = train["views"][0]
  assert data["names"] == ("att1-52", "att53-103")
  np.testing.assert_array_equal(data["train"]["views"][0], x[:, :52])
  np.testing.assert_array_equal(data["train"]["views"][1], x[:, 52:])
  assert data["fit"] is data["train"]
  sizes = {part: data[part]["labels"].shape[0] for part in ("train", "query", "validation")}
  assert sizes == {"train": 1700, "query": 417, "validation": 300}
  # Queries and validation queries cut the held-out genes: together, each exactly once.
  rows = lambda batch: np.concatenate(batch["views"], axis=1)
  both = np.concatenate([rows(data["query"]), rows(data["validation"])])
  np.testing.assert_array_equal(np.unique(both, axis=0), np.unique(held_out["views"][0], axis=0))
  quick = runs.load_config("cdh_multilabel")
  canvases = cdh_multilabel.load_data("canvases", quick.datasets.canvases, 0)
  assert canvases["names"] == ("top", "bottom")
  for view in canvases["train"]["views"]:
    assert view.shape == (300, 28 * 56) and view.dtype == np.float32
    np.testing.assert_allclose(view.mean(axis=0), 0, atol=1e-5)
    assert np.sqrt(np.mean(view**2)) == pytest.approx(1, rel=1e-4)
  labels = canvases["train"]["labels"]
  assert labels.dtype == bool and labels.shape[1] == 10 and labels.any(axis=1).all()
  assert (
    canvases["query"]["views"][0].shape
    == canvases["validation"]["views"][1].shape
    == (100, 28 * 56)
  )
