"""Tiny Hugging Face model folders (written by ``save_pretrained``, nothing downloaded), the ways
they get damaged, and the bad folders of docs/errors.md's import section (``HF_CASES``).

Needs transformers (the ``hf`` extra): :func:`hf_folder` skips the calling test without it, and
:func:`section` then keeps the section already in docs/errors.md (``test_errors`` renders the
rest of that file without the extra)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

HEADER = "## Importing a Hugging Face folder"


def hf_folder(kind: str, root: Path, name: str | None = None, **config) -> Path:
    """A tiny GPT-2, GPT-NeoX, Llama, Mistral or Qwen2 (3 layers, a window of 4 of 32
    positions, bytes) folder as ``root/name`` (default ``kind``); ``config`` overrides the
    config's fields."""
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "gpt2":
        m = tf.GPT2LMHeadModel(tf.GPT2Config(**{
            "vocab_size": 300, "n_embd": 16, "n_layer": 1, "n_head": 2, "n_positions": 32,
            "bos_token_id": 0, "eos_token_id": 0, **config}))
    elif kind == "neox":
        m = tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(**{
            "vocab_size": 300, "hidden_size": 16, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 32,
            "rotary_pct": 0.25, "tie_word_embeddings": False, "bos_token_id": 0,
            "eos_token_id": 0, **config}))
    elif kind == "mistral":
        m = tf.MistralForCausalLM(tf.MistralConfig(**{
            "vocab_size": 256, "hidden_size": 16, "num_hidden_layers": 3,
            "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 32,
            "max_position_embeddings": 32, "sliding_window": 4, "bos_token_id": 0,
            "eos_token_id": 0, **config}))
    elif kind == "qwen2":
        m = tf.Qwen2ForCausalLM(tf.Qwen2Config(**{
            "vocab_size": 256, "hidden_size": 16, "num_hidden_layers": 3,
            "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 32,
            "max_position_embeddings": 32, "use_sliding_window": True, "sliding_window": 4,
            "max_window_layers": 1, "bos_token_id": 0, "eos_token_id": 0, **config}))
    elif kind in ("gemma2", "gemma3"):
        cls, cfg = ((tf.Gemma2ForCausalLM, tf.Gemma2Config) if kind == "gemma2" else
                    (tf.Gemma3ForCausalLM, tf.Gemma3TextConfig))
        m = cls(cfg(**{"vocab_size": 256, "hidden_size": 16, "num_hidden_layers": 2,
                       "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
                       "intermediate_size": 32, "max_position_embeddings": 32,
                       "sliding_window": 4, "bos_token_id": 0, "eos_token_id": 0,
                       "pad_token_id": 0, **config}))
    else:
        m = tf.LlamaForCausalLM(tf.LlamaConfig(**{
            "vocab_size": 300, "hidden_size": 16, "num_hidden_layers": 1,
            "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 32,
            "max_position_embeddings": 32, "bos_token_id": 0, "eos_token_id": 0, **config}))
    d = root / (name or kind)
    m.eval().save_pretrained(d)
    return d


def edit_weights(d: Path, edit) -> None:
    from safetensors.torch import load_file, save_file

    sd = load_file(d / "model.safetensors")
    edit(sd)
    save_file(sd, d / "model.safetensors", metadata={"format": "pt"})


def _up_projection(sd: dict) -> str:
    return next(k for k in sd if k.endswith(("mlp.c_fc.weight", "dense_h_to_4h.weight",
                                             "mlp.up_proj.weight")))


def _cut(d: Path, n: int) -> None:
    (d / "model.safetensors").write_bytes((d / "model.safetensors").read_bytes()[:n])


HF_DAMAGE = {
    "a tensor missing": (lambda d: edit_weights(d, lambda sd: sd.pop(_up_projection(sd))),
                         r": the weights do not fit its config.json \(the file has no "
                         r"\S+(c_fc|dense_h_to_4h|up_proj).weight: transformers would "
                         r"initialise it at random\); nothing was imported"),
    "a weight of the wrong shape": (
        lambda d: edit_weights(d, lambda sd: sd.__setitem__(_up_projection(sd),
                                                            torch.zeros(3, 3))),
        r"(c_fc|dense_h_to_4h|up_proj).weight has shape \(3, 3\), the config needs "
        r"\(\d+, \d+\)"),
    "a truncated model.safetensors": (
        lambda d: _cut(d, 2000),
        r"model.safetensors is damaged or cut short: its tensors cannot be read \(Error while "
        r"deserializing header"),
    "an empty model.safetensors": (
        lambda d: _cut(d, 0),
        r"model.safetensors is damaged or cut short: its tensors cannot be read"),
}


def _config_edit(d: Path, **changes) -> None:
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))


def _no_key(d: Path, key: str) -> None:
    cfg = json.loads((d / "config.json").read_text())
    del cfg[key]
    (d / "config.json").write_text(json.dumps(cfg))


def scratch(tmp: Path) -> Path:
    """The folders the cases below name, under ``tmp/hf-folders`` (made once)."""
    root = tmp / "hf-folders"
    if root.exists():
        return tmp
    root.mkdir(parents=True)
    (root / "file").write_text("not a folder")
    (root / "empty").mkdir()
    bad_json = hf_folder("gpt2", root, "bad-json")
    (bad_json / "config.json").write_text("{not json")
    _config_edit(hf_folder("gpt2", root, "bert"), model_type="bert")
    hf_folder("neox", root, "neox-gelu-fast", hidden_act="gelu_fast")
    _config_edit(hf_folder("neox", root, "neox-linear-rope"),
                 rope_scaling={"rope_type": "linear", "factor": 2.0})
    for i, (damage, _) in enumerate(HF_DAMAGE.values()):
        damage(hf_folder("neox", root, f"neox-damaged-{i}"))
    hf_folder("gpt2", root, "gpt2-gelu-fast", activation_function="gelu_fast")
    _config_edit(hf_folder("llama", root, "llama3-rope"), rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16})
    _config_edit(hf_folder("llama", root, "llama-vocab-str"), vocab_size="256")     # D2
    _config_edit(hf_folder("llama", root, "llama-eps-str"), rms_norm_eps="small")   # D2
    _config_edit(hf_folder("neox", root, "neox-3-heads"), num_attention_heads=3)    # D2
    _config_edit(hf_folder("gpt2", root, "gpt2-3-heads"), n_head=3)                 # D2
    _no_key(hf_folder("llama", root, "llama-no-hidden-size"), "hidden_size")        # D12
    _no_key(hf_folder("gpt2", root, "gpt2-no-n-layer"), "n_layer")                  # D12
    # issue 61: windows are exact past them now; what Qwen2's layer_types can ask and not map
    hf_folder("qwen2", root, "qwen2-window-off", use_sliding_window=False, layer_types=[
        "full_attention", "sliding_attention", "sliding_attention"])
    hf_folder("qwen2", root, "qwen2-chunked", layer_types=[
        "full_attention", "chunked_attention", "sliding_attention"])
    # issue 61: what of Gemma 2 / 3 is not mapped
    _config_edit(hf_folder("gemma3", root, "gemma3-linear-rope"), rope_parameters={
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})
    hf_folder("gemma3", root, "gemma3-attn-softcap", attn_logit_softcapping=50.0)
    hf_folder("gemma2", root, "gemma2-gelu", hidden_activation="gelu")
    hf_folder("gemma3", root, "gemma3-bidirectional", use_bidirectional_attention=True)
    (root / "gemma3-multimodal").mkdir()
    (root / "gemma3-multimodal" / "config.json").write_text(json.dumps({"model_type": "gemma3"}))
    hf_folder("gpt2", root, "gpt2", vocab_size=256)          # a good one, for --text's cases
    (root / "empty.txt").write_text("")
    return tmp


def _api(path: str):
    def call(tmp: Path):
        import splitnet as sn

        return sn.interop.from_hf(path.replace("{tmp}", str(tmp)))
    call.text = f"sn.interop.from_hf('{path}')"
    return call


def _not_a_model(tmp: Path):
    import splitnet as sn

    return sn.interop.from_hf(42)


_not_a_model.text = "sn.interop.from_hf(42)"


def _config_raised(tmp: Path):
    import splitnet as sn

    tf = pytest.importorskip("transformers")
    m = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2,
                                         n_positions=16, bos_token_id=0, eos_token_id=0))
    m.config.n_layer = 2
    return sn.interop.from_hf(m)


_config_raised.text = "sn.interop.from_hf(model) after model.config.n_layer = 2 (1 layer built)"
DAMAGE = list(HF_DAMAGE.items())
HF_CASES = [
    # (what is wrong, a call of from_hf or a command line, exception or exit status, regex)
    ("a plain file, not a folder", _api("{tmp}/hf-folders/file"), ValueError,
     r"is not a directory"),
    ("a folder without config.json", _api("{tmp}/hf-folders/empty"), ValueError,
     r"has no config.json"),
    ("config.json that is not JSON", _api("{tmp}/hf-folders/bad-json"), ValueError,
     r"config.json cannot be read"),
    ("a model type splitnet does not import", _api("{tmp}/hf-folders/bert"), ValueError,
     r"holds a 'bert' model"),
    ("GPT-2: an activation without an exact counterpart", _api("{tmp}/hf-folders/gpt2-gelu-fast"),
     ValueError, r"GPT-2 activation 'gelu_fast' has no exact splitnet counterpart"),
    ("GPT-NeoX: an activation without an exact counterpart",
     _api("{tmp}/hf-folders/neox-gelu-fast"), ValueError,
     r"GPT-NeoX activation 'gelu_fast' has no exact splitnet counterpart"),
    ("GPT-NeoX: scaled rotary positions", _api("{tmp}/hf-folders/neox-linear-rope"), ValueError,
     r"rope_type 'linear'"),
    *[(f"GPT-NeoX: {what}", _api(f"{{tmp}}/hf-folders/neox-damaged-{i}"), ValueError, pattern)
      for i, (what, (_, pattern)) in enumerate(DAMAGE)],
    ("Llama 3: scaled rotary positions", _api("{tmp}/hf-folders/llama3-rope"), ValueError,
     r"scales its rotary positions \(rope_type 'llama3'\)"),
    ("config.json: a value of the wrong type (vocab_size \"256\")",
     _api("{tmp}/hf-folders/llama-vocab-str"), ValueError,
     r"config.json: vocab_size is '256'; a positive integer is expected"),
    ("config.json: a value its config class rejects by type (rms_norm_eps \"small\")",
     _api("{tmp}/hf-folders/llama-eps-str"), ValueError,
     r"config.json has a bad value: Field 'rms_norm_eps' expected float, got str"),
    ("config.json: values its config class rejects (3 heads for width 16)",
     _api("{tmp}/hf-folders/neox-3-heads"), ValueError,
     r"config.json has a bad value: The hidden size is not divisible by the number of "
     r"attention heads"),
    ("GPT-2: config.json transformers cannot build a model from (3 heads for width 16)",
     _api("{tmp}/hf-folders/gpt2-3-heads"), ValueError,
     r"config.json describes a model transformers cannot build \(`embed_dim` must be "
     r"divisible by num_heads"),
    ("Llama: config.json without hidden_size (transformers would default it to 4096)",
     _api("{tmp}/hf-folders/llama-no-hidden-size"), ValueError,
     r"config.json has no 'hidden_size': a llama config.json states vocab_size, hidden_size"),
    ("GPT-2: config.json without n_layer", _api("{tmp}/hf-folders/gpt2-no-n-layer"),
     ValueError, r"config.json has no 'n_layer'"),
    ("Gemma 3: scaled rotary positions on its global layers",
     _api("{tmp}/hf-folders/gemma3-linear-rope"), ValueError,
     r"scales its rotary positions on full_attention layers \(rope_type 'linear'\)"),
    ("Gemma 3: attn_logit_softcapping, which transformers' Gemma 3 does not apply",
     _api("{tmp}/hf-folders/gemma3-attn-softcap"), ValueError,
     r"attn_logit_softcapping 50.0 \(transformers' Gemma 3 attention does not apply it\)"),
    ("Gemma 2: an activation other than tanh-GELU", _api("{tmp}/hf-folders/gemma2-gelu"),
     ValueError, r"hidden_activation 'gelu' \(Gemma's GeGLU gates with gelu_pytorch_tanh\)"),
    ("Gemma 3: bidirectional attention", _api("{tmp}/hf-folders/gemma3-bidirectional"),
     ValueError, r"use_bidirectional_attention=True"),
    ("Gemma 3 with its vision tower (multimodal, model type gemma3)",
     _api("{tmp}/hf-folders/gemma3-multimodal"), ValueError,
     r"holds a 'gemma3' model: Gemma 3 with its vision tower"),
    ("an object that is not a model", _not_a_model, TypeError,
     r"from_hf takes a GPT2LMHeadModel, a GPTNeoXForCausalLM, .*got int"),
    ("describe: GPT-NeoX with an unmapped activation",
     ["describe", "--hf", "{tmp}/hf-folders/neox-gelu-fast"], 2,
     r"GPT-NeoX activation 'gelu_fast'"),
    ("sample: GPT-NeoX with a tensor missing",
     ["sample", "--hf", "{tmp}/hf-folders/neox-damaged-0", "--max-new-tokens", "4"], 2,
     r"the weights do not fit its config.json"),
    ("refine: GPT-NeoX cut short",
     ["refine", "--hf", "{tmp}/hf-folders/neox-damaged-2", "--out", "{tmp}/hf-folders/r.png",
      "--no-progress"], 2,
     r"model.safetensors is damaged or cut short"),
    ("describe: config.json with a value of the wrong type",
     ["describe", "--hf", "{tmp}/hf-folders/llama-vocab-str"], 2,
     r"config.json: vocab_size is '256'"),
    ("sample: config.json rejected by its config class",
     ["sample", "--hf", "{tmp}/hf-folders/neox-3-heads", "--max-new-tokens", "4"], 2,
     r"config.json has a bad value: The hidden size is not divisible"),
    ("refine: config.json without hidden_size",
     ["refine", "--hf", "{tmp}/hf-folders/llama-no-hidden-size", "--out",
      "{tmp}/hf-folders/r.png", "--no-progress"], 2, r"config.json has no 'hidden_size'"),
    ("Qwen2: sliding layers in layer_types with use_sliding_window false",
     _api("{tmp}/hf-folders/qwen2-window-off"), ValueError,
     r"has sliding_attention layers and no sliding_window \(use_sliding_window is False"),
    ("Qwen2: a layer type other than sliding and full attention",
     _api("{tmp}/hf-folders/qwen2-chunked"), ValueError,
     r"has layer_types 'chunked_attention'; splitnet maps sliding_attention and full_attention"),
    ("trajectories: a model type splitnet does not import",
     ["trajectories", "--hf", "{tmp}/hf-folders/bert", "--prompt", "x = 1", "--out",
      "{tmp}/hf-folders/t.png"], 2,
     r"holds a 'bert' model"),
    ("refine: --hf with a folder as --text",
     ["refine", "--hf", "{tmp}/hf-folders/gpt2", "--text", "{tmp}/hf-folders/empty", "--out",
      "{tmp}/hf-folders/r.png"], 2, r"--text \S+/empty is a directory; give a file"),
    ("refine: --hf with an empty --text",
     ["refine", "--hf", "{tmp}/hf-folders/gpt2", "--text", "{tmp}/hf-folders/empty.txt",
      "--out", "{tmp}/hf-folders/r.png"], 2, r"--text \S+/empty.txt is empty: give a text"),
    ("an object whose config asks for more layers than it holds", _config_raised, ValueError,
     r"this GPT2LMHeadModel lacks tensors its config needs: transformer.h.1.\* \(\d+ tensors\)"),
]


def outcome(case, tmp: Path, run_cli) -> tuple[str, str, str]:
    """(the call as the table prints it, the exception's name or the exit status, the message
    with ``tmp`` written {tmp}); ``run_cli(argv)`` runs a command line in this process."""
    _, call, _, _ = case
    if isinstance(call, list):
        rc, _, err = run_cli(call)
        cmd = " ".join(call)
        return f"splitnet {cmd}", str(rc), err.strip()
    try:
        call(tmp)
    except Exception as e:
        return call.text, type(e).__name__, str(e).replace(str(tmp), "{tmp}")
    return call.text, "(nothing raised)", ""


def section(tmp: Path | None, run_cli, current: str) -> str:
    """The import section of docs/errors.md: rendered from HF_CASES with transformers, else the
    section of ``current`` (the file as it is) unchanged."""
    if tmp is None:
        return current[current.index(HEADER):] if HEADER in current else ""
    lines = [HEADER, "",
             ("GPT-2, GPT-NeoX (Pythia) and Llama-family folders, read by `sn.interop.from_hf` "
              "and every command's `--hf`: nothing is imported that the map would not reproduce "
              "exactly, and a damaged folder is one line, never transformers' random "
              "initialisation of what is missing. Each row is a test (`HF_CASES` in "
              "`tests/hf_folders.py`, run with the `hf` extra)."), "",
             "| # | bad input | call | raises / exit | message |", "|---|---|---|---|---|"]
    for i, case in enumerate(HF_CASES, 1):
        call, result, msg = outcome(case, tmp, run_cli)
        msg = re.sub(r"\s+", " ", msg).replace("|", "\\|")
        lines.append(f"| {i} | {case[0]} | `{call}` | {result} | {msg} |")
    return "\n".join(lines) + "\n"
