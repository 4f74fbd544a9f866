"""FSDP2 (issue 30): two gloo ranks with ``--parallel fsdp`` reproduce one process step by step;
a sharded run resumes at another world size to the same losses; one process with a fake process
group builds the sharding plan of 8 ranks; the first 10 steps match a golden record."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from splitnet import checkpoint as ck
from splitnet import train as T
from splitnet.cli import build_parser
from splitnet.cli.commands.cmd_train import config_from_args

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(),
                                reason="torch.distributed not built")

BASE = ["--d-model", "32", "--n-heads", "2", "--context", "32", "--batch-size", "8",
        "--grad-accum", "2", "--warmup", "2", "--no-progress", "--no-plot", "--device", "cpu"]
LM = ["--n-layers", "2"]
TRANSLATE = ["--task", "translate", "--pairs", "copy", "--n-encoder-layers", "1",
             "--n-decoder-layers", "1"]
GOLDEN = Path(__file__).parent / "data" / "golden_fsdp.json"


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    p.write_text("".join(f"def g{i}(y):\n    return y - {i % 5}\n" for i in range(400)))
    return p


def _one(argv):
    return T.train(*config_from_args(build_parser("train").parse_args([*argv, "--threads", "1"])))


def _ranks(argv, n=2):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={n}", "-m", "splitnet", "train", *argv]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def _metrics(out):
    """The training records by step (a translation run's final test scores aside)."""
    return {r["step"]: r for r in ck.read_metrics(Path(out) / ck.METRICS) if "loss" in r}


def _data(task, text):
    """A task's data options (a translation run scores its pairs: it has no --eval-windows)."""
    return [] if task == "translate" else ["--text", str(text), "--eval-windows", "16"]


CASES = {
    "yoshida4-shared": LM + ["--scheme", "yoshida4"],
    "translation": TRANSLATE,
    "lie-trotter": LM,
    "strang-per-stage": LM + ["--scheme", "strang", "--weights", "per-stage"],
    "learned": LM + ["--scheme", "strang", "--learn-coefficients"],
}
FAST = ("yoshida4-shared", "translation")


@pytest.mark.heavy
@pytest.mark.parametrize("case", [c if c in FAST else pytest.param(c, marks=pytest.mark.slow)
                                  for c in CASES])
def test_two_fsdp_ranks_match_one_process(case, text, tmp_path):
    """Every step's loss within 1e-5 and gradient norm within 1e-4 (the norm of sharded
    gradients, made whole); the gathered checkpoints hold the same weights. The translation
    run ends with its test BLEU, decoded on rank 0 from the gathered weights (sacrebleu: the
    translate extra)."""
    if case == "translation":
        pytest.importorskip("sacrebleu")
    opts = [*_data("translate" if case == "translation" else "lm", text), *BASE, *CASES[case],
            "--steps", "4", "--eval-every", "2"]
    _one([*opts, "--out", str(tmp_path / "one")])
    res = _ranks([*opts, "--out", str(tmp_path / "two"), "--parallel", "fsdp"])
    assert "world=2" in res.stderr
    a, b = _metrics(tmp_path / "one"), _metrics(tmp_path / "two")
    assert sorted(a) == sorted(b) == [1, 2, 3, 4]
    for s in a:
        assert abs(a[s]["loss"] - b[s]["loss"]) < 1e-5, (s, a[s], b[s])
        assert abs(a[s]["grad_norm"] - b[s]["grad_norm"]) < 1e-4, (s, a[s], b[s])
    _check_sharded_checkpoint(tmp_path / "two", step=4)
    wa, wb = ck.load(tmp_path / "one"), ck.load(tmp_path / "two")
    assert wb["world_size"] == 2
    for k, v in wa["model"].items():
        torch.testing.assert_close(_comparable(k, wb["model"][k]), _comparable(k, v),
                                   atol=1e-5, rtol=1e-4)


def _check_sharded_checkpoint(out, step):
    """What a sharded save leaves: checkpoint.pt naming ``shards-<step>`` (no weights in the file
    itself), one shards folder (the older ones removed), which ck.load reads back whole; without
    the folder the checkpoint is a one-line error."""
    import shutil

    raw = torch.load(out / ck.CKPT, map_location="cpu", weights_only=True)
    assert raw["shards"] == f"shards-{step}" and raw["model"] == {} and raw["optimizer"] == {}
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [ck.CKPT, ck.METRICS, ck.LOCK, f"shards-{step}"])
    full = ck.load(out)
    assert full["model"] and all(isinstance(t, torch.Tensor) for t in full["model"].values())
    assert ck.load_model(out).config.d_model == 32                 # what every command does
    broken = out.parent / (out.name + "-broken")
    shutil.copytree(out, broken, ignore=shutil.ignore_patterns("shards-*"))
    with pytest.raises(ValueError, match=r"sharded weights .* missing") as e:
        ck.load(broken)
    assert "\n" not in str(e.value)


def _comparable(name, w):
    """``w`` without the key part of an attention's bias: softmax does not change when
    every key moves by the same vector, so that bias's gradient is zero up to rounding, and
    AdamW, dividing each step by the gradient's own scale, turns the rounding (which the
    ranks' reduction order changes) into steps of the learning rate's size."""
    if name.endswith("qkv.bias"):                    # self-attention: q, k, v
        d = w.shape[0] // 3
        return torch.cat([w[:d], w[2 * d:]])
    if name.endswith("kv.bias"):                     # cross-attention: k, v
        return w[w.shape[0] // 2:]
    return w


@pytest.mark.heavy
def test_a_sharded_run_resumes_at_another_world_size(text, tmp_path):
    """Saved by 2 fsdp ranks at step 4; resumed by 1 process and by 2 ranks: steps 5 and 6
    equal an uninterrupted single process's (and 1 process -> 2 fsdp ranks too)."""
    opts = [*_data("lm", text), *BASE, *LM, "--scheme", "strang", "--steps", "6",
            "--eval-every", "2", "--ckpt-every", "2"]
    _one([*opts, "--out", str(tmp_path / "ref")])
    ref = _metrics(tmp_path / "ref")
    _ranks([*opts, "--out", str(tmp_path / "cut"), "--parallel", "fsdp", "--stop-at", "4"])
    for d in ("to1", "to2"):
        subprocess.run(["cp", "-r", str(tmp_path / "cut"), str(tmp_path / d)], check=True)
    resume = ["--resume", "--no-progress", "--no-plot", "--device", "cpu"]
    _one(["--out", str(tmp_path / "to1"), *resume])
    _ranks(["--out", str(tmp_path / "to2"), *resume, "--parallel", "fsdp"])
    _one([*opts, "--out", str(tmp_path / "plain"), "--stop-at", "4"])
    _ranks(["--out", str(tmp_path / "plain"), *resume, "--parallel", "fsdp"])
    for d in ("to1", "to2", "plain"):
        got = _metrics(tmp_path / d)
        for s in (5, 6):
            assert abs(got[s]["loss"] - ref[s]["loss"]) < 1e-5, (d, s, got[s], ref[s])


def test_a_fake_process_group_plans_eight_ranks():
    """One process, a fake process group of 8: every layer and the root sharded on dim 0, each
    rank holding ceil(rows / 8) rows of every parameter (no communication happens)."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import splitnet as sn
    from splitnet.training import sharding

    dist.init_process_group("fake", rank=3, world_size=8, store=FakeStore())
    try:
        m = sn.SplitTransformer(256, 64, 4, 3, scheme="yoshida4", weights="per-stage",
                                max_len=32)
        full = {n: tuple(p.shape) for n, p in m.named_parameters()}
        sharding.shard(m, torch.device("cpu"), 8)
        assert sharding.is_sharded(m)
        for n, p in m.named_parameters():
            assert tuple(p.shape) == full[n]                       # the global shape
            rows = full[n][0]
            assert p.to_local().shape[0] == max(0, min(-(-rows // 8), rows - 3 * -(-rows // 8)))
        units = [u for u in m.modules() if hasattr(u, "set_requires_gradient_sync")]
        assert len(units) == 3 + 1                                 # the layers and the root
    finally:
        dist.destroy_process_group()


def _golden_run(text, out):
    opts = [*_data("lm", text), *BASE, *LM, "--scheme", "strang", "--steps", "10",
            "--eval-every", "10", "--seed", "0"]
    _ranks([*opts, "--out", str(out), "--parallel", "fsdp"])
    return opts, [{"step": s, "loss": r["loss"], "grad_norm": r["grad_norm"]}
                  for s, r in sorted(_metrics(out).items())]


@pytest.mark.heavy
def test_first_ten_steps_match_the_golden_record(text, tmp_path):
    """As torchtitan keeps them: the loss and gradient norm of the first 10 steps of a 2-rank
    fsdp run, with its configuration in the header (SPLITNET_WRITE_GOLDEN=1 rewrites the
    file after a deliberate change of the numbers)."""
    opts, rows = _golden_run(text, tmp_path / "g")
    header = {"parallel": "fsdp", "world": 2, "torch": torch.__version__.split("+")[0],
              "options": [o for o in opts if o != str(text)], "corpus": "test fixture"}
    if os.environ.get("SPLITNET_WRITE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps({"header": header, "steps": rows}, indent=1) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert golden["header"]["options"] == header["options"]
    assert [r["step"] for r in golden["steps"]] == list(range(1, 11))
    for g, r in zip(golden["steps"], rows):
        assert abs(g["loss"] - r["loss"]) < 1e-4, (g, r)
        assert abs(g["grad_norm"] - r["grad_norm"]) < 1e-3, (g, r)


@pytest.mark.parametrize("extra,match", [
    (["--reversible"], "--reversible"),
    (["--refine-prob", "0.5"], "--refine-prob"),
    (["--param-dtype", "bfloat16"], "--param-dtype bfloat16"),
])
def test_fsdp_refuses_what_it_does_not_shard_yet(extra, match, text):
    args = build_parser("train").parse_args(["--text", str(text), "--parallel", "fsdp", *extra])
    with pytest.raises(ValueError, match=match) as e:
        config_from_args(args)
    # advice that works: ddp takes the others; a bf16 compute copy runs in one process only
    advice = "in one process" if "bfloat16" in extra else "--parallel ddp"
    assert "\n" not in str(e.value) and advice in str(e.value)


def test_describe_memory_per_rank(capsys):
    """describe --world-size N: DDP keeps 16 bytes per parameter on every rank (weight,
    gradient, AdamW's two moments); FSDP 16/N of them plus the root and one layer gathered.
    At GPT-2-small width on 8 ranks: 1.855 against 0.535 GiB."""
    import splitnet as sn
    from splitnet.cli import main
    from splitnet.nets.cost import count_params, memory_per_rank

    c = sn.SplitConfig(vocab_size=50304, d_model=768, n_heads=12, n_layers=12, max_len=1024)
    n = count_params(c)[0]
    assert memory_per_rank(c, 8, "ddp")["total"] == 16 * n
    fs = memory_per_rank(c, 8, "fsdp")
    d = 768
    root, layer = (50304 + 1024) * d + 2 * d, 12 * d * d + 13 * d      # embeddings; a block
    assert fs["sharded"] == 16 * n / 8
    assert fs["in_flight"] == pytest.approx(8 * (root + layer) * (1 - 1 / 8))
    assert memory_per_rank(c, 1, "fsdp")["total"] == 16 * n          # nothing to shard
    assert main(["describe", "--d-model", "768", "--n-heads", "12", "--n-layers", "12",
                 "--vocab-size", "50304", "--seq-len", "1024", "--weights", "shared",
                 "--world-size", "8"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert "ddp 1.855 GiB" in line and "fsdp 0.535 GiB" in line


def test_a_torn_shards_folder_is_removed_at_the_next_start(tmp_path):
    """A kill while the ranks wrote their shards leaves OUT/shards-<step>.tmp: removed when the
    run starts again (the folder the checkpoint names stays)."""
    torn = tmp_path / "shards-6.tmp"
    torn.mkdir()
    (torn / "__0_0.distcp").write_bytes(b"half")
    (tmp_path / "shards-4").mkdir()
    assert ck.remove_torn_saves(tmp_path) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["shards-4"]


# -- tensor parallelism (--tp): a 2-D (dp, tp) mesh, each field split over tp ---------------

TP_CASES = {"yoshida4-shared": 4, "translation": 2, "lie-trotter": 4, "strang-per-stage": 4,
            "learned": 4}        # the ranks: dp x tp = 2 x 2, or 1 x 2 (tp alone)


@pytest.mark.heavy
@pytest.mark.parametrize("case", [c if c in FAST else pytest.param(c, marks=pytest.mark.slow)
                                  for c in TP_CASES])
def test_tensor_parallel_ranks_match_one_process(case, text, tmp_path):
    """--parallel fsdp --tp 2 (feed-forward split by columns then rows, attention by heads
    through the fused q/k/v projection): every step's loss within 1e-5 of one process's, the
    gathered checkpoint's weights within 1e-5 (the translation run ends with its test BLEU,
    decoded from the gathered weights)."""
    if case == "translation":
        pytest.importorskip("sacrebleu")
    opts = [*_data("translate" if case == "translation" else "lm", text), *BASE, *CASES[case],
            "--steps", "4", "--eval-every", "2"]
    _one([*opts, "--out", str(tmp_path / "one")])
    res = _ranks([*opts, "--out", str(tmp_path / "tp"), "--parallel", "fsdp", "--tp", "2"],
                 n=TP_CASES[case])
    assert f"world={TP_CASES[case]} (tp 2)" in res.stderr
    a, b = _metrics(tmp_path / "one"), _metrics(tmp_path / "tp")
    assert sorted(a) == sorted(b) == [1, 2, 3, 4]
    for s in a:
        assert abs(a[s]["loss"] - b[s]["loss"]) < 1e-5, (s, a[s], b[s])
        assert abs(a[s]["grad_norm"] - b[s]["grad_norm"]) < 1e-4, (s, a[s], b[s])
    wa, wb = ck.load(tmp_path / "one"), ck.load(tmp_path / "tp")
    for k, v in wa["model"].items():
        torch.testing.assert_close(_comparable(k, wb["model"][k]), _comparable(k, v),
                                   atol=1e-5, rtol=1e-4)


@pytest.mark.heavy
def test_a_tensor_parallel_run_resumes_at_another_layout(text, tmp_path):
    """Saved by 2 x 2 (dp x tp) ranks at step 4, resumed by one process, by 2 fsdp ranks
    without --tp and by 2 x 2 again (these two reading only their own chunks of the shards);
    saved by one process, resumed by 2 x 2: steps 5 and 6 equal an uninterrupted single
    process's (the weights and the AdamW state of the per-head split q/k/v rows are written and
    read in the model's own layout)."""
    opts = [*_data("lm", text), *BASE, *LM, "--scheme", "strang", "--steps", "6",
            "--eval-every", "2", "--ckpt-every", "2"]
    tp = ["--parallel", "fsdp", "--tp", "2"]
    _one([*opts, "--out", str(tmp_path / "ref")])
    ref = _metrics(tmp_path / "ref")
    _ranks([*opts, "--out", str(tmp_path / "cut"), *tp, "--stop-at", "4"], n=4)
    for d in ("to1", "to2", "to4"):
        subprocess.run(["cp", "-r", str(tmp_path / "cut"), str(tmp_path / d)], check=True)
    resume = ["--resume", "--no-progress", "--no-plot", "--device", "cpu"]
    _one(["--out", str(tmp_path / "to1"), *resume])
    _ranks(["--out", str(tmp_path / "to2"), *resume, "--parallel", "fsdp"])   # --tp: not kept
    _ranks(["--out", str(tmp_path / "to4"), *resume, *tp], n=4)     # read shard by shard
    _one([*opts, "--out", str(tmp_path / "plain"), "--stop-at", "4"])
    _ranks(["--out", str(tmp_path / "plain"), *resume, *tp], n=4)
    for d in ("to1", "to2", "to4", "plain"):
        got = _metrics(tmp_path / d)
        for s in (5, 6):
            assert abs(got[s]["loss"] - ref[s]["loss"]) < 1e-5, (d, s, got[s], ref[s])


def test_a_fake_process_group_plans_four_by_two():
    """One process, a fake process group of 8 as a 4 x 2 (dp x tp) mesh, rank 5 = (2, 1):
    feed-forward fc1 split by rows and fc2 by columns over tp; the fused q/k/v projection per
    head (tp rank 1 holds the second half of the q, k and v rows each: 3 x 16 rows of 96), then
    chunked over dp by FSDP; norms and embeddings sharded over dp alone. No communication."""
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.placement_types import _StridedShard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import splitnet as sn
    from splitnet.training import sharding, tensor_parallel

    dist.init_process_group("fake", rank=5, world_size=8, store=FakeStore())
    try:
        m = sn.SplitTransformer(256, 32, 4, 2, scheme="strang", max_len=32)
        qkv = m.layers[0].diffusion.qkv.weight.detach().clone()
        sharding.shard(m, torch.device("cpu"), 8, tp=2)
        layer = m.layers[0]
        w = layer.diffusion.qkv.weight
        assert w.device_mesh.mesh_dim_names == ("dp", "tp") and w.shape == (96, 32)
        assert isinstance(w.placements[1], _StridedShard) and w.placements[1].split_factor == 3
        assert tensor_parallel.headwise_groups(w) == 3
        t_1 = torch.cat([qkv[16:32], qkv[48:64], qkv[80:96]])        # tp rank 1's heads
        torch.testing.assert_close(w.to_local(), t_1.chunk(4)[2])     # dp rank 2's rows
        torch.testing.assert_close(tensor_parallel.local_rows(qkv, w), w.to_local())
        fc1, fc2 = layer.convection.fc1.weight, layer.convection.fc2.weight
        assert fc1.placements[1] == Shard(0) and fc2.placements[1] == Shard(1)
        assert fc1.to_local().shape == (16, 32) and fc2.to_local().shape == (8, 64)
        norm = layer.diffusion.norm.weight
        assert isinstance(norm, DTensor) and norm.device_mesh.ndim == 1
        assert norm.to_local().shape == (8,)                           # 32 / 4 (dp)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("argv,match", [
    (["--tp", "2"], "needs --parallel fsdp"),
    (["--parallel", "fsdp", "--tp", "0"], "whole number >= 1"),
    (["--parallel", "fsdp", "--tp", "2"], "must divide the world size 1"),
    (["--parallel", "fsdp", "--tp", "3", "--n-heads", "2"], "must divide the world size 1"),
])
def test_tp_refusals_are_one_line(argv, match, text, tmp_path, capsys):
    from splitnet.cli import main

    assert main(["train", "--text", str(text), "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert re.search(match, err) and "\n" not in err, err
    assert not (tmp_path / "o").exists()


def test_tp_needs_whole_heads_and_feed_forward_columns():
    from splitnet.configs.config import SplitConfig
    from splitnet.training.tensor_parallel import check_tp

    with pytest.raises(ValueError, match="must divide --n-heads 2"):
        check_tp(4, 8, SplitConfig(d_model=32, n_heads=2))
    with pytest.raises(ValueError, match="feed-forward width 30"):
        check_tp(4, 8, SplitConfig(d_model=32, n_heads=4, d_ff=30))
    check_tp(4, 8, SplitConfig(d_model=32, n_heads=4))


@pytest.mark.heavy
def test_a_sharded_checkpoint_read_for_a_sharded_resume_holds_shapes_only(text, tmp_path):
    """ck.load(whole=False), as ranks resuming a sharded run call it: the weights' names and
    shapes from the shards' metadata (meta tensors: nothing read), the folder to read from."""
    from splitnet.runs import shards

    opts = [*_data("lm", text), *BASE, *LM, "--steps", "2", "--eval-every", "2"]
    _ranks([*opts, "--out", str(tmp_path / "s"), "--parallel", "fsdp"])
    lazy, full = ck.load(tmp_path / "s", whole=False), ck.load(tmp_path / "s")
    assert lazy[shards.FOLDER] == str(tmp_path / "s" / "shards-2")
    assert lazy["optimizer"] == {"state": {}, "param_groups": []}
    assert sorted(lazy["model"]) == sorted(full["model"])
    for k, t in lazy["model"].items():
        assert t.is_meta and t.shape == full["model"][k].shape and t.dtype == full["model"][k].dtype
    assert shards.FOLDER not in full and full["optimizer"]["state"]


@pytest.mark.heavy
def test_a_damaged_shard_read_shard_by_shard_is_one_line(text, tmp_path):
    """Ranks resuming under fsdp read their own chunks: a truncated shard file stops them
    with one line naming the folder, not a traceback."""
    opts = [*_data("lm", text), *BASE, *LM, "--steps", "2", "--eval-every", "2"]
    _ranks([*opts, "--out", str(tmp_path / "s"), "--parallel", "fsdp"])
    for f in (tmp_path / "s" / "shards-2").glob("*.distcp"):
        f.write_bytes(b"")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc_per_node=2", "-m", "splitnet", "train", "--resume", "--out",
                          str(tmp_path / "s"), "--steps", "4", "--parallel", "fsdp",
                          "--no-progress"], capture_output=True, text=True, env=env,
                         timeout=300, check=False)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("splitnet train: error:")]
    # the recorded digests catch it first, naming a chunk (issue 49, D3)
    assert lines and all("shards-2: " in ln and "does not match its digest" in ln
                         for ln in lines), lines
    assert "]: Traceback" not in res.stderr            # no rank's own ("[rankN]: Traceback")


@pytest.mark.heavy
def test_overwriting_a_sharded_run_keeps_it_whole_in_previous(text, tmp_path):
    """--overwrite of an fsdp run moves its shards folder with its checkpoint into previous-1
    (left behind, the new run's first save removed it as superseded: issue 49, D1); the old
    run then loads from previous-1 as it was, and the new run has shards of its own."""
    opts = [*_data("lm", text), *BASE, *LM, "--steps", "2", "--eval-every", "2",
            "--ckpt-every", "2", "--parallel", "fsdp", "--out", str(tmp_path / "r")]
    _ranks(opts)
    before = ck.load(tmp_path / "r")
    _ranks([*opts, "--overwrite", "--seed", "5"])
    prev = tmp_path / "r" / "previous-1"
    assert sorted(p.name for p in prev.iterdir() if p.name.startswith("shards-")) == ["shards-2"]
    old = ck.load(prev)
    assert old["step"] == 2 and all(torch.equal(v, before["model"][k])
                                    for k, v in old["model"].items())
    new = ck.load(tmp_path / "r")
    assert any(not torch.equal(v, old["model"][k]) for k, v in new["model"].items())
    assert (tmp_path / "r" / "shards-2").is_dir()
