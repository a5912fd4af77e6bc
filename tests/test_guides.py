"""The guides in ``docs/`` run: each one's Python blocks, in order, in one namespace, and
what a guide says its code computes is checked.

A guide is a promise that its code works; running it here keeps the promise when the
library changes."""

import pathlib
import re

import jax
import numpy as np
import pytest

import jhash

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
GUIDES = sorted(p.name for p in DOCS.glob("*.md") if "```python" in p.read_text())
CHECKED = (  # each run, and its results checked, below
  "research-code.md",
  "getting-started.md",
  "concepts.md",
  "own-data.md",
  "multi-code.md",
  "scaling.md",
  "native.md",
)


def _run(name: str) -> dict:
  namespace = {"__name__": f"guide_{name}"}
  blocks = re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(), flags=re.S)
  for i, block in enumerate(blocks):
    try:
      exec(compile(block, f"{name} block {i + 1}", "exec"), namespace)
    except Exception as error:
      raise AssertionError(f"{name}, block {i + 1}, failed:\n{block}") from error
  return namespace


def test_every_guide_is_run_here():
  assert GUIDES == sorted(CHECKED), "a guide with Python blocks needs its test below"


def test_the_research_code_guide_computes_what_it_says(capsys):
  ns = _run("research-code.md")
  assert ns["metrics"]["loss"].shape == (3, 12)  # the sweep: 3 values, 6 steps x 2 epochs
  state, mine, query, train = ns["state"], ns["mine"], ns["query"], ns["train"]
  eager = jhash.metrics.mean_average_precision(
    jhash.encode(mine, state, query),
    jhash.encode(mine, state, train),
    query["labels"],
    train["labels"],
  )
  assert float(ns["evaluate"](state)) == pytest.approx(eager, abs=1e-6)
  assert ns["features"].shape == (60, 32)
  grads = jax.tree.leaves(ns["grads"])
  assert grads and all(np.isfinite(np.asarray(g)).all() for g in grads)
  assert ns["found"].value in (0.01, 1.0) and len(ns["found"].scores) == 2


def test_the_readme_example_is_the_getting_started_example():
  # The README's example is run by the test below, as the getting-started guide's.
  readme = (DOCS.parent / "README.md").read_text()
  blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
  guide = re.findall(r"```python\n(.*?)```", (DOCS / "getting-started.md").read_text(), re.S)
  normalize = lambda code: [line.split("  #")[0].rstrip() for line in code.splitlines()]  # noqa: E731
  assert len(blocks) == 1 and normalize(blocks[0]) == normalize(guide[0])


def test_the_getting_started_example_scores_its_codes():
  ns = _run("getting-started.md")
  assert ns["q_codes"].shape == (200, 32) and ns["idx"].shape == (200, 10)
  assert 0.5 < ns["score"] <= 1.0


@pytest.mark.parametrize(
  "name", ["concepts.md", "own-data.md", "multi-code.md", "scaling.md", "native.md"]
)
def test_the_guides_with_their_own_checks_run(name):
  # Each of these guides asserts what it says its code computes, in its own blocks.
  _run(name)
