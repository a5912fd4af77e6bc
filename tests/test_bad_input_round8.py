"""Bad input, round 8: what an eighth probe round found (about 440 cases)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import _data_files
import jhash
from jhash import distributed


def _packed(rng, n, bits=20):
  return rng.integers(0, 2**bits, (n, 1)).astype(np.uint32)


@pytest.mark.parametrize("n, num_rows, k", [(7, 3, 3), (7, 6, 6), (8, 6, 4), (9, 1, 1)])
def test_sharded_topk_takes_num_rows_below_the_padded_rows(n, num_rows, k):
  # Was: "index can't contain negative values" whenever num_rows rounded up to the mesh
  # stayed below the database's rows.
  rng = np.random.default_rng(n * 10 + num_rows)
  db, q = _packed(rng, n), _packed(rng, 4)
  mesh = jax.make_mesh((1,), ("db",))
  got = jhash.search.sharded_hamming_topk(q, db, k, mesh=mesh, num_rows=num_rows, num_bits=20)
  want = jhash.search.hamming_topk(q, db[:num_rows], k, num_bits=20)
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_sharded_map_reads_global_rows_of_an_explicit_mesh_with_num_rows():
  rng = np.random.default_rng(0)
  codes = np.sign(rng.normal(size=(7, 20))).astype(np.int8)
  queries = np.sign(rng.normal(size=(3, 20))).astype(np.int8)
  labels, q_labels = rng.integers(0, 3, 7), rng.integers(0, 3, 3)
  mesh = jax.make_mesh((1,), ("db",))
  rows = distributed.global_rows(codes, 7, mesh)
  got = jhash.metrics.sharded_mean_average_precision(  # was: ShardingTypeError
    queries, rows, q_labels, distributed.global_rows(labels, 7, mesh), mesh=mesh, num_rows=7
  )
  want = jhash.metrics.mean_average_precision(queries, codes, q_labels, labels, ties="aware")
  assert got == pytest.approx(want, abs=1e-6)
  for bad in (None, np.int8(1)):  # was: IndexError
    with pytest.raises(ValueError, match=r"db_codes must be an array \[n, K\]"):
      jhash.metrics.sharded_mean_average_precision(queries, bad, q_labels, labels, mesh=mesh)


def test_global_rows_refuses_values_jax_would_change_and_ragged_rows():
  mesh = distributed.process_mesh()
  for local in (np.array([2**40, 1, 5]), np.array([2**33, 1, 5], np.uint64)):
    with pytest.raises(ValueError, match=r"local holds .* which (int|uint)32 .* cannot hold"):
      distributed.global_rows(local, 3, mesh)  # was: 0 in its place
  with pytest.raises(ValueError, match=r"which float32 .* cannot hold"):
    distributed.global_rows(np.array([1e300, 1.0, 2.0]), 3, mesh)  # was: inf
  np.testing.assert_array_equal(  # float64 that float32 holds: rounded, as JAX does
    distributed.gather(distributed.global_rows(np.array([1.5, 2.0, 3.0]), 3, mesh))[:3],
    [1.5, 2.0, 3.0],
  )
  with pytest.raises(ValueError, match=r"local must be an array of rows of one shape"):
    distributed.global_rows([[1, 2], [3]], 2, mesh)  # was: NumPy's own message


def test_the_host_functions_say_so_inside_jit():
  mesh = distributed.process_mesh()
  with pytest.raises(TypeError, match=r"global_rows runs on the host, outside jit"):
    jax.jit(lambda x: distributed.global_rows(x, 3, mesh))(jnp.arange(3))
  with pytest.raises(TypeError, match=r"gather runs on the host, outside jit"):
    jax.jit(distributed.gather)(jnp.arange(3))
  with pytest.raises(ValueError, match=r"x holds PRNG keys"):
    distributed.gather(jax.random.key(0))  # was: "Cannot interpret 'key<fry>' as a data type"


def test_unhashable_arch_and_variables_without_collections_are_named():
  for arch in (["resnet18"], {"a": 1}):  # was: TypeError: unhashable type
    with pytest.raises(ValueError, match=r"arch must be one of 'resnet18', 'resnet50'"):
      jhash.models.backbone((64, 64, 3), 16, arch=arch)
    with pytest.raises(ValueError, match=r"arch must be one of 'resnet18', 'resnet50', 'alexnet'"):
      jhash.models.load_torchvision("x.pth", {}, arch)
  with pytest.raises(TypeError, match=r"variables must be the ResNet's variables"):
    jhash.models.load_torchvision("x.safetensors", {"params": 3}, "resnet18")  # was IndexError


def test_a_single_image_given_to_alexnet_is_named_as_read():
  net = jhash.models.model(jhash.models.alexnet(8))
  with pytest.raises(ValueError, match=r"x of shape \(32, 32, 3\) reads as 32 one-channel images"):
    net.init(jax.random.key(0), np.zeros((32, 32, 3), np.float32))  # was: (32, 32, 3, 1)


@pytest.fixture(scope="module")
def resnet_state():
  torch = pytest.importorskip("torch")
  variables, state = _data_files.resnet18_torchvision_state()
  return torch, variables, {k: torch.from_numpy(v) for k, v in state.items()}


def test_pth_weights_must_be_floating_point_and_a_flat_state_dict(resnet_state, tmp_path):
  torch, variables, state = resnet_state
  for dtype in (torch.int32, torch.bool):  # was: loaded as floats
    bad = dict(state, **{"conv1.weight": torch.ones(state["conv1.weight"].shape, dtype=dtype)})
    torch.save(bad, tmp_path / "bad.pth")
    with pytest.raises(ValueError, match=r"conv1.weight in .* must hold floating-point weights"):
      jhash.models.load_torchvision(tmp_path / "bad.pth", variables, "resnet18")
  torch.save({"state_dict": state}, tmp_path / "nested.pth")
  with pytest.raises(ValueError, match=r"its key 'state_dict' holds a dict"):
    jhash.models.load_torchvision(tmp_path / "nested.pth", variables, "resnet18")
  torch.save(state, tmp_path / "good.pth")  # the same weights as floats load
  jhash.models.load_torchvision(tmp_path / "good.pth", variables, "resnet18")


def test_a_searcher_checks_the_result_arrays_fit_in_memory_at_each_call():
  codes = np.sign(np.random.default_rng(0).normal(size=(50, 12))).astype(np.int8)
  index = jhash.index.build_index(jhash.codes.pack_bits(codes), num_bits=12)
  search = jhash.index.searcher(index, max_radius=1, max_results=2**31 - 1).search
  with pytest.raises(ValueError, match=r"max_results=2,147,483,647 slots for 5 queries"):
    search(jhash.codes.pack_bits(codes[:5]))  # was: XLA's RESOURCE_EXHAUSTED


def test_python_dash_m_jhash_is_the_jhash_command():
  import subprocess
  import sys

  out = subprocess.run(
    [sys.executable, "-m", "jhash", "--help"], capture_output=True, text=True, timeout=120
  )
  assert out.returncode == 0 and "usage: jhash" in out.stdout, out.stderr  # was: no __main__


def _papers_quick(tmp_path):
  from _experiment_runs import load_config

  config = load_config("papers", "quick").unlock()
  config.datasets.cifar10.root = str(tmp_path)
  return config


def test_the_retrieval_configs_refuse_pretrained_without_networks_and_repeated_bits(tmp_path):
  from _experiment_runs import run_config

  from experiments import harness

  config = _papers_quick(tmp_path)
  config.pretrained = str(tmp_path)  # was: ignored (quick trains ITQ and LSH only)
  with pytest.raises(harness.ConfigError, match=r"config.pretrained=.* starts the deep methods"):
    run_config(config.lock(), tmp_path / "a")
  config = _papers_quick(tmp_path)
  config.bits = (16, 16)  # was: a table with the same column twice
  with pytest.raises(harness.ConfigError, match=r"config.bits: each value once; 16 repeats"):
    run_config(config.lock(), tmp_path / "b")


def test_map_at_takes_an_int_or_none_from_the_command_line():
  from experiments import retrieval

  for given, want in (("5", 5), ("100000", 100000), ("None", None), ("protocol", 5000)):
    evaluation = {"map_at": given}  # absl gives a config's str key the text as typed
    assert retrieval.map_at(evaluation, "nuswide_21") == want, given
  # was: "must be ints >= 1; got ['5']"


def test_an_empty_root_is_refused_not_read_as_the_working_directory():
  for name in ("cifar10", "nuswide_21", "wiki_cv"):
    with pytest.raises(ValueError, match=r"root is empty"):
      jhash.data.load_protocol(name, 0, root="")


def test_a_single_label_list_set_refuses_rows_of_several_labels_or_none(tmp_path):
  from PIL import Image

  for i in range(4):
    Image.new("RGB", (4, 4), (60 * i, 0, 0)).save(tmp_path / f"{i}.png")
  one_hot = lambda c: " ".join("1" if j == c else "0" for j in range(100))
  two = " ".join("1" if j in (1, 2) else "0" for j in range(100))
  (tmp_path / "train.txt").write_text(f"0.png {one_hot(0)}\n1.png {two}\n")
  (tmp_path / "test.txt").write_text(f"2.png {one_hot(3)}\n")
  (tmp_path / "database.txt").write_text(f"3.png {one_hot(4)}\n0.png {one_hot(0)}\n")
  with pytest.raises(
    jhash.data.DataFormatError, match=r"train.txt, image 2 \(.*1.png\), has 2 labels set"
  ):
    jhash.data.load_paper_lists("imagenet100", tmp_path)  # was: read as multi-label


def test_cifar10_files_without_every_class_are_refused(tmp_path):
  folder = tmp_path / "cifar-10-batches-bin"
  folder.mkdir()
  names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
  for name in names:  # files of zeros: every label 0
    (folder / name).write_bytes(bytes(20 * 3073))
  with pytest.raises(jhash.data.DataFormatError, match=r"no image of class 1 \(classes absent"):
    jhash.data.load_protocol(
      "cifar10", 0, root=tmp_path, records_per_file=None, query_per_class=1, train_per_class=1
    )  # was: a one-class split
