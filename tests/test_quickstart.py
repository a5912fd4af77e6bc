"""The quickstart (``experiments/configs/quickstart.py:tiny``) end to end, in-process: what
each method learned, the one printed table, the combined results.json and its results page,
the plots, and a config refused before anything trains.

The thresholds come from what the methods are claimed to do, not from the numbers a run
gave: every method well above chance (a random ranking: 0.1 with ten balanced classes);
ITQ's learned rotation above LSH's random projections; HBMP's class codes and DCH's CNN,
both trained on the labels, clearly above ITQ, which never sees them; CDH clearly above
SCM in both cross-view directions (the README: far above every baseline at every length).
"""

import contextlib
import io

import pytest

import _experiment_runs as runs
from experiments import harness
from experiments import quickstart
from experiments import report

BITS = 16  # the tiny config's one code length
ROWS = (  # data set, method, what is measured: in the table's order
  ("Fashion-MNIST", "chance", "mAP"),
  ("Fashion-MNIST", "LSH", "mAP"),
  ("Fashion-MNIST", "ITQ", "mAP"),
  ("Fashion-MNIST", "HBMP (linear)", "mAP"),
  ("Fashion-MNIST", "DCH (small CNN)", "mAP"),
  ("mfeat pix/fou", "chance", "mAP"),
  ("mfeat pix/fou", "SCM", "mAP pix->fou"),
  ("mfeat pix/fou", "SCM", "mAP fou->pix"),
  ("mfeat pix/fou", "CDH", "mAP pix->fou"),
  ("mfeat pix/fou", "CDH", "mAP fou->pix"),
)
PLOTS = (
  "map_bars.png",
  "fashion_mnist/map_vs_bits.png",
  "fashion_mnist/pr_radius.png",
  "fashion_mnist/dch_loss.png",
  "fashion_mnist/hbmp_bit_error.png",
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  """The tiny run: (workdir, results.json, what it printed)."""
  workdir = tmp_path_factory.mktemp("quickstart") / "run"
  printed = io.StringIO()
  with contextlib.redirect_stdout(printed):
    results = runs.run_config(runs.load_config("quickstart", "tiny"), workdir, ("parts",))
  return workdir, results, printed.getvalue()


def _map(results, cell: str, measure: str = "map") -> float:
  return results["metrics"][cell][measure]


def test_the_learned_methods_beat_the_baselines_and_chance(tiny):
  _, results, _ = tiny
  fashion = {m: _map(results, f"fashion_mnist/{m}/{BITS}") for m in ("lsh", "itq", "hbmp", "dch")}
  chance = _map(results, "fashion_mnist/chance")
  assert 0.09 < chance < 0.12, chance  # ten balanced classes
  assert all(v > 2 * chance for v in fashion.values()), fashion
  assert fashion["itq"] > fashion["lsh"], fashion
  assert fashion["hbmp"] > fashion["itq"] + 0.05, fashion
  assert fashion["dch"] > fashion["itq"] + 0.05, fashion
  chance = _map(results, "mfeat/chance")
  assert 0.09 < chance < 0.12, chance
  for direction in ("pix->fou", "fou->pix"):
    cdh = _map(results, f"mfeat/cdh/{BITS}", direction)
    scm = _map(results, f"mfeat/scm/{BITS}", direction)
    assert scm > 2 * chance and cdh > scm + 0.05, (direction, cdh, scm)


def test_one_table_names_every_method_and_holds_the_run_numbers(tiny):
  _, results, printed = tiny
  table = results["table"]
  assert f"Quickstart (seed 0):\n{table}" in printed
  lines = table.splitlines()
  header = [c.strip() for c in lines[0].split("|")[1:-1]]
  assert header == ["data set", "method", "measured", "config", f"{BITS} bits"]
  rows = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[2:]]
  assert [tuple(r[:3]) for r in rows] == list(ROWS)
  dch = next(r for r in rows if r[1] == "DCH (small CNN)")
  assert (
    dch[3] == "fashion.methods.dch"
    and dch[4] == f"{_map(results, f'fashion_mnist/dch/{BITS}'):.4f}"
  )
  cdh = next(r for r in rows if r[1] == "CDH" and r[2] == "mAP fou->pix")
  assert cdh[4] == f"{_map(results, f'mfeat/cdh/{BITS}', 'fou->pix'):.4f}"


def test_results_json_the_parts_and_the_results_page(tiny):
  workdir, results, _ = tiny
  assert results["config"]["trainer"] == "experiments.quickstart"
  parts = {p: report.load(workdir / path.rsplit("/", 1)[0]) for p, path in results["parts"].items()}
  assert set(parts) == {"fashion", "cross_view"}
  for part, sub in parts.items():  # each part's own results, table and config
    assert sub["config"] == results["config"][part] and "| " in sub["table"], part
  cells = parts["cross_view"]["metrics"]
  assert set(cells) == {f"cdh/{BITS}", f"scm/{BITS}"}  # no gamma selection cells
  assert cells[f"cdh/{BITS}"]["gamma"] == results["config"]["cross_view"]["gamma"] == 0.003
  page = report.page([workdir], ["Quickstart"])
  assert page.startswith(f"# Quickstart\n\n{results['table']}\n")
  runs.assert_pngs(workdir, PLOTS)


@pytest.mark.parametrize(
  "change, names",
  [
    ({"cross_view.gama": 0.01}, ("gama", "gamma")),
    ({"fashion.methods.itq.num_iter": 3}, ("config.fashion.methods.itq", "num_iters")),
    ({"cross_view.baselines": ("scn",)}, ("scn", "'scm'")),
  ],
)
def test_a_config_naming_what_does_not_exist_is_refused_before_training(change, names, tmp_path):
  config = runs.load_config("quickstart", "tiny")
  with config.unlocked():
    for path, value in change.items():
      *parents, leaf = path.split(".")
      node = config
      for name in parents:
        node = node[name]
      node[leaf] = value
  with pytest.raises(harness.ConfigError) as error:
    quickstart.train_and_evaluate(config, tmp_path)
  for name in names:
    assert name in str(error.value), (name, str(error.value))
  assert not list(tmp_path.iterdir())  # nothing written, nothing trained
