"""SplitTransformer as a Hugging Face ``transformers`` model (``pip install 'splitnet[hf]'``).

Importing this module registers two classes with the Auto classes, so a directory written by
:func:`splitnet.interop.to_hf` for any scheme and weights mode loads with::

    import splitnet.interop.hf                       # (every splitnet.interop call imports it too)
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(directory)
    model.generate(ids, max_new_tokens=20, do_sample=False)

* :class:`SplitTransformerConfig` (``model_type = "splitnet"``) holds the model's
  :class:`~splitnet.configs.config.SplitConfig` as plain data (``split_config``, its ``to_dict()``:
  a
  custom scheme is stored as its stages, so nothing but JSON is needed to rebuild it).
* :class:`SplitTransformerForCausalLM` wraps a :class:`~splitnet.nets.models.SplitTransformer` as
  ``self.model``; its forward is the SplitTransformer's (logits equal), plus the shifted
  cross-entropy when ``labels`` are given. There is no key/value cache (a layer of a general
  scheme calls its attention several times on changing states): generation re-runs the whole
  prefix at every step.

This module imports ``transformers`` at the top; :mod:`splitnet.interop` imports it lazily, so
the core library never needs it.
"""

from __future__ import annotations

from ..configs.config import SplitConfig, require

require("transformers", "safetensors", extra="hf", feature="splitnet.interop.hf")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from transformers import (  # noqa: E402
    AutoConfig,
    AutoModelForCausalLM,
    GenerationMixin,
    PreTrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import CausalLMOutput  # noqa: E402

from ..nets.models import SplitTransformer  # noqa: E402

MODEL_TYPE = "splitnet"


class SplitTransformerConfig(PreTrainedConfig):
    """A :class:`~splitnet.configs.config.SplitConfig` as a ``transformers`` config.

    ``split_config`` is ``SplitConfig.to_dict()``; the usual names (``vocab_size``,
    ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``,
    ``max_position_embeddings``) read from it."""

    model_type = MODEL_TYPE
    split_config: dict | None = None
    tie_word_embeddings: bool = True

    def __post_init__(self, **kwargs):
        cfg = SplitConfig.from_dict(self.split_config) if self.split_config else SplitConfig()
        self.split_config = cfg.to_dict()          # validated, complete
        self.tie_word_embeddings = cfg.tie_head    # an untied head stays untied on load
        super().__post_init__(**kwargs)

    @property
    def splitnet(self) -> SplitConfig:
        return SplitConfig.from_dict(self.split_config)

    @property
    def vocab_size(self) -> int:
        return self.split_config["vocab_size"]

    @property
    def hidden_size(self) -> int:
        return self.split_config["d_model"]

    @property
    def num_hidden_layers(self) -> int:
        return self.split_config["n_layers"]

    @property
    def num_attention_heads(self) -> int:
        return self.split_config["n_heads"]

    @property
    def max_position_embeddings(self) -> int:
        return self.split_config["max_len"]


class SplitTransformerForCausalLM(PreTrainedModel, GenerationMixin):
    """A :class:`~splitnet.nets.models.SplitTransformer` (``self.model``) as a causal LM."""

    config_class = SplitTransformerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _tied_weights_keys = {"model.head.weight": "model.tok_emb.weight"}  # noqa: RUF012

    def __init__(self, config: SplitTransformerConfig):
        super().__init__(config)
        self.model = SplitTransformer.from_config(config.split_config)
        self.post_init()
        # No key/value cache: every step sees the whole sequence.
        self.generation_config.use_cache = False

    def _init_weights(self, module):
        # The SplitTransformer initialises itself (GPT-2 style) on construction; weights that
        # from_pretrained loads replace it. Nothing to do here.
        return

    def get_input_embeddings(self):
        return self.model.tok_emb

    def set_input_embeddings(self, value):
        self.model.tok_emb = value

    def get_output_embeddings(self):
        return self.model.head

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask=None,
                labels: torch.LongTensor | None = None, **kwargs) -> CausalLMOutput:
        """``input_ids`` (B, T) -> logits (B, T, V) of the SplitTransformer; with ``labels``
        also the mean cross-entropy of predicting token t + 1 from the prefix up to t."""
        if input_ids is None:
            raise ValueError("SplitTransformerForCausalLM needs input_ids (no inputs_embeds)")
        if attention_mask is not None and not bool(attention_mask.bool().all()):
            raise ValueError("SplitTransformerForCausalLM has no padding mask: pass sequences "
                             "of equal length without padding (attention_mask all ones)")
        logits = self.model(input_ids)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)),
                                   labels[:, 1:].reshape(-1), ignore_index=-100)
        return CausalLMOutput(loss=loss, logits=logits)

    def prepare_inputs_for_generation(self, input_ids, **kwargs):
        """The whole sequence at every step (no cache)."""
        return {"input_ids": input_ids}


AutoConfig.register(MODEL_TYPE, SplitTransformerConfig, exist_ok=True)
AutoModelForCausalLM.register(SplitTransformerConfig, SplitTransformerForCausalLM,
                              exist_ok=True)

__all__ = ["MODEL_TYPE", "SplitTransformerConfig", "SplitTransformerForCausalLM"]
