"""Sliding-window attention of the Llama family in (issue 61): Mistral's and Phi-3's window on
every layer, Qwen2's and Qwen3's on the layers ``layer_types`` names (derived from
``max_window_layers`` when ``use_sliding_window``), as splitnet's own ``sliding_window`` and
``window_layers``: logits equal transformers' (eager attention, float64) on sequences several
windows long, greedy generation equal token for token far past the window, cached and not.

transformers' RMSNorms cast to float32 even in float64, and its eager attention takes the
softmax in float32; ``exact_norms`` (tests/conftest.py, as in tests/test_llama.py) and
``exact_eager`` patch those casts out, the same formulas in the input's dtype. A window one
token wider or narrower than the config's (a planted bug) is caught by the logits check."""

import pytest
import torch
from test_llama import _idx, _tiny

import splitnet as sn

pytest.importorskip("transformers")
from transformers.models.mistral import modeling_mistral
from transformers.models.phi3 import modeling_phi3
from transformers.models.qwen2 import modeling_qwen2
from transformers.models.qwen3 import modeling_qwen3


def _eager(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """These families' eager_attention_forward with the softmax in the input's dtype."""
    k = modeling_mistral.repeat_kv(key, module.num_key_value_groups)
    v = modeling_mistral.repeat_kv(value, module.num_key_value_groups)
    w = torch.matmul(query, k.transpose(2, 3)) * scaling
    if attention_mask is not None:
        w = w + attention_mask
    w = torch.softmax(w, dim=-1)
    return torch.matmul(w, v).transpose(1, 2).contiguous(), w


@pytest.fixture
def exact_eager(monkeypatch, exact_norms):
    for mod in (modeling_mistral, modeling_phi3, modeling_qwen2, modeling_qwen3):
        monkeypatch.setattr(mod, "eager_attention_forward", _eager)


QWEN = {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}
# name -> (family, config fields: 3 layers, a window of 4 of 64 positions, eager attention,
# the window_layers transformers' model windows: None is every layer)
CASES = {
    "mistral": ("mistral", {"sliding_window": 4}, None),
    "phi3": ("phi3", {"sliding_window": 4}, None),
    "qwen2": ("qwen2", QWEN, (1, 2)),
    "qwen3": ("qwen3", QWEN, (1, 2)),
    # an explicit list rules over max_window_layers
    "qwen2-listed": ("qwen2", {**QWEN, "layer_types": [
        "sliding_attention", "full_attention", "sliding_attention"]}, (0, 2)),
    # Mistral's mask windows every layer whatever layer_types say (transformers warns)
    "mistral-listed": ("mistral", {"sliding_window": 4, "layer_types": [
        "full_attention", "sliding_attention", "sliding_attention"]}, None),
}


def _windowed(name, seed=6, **extra):
    family, kw, _ = CASES[name]
    return _tiny(family, seed=seed, num_hidden_layers=3, attn_implementation="eager",
                 **{**kw, **extra})


def _gap(src, m, idx) -> float:
    """max |ours - theirs| / max |theirs| of the logits."""
    with torch.no_grad():
        ref = src(idx).logits
        return float((m(idx) - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("name", list(CASES))
def test_logits_on_sequences_past_the_window_equal_transformers(name, exact_eager):
    """20 tokens, five windows: the imported windows are transformers' layer by layer, the
    context is all of max_position_embeddings and slides; without the window the logits
    differ (the sequence is long enough for it to bind)."""
    src = _windowed(name)
    m = sn.interop.from_hf(src)
    c = m.config
    assert (c.sliding_window, c.window_layers, c.max_len, c.context_slides) == \
        (4, CASES[name][2], 64, True)
    idx = _idx(20, rows=2, seed=7)
    assert _gap(src, m, idx) <= 1e-13
    unwindowed = sn.SplitTransformer.from_config({**c.to_dict(), "sliding_window": None,
                                                  "window_layers": None})
    unwindowed.load_state_dict(m.state_dict())
    assert _gap(src, unwindowed.double(), idx) > 1e-3


@pytest.mark.parametrize("name", ["mistral", "phi3", "qwen2", "qwen3", "qwen2-listed"])
@pytest.mark.parametrize("prompt,new", [(3, 12), (1, 9), (19, 6)])
def test_greedy_generation_past_the_window_equals_transformers(name, prompt, new, exact_eager):
    """A window of 4, sequences of up to 25 tokens: cached and uncached greedy tokens are
    transformers' (its sliding cache) token for token (before issue 61 these were refused)."""
    src = _windowed(name, seed=4)
    m = sn.interop.from_hf(src)
    idx = _idx(prompt, rows=1, seed=5)
    theirs = src.generate(idx, max_new_tokens=new, do_sample=False, pad_token_id=0)
    assert len(set(theirs[0, prompt:].tolist())) > 2                  # not one token repeated
    assert torch.equal(m.generate(idx, new, temperature=0, use_cache=True), theirs)
    assert torch.equal(m.generate(idx, new, temperature=0, use_cache=False), theirs)


def test_a_windowed_folder_imports_the_same_windows(tmp_path, exact_eager):
    """From a sharded save_pretrained folder: transformers derives layer_types from
    config.json, the import the same windows and logits."""
    src = _windowed("qwen2")
    src.save_pretrained(tmp_path, max_shard_size="20KB")
    m = sn.interop.from_hf(tmp_path)
    assert (m.config.sliding_window, m.config.window_layers) == (4, (1, 2))
    assert _gap(src, m, _idx(20, rows=2, seed=3)) <= 1e-13


def test_a_window_no_shorter_than_the_context_is_left_out():
    """A window of 64 of 64 positions binds nowhere within the context: no window."""
    for name in ("mistral", "qwen2"):
        c = sn.interop.from_hf(_windowed(name, sliding_window=64)).config
        assert (c.sliding_window, c.window_layers, c.max_len) == (None, None, 64)


@pytest.mark.parametrize("name", ["mistral", "phi3", "qwen2", "qwen3"])
@pytest.mark.parametrize("off", [1, -1])
def test_planted_a_window_off_by_one_is_caught(name, off, monkeypatch, exact_eager):
    from splitnet.interop import llama

    windows = llama._windows
    monkeypatch.setattr(llama, "_windows", lambda c: {
        **windows(c), "sliding_window": windows(c)["sliding_window"] + off})
    src = _windowed(name)
    m = sn.interop.from_hf(src)
    assert m.config.sliding_window == 4 + off
    assert _gap(src, m, _idx(20, rows=2, seed=7)) > 1e-6


@pytest.mark.parametrize("extra,says", [
    ({"use_sliding_window": False}, r"this qwen2 has sliding_attention layers and no "
     r"sliding_window \(use_sliding_window is False, which unsets it\); transformers cannot"),
    ({"layer_types": ["full_attention", "chunked_attention", "sliding_attention"]},
     r"this qwen2 has layer_types 'chunked_attention'; splitnet maps sliding_attention and "
     r"full_attention"),
])
def test_what_the_windows_cannot_map_is_refused_by_name(extra, says):
    with pytest.raises(ValueError, match=says) as info:
        sn.interop.from_hf(_windowed("qwen2-listed", **extra))
    assert "\n" not in str(info.value)


def test_sample_runs_past_an_imported_window(tmp_path, capsysbinary, exact_eager):
    """The command line: a window of 4 tokens, a 19-byte prompt and 8 bytes more are
    transformers' bytes (before issue 61: refused, one line)."""
    from splitnet.cli import main

    src = _tiny("mistral", seed=8, num_hidden_layers=3, sliding_window=4, vocab_size=256)
    src.save_pretrained(tmp_path / "m")
    capsysbinary.readouterr()
    prompt = b"the quick brown fox"
    assert main(["sample", "--hf", str(tmp_path / "m"), "--prompt", prompt.decode(),
                 "--temperature", "0", "--max-new-tokens", "8"]) == 0
    want = src.generate(torch.tensor([list(prompt)]), max_new_tokens=8, do_sample=False,
                        pad_token_id=0)[0, len(prompt):]
    assert capsysbinary.readouterr().out == bytes(want.tolist())       # raw bytes, any of 256
