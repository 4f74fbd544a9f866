"""A source's config and its tensors agree, or the import follows what ``transformers`` does and
says so (issue 62 D1, D10), for every family :func:`splitnet.interop.convert.from_hf` reads, an
object or a folder, one weights file or shards.

* **the head** (:func:`follow_head`): a config that says the head is tied
  (``tie_word_embeddings``) while the head is another tensor with other values -- a folder whose
  file holds its own ``lm_head.weight``, or an object whose head was replaced. transformers
  keeps that head (it warns "we will NOT tie them") and its logits are the head's, so the import
  keeps it too, untied, and warns naming the config and the head. A head that is the embedding
  or equal to it is tied as the config says.
* **tensors the config does not use** (:func:`warn_unused`): a layer beyond
  ``num_hidden_layers``, a tensor no module of the model has. transformers drops them from the
  model it builds (its "UNEXPECTED" report); the import does the same, so its logits are
  transformers', and warns naming each (a whole layer as one entry). Buffers that older
  transformers versions saved and every version recomputes from the config (:data:`DERIVED`)
  are not named.
* **tensors the config needs that an object lacks** (:func:`check_object`, a layer count raised
  after construction, a module of another shape) are refused: the import would otherwise keep
  a random initialisation in their place. A folder's missing tensors are refused when it is
  read (:func:`splitnet.interop.folder.load_pretrained`).

The warnings are :class:`UserWarning`; ``warnings.simplefilter("error")`` makes them refusals.
"""

from __future__ import annotations

import re
import warnings

import torch

from .folder import first_line, quiet

# Buffers of older transformers versions that the model recomputes from its config (causal
# masks, their fill value, rotary inverse frequencies); transformers' own
# _keys_to_ignore_on_load_unexpected already hides some of them.
DERIVED = (r"\.attn\.masked_bias$", r"\.attn\.bias$", r"\.attention\.masked_bias$",
           r"\.attention\.bias$", r"\.rotary_emb\.inv_freq$")


def derived(key: str) -> bool:
    return any(re.search(p, key) for p in DERIVED)


def grouped(keys) -> str:
    """The tensors ``keys`` named for a message: the keys of one numbered block
    (``model.layers.2.``) as ``model.layers.2.* (9 tensors)``, the rest as they are."""
    groups: dict[str, list[str]] = {}
    for k in sorted(keys):
        m = re.match(r"^(.*?\.\d+)\.", k)
        groups.setdefault(m.group(1) + ".*" if m else k, []).append(k)
    parts = [g if len(v) == 1 and g == v[0] else f"{g} ({len(v)} tensor{'s' * (len(v) > 1)})"
             for g, v in groups.items()]
    return ", ".join(parts[:6]) + (f" and {len(parts) - 6} more" if len(parts) > 6 else "")


def warn_unused(keys, where: str, stacklevel: int = 3) -> None:
    """A warning naming the tensors of ``where`` that its config does not use (none derived)."""
    keys = [k for k in keys if not derived(k)]
    if keys:
        warnings.warn(f"{where} holds tensors its config does not use: {grouped(keys)}; they "
                      f"are not imported (as transformers does), so the model is the one the "
                      f"config describes", UserWarning, stacklevel=stacklevel)


def check_object(src) -> None:
    """``src``'s tensors against a model built from its own config (on the meta device: no
    memory): ValueError for a tensor the config needs that ``src`` lacks or holds in another
    shape, a warning naming those it holds that the config does not use."""
    try:
        with quiet(), torch.device("meta"):
            ref = type(src)(src.config).state_dict()
    except Exception as e:   # the model's own checks raise ValueError, AssertionError, ...
        raise ValueError(f"this {type(src).__name__}'s config describes a model transformers "
                         f"cannot build ({first_line(e)})") from None
    have = src.state_dict()
    where = f"this {type(src).__name__}"
    missing = [k for k in ref if k not in have]
    if missing:
        raise ValueError(f"{where} lacks tensors its config needs: {grouped(missing)} (its "
                         f"config was changed after it was built?); nothing was imported")
    shaped = [k for k in ref if tuple(ref[k].shape) != tuple(have[k].shape)]
    if shaped:
        k = shaped[0]
        raise ValueError(f"{where}'s {k} has shape {tuple(have[k].shape)}, its config needs "
                         f"{tuple(ref[k].shape)}; nothing was imported")
    warn_unused([k for k in have if k not in ref], where, stacklevel=4)


def head_differs(src) -> float | None:
    """How far ``src``'s output head is from its token embedding (the largest difference), or
    None when the head is the embedding or equal to it."""
    head = src.get_output_embeddings().weight
    emb = src.get_input_embeddings().weight
    if head is emb or (head.shape == emb.shape and torch.equal(head, emb)):
        return None
    if head.shape != emb.shape:
        return float("inf")
    return float((head.detach().float() - emb.detach().float()).abs().max())


def _head_name(src) -> str:
    head = src.get_output_embeddings().weight
    return next((n for n, p in src.named_parameters() if p is head), "lm_head.weight")


def follow_head(src, model, where: str | None = None):
    """``model`` with ``src``'s head: untied when that head is not the embedding (whatever
    the import built), with a warning when ``src``'s config says it is tied."""
    gap = head_differs(src)
    if gap is None or not model.config.tie_head:
        return model
    if bool(getattr(src.config, "tie_word_embeddings", True)):
        where = where or f"this {type(src).__name__}'s config"
        warnings.warn(f"{where} says the head is tied (tie_word_embeddings=True), but "
                      f"{_head_name(src)} differs from the token embedding (by up to "
                      f"{gap:.3g}); imported untied with that head, as transformers does (set "
                      f"tie_word_embeddings to false to say so)", UserWarning, stacklevel=3)
    untied = type(model).from_config(model.config.replace(tie_head=False))
    untied.to(next(model.parameters()).dtype)
    with torch.no_grad():
        untied.load_state_dict(model.state_dict())
        untied.head.weight.copy_(src.get_output_embeddings().weight)
    return untied


__all__ = ["DERIVED", "check_object", "derived", "follow_head", "grouped", "head_differs",
           "warn_unused"]
