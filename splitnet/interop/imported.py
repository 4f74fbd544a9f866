"""Imported models for the analyses: a ``save_pretrained`` folder as a SplitTransformer with its
tokenizer and an ``evaluate`` of any re-discretised copy on the same tokens
(:func:`load_hf_for_analysis`; ``splitnet refine --hf DIR``, ``splitnet trajectories --hf
DIR``). The mappings themselves: :mod:`splitnet.interop.convert`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from ..nets.models import SplitTransformer
from .convert import from_hf
from .folder import check_directory, require_hf

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json")


def load_tokenizer(directory):
    """The tokenizer saved in ``directory`` (``AutoTokenizer``, local files only), or None when
    it has none (then texts are UTF-8 bytes)."""
    require_hf()
    p = Path(directory)
    if not any((p / f).is_file() for f in TOKENIZER_FILES):
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(p, local_files_only=True)
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"{p}: the tokenizer cannot be read ({str(e).splitlines()[0]})") \
            from None


@dataclass
class Imported:
    """An imported model with what analyses need: ``model`` (a SplitTransformer), ``tokenizer``
    (None: UTF-8 bytes), the ``directory`` it came from.

    ``splitnet refine --hf DIR`` hooks in here: ``imported.model`` is the network to
    re-discretise (:func:`splitnet.analyses.convergence.rediscretize`), ``imported.evaluate(text,
    model=m)``
    the loss of any re-discretised ``m`` on the same tokens."""

    model: SplitTransformer
    tokenizer: object
    directory: Path

    def encode(self, text: str) -> torch.Tensor:
        """Token ids (T,) of ``text``: the tokenizer's, else UTF-8 bytes."""
        if not isinstance(text, str) or not text:
            raise ValueError("text must be a non-empty str")
        ids = self.tokenizer.encode(text) if self.tokenizer is not None else \
            list(text.encode("utf-8"))
        if max(ids) >= self.model.vocab_size:
            raise ValueError(f"token ids up to {max(ids)} do not fit the model's vocabulary "
                             f"{self.model.vocab_size}")
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids]
        if self.tokenizer is not None:
            return self.tokenizer.decode(ids)
        return bytes(ids).decode("utf-8", "replace")

    @torch.no_grad()
    def evaluate(self, text: str, model: SplitTransformer | None = None) -> dict:
        """Next-token loss of ``model`` (default: the imported one) on ``text``, cut into
        windows of the model's context: ``loss`` in nats per predicted token, ``bpb`` the
        same total in bits per UTF-8 byte of the predicted text (comparable across
        tokenizers and with splitnet's byte models), ``tokens``, ``bytes``."""
        model = self.model if model is None else model
        ids = self.encode(text)
        dev = next(model.parameters()).device
        nats, n_tok, n_bytes = 0.0, 0, 0
        for w in ids.split(model.max_len):
            if len(w) < 2:
                continue
            logits = model(w[None].to(dev))[0, :-1].double()
            nats += float(torch.nn.functional.cross_entropy(logits, w[1:].to(dev),
                                                            reduction="sum"))
            n_tok += len(w) - 1
            n_bytes += len(self.decode(w).encode()) - len(self.decode(w[:1]).encode())
        if n_tok == 0:
            raise ValueError("the text is too short: it needs at least 2 tokens")
        return {"loss": nats / n_tok, "bpb": nats / math.log(2) / max(n_bytes, 1),
                "tokens": n_tok, "bytes": n_bytes}


def load_hf_for_analysis(directory, dtype: torch.dtype | None = None) -> Imported:
    """A local Hugging Face directory (GPT-2 or splitnet) as an :class:`Imported`: the model
    (:func:`from_hf`), the directory's tokenizer or bytes, and a loss evaluator."""
    p = check_directory(directory)
    model = from_hf(p, dtype=dtype)
    tok = load_tokenizer(p)
    if tok is None and model.vocab_size < 256:
        raise ValueError(f"{p} has no tokenizer and the model's vocabulary "
                         f"({model.vocab_size}) is too small for bytes")
    return Imported(model=model, tokenizer=tok, directory=p)


__all__ = ["TOKENIZER_FILES", "Imported", "load_hf_for_analysis", "load_tokenizer"]
