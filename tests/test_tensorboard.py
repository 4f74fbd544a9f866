"""``--tensorboard``: training metrics as TensorBoard events, read back with TensorBoard's own
reader (EventAccumulator); one event per step across --resume; a clear line without the extra."""

from __future__ import annotations

import importlib.util

import pytest

from splitnet import checkpoint as ck
from splitnet.cli import main
from splitnet.configs.config import MissingDependency
from splitnet.training.train import TrainConfig, train

TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--context", "16",
        "--batch-size", "4", "--warmup", "2", "--eval-windows", "8", "--threads", "1",
        "--no-progress", "--no-plot", "--eval-every", "3"]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    p = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    p.write_text("".join(f"def f{i}(x):\n    return x * {i % 7}\n" for i in range(300)))
    return p


@pytest.fixture(scope="module")
def tracking():
    pytest.importorskip("tensorboard")
    from splitnet import tracking

    return tracking


def _by_step(records, key):
    return [(r["step"], r[key]) for r in records if key in r]


def test_events_hold_what_metrics_jsonl_holds(text, tmp_path, tracking):
    out = tmp_path / "run"
    assert main(["train", "--text", str(text), "--out", str(out), *TINY, "--steps", "6",
                 "--peak-tflops", "1", "--tensorboard"]) == 0      # bare flag: OUT/tensorboard
    scalars = tracking.read_scalars(out / "tensorboard")
    records = ck.read_metrics(out / ck.METRICS)
    for key, tag in tracking.TAGS.items():
        expected = _by_step(records, key)
        if key == "grad_norm" and not expected:
            continue
        assert expected, key
        got = scalars[tag]
        assert [s for s, _ in got] == [s for s, _ in expected], tag
        assert [v for _, v in got] == pytest.approx([v for _, v in expected], rel=1e-6), tag
    assert {"speed/mfu", "val/bpb", "train/lr"} <= set(scalars)
    assert [s for s, _ in scalars["val/bpb"]] == [3, 6]


def test_resume_leaves_each_step_once(text, tmp_path, tracking):
    """Events a killed session wrote after its last checkpoint are purged on --resume."""
    out, tb = tmp_path / "run", tmp_path / "tb"
    cfg = TrainConfig.from_dict({**TrainConfig(text=str(text)).to_dict(), "out": str(out),
                                 "steps": 6, "context": 16, "batch_size": 4, "warmup": 2,
                                 "eval_windows": 8, "threads": 1, "progress": False,
                                 "plot": False, "eval_every": 3, "stop_at": 3,
                                 "tensorboard": str(tb),
                                 "model": {"d_model": 16, "n_heads": 2, "n_layers": 1}})
    train(cfg)
    # what a session killed after step 5 would have left behind: events past the checkpoint
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(str(tb))
    for step in (4, 5):
        w.add_scalar("train/loss", 99.0, step)
    w.close()
    # resume restores --tensorboard from the checkpoint (a free option)
    assert main(["train", "--resume", "--out", str(out)]) == 0
    loss = tracking.read_scalars(tb)["train/loss"]
    assert [s for s, _ in loss] == [1, 2, 3, 4, 5, 6]
    assert 99.0 not in [v for _, v in loss]
    expected = _by_step(ck.read_metrics(out / ck.METRICS), "loss")
    assert [v for _, v in loss] == pytest.approx([v for _, v in expected], rel=1e-6)


def test_tensorboard_option_values(tmp_path):
    base = TrainConfig(out=str(tmp_path / "o"))
    assert base.tensorboard_dir() is None
    assert base.replace(tensorboard=True).tensorboard_dir() == str(tmp_path / "o" / "tensorboard")
    assert base.replace(tensorboard="off").tensorboard is None
    assert base.replace(tensorboard="rel").tensorboard_dir().endswith("/rel")
    with pytest.raises(ValueError, match="tensorboard must be"):
        base.replace(tensorboard="  ")


def test_without_tensorboard_one_line_and_nothing_written(text, tmp_path, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorboard" else real(name, *a))
    out = tmp_path / "run"
    assert main(["train", "--text", str(text), "--out", str(out), *TINY, "--steps", "2",
                 "--tensorboard", str(tmp_path / "tb")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'splitnet[tensorboard]'" in err
    assert not out.exists() and not (tmp_path / "tb").exists()
    from splitnet import tracking

    with pytest.raises(MissingDependency):
        tracking.TensorBoardLog(tmp_path / "tb", 0)


def test_overwrite_starts_the_events_afresh(text, tmp_path, tracking):
    out = tmp_path / "run"
    common = ["--text", str(text), "--out", str(out), *TINY, "--tensorboard"]
    assert main(["train", *common, "--steps", "3", "--seed", "1"]) == 0
    assert main(["train", *common, "--steps", "2", "--overwrite"]) == 0
    loss = tracking.read_scalars(out / "tensorboard")["train/loss"]
    assert [s for s, _ in loss] == [1, 2]
    expected = _by_step(ck.read_metrics(out / ck.METRICS), "loss")
    assert [v for _, v in loss] == pytest.approx([v for _, v in expected], rel=1e-6)
