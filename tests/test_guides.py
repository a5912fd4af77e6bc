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
CHECKED = ("research-code.md",)  # each run, and its results checked, below


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
