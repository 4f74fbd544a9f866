"""Model sources of a refinement study (:func:`splitnet.analyses.refine.refinement_study`): a
model and a function ``evaluate(model) -> mean loss``, from a ``splitnet train`` checkpoint
(:func:`checkpoint_source`, on the run's own validation windows) or a local Hugging Face
directory (:func:`hf_source`); :func:`study_memory` estimates what a study holds at once.
``splitnet.analyses.refine`` serves these names too.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

import torch


def validation_loss(batches: Sequence[tuple], device) -> Callable:
    """``evaluate(model)``: mean cross-entropy (nats per target) over ``batches`` of (inputs,
    targets), in the model's precision, accumulated in float64; targets of -100 (a masked
    language model's unmasked bytes) are not counted."""
    import torch.nn.functional as F

    def evaluate(model) -> float:
        tot, n = torch.zeros((), dtype=torch.float64, device=device), 0
        with torch.no_grad():
            for x, y in batches:
                logits = model(x.to(device))
                tot += F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                       y.to(device).reshape(-1), reduction="sum").double()
                n += int((y != -100).sum())
        return float(tot / n)

    return evaluate


def study_memory(config, windows: int, context: int, batch_size: int) -> float:
    """Bytes a refinement study holds at once (an estimate): the validation windows (inputs
    and targets, int64), the weights (float32, the model and a re-integrated copy's
    references) and one forward pass of ``batch_size`` windows without gradients (per token
    and attention: the heads' scores over the context, and a few states of width d_model and
    d_ff). Counts must be ints >= 1 (ValueError naming the one that is not)."""
    for name, v in (("windows", windows), ("context", context), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    d, ff = config.d_model, config.d_ff
    params = 2 * 256 * d + config.n_layers * 12 * d * d * max(1, ff / (4 * d))
    per_token = config.n_heads * context + 12 * d + 2 * ff
    return 16.0 * windows * context + 8.0 * params + 4.0 * 4 * batch_size * context * per_token


def checkpoint_source(path, windows: int | None = None, device="cpu", batch_size: int = 32,
                      trust: bool = False, warn=None, check_memory: bool = False):
    """``(model, evaluate, info)`` for a ``splitnet train`` checkpoint: the trained model (eval
    mode, on ``device``) and its validation loss on the checkpoint's own validation windows
    (the corpus and context of its ``train_config``; ``windows`` of them, default the run's
    ``eval_windows``: the windows training evaluated, a prefix of the same draw when fewer).
    ``check_memory``: refuse (ValueError with the estimate, :func:`study_memory`) a study that
    would not fit in the free memory of ``device``, before any window is cut.
    ``info``: the run's recorded final validation bpb, steps, corpus. A corpus that changed
    since training is reported through ``warn`` (evaluation goes on)."""
    from ..runs import checkpoint as ck
    from ..runs import data as D

    state = ck.load(path, trust=trust)
    if "train_config" not in state:
        raise ValueError(f"{ck.checkpoint_file(path)} has no training options (not written by "
                         f"splitnet train): its validation windows are unknown")
    tc = state["train_config"]
    n = tc.get("eval_windows", 256) if windows is None else windows
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"windows must be an int >= 1, got {n!r}")
    model = ck.model_from_state(state, path)
    from ..mlm.corpora import load_run_corpus

    corpus = load_run_corpus(tc.get("text"), tc.get("corpus"), tc.get("val_fraction", 0.05),
                             exclude=[ck.checkpoint_file(path).parent])   # as training did
    if warn is not None and state.get("corpus") not in (None, corpus.fingerprint()):
        warn(f"the corpus changed since the checkpoint was written (checkpoint: "
             f"{D.describe_fingerprint(state.get('corpus'))}; now: "
             f"{D.describe_fingerprint(corpus.fingerprint())})")
    if state.get("tokenizer") is not None:      # a BPE masked LM: its windows are tokens
        from ..mlm.tokens import text_tokens, tokenize

        corpus = tokenize(corpus, text_tokens(state))
    context = tc["context"]
    starts = D.val_starts(corpus, n, context, seed=0)
    if check_memory:
        from ..runenv import require_memory

        require_memory(study_memory(model.config, len(starts), context, batch_size),
                       f"a refinement study of {len(starts)} windows of {context} bytes, "
                       f"{batch_size} per pass,", "lower --windows or --batch-size", device)
    if tc.get("task") == "mlm":     # the held-out masked bytes the trainer scored
        from ..mlm import masked_windows

        x, y = masked_windows(corpus, starts, context, tc.get("seed", 0))
        batches = [(x[i:i + batch_size], y[i:i + batch_size])
                   for i in range(0, len(x), batch_size)]
    else:
        batches = list(D.val_batches(corpus, starts, batch_size, context))
    dev = torch.device(device)
    info = {"step": state.get("step"), "windows": len(starts), "context": context,
            "corpus": corpus.describe(), "val_bpb": _last_val_bpb(path)}
    return model.to(dev).eval(), validation_loss(batches, dev), info


def hf_source(directory, text=None, windows: int = 16, device="cpu"):
    """``(model, evaluate, info)`` for a local Hugging Face directory (GPT-2 or splitnet, read
    by :func:`splitnet.interop.load_hf_for_analysis`): the imported model (eval mode, on
    ``device``) and its next-token loss in nats per token (``evaluate(m)``, the same tokens for
    every re-discretised ``m``). ``text``: a path of a UTF-8 text file or None, the Python
    standard library's validation split (:func:`splitnet.runs.data.load_stdlib`); the first
    ``windows`` windows of the model's context are used."""
    from ..interop.imported import load_hf_for_analysis
    from ..runs import data as D

    if isinstance(windows, bool) or not isinstance(windows, int) or windows < 1:
        raise ValueError(f"windows must be an int >= 1, got {windows!r}")
    imported = load_hf_for_analysis(directory)
    if text is None:
        body, source = bytes(D.load_stdlib().val).decode("utf-8", "replace"), \
            "Python standard library (validation split)"
    else:   # the command line's readers: a folder, a FIFO, binary or not UTF-8 said so
        from .._io import input_kind, read_input

        input_kind(text, "--text")
        body, source = read_input(text, f"--text {text}", text=True).decode("utf-8"), str(text)
        if not body.strip():
            raise ValueError(f"--text {text} is empty: give a text to evaluate on")
    ctx = imported.model.max_len
    # tokens average a few characters (GPT-2: ~4 on English, fewer on code): 16 characters a
    # token leaves room; a shorter text gives fewer windows (info["windows"] says how many)
    ids = imported.encode(body[:windows * (ctx + 1) * 16])
    n = min(windows, (len(ids) - 1) // ctx)
    if n < 1:
        raise ValueError(f"{source}: the text is too short for one window of the model's "
                         f"context ({ctx + 1} tokens needed, {len(ids)} found)")
    # windows of ctx inputs and their next tokens, one after another (no overlap)
    starts = torch.arange(n) * ctx
    x = torch.stack([ids[a:a + ctx] for a in starts])
    y = torch.stack([ids[a + 1:a + ctx + 1] for a in starts])
    dev = torch.device(device)
    model = imported.model.to(dev).eval()
    evaluate = validation_loss(list(zip(x.split(8), y.split(8))), dev)
    info = {"windows": n, "context": ctx, "tokens": n * ctx,
            "text": source, "tokenizer": "bytes" if imported.tokenizer is None else
            type(imported.tokenizer).__name__}
    return model, evaluate, info


def _last_val_bpb(path) -> float | None:
    from ..runs import checkpoint as ck

    f = ck.checkpoint_file(path).parent / ck.METRICS
    if not f.exists():
        return None
    vals = [r["val_bpb"] for r in ck.read_metrics(f) if "val_bpb" in r]
    return vals[-1] if vals else None



__all__ = ["checkpoint_source", "hf_source", "study_memory", "validation_loss"]
