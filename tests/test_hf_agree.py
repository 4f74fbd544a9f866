"""A folder's or an object's config and its tensors agree, or the import follows transformers
and says so (issue 62 D1, D10), for every family from_hf reads, one file or shards:

* a config that calls the head tied while the head is another tensor: imported untied with that
  head, with a warning; logits equal to transformers' (which keeps the file's head too);
* tensors the config does not use (a whole layer beyond ``num_hidden_layers``, an unknown
  tensor): not imported, as transformers does, with a warning naming them; logits equal;
* tensors the config needs that an object lacks: refused (an import would keep random ones).

Tiny random models in float64 (RMSNorm's float32 cast patched out: ``exact_norms``)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import splitnet as sn

tf = pytest.importorskip("transformers")

SIZES = {"vocab_size": 61, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
         "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 16}
FAMILIES = {   # name -> (model class, its config's keywords)
    "gpt2": (tf.GPT2LMHeadModel, tf.GPT2Config, {
        "vocab_size": 61, "n_embd": 16, "n_layer": 2, "n_head": 2, "n_positions": 16,
        "bos_token_id": None, "eos_token_id": None}),
    "neox": (tf.GPTNeoXForCausalLM, tf.GPTNeoXConfig, {**SIZES, "rotary_pct": 0.5}),
    "llama": (tf.LlamaForCausalLM, tf.LlamaConfig, SIZES),
    "qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config, SIZES),
    "mistral": (tf.MistralForCausalLM, tf.MistralConfig, {**SIZES, "sliding_window": None}),
}
LAYERS = {"gpt2": "n_layer"}


def _tiny(name, tied=True, seed=0, **extra):
    cls, cfg_cls, kw = FAMILIES[name]
    torch.manual_seed(seed)
    m = cls(cfg_cls(**{**kw, "tie_word_embeddings": tied, **extra})).double().eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "norm" in n or "ln" in n:
                p.add_(0.3 * torch.randn_like(p))
    return m


def _save(m, d, sharded):
    m.save_pretrained(d, **({"max_shard_size": "4KB"} if sharded else {}))
    assert (d / "model.safetensors.index.json").exists() == sharded
    return d


def _edit_config(d, **changes):
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    if "layer_types" in cfg:      # Qwen2's per-layer kinds: one per layer, as its config checks
        cfg["layer_types"] = cfg["layer_types"][:cfg["num_hidden_layers"]]
    (d / "config.json").write_text(json.dumps(cfg))


def _import(src):
    """from_hf(src) and the messages of the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = sn.interop.from_hf(src)
    return m, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _same_logits(ours, theirs):
    idx = torch.randint(0, 61, (2, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = theirs(idx).logits
        gap = (ours(idx) - ref).abs().max()
    assert gap < 1e-10 * ref.abs().max(), float(gap)


def _transformers(d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tf.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float64).eval()


@pytest.mark.parametrize("sharded", [False, True], ids=["one-file", "sharded"])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_head_the_config_calls_tied_is_kept_untied_and_said(name, sharded, tmp_path,
                                                              exact_norms):
    d = _save(_tiny(name, tied=False), tmp_path / name, sharded)
    _edit_config(d, tie_word_embeddings=True)
    m, said = _import(d)
    assert len(said) == 1 and "config.json says the head is tied" in said[0], said
    assert "imported untied with that head, as transformers does" in said[0]
    assert not m.config.tie_head and m.head.weight is not m.tok_emb.weight
    _same_logits(m, _transformers(d))


@pytest.mark.parametrize("name", list(FAMILIES))
def test_an_object_whose_head_is_not_its_embedding_keeps_that_head(name, exact_norms):
    """An object built tied whose head was replaced: its forward uses that head."""
    src = _tiny(name)
    src.get_output_embeddings().weight = torch.nn.Parameter(
        src.get_input_embeddings().weight.detach() + 0.5)
    m, said = _import(src)
    assert len(said) == 1 and f"this {type(src).__name__}'s config says the head" in said[0]
    _same_logits(m, src)
    # a head equal to the embedding in an untied config: the same logits, nothing to say
    m, said = _import(_tiny(name, tied=True, seed=1))
    assert said == [] and m.config.tie_head


@pytest.mark.parametrize("sharded", [False, True], ids=["one-file", "sharded"])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_layer_beyond_the_config_and_an_unknown_tensor_are_named(name, sharded, tmp_path,
                                                                  exact_norms):
    d = _save(_tiny(name, **{LAYERS.get(name, "num_hidden_layers"): 3}), tmp_path / name,
              sharded)
    _edit_config(d, **{LAYERS.get(name, "num_hidden_layers"): 2})
    m, said = _import(d)
    assert len(said) == 1 and "holds tensors its config does not use" in said[0], said
    assert ".2.* (" in said[0] and " tensors)" in said[0], said[0]   # the layer, as one entry
    assert m.config.n_layers == 2
    _same_logits(m, _transformers(d))
    if not sharded:
        from safetensors.torch import load_file, save_file

        f = d / "model.safetensors"
        sd = {**load_file(f), "extra.thing": torch.zeros(3)}
        save_file(sd, f, metadata={"format": "pt"})
        _, said = _import(d)
        assert "extra.thing" in said[0], said


@pytest.mark.parametrize("name", list(FAMILIES))
def test_an_objects_tensors_against_its_own_config(name, exact_norms):
    """Layers beyond the config's count (lowered after construction) are named; layers the
    config needs that the object lacks (the count raised) are refused, not left random."""
    key = LAYERS.get(name, "num_hidden_layers")
    src = _tiny(name, **{key: 3})

    def layers(n):
        setattr(src.config, key, n)
        if getattr(src.config, "layer_types", None):     # Qwen2: one kind per layer
            src.config.layer_types = [src.config.layer_types[0]] * n

    layers(2)
    m, said = _import(src)
    assert len(said) == 1 and ".2.* (" in said[0], said
    assert m.config.n_layers == 2
    layers(4)
    with pytest.raises(ValueError, match=r"lacks tensors its config needs: \S+\.3\.\* \("):
        sn.interop.from_hf(src)


def test_buffers_older_transformers_saved_are_not_named(tmp_path):
    """GPT-2's attn.masked_bias (recomputed from the config by every version) says nothing."""
    from safetensors.torch import load_file, save_file

    d = _save(_tiny("gpt2"), tmp_path / "g", False)
    f = d / "model.safetensors"
    sd = {**load_file(f), "transformer.h.0.attn.masked_bias": torch.tensor(-1e4),
          "transformer.h.0.attn.bias": torch.ones(1, 1, 16, 16)}
    save_file(sd, f, metadata={"format": "pt"})
    _, said = _import(d)
    assert said == []


def test_a_splitnet_folder_whose_head_differs_keeps_it_untied(tmp_path):
    """The splitnet family too: split_config says tie_head, the file holds its own head."""
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    m = sn.SplitTransformer(vocab_size=61, d_model=16, n_heads=2, n_layers=2, max_len=16,
                            scheme="strang").double()
    sn.interop.to_hf(m, tmp_path / "sp")
    f = tmp_path / "sp" / "model.safetensors"
    sd = load_file(f)
    sd["model.head.weight"] = torch.randn(61, 16, dtype=torch.float64)
    save_file(sd, f, metadata={"format": "pt"})
    ours, said = _import(tmp_path / "sp")
    assert len(said) == 1 and "model.head.weight differs from the token embedding" in said[0]
    assert not ours.config.tie_head
    _same_logits(ours, _transformers(tmp_path / "sp"))
