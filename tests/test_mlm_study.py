"""experiments/mlm_study.py at a toy size, so the study cannot rot: its arrangements have equal
parameters, a run records its curve and WN-lex (on the WordNet fixture), the report writes the
doc's table from the cached records, and the table in docs/mlm.md is the cache's."""

import json
from pathlib import Path

import pytest
from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "mlm_study.py"


@pytest.fixture(scope="module")
def study():
    return load_script(SCRIPT)


def test_the_arrangements_have_equal_parameters(study):
    from splitnet.configs.config import SplitConfig
    from splitnet.mlm import MLM_VOCAB
    from splitnet.nets.cost import count_params

    n = [count_params(SplitConfig(scheme=s, weights=w, vocab_size=MLM_VOCAB, max_len=64,
                                  causal=False, **study.MODEL))[0]
         for s, w in study.ARRANGEMENTS.values()]
    assert max(n) / min(n) < 1.005


@pytest.mark.heavy
def test_a_toy_study_and_its_report(study, tmp_path, monkeypatch):
    monkeypatch.setenv("WNSEARCHDIR", str(ROOT / "tests" / "data" / "wordnet"))
    for name, value in (("CACHE", tmp_path / "cache"), ("RUNS", tmp_path / "runs"),
                        ("DOC", tmp_path / "mlm.md"), ("FIGURE", tmp_path / "f.png"),
                        ("STEPS", 6), ("SEEDS", (0, 1)),
                        ("ARRANGEMENTS", {k: study.ARRANGEMENTS[k]
                                          for k in ("Transformer", "Macaron")}),
                        ("MODEL", {**study.MODEL, "d_model": 16, "n_heads": 2, "n_layers": 1}),
                        ("RUN", {**study.RUN, "context": 16, "batch_size": 4,
                                 "eval_every": 3})):
        monkeypatch.setattr(study, name, value)
    study.study()
    rec = json.loads((tmp_path / "cache" / "Macaron-1.json").read_text())
    assert [s for s, _, _ in rec["curve"]] == [3, 6] and rec["wn_lex"]["task"] == "wn-lex"
    (tmp_path / "mlm.md").write_text("x\n<!-- mlm-study:begin -->\nold\n<!-- mlm-study:end -->\n"
                                     "<!-- mlm-study-paired:begin -->\nold\n"
                                     "<!-- mlm-study-paired:end -->\n")
    study.report()
    doc = (tmp_path / "mlm.md").read_text()
    assert "| Macaron |" in doc and "old" not in doc and (tmp_path / "f.png").stat().st_size
    assert "| Macaron | held-out loss (nats) | 2 |" in doc        # paired by seed, 2 seeds


def test_the_doc_table_is_the_caches(study):
    recs = study._records()
    if set(recs) != set(study.ARRANGEMENTS) or any(len(v) < 3 for v in recs.values()):
        pytest.skip("the study's cache is not complete")
    doc = (ROOT / "docs" / "mlm.md").read_text()
    assert study.table(recs) in doc and study.paired_table(recs) in doc


def test_the_austen_table_is_its_cache(study):
    cache = study.setting("austen")[0]
    recs = study._records(cache)
    if set(recs) != set(study.ARRANGEMENTS) or any(len(v) < 3 for v in recs.values()):
        pytest.skip("the Austen study's cache is not complete")
    doc = (ROOT / "docs" / "mlm.md").read_text()
    assert study.table(recs) in doc and study.paired_table(recs) in doc
    loss = {k: {r["seed"]: r["val_loss"] for r in v} for k, v in recs.items()}
    ahead = sum(m < loss["Transformer"][s] for s, m in loss["Macaron"].items())
    assert ahead == 4 and "at\n  eight it is ahead in four" in doc                  # the reading
    # every Yoshida4 seed on the plateau, as the reading says
    assert len(loss["Yoshida4"]) == 8 and min(loss["Yoshida4"].values()) > 2.7
    assert "stays at 2.70–2.77 in all eight" in doc


def test_runs_are_paired_by_seed(study):
    """Differences 1, 1.5, 1.5 (seeds 0, 1, 2): mean 4/3, standard deviation sqrt(1/12), t = 8;
    a seed only one side has (7) and the records' order do not enter."""
    base = [{"seed": s, "val_loss": v} for s, v in ((0, 1.0), (1, 1.5), (2, 2.5))]
    runs = [{"seed": s, "val_loss": v} for s, v in ((2, 4.0), (0, 2.0), (1, 3.0), (7, 9.0))]
    c = study._compare(runs, base, lambda r: r["val_loss"])
    assert c.n == 3 and c.t == pytest.approx(8.0)


@pytest.mark.heavy
def test_the_austen_setting_caches_apart_and_reports_every_probe(study, tmp_path, monkeypatch):
    """--corpus austen: its own cache, runs, block and figure; its table has a column pair for
    each probe the records hold (a fake novel database stands in for the R package)."""
    import numpy as np

    from splitnet.mlm import corpora

    base = tmp_path / "Rdata"
    (tmp_path / "Rdata.rdx").write_bytes(b"")
    monkeypatch.setattr(corpora, "AUSTEN", base)
    monkeypatch.setattr(corpora, "read_variable", lambda b, name, recipe: np.array(
        [f"{name}: it is a truth universally acknowledged, line {i}" for i in range(200)]))
    monkeypatch.setenv("WNSEARCHDIR", str(ROOT / "tests" / "data" / "wordnet"))
    real = study.setting      # the fixture's synsets leave WN-polarity no test split at seed 0
    monkeypatch.setattr(study, "setting", lambda c: (*real(c)[:4], ("wn-lex", "wic-wn")))
    for name, value in (("CACHE", tmp_path / "cache"), ("RUNS", tmp_path / "runs"),
                        ("DOC", tmp_path / "mlm.md"), ("FIGURE", tmp_path / "f.png"),
                        ("STEPS", 4), ("SEEDS", (0,)),
                        ("ARRANGEMENTS", {"Transformer": study.ARRANGEMENTS["Transformer"]}),
                        ("MODEL", {**study.MODEL, "d_model": 16, "n_heads": 2, "n_layers": 1}),
                        ("RUN", {**study.RUN, "context": 16, "batch_size": 4,
                                 "eval_every": 2})):
        monkeypatch.setattr(study, name, value)
    study.study("austen")
    rec = json.loads((tmp_path / "cache" / "austen" / "Transformer-0.json").read_text())
    assert {"wn_lex", "wic_wn"} <= set(rec) and rec["val_loss"] > 0
    (tmp_path / "mlm.md").write_text("<!-- mlm-study-austen:begin -->\n"
                                     "<!-- mlm-study-austen:end -->\n"
                                     "<!-- mlm-study-austen-paired:begin -->\n"
                                     "<!-- mlm-study-austen-paired:end -->\n")
    study.report("austen")
    doc = (tmp_path / "mlm.md").read_text()
    assert "| WN-lex probe | t | WiC-WN probe | t |" in doc
    assert (tmp_path / "mlm_curves_austen.png").stat().st_size


def test_a_run_stopped_by_a_signal_is_never_cached(study, tmp_path, monkeypatch):
    """Issue 48: a study stopped by a signal resumes next time; the stopped run's record is not
    written (the trainer returns its summary on SIGTERM, and the study cached it as whole)."""
    import splitnet.training.train as T

    monkeypatch.setattr(study, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(study, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(study, "SEEDS", (0,))
    monkeypatch.setattr(T, "train", lambda cfg: {"step": 17, "signal": 15})
    with pytest.raises(SystemExit, match="stopped at step 17 \\(signal 15\\); run again"):
        study.study()
    assert not list((tmp_path / "cache").glob("*.json*"))


def _shared_gradients():
    return load_script(ROOT / "experiments" / "shared_gradients.py")


@pytest.mark.heavy
def test_a_shared_yoshida4_field_cancels_most_of_its_gradient_and_strang_none():
    """Issue 62: the shared compositions' plateau. At initialisation Yoshida4's feed-forward
    calls (two at a negative step) sum to a quarter of their magnitudes, Strang's two half
    steps to all of it; a field of one call is aligned with itself by definition."""
    sg = _shared_gradients()
    y4, strang = sg.alignments("yoshida4", batches=1), sg.alignments("strang", batches=1)
    assert y4["convection"][0] < 0.35 and y4["diffusion"][0] < 0.6
    assert strang["convection"][0] > 0.95 and strang["diffusion"][0] == pytest.approx(1.0)


def test_the_call_gradients_add_up_to_autograds():
    """The hooks' per-call gradients are the calls' shares of the gradient autograd gives the
    shared weights (their sum equals it): the alignment measures what training sees."""
    import torch

    from splitnet.nets.models import SplitTransformer

    sg = _shared_gradients()
    torch.manual_seed(0)
    model = SplitTransformer(**{**sg.MODEL, "n_layers": 1}, scheme="yoshida4")
    ff = model.layers[0].convection
    hook = sg.CallGradients(ff)
    x = torch.randint(0, 256, (2, 16))
    model(x).square().mean().backward()
    lins = [m for m in ff.modules() if isinstance(m, torch.nn.Linear)]
    for i, lin in enumerate(lins):
        summed = sum(call[i] for call in hook.calls)
        torch.testing.assert_close(summed, lin.weight.grad, rtol=1e-4, atol=1e-7)
    assert len(hook.calls) == 6
    hook.close()


@pytest.mark.heavy
def test_docs_mlm_gradient_table_is_the_scripts():
    sg = _shared_gradients()
    doc = (ROOT / "docs" / "mlm.md").read_text()
    assert sg.table() in doc, "docs/mlm.md is stale: python3 -m splitnet.dev regen mlm-gradients"


def test_a_masked_lm_of_a_shared_order_4_scheme_is_told_once(tmp_path):
    from splitnet.train import TrainConfig

    from splitnet.tasks import get_task

    notes = get_task("mlm").notes(TrainConfig(task="mlm", model_options={"scheme": "yoshida4"}))
    assert len(notes) == 1 and "docs/mlm.md" in notes[0] and "per-stage" in notes[0]
    for scheme, weights in (("strang", "shared"), ("yoshida4", "per-stage")):
        cfg = TrainConfig(task="mlm", model_options={"scheme": scheme, "weights": weights})
        assert get_task("mlm").notes(cfg) == []
    assert get_task("lm").notes(TrainConfig(model_options={"scheme": "yoshida4"})) == []
