"""What the mutation run of ``runs/checkpoint.py`` showed unstated (issue 33): the checks a
resume relies on (the weights against the config, the training state entry by entry, every
RNG state at its bounds), the RNG round trip that makes a resume exact, a version-1
checkpoint's upgrade, which file a path names, which metrics survive a resume, the numbering of
``previous-N``, what a torn save leaves, and what the run lock writes.
"""

from __future__ import annotations

import json
import os
import random
import stat

import numpy as np
import pytest
import torch

import splitnet as sn
from splitnet import checkpoint as ck
from splitnet.runs import checkpoint as C
from splitnet.runs import lock as run_lock


def _state(model=None):
    model = model or sn.SplitTransformer(16, 8, 2, 1, max_len=8)
    opt = torch.optim.AdamW(model.parameters())
    return {"model": model.state_dict(), "model_config": model.config.to_dict(),
            "step": 3, "train_config": {}, "optimizer": opt.state_dict(), "scheduler": {},
            "rng": C.rng_state(torch.device("cpu")), "version": C.VERSION}


# ---------------------------------------------------------------------------------------------
# the weights against the config

@pytest.mark.parametrize("change,match", [
    (lambda w: w.pop("tok_emb.weight") is None, r"no weights for 'tok_emb.weight'"),
    (lambda w: w.update(extra=torch.zeros(1)), r"unexpected weights 'extra'"),
    (lambda w: w.update({"tok_emb.weight": torch.zeros(16, 9)}),
     r"'tok_emb.weight' has shape \(16, 9\), the config needs \(16, 8\)"),
])
def test_weights_that_do_not_fit_the_config_are_refused_by_name(change, match, tmp_path):
    state = _state()
    change(state["model"])
    with pytest.raises(ValueError, match=match) as e:
        C.check_weights(state, tmp_path)
    assert str(tmp_path / C.CKPT) in str(e.value)


def test_the_weights_memory_is_asked_for_before_anything_is_built(monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr("splitnet.runenv.require_memory", lambda *a: asked.append(a))
    state = _state()
    n = sum(t.numel() for t in state["model"].values())
    C.check_weights(state, tmp_path)
    assert asked == [(8.0 * n, f"the model of {tmp_path / C.CKPT} ({n:,} parameters)",
                      "use a machine with more memory")]


def test_a_checkpoint_without_a_model_kind_is_a_language_model():
    assert C.model_classes({}, "f")[1] is sn.SplitTransformer
    assert C.model_classes({"model_kind": "seq2seq"}, "f")[1].__name__ == "SplitSeq2Seq"


# ---------------------------------------------------------------------------------------------
# the training state, entry by entry

@pytest.mark.parametrize("change,match", [
    (lambda s: [s.pop(k) for k in ("rng", "scheduler")], r"it has no 'scheduler', 'rng'"),
    (lambda s: s.update(step=-1), r"'step' must be an int >= 0, got -1"),
    (lambda s: s.update(step=True), r"'step' must be an int >= 0, got True"),
    (lambda s: s.update(step=2.0), r"'step' must be an int >= 0, got 2.0"),
    (lambda s: s.update(scheduler=[]), r"'scheduler' must be a dict, got list"),
    (lambda s: s["optimizer"].update(state=[]), r"'optimizer' is not an optimiser state"),
    (lambda s: s["optimizer"].update(param_groups={}), r"'optimizer' is not an optimiser state"),
    (lambda s: s["optimizer"]["param_groups"].append({"params": 3}),
     r"'optimizer' is not an optimiser state"),
    (lambda s: s["optimizer"]["param_groups"].append([1]), r"'optimizer' is not an optimiser"),
    (lambda s: s.update(rng=[]), r"'rng' must be a dict, got list"),
    (lambda s: s.update(corpus="abc"), r"'corpus' must be a dict, got str"),
])
def test_a_training_state_with_a_bad_entry_is_refused_naming_it(change, match, tmp_path):
    state = _state()
    change(state)
    with pytest.raises(ValueError, match=match) as e:
        C.check_training_state(state, tmp_path)
    assert str(tmp_path / C.CKPT) in str(e.value)


def test_a_good_training_state_passes_at_step_zero_without_a_corpus(tmp_path):
    state = _state()
    state.update(step=0, corpus=None)
    C.check_training_state(state, tmp_path)
    state["corpus"] = {"files": 1}
    C.check_training_state(state, tmp_path)


def _py(rng):
    return rng["python"]


@pytest.mark.parametrize("part,change,ok", [
    ("python", lambda p: p.__setitem__(2, None), True),
    ("python", lambda p: p[1].__setitem__(0, 0), True),
    ("python", lambda p: p[1].__setitem__(0, 2 ** 32 - 1), True),
    ("python", lambda p: p[1].__setitem__(0, 2 ** 32), False),
    ("python", lambda p: p[1].__setitem__(5, -1), False),
    ("python", lambda p: p[1].__setitem__(623, True), False),
    ("python", lambda p: p[1].__setitem__(624, 1.5), False),
    ("python", lambda p: p[1].append(7), False),
    ("python", lambda p: p.__setitem__(2, "0.5"), False),
    ("python", lambda p: p.__setitem__(0, "3"), False),
    ("python", lambda p: p.append(0), False),
    ("numpy", lambda p: p.__setitem__(2, 0), True),
    ("numpy", lambda p: p.__setitem__(2, 624), True),
    ("numpy", lambda p: p.__setitem__(2, 625), False),
    ("numpy", lambda p: p.__setitem__(2, -1), False),
    ("numpy", lambda p: p.__setitem__(2, 3.0), False),
    ("numpy", lambda p: p.__setitem__(3, 1.0), False),
    ("numpy", lambda p: p.__setitem__(4, "0"), False),
    ("numpy", lambda p: p.__setitem__(1, p[1][:623]), False),
    ("numpy", lambda p: p.__setitem__(1, p[1].tolist()), False),
    ("numpy", lambda p: p.__setitem__(0, 7), False),
    ("numpy", lambda p: p.append(0), False),
])
def test_every_rng_state_is_checked_at_its_bounds(part, change, ok):
    rng = C.rng_state(torch.device("cpu"))
    change(rng[part])
    problem = C._rng_problem(rng)
    assert problem is None if ok else problem == f"'rng' has no valid " \
        f"{'Python' if part == 'python' else part} random state", problem


@pytest.mark.parametrize("value", [torch.zeros(5, dtype=torch.int64),
                                   torch.zeros(2, 3, dtype=torch.uint8), b"\x00"])
def test_a_torch_rng_state_is_a_1d_byte_tensor(value):
    rng = C.rng_state(torch.device("cpu"))
    rng["torch"] = value
    assert C._rng_problem(rng) == "'rng' has no valid torch random state"


def test_the_rng_states_round_trip_exactly():
    """What makes a resume bit-exact: after set_rng_state(rng_state()), Python's, numpy's and
    torch's next draws are the ones they would have been."""
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.standard_normal()               # a cached Gaussian in numpy's state
    saved = C.rng_state(torch.device("cpu"))
    assert saved["numpy"][1].dtype == torch.int64
    want = (random.random(), np.random.standard_normal(2).tolist(), torch.rand(2).tolist())
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    C.set_rng_state(saved, torch.device("cpu"))
    assert (random.random(), np.random.standard_normal(2).tolist(), torch.rand(2).tolist()) \
        == want
    assert C.plain_rng_state({"cuda": (torch.zeros(2),)})["cuda"][0].shape == (2,)


# ---------------------------------------------------------------------------------------------
# files

def test_a_version_1_checkpoint_is_upgraded():
    old = {"version": 1, "model_config": {"gate_layers": (0, 1), "d_model": 8},
           "rng": {"python": random.getstate()}}
    new = C._upgrade(old, "f")
    assert new["version"] == C.VERSION and new["model_config"]["gate_layers"] == [0, 1]
    assert new["model_config"]["d_model"] == 8 and isinstance(new["rng"]["python"][1], list)
    assert old["model_config"]["gate_layers"] == (0, 1)          # the input is not changed


def test_which_file_a_path_names(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert C.checkpoint_file(run) == run / C.CKPT
    assert C.checkpoint_file(tmp_path / "new.pt") == tmp_path / "new.pt"   # not there yet
    odd = tmp_path / "odd.pt"
    odd.mkdir()
    assert C.checkpoint_file(odd) == odd / C.CKPT                        # a folder named .pt
    (tmp_path / "weights.bin").write_bytes(b"x")
    assert C.checkpoint_file(tmp_path / "weights.bin") == tmp_path / "weights.bin"
    assert C.checkpoint_file(tmp_path / "later") == tmp_path / "later" / C.CKPT


def test_a_checkpoint_needs_a_model_and_its_config(tmp_path):
    for bad in ({"model": {}}, {"model_config": {}}):
        torch.save(bad, tmp_path / "x.pt")
        with pytest.raises(ValueError, match="not a splitnet checkpoint"):
            ck.load(tmp_path / "x.pt")


def test_model_entries_must_be_named_tensors(tmp_path):
    for weights, match in (({"w": 3}, r"'model' entry 'w' is int"),
                           ({3: torch.zeros(1)}, r"'model' entry 3 is Tensor")):
        with pytest.raises(ValueError, match=match):
            C._check_model_entries({"model": weights, "model_config": {}}, tmp_path / "f")
    for n in (1000, 3):                       # 3 x 4 bytes described by 4
        big = torch.zeros(1).expand(n)
        with pytest.raises(ValueError, match=rf"'w' of shape \({n},\) is backed by 4 bytes"):
            C._check_model_entries({"model": {"w": big}, "model_config": {}}, tmp_path / "f")
    C._check_model_entries({"model": {"w": torch.zeros(3, 2)}, "model_config": {}}, "f")


def test_a_resume_keeps_the_records_up_to_its_step(tmp_path):
    p = tmp_path / "metrics.jsonl"
    recs = [{"step": 1}, {"step": 2}, {"step": 3}, {"bleu": 0.5}, {"step": "4"}]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"step": 5')
    assert C.truncate_metrics(p, 2) == 2
    assert C.read_metrics(p) == [{"step": 1}, {"step": 2}]
    assert C.truncate_metrics(tmp_path / "none.jsonl", 2) == 0
    assert not (tmp_path / "none.jsonl").exists()
    q = tmp_path / "bytes.jsonl"
    q.write_bytes(b'{"step": 1, "s": "\xff"}\n')
    assert C.read_metrics(q) == [{"step": 1, "s": "\ufffd"}]


def test_overwrite_moves_a_run_into_the_next_generation(tmp_path):
    for n in ("previous-1", "previous-3", "previous-x", "previous"):
        (tmp_path / n).mkdir()
    for name in (C.CKPT, C.METRICS):
        (tmp_path / name).write_text(name)
    prev = run_lock.move_aside(tmp_path)
    assert prev == tmp_path / "previous-4"
    assert sorted(p.name for p in prev.iterdir()) == sorted([C.CKPT, C.METRICS])
    assert not (tmp_path / C.CKPT).exists() and run_lock.move_aside(tmp_path) is None
    (tmp_path / C.PLOT).write_text("p")
    assert run_lock.move_aside(tmp_path) == tmp_path / "previous-5"
    empty = tmp_path / "fresh"
    empty.mkdir()
    (empty / C.CKPT).write_text("c")
    assert run_lock.move_aside(empty) == empty / "previous-1"


def test_a_torn_save_is_removed_and_counted(tmp_path):
    (tmp_path / "shards-4.tmp").mkdir()
    (tmp_path / "shards-4.tmp" / "__0_0.distcp").write_bytes(b"x")
    (tmp_path / "shards-2").mkdir()
    (tmp_path / f".{C.CKPT}.a1b2.tmp").write_bytes(b"half a checkpoint")
    (tmp_path / f".{C.METRICS}.a1b2.tmp").write_bytes(b"not ours")
    assert C.remove_torn_saves(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["shards-2",
                                                                 f".{C.METRICS}.a1b2.tmp"])


def test_the_run_lock_names_its_holder_and_lets_go(tmp_path):
    out = tmp_path / "a" / "b"                               # made, parents too
    lock = run_lock.RunLock(out).acquire()
    try:
        info = json.loads((out / C.LOCK).read_text())
        assert info["pid"] == os.getpid() and "argv" in info
        assert stat.S_IMODE((out / C.LOCK).stat().st_mode) == 0o644 & ~_umask()
        lock.verify()
    finally:
        lock.release()
    assert (out / C.LOCK).read_text() == ""                  # emptied, not left half written
    lock.release()                                           # twice: nothing to do


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


@pytest.mark.parametrize("how", ["replaced", "removed"])
def test_the_run_lock_notices_its_directory_replaced_or_removed(how, tmp_path):
    import shutil

    out = tmp_path / "run"
    lock = run_lock.RunLock(out).acquire()
    try:
        if how == "replaced":
            out.rename(tmp_path / "old")
            out.mkdir()
        else:
            shutil.rmtree(out)
        with pytest.raises(run_lock.RunDirectoryReplaced, match="was removed or replaced"):
            lock.verify()
    finally:
        lock.release()
