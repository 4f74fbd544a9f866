"""experiments/elastic_translation.py: the elastic-depth study on translation (issue 60, item 4).

Its arms build as the networks they name, and docs/elastic.md's translation table is the
script's rendering of its cache, with the claims its reading makes."""

import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
try:
    import elastic_translation as E
finally:
    sys.path.pop(0)


@pytest.mark.parametrize("arm", list(E.ARMS))
def test_each_arm_is_the_network_it_names(arm, tmp_path):
    from splitnet.models import SplitSeq2Seq

    from splitnet.nets.depth import at_depth

    cfg = E._config(arm, tmp_path / arm, steps=10)
    assert cfg.task == "translate" and cfg.steps == 10 and cfg.bleu_sentences == 0
    net, opts = E.ARMS[arm]
    m = cfg.model
    assert (m.n_encoder_layers, m.n_decoder_layers) == (net["n_encoder_layers"],) * 2
    assert cfg.train_depths == opts.get("train_depths", ())
    assert m.reversible is (arm == "strang-train-depths")
    assert m.depth_basis == net.get("depth_basis")
    small = dataclasses.replace(m, src_vocab=40, tgt_vocab=40, pad_id=37, bos_id=38, eos_id=39,
                                d_model=16, n_heads=2, d_ff=32)
    model = SplitSeq2Seq(config=small)
    src, tgt = torch.randint(0, 37, (2, 5)), torch.randint(0, 37, (2, 4))
    for n in (1, 2, 4, 8):      # every depth the study measures runs
        assert at_depth(model, n).eval()(src, tgt).shape == (2, 4, 40)


def _cached():
    return {json.loads(p.read_text())["arm"]: json.loads(p.read_text())
            for p in sorted(E.CACHE.glob("*.json"))}


def test_docs_elastic_md_translation_table_is_the_cache():
    runs = _cached()
    assert set(runs) == set(E.ARMS), "every arm of the translation study is cached"
    doc = (ROOT / "docs" / "elastic.md").read_text()
    table = E.table(list(runs.values()))
    assert f"<!-- elastic:translation -->\n{table}\n<!-- /elastic:translation -->" in doc
    for r in runs.values():
        assert r["steps"] == E.STEPS and r["scale"] == E.SCALE
        assert all(0 < d["val_loss"] < 10 and 0 <= d["bleu"] <= 100
                   for d in r["depths"].values())


def test_the_translation_reading_holds():
    d = {arm: {int(n): v["val_loss"] for n, v in r["depths"].items()}
         for arm, r in _cached().items()}
    strang = d["strang-train-depths"]
    assert max(strang.values()) - min(strang.values()) < 0.1       # keeps its loss at every depth
    assert d["frontier-4"][2] > 5 and d["frontier-4"][1] > 9         # coarsened, it collapses
    assert strang[1] < d["frontier-1"][1]                            # matches 1 + 1 at one step
    assert strang[2] - d["frontier-2"][2] > 0.1 and strang[4] - d["frontier-4"][4] > 0.2
