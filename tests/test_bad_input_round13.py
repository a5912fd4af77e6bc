"""Bad input, round 13: what round 12 left (config keys accepted and ignored, flag errors of
one kind) and what the thirteenth probe found. Each case names what it did before."""

import jax
import numpy as np
import pytest

import _experiment_runs as runs
import jhash
from jhash import codes
from jhash import metrics
from experiments import harness
from experiments import quickstart


def _refused(validate, config, match):
  with pytest.raises(harness.ConfigError, match=match):
    validate(config)


@pytest.mark.parametrize(
  "part, key, value, match",
  [
    ("fashion", "trainer", "experiments.cdh_mfeat", r"config\.fashion\.trainer: .*retrieval"),
    (
      "cross_view.dataset",
      "validation_per_class",
      3,
      r"cross_view\.dataset\.validation_per_class: must be an int in \[0, 0\]",
    ),
  ],
)
def test_quickstart_refuses_keys_it_would_ignore(part, key, value, match):
  config = runs.load_config("quickstart", "tiny").unlock()
  node = config
  for name in part.split("."):
    node = node[name]
  node[key] = value  # was: accepted, and the part ran as if it were not there
  _refused(quickstart.validate, config, match)


def test_the_sharded_map_reads_labels_in_the_real_rows_only():
  rng = np.random.default_rng(0)
  mesh = jax.make_mesh((1,), ("db",))
  q = np.where(rng.random((5, 16)) < 0.5, -1, 1).astype(np.int8)
  db = np.where(rng.random((12, 16)) < 0.5, -1, 1).astype(np.int8)
  ql, dl = np.arange(5) % 3, np.arange(12) % 3
  padded = dl.copy()
  padded[9:] = -1  # the padding rows: "may hold anything", as their codes
  want = metrics.mean_average_precision(q, db[:9], ql, dl[:9])
  got = metrics.sharded_mean_average_precision(q, db, ql, padded, mesh=mesh, num_rows=9)
  assert got == pytest.approx(float(want), abs=1e-6)  # was: "db_labels ... >= 0" refused
  bad = padded.copy()
  bad[2] = -1  # a real row's label is still checked
  with pytest.raises(ValueError, match="db_labels"):
    metrics.sharded_mean_average_precision(q, db, ql, bad, mesh=mesh, num_rows=9)
  with pytest.raises(ValueError, match=r"db_labels must have shape \[12\]"):
    metrics.sharded_mean_average_precision(q, db, ql, dl[:9], mesh=mesh, num_rows=9)


def test_every_flag_is_refused_with_one_kind_of_error(tmp_path):
  signs = np.array([[1, -1, 1]], np.int8)
  with pytest.raises(ValueError, match="bits must be True or False; got str 'yes'"):
    codes.pack_bits(signs, bits="yes")
  with pytest.raises(ValueError, match="signed must be True or False; got str 'yes'"):
    codes.unpack_bits(codes.pack_bits(signs), 3, signed="yes")  # was: TypeError
  with pytest.raises(ValueError, match="overwrite must be True or False; got str 'yes'"):
    jhash.save(tmp_path / "s", {"a": np.zeros(2)}, overwrite="yes")  # was: TypeError


def test_a_stream_minibatch_naming_an_item_twice_is_refused():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(32, 6)).astype(np.float32)
  labels = np.arange(32) % 4
  method = jhash.methods.pairwise(8, batch_size=8, num_epochs=1, memory=True)

  def stream(repeat):
    for step in range(2):
      index = np.arange(8 * step, 8 * step + 8)
      if repeat and step == 1:
        index[3] = index[2]  # was: accepted; the memory bank got one of the two codes
      yield {"views": (x[index],), "labels": labels[index], "index": index}

  with pytest.raises(ValueError, match=r"minibatch of step 1: .*each position once.*\[10\]"):
    jhash.fit(method, jax.random.key(0), stream(True), 2, num_items=32, progress=False)
  state, _ = jhash.fit(method, jax.random.key(0), stream(False), 2, num_items=32, progress=False)
  assert state.memory.outputs.shape == (32, 8)


def test_a_state_of_another_method_of_the_same_name_is_named():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(40, 8)).astype(np.float32)
  batch, key = {"views": (x,), "labels": np.arange(40) % 4}, jax.random.key(0)
  net = jhash.models.backbone((8,), 4, hidden=(8,))
  itq = jhash.methods.itq(4, num_iters=2)
  same_name = jhash.methods.pairwise(4, backbone=net, batch_size=8, num_epochs=1, name="itq")
  states = {m: jhash.fit(m, key, batch, progress=False)[0] for m in (itq, same_name)}
  for method, other in ((itq, same_name), (same_name, itq)):
    for encode in (jhash.encode, jhash.encode_multi):  # was: AttributeError from inside
      with pytest.raises(ValueError, match=r"state must be a state itq makes .*another method"):
        encode(method, states[other], batch)
  query = {"views": (x[:0],)}  # no item, no labels: a state is still made to compare
  with pytest.raises(ValueError, match=r"\(PairwiseState\); got ITQState"):
    jhash.encode_multi(same_name, states[itq], query)


def test_fit_given_another_methods_state_says_how_to_resume():
  rng = np.random.default_rng(0)
  batch = {"views": (rng.normal(size=(40, 8)).astype(np.float32),), "labels": np.arange(40) % 4}
  net, key = jhash.models.backbone((8,), 4, hidden=(8,)), jax.random.key(0)
  options = dict(backbone=net, batch_size=8, num_epochs=1)
  state, _ = jhash.fit(jhash.methods.dch(4, **options), key, batch, progress=False)
  with pytest.raises(ValueError, match=r"Resume with the method that trained the state, or"):
    jhash.fit(jhash.methods.hashnet(4, **options), key, batch, state=state, progress=False)


@pytest.mark.parametrize("power", [0.0, -1.0])
def test_hashnet_refuses_a_continuation_that_runs_backwards(power):
  with pytest.raises(ValueError, match=r"power must be .*> 0"):
    jhash.methods.hashnet(4, power=power)  # was: accepted; beta fell towards 0


@pytest.mark.parametrize("ties", ["aware", "index"])
@pytest.mark.parametrize("max_distance", [None, 4])
def test_an_item_holding_no_code_is_never_retrieved_whatever_the_kernels_options(
  ties, max_distance
):
  no_code = np.iinfo(np.int32).max  # as jhash.search.multi_code_hamming gives it
  d, relevant = np.array([[0, no_code]], np.int32), np.array([[False, True]])
  options = dict(ties=ties, max_distance=max_distance)
  # was, without max_distance: AP 0.5, hits@2 1, NDCG@2 0.63 (ranked last, but retrieved)
  assert float(metrics.average_precision(d, relevant, **options)[0][0]) == 0.0
  assert float(metrics.hits_at_k(d, relevant, (2,), **options)[0, 0]) == 0.0
  assert float(metrics.ndcg(d, relevant.astype(np.int32), k=2, **options)[0][0]) == 0.0


def test_an_item_whose_one_code_is_masked_inside_jit_is_never_retrieved():
  # One code per item ([n, 1, K]) with a traced mask: the native kernels read the mask
  # (was: ignored for m = 1, so mAP 0.5, P@2 0.5 with ties "aware", NDCG 0.63).
  qc = np.array([[1, 1, 1, 1]], np.int8)
  dc = np.array([[[1, 1, 1, 1]], [[1, 1, 1, -1]]], np.int8)
  mask, ql, dl = np.array([[True], [False]]), np.array([0]), np.array([1, 0])
  args = (qc, dc, ql, dl)
  got = jax.jit(
    lambda m: (
      metrics.mean_average_precision(*args, db_mask=m),
      metrics.mean_average_precision(*args, db_mask=m, ties="index"),
      metrics.precision_at_k(*args, [2], db_mask=m)[0],
      metrics.ndcg_at_k(*args, 2, db_mask=m),
      *metrics.precision_recall_at_radius(*args, 4, db_mask=m),
    )
  )(mask)
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.zeros(6, np.float32))


def test_unpack_bits_reads_int64_words_past_2_31_as_their_uint32_values():
  words = np.array([[3_000_000_000]], np.int64)  # was: wrapped to int32 and refused
  np.testing.assert_array_equal(
    codes.unpack_bits(words, 32), codes.unpack_bits(words.astype(np.uint32), 32)
  )


def test_hashnet_map_inside_jit_names_the_traceable_rule():
  from jhash import evaluate

  rng = np.random.default_rng(0)
  q = rng.choice([-1, 1], (3, 8)).astype(np.int8)
  d = rng.choice([-1, 1], (10, 8)).astype(np.int8)
  with pytest.raises(TypeError, match=r"hashnet_map runs on the host .*ties='index'"):
    jax.jit(lambda a: evaluate.hashnet_map(a, d, np.arange(3), np.arange(10) % 3, 5))(q)


def test_the_unchecked_searches_check_their_static_arguments():
  from jhash import search

  rng = np.random.default_rng(0)
  q = codes.pack_bits(rng.choice([-1, 1], (3, 40)))
  d = codes.pack_bits(rng.choice([-1, 1], (20, 40)))
  signs = rng.choice([-1, 1], (20, 8)).astype(np.int8)
  # was: a runtime error from the kernel, or broadcasting, or ZeroDivisionError
  for call, match in [
    (lambda: search.hamming_topk_unchecked(q, d[0], 1, 40), r"db_packed must be 2-D"),
    (lambda: search.hamming_topk_unchecked(q, d[:, None], 1, 40), r"db_packed must be 2-D"),
    (
      lambda: search.weighted_hamming_topk_unchecked(signs[:3], signs[0], np.ones(8), 1),
      r"db_codes must be 2-D",
    ),
    (lambda: search.multi_code_topk_unchecked(q, d, np.ones((20, 1), bool), 1, 40), "3-D"),
    (
      lambda: search.hamming_topk_unchecked(q, d, 2, 40, query_chunk=0, method="xor"),
      "query_chunk must be >= 1",
    ),
    (lambda: search.hamming_topk_unchecked(q, d, 2, 40, query_chunk=2.5), "query_chunk"),
    (lambda: search.hamming_topk_unchecked(q, d, 2, 40, db_block=0), "db_block must be >= 1"),
    # A concrete num_valid below k returned padding rows, documented as never returned.
    (lambda: search.hamming_topk_unchecked(q, d, 5, 40, num_valid=3), r"num_valid .*\[5, 20\]"),
    (lambda: search.hamming_topk_unchecked(q, d, 5, 40, num_valid=-1), r"num_valid"),
  ]:
    with pytest.raises(ValueError, match=match):
      call()
  _, idx = search.hamming_topk_unchecked(q, d, 5, 40, num_valid=10)
  assert np.asarray(idx).max() < 10


def test_bool_codes_are_not_signs_even_all_true():
  ones = np.ones((2, 3), bool)  # was: read as +1 everywhere (a single False was refused)
  for call in (
    lambda: codes.pack_bits(ones),
    lambda: metrics.mean_average_precision(ones[:1], ones, np.array([0]), np.array([0, 1])),
    lambda: jhash.index.build_index(ones, num_bits=3),
  ):
    with pytest.raises(ValueError, match=r"must be signs -1 and \+1 .*from_bits"):
      call()


def test_negative_distances_are_refused_with_the_shift_that_keeps_the_ranking():
  d = np.array([[-2.0, 1.0, 0.5]], np.float32)
  with pytest.raises(ValueError, match=r"distances must be >= 0.*subtract each row's minimum"):
    metrics.average_precision(d, np.ones((1, 3), bool))
  shifted = metrics.average_precision(d - d.min(axis=1, keepdims=True), np.array([[0, 1, 1]]))
  assert float(shifted[0][0]) == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_evaluate_refuses_a_bad_argv_repeated_options_and_bad_row_counts(tmp_path, capsys):
  from jhash import evaluate

  rng = np.random.default_rng(0)
  files = {
    "q": rng.choice([-1, 1], (20, 16)).astype(np.int8),
    "db": rng.choice([-1, 1], (200, 16)).astype(np.int8),
    "ql": np.arange(20) % 3,
    "dl": np.arange(200) % 3,
  }
  for name, array in files.items():
    np.save(tmp_path / f"{name}.npy", array)
  argv = [
    "--query-codes", str(tmp_path / "q.npy"), "--db-codes", str(tmp_path / "db.npy"),
    "--query-labels", str(tmp_path / "ql.npy"), "--db-labels", str(tmp_path / "dl.npy"),
  ]  # fmt: skip
  assert evaluate.main(argv + ["--top-k", "5", "--top-k", "10"]) == 2  # was: mAP@10, silent
  assert "--top-k is given twice (--top-k 5, then --top-k 10)" in capsys.readouterr().err
  for bad in (" ".join(argv), ["--top-k", 5]):  # was: "arguments are required", TypeError
    with pytest.raises(TypeError, match="argv must be a list of str"):
      evaluate.main(bad)
  with pytest.raises(ValueError, match=r"num_rows must be a Python int >= 1 .*got str '20'"):
    evaluate.load_labels(str(tmp_path / "ql.npy"), "--query-labels", "20")
  np.save(tmp_path / "words.npy", codes.pack_bits(files["q"]).astype(np.int64))
  words = argv[:]
  words[1] = str(tmp_path / "words.npy")
  assert evaluate.main(words + ["--num-bits", "16"]) == 2  # was: a message about signs only
  assert "saved as uint32 words" in capsys.readouterr().err


def test_cdh_runs_hold_out_validation_items_only_to_choose_gamma(tmp_path):
  from experiments import cdh_figure1
  from experiments import cdh_mfeat

  config = runs.load_config("cdh_mfeat", "quick").unlock()
  config.dataset.validation_per_class = 0  # was: a traceback after the workdir was made
  with pytest.raises(harness.ConfigError, match=r"validation_per_class: must be an int in \[1, "):
    cdh_mfeat.train_and_evaluate(config, tmp_path / "mfeat")
  assert not (tmp_path / "mfeat").exists()
  config = runs.load_config("cdh_figure1", "quick").unlock()
  config.dataset.validation_per_class = 5  # was: ignored (figure 1 chooses no gamma)
  with pytest.raises(
    harness.ConfigError, match=r"validation_per_class: must be an int in \[0, 0\]"
  ):
    cdh_figure1.train_and_evaluate(config, tmp_path / "figure1")


@pytest.mark.parametrize("name, num_train", [("canvases", 600), ("yeast", 2300)])
def test_cdh_multilabel_checks_its_split_sizes_before_training(name, num_train):
  from experiments import cdh_multilabel

  config = runs.load_config("cdh_multilabel", "quick" if name == "canvases" else None).unlock()
  config.datasets[name].num_train = num_train  # was: a traceback naming num_queries
  with pytest.raises(harness.ConfigError, match=r"num_train \+ num_queries \+ num_validation"):
    cdh_multilabel.check_config(config)


@pytest.mark.parametrize(
  "path, value, match",
  [
    ("dataset.query_per_class", 0, r"config\.dataset: the split holds no queries"),
    ("dataset.database_limit", 0, r"config\.dataset: database_limit must be >= 1"),
    ("dataset.train_per_class", 0, r"config\.dataset: "),
    ("hash_function", "cnn", r"config\.hash_function: .*allowed values: "),
    ("step_sizes", ("lin",), r"config\.step_sizes: 'lin'"),
  ],
)
def test_hbmp_step_sizes_names_its_keys_before_training(tmp_path, path, value, match):
  from experiments import hbmp_step_sizes

  config = runs.load_config("hbmp_step_sizes", "quick").unlock()
  node, *_ = path.split(".")
  if "." in path:
    config[node][path.split(".")[1]] = value
  else:
    config[path] = value
  # was: tracebacks after training (no queries), or from load_protocol, or "config: 'cnn'"
  with pytest.raises(harness.ConfigError, match=match):
    hbmp_step_sizes.train_and_evaluate(config, tmp_path / "w")
  assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
  "key, value, match",
  [
    ("num_classes", 11, r"config\.num_classes: must be at most Fashion-MNIST's 10"),
    ("instances_per_class", 100_000, r"config\.instances_per_class: must be at most the 7,000"),
  ],
)
def test_hbmp_figure1_bounds_its_classes_and_instances(key, value, match):
  from experiments import hbmp_figure1

  config = runs.load_config("hbmp_figure1", "quick").unlock()
  config[key] = value  # was: 11 ran 10 classes silently; 100,000 a traceback naming other keys
  with pytest.raises(harness.ConfigError, match=match):
    hbmp_figure1.validate(config)


def test_the_retrieval_trainer_refuses_what_no_method_would_report():
  from experiments import retrieval

  def refused(change, match):
    config = runs.load_config("baselines", "tiny").unlock()
    change(config)
    with pytest.raises(harness.ConfigError, match=match):
      retrieval.validate(config)

  # was: empty tables and plots after training (LSH and ITQ have one code, no weights)
  refused(lambda c: setattr(c, "tables", ("map_multi",)), r"no method .* reports 'map_multi'")
  # was: a misspelt sweep parameter skipped for every method, an empty table
  refused(lambda c: c.evaluation.update({"sweep": {"sigmaa": (0.5,)}}), r"sweep\.sigmaa: no method")
  refused(lambda c: c.evaluation.update({"controls": True}), r"controls: True needs an MCH method")
  refused(
    lambda c: (c.evaluation.update({"f1_buckets": True}), c.plots.update({"f1_bucket_bits": None})),
    r"f1_buckets needs config\.plots\.f1_bucket_bits",
  )
  refused(
    lambda c: (c.evaluation.update({"topn": (1, 5)}), c.plots.update({"pr_curve_bits": 0})),
    r"topn needs config\.plots\.pr_curve_bits",
  )


@pytest.mark.parametrize("arg", ["canvases", "quick", "scenes-quick"])
def test_every_none_of_the_mch_configs_can_be_set_on_the_command_line(arg):
  config = runs.load_config("mch", arg)
  # A plain None field cannot be overridden (ml_collections: "Type NoneType of field ...
  # is not supported for overriding"); a placeholder of its type can.
  for node, key in ((config.evaluation, "ndcg_at"), (config.plots, "pr_curve_bits")):
    assert node.get_ref(key).get_type() is int, key


def test_the_results_page_says_damaged_repeated_and_where_it_cannot_write(tmp_path, capsys):
  import json

  from experiments import report

  results = tmp_path / "results.json"
  for damaged, match in (
    ([], r"is damaged: a run's results are a JSON object; got list"),
    ({"table": 123}, r"is damaged: its 'table' must be text; got int"),
  ):
    results.write_text(json.dumps(damaged))  # was: "written by an older jhash?"
    with pytest.raises(ValueError, match=match):
      report.load(tmp_path)
  results.write_text(json.dumps({"table": "| a |\n|---|\n| 1 |"}))
  assert report.main([str(tmp_path), str(tmp_path)]) == 2  # was: the section twice
  assert "is given twice" in capsys.readouterr().err
  (tmp_path / "file").write_text("")
  assert report.main([str(tmp_path), "--out", str(tmp_path / "file" / "page.md")]) == 2
  assert "is a file, not a folder to write the page in" in capsys.readouterr().err  # was:
  # "cannot write (File exists)"


def test_pretrain_refuses_a_checkpoint_interval_of_0():
  from experiments import pretrain

  config = runs.load_config("pretrain", "quick").unlock()
  config.checkpoint_every = 0  # was: accepted, checkpoints silently off
  with pytest.raises(harness.ConfigError, match=r"config\.checkpoint_every: must be an int >= 1"):
    pretrain.validate(config)


def test_the_runner_refuses_repeated_flags_a_trainer_override_and_stray_words():
  from experiments import main

  config = "experiments/configs/baselines.py:tiny"
  for argv, match in (
    (
      ["--config", config, "--config", "experiments/configs/cdh_mfeat.py:quick"],
      "--config is given 2 times",
    ),
    (["--config", config, "--workdir", "a", "--workdir=b"], "--workdir is given 2 times"),
    (
      ["--config", config, "--config.trainer=experiments.cdh_mfeat"],
      r"--config\.trainer=.*its trainer",
    ),
  ):  # was: the last --config loaded (a SyntaxError traceback, "defined twice"), or
    # "unknown key 'datasets'" for another trainer's config
    with pytest.raises(SystemExit, match=match):
      main._parse_flags(["main", *argv])
  with pytest.raises(SystemExit, match=r"error: unexpected arguments: extra \(the flags are"):
    main.main(["main", "extra"])  # was: the usage text, 18 lines, then the message


def test_the_absl_scripts_help_exits_0_and_a_bad_flag_is_one_line(monkeypatch, capsys):
  from experiments import _cli

  monkeypatch.setattr("sys.argv", ["script", "--help"])
  with pytest.raises(SystemExit) as stop:  # was: status 1
    _cli.run(lambda argv: None)
  assert stop.value.code == 0 and "flags:" in capsys.readouterr().out
  with pytest.raises(SystemExit) as stop:  # was: "FATAL Flags parsing error", status 1
    _cli.parse_flags(["script", "--no_such_flag_here"])
  assert stop.value.code == 2
  assert capsys.readouterr().err.startswith("error: Unknown command line flag")

  def interrupted(argv):
    raise KeyboardInterrupt

  monkeypatch.setattr("sys.argv", ["script"])
  with pytest.raises(SystemExit, match=r"^interrupted: the script stopped"):  # was: a traceback
    _cli.run(lambda argv: None, flags_parser=interrupted)  # Ctrl-C while flags are read
    # (a parser of its own: absl's flags are process-wide, and another test's import of
    # experiments.main makes its --config and --workdir required)


def test_quickstart_names_its_shared_bits_as_the_user_set_them():
  config = runs.load_config("quickstart", "tiny").unlock()
  config.cross_view.bits = (8,)  # one value with config.bits and config.fashion.bits
  # was: "config.fashion.plots.pr_curve_bits ...: 16 is not allowed", a key in the other part
  _refused(
    quickstart.validate,
    config,
    r"pr_curve_bits: 16 is not one of config\.bits \(8,\) \(config\.bits is shared",
  )
  config = runs.load_config("quickstart", "tiny").unlock()
  config.bits = (0,)  # was: "config.fashion.bits: ..."
  _refused(quickstart.validate, config, r"^config\.bits: must be a tuple of ints >= 1")
