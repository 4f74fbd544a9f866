"""``splitnet sample``: continue a prompt with a trained byte-level model, streaming the bytes."""

from __future__ import annotations

import argparse
import math
import sys

from .._args import (
    add_device_option,
    add_model_source,
    add_threads_option,
    check_only_with,
    float_in,
    nonnegative_int,
    positive_int,
    seed,
    set_threads,
    torch_device,
)
from .._depth import add_at_depth_option, at_depth_of

RANK = 60   # place in `splitnet --help`
HELP = "generate text from a trained checkpoint"
START = b"\n"   # what an empty prompt starts from: a line break (the corpus is lines of text)
# Temperatures other than 0 that sampling takes: logits / T stays finite in float32 (a
# subnormal T made every probability NaN).
TEMPERATURE = (1e-6, 1e6)


def nonnegative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return v


def configure(p) -> None:
    p.description = (
        "Continue --prompt with a model trained by 'splitnet train' and write the new bytes to "
        "stdout as they are produced (raw bytes: the tokenizer is the identity on bytes, so a "
        "UTF-8 character may take several tokens). The prompt itself is not echoed; an empty "
        "prompt starts from a line break. A prompt longer than the model's context is allowed: "
        "each token is predicted from the last context-many bytes. Tokens/s go to stderr at "
        "the end. Attention keys and values are cached per stage and sub-step "
        "(splitnet.nets.generation), except for method 'exact'.")
    add_model_source(p, hf=": continue the prompt with that imported model (GPT-2, GPT-NeoX, "
                           "Llama, Qwen2, Mistral), in its folder's tokens when it has a "
                           "tokenizer")
    p.add_argument("--prompt", default="", metavar="TEXT",
                   help="text to continue (default: empty = start from a line break)")
    p.add_argument("--max-new-tokens", type=nonnegative_int, default=256, metavar="N",
                   help="bytes to generate (default 256)")
    p.add_argument("--temperature", type=float_in(TEMPERATURE[0], TEMPERATURE[1], zero=True),
                   default=1.0, metavar="T",
                   help=f"softmax temperature in [{TEMPERATURE[0]:g}, {TEMPERATURE[1]:g}]; 0 = "
                        f"greedy (default 1.0)")
    p.add_argument("--top-k", type=positive_int, default=None, metavar="K",
                   help="sample from the K most likely bytes only (default: all)")
    p.add_argument("--seed", type=seed, default=None, metavar="S",
                   help="seed of the sampling RNG (default 0): same seed, same text")
    add_at_depth_option(p)
    add_device_option(p)
    add_threads_option(p)


def prompt_bytes(prompt: str) -> bytes:
    """The prompt's bytes (command-line bytes that are not UTF-8 come back as they were);
    an empty prompt is :data:`START`."""
    return prompt.encode("utf-8", "surrogateescape") or START


class _ByteWriter:
    """Raw bytes to stdout, flushed each time; ``closed`` once the reader has gone."""

    def __init__(self):
        sys.stdout.flush()
        self.buffer = getattr(sys.stdout, "buffer", None)
        if self.buffer is None:      # a text-only stdout (an embedding host): decode as we go
            import codecs

            self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.closed = False

    def write(self, b: bytes) -> None:
        try:
            if self.buffer is not None:
                self.buffer.write(b)
                self.buffer.flush()
            else:
                sys.stdout.write(self.decoder.decode(b))
                sys.stdout.flush()
        except BrokenPipeError:
            import os

            self.closed = True   # `| head -c N`: stop; keep exit-time flushes from failing
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


# options that only apply alongside another (splitnet.cli._args.check_only_with): greedy
# decoding (--temperature 0) draws nothing
ONLY_WITH = {"top_k": ("when sampling (--temperature > 0)", lambda a: a.temperature > 0),
             "seed": ("when sampling (--temperature > 0)", lambda a: a.temperature > 0)}


def run(args) -> int:
    import time

    import torch

    check_only_with(args, ONLY_WITH)
    args.seed = 0 if args.seed is None else args.seed

    from ...nets.generation import cache_unsupported, stream
    from ...runs.checkpoint import load, model_from_state

    device = torch_device(args.device)
    set_threads(args.threads)
    if args.hf is not None:
        if args.at_depth is not None:
            raise ValueError("--at-depth takes a splitnet checkpoint (--checkpoint), not --hf")
        return _sample_hf(args, device)
    state = load(args.checkpoint, trust=args.trust_checkpoint)
    model = model_from_state(state, args.checkpoint).to(device).eval()
    if hasattr(model, "decoder_layers"):
        raise ValueError(f"{args.checkpoint} holds a translation model: use 'splitnet translate "
                         f"--checkpoint {args.checkpoint}'")
    if not model.config.causal:
        raise ValueError(f"{args.checkpoint} holds a masked language model (bidirectional, "
                         f"--task mlm): it restores masked bytes, it does not continue text")
    if model.vocab_size != 256:
        raise ValueError(f"sample writes bytes: the model needs vocab_size 256, this one has "
                         f"{model.vocab_size}")
    model = at_depth_of(model, args.at_depth, state.get("train_config"))
    prompt = prompt_bytes(args.prompt)
    idx = torch.tensor([list(prompt)], dtype=torch.long, device=device)
    gen = torch.Generator(device).manual_seed(args.seed)
    tokens = stream(model, idx, args.max_new_tokens, args.temperature, args.top_k,
                    generator=gen)      # every argument checked here, before any output
    out, n = _ByteWriter(), 0
    t0 = time.perf_counter()
    for tok in tokens:
        out.write(bytes([int(tok)]))
        n += 1
        if out.closed:
            tokens.close()
            break
    dt = time.perf_counter() - t0
    print(f"\nsample: {n} tokens in {dt:.2f} s, {n / dt if dt > 0 else 0.0:.1f} tokens/s "
          f"({len(prompt)}-byte prompt, context {model.max_len}, "
          f"{_how(model, len(prompt), n, cache_unsupported(model))}, {device})", file=sys.stderr)
    return 0


def _sample_hf(args, device) -> int:
    """``--hf DIR``: the imported model, in its tokenizer's tokens (text written as it is
    decoded), or in bytes when the folder has no tokenizer (a vocabulary of 256 then)."""
    import time

    import torch

    from ...interop.imported import load_hf_for_analysis
    from ...nets.generation import cache_unsupported, stream

    imported = load_hf_for_analysis(args.hf)
    model, tok = imported.model.to(device), imported.tokenizer
    if tok is None and model.vocab_size != 256:
        raise ValueError(f"{args.hf} has no tokenizer and a vocabulary of {model.vocab_size}: "
                         f"bytes need 256 (save the model's tokenizer beside it)")
    if tok is None:
        prompt = list(prompt_bytes(args.prompt))
    else:
        prompt = tok.encode(args.prompt, add_special_tokens=False) or \
            [tok.bos_token_id if tok.bos_token_id is not None else tok.encode("\n")[0]]
    idx = torch.tensor([prompt], dtype=torch.long, device=device)
    gen = torch.Generator(device).manual_seed(args.seed)
    tokens = stream(model, idx, args.max_new_tokens, args.temperature, args.top_k,
                    generator=gen)
    out, ids, shown, t0 = _ByteWriter(), [], "", time.perf_counter()
    for t in tokens:
        ids.append(int(t))
        if tok is None:
            out.write(bytes([ids[-1]]))
        else:      # the decoded text so far, less an unfinished character (it may span tokens)
            text = tok.decode(ids).rstrip("\ufffd")
            out.write(text[len(shown):].encode("utf-8", "replace"))
            shown = text
        if out.closed:
            tokens.close()
            break
    if tok is not None and not out.closed:
        out.write(tok.decode(ids)[len(shown):].encode("utf-8", "replace"))
    dt = time.perf_counter() - t0
    print(f"\nsample: {len(ids)} tokens in {dt:.2f} s ({len(prompt)}-token prompt, context "
          f"{model.max_len}, {_how(model, len(prompt), len(ids), cache_unsupported(model))}, "
          f"{device})", file=sys.stderr)
    return 0


def _how(model, n_prompt: int, n: int, reason: str | None) -> str:
    """Which tokens used the key/value cache: those predicted from at most max_len tokens."""
    if reason is not None:
        return f"no cache: {reason}"
    cached = max(0, min(n, model.max_len - n_prompt + 1))
    if cached == n:
        return "key/value cache"
    if cached == 0:
        return "no cache: the prompt fills the context, the window slides from the first token"
    return (f"key/value cache for {cached} tokens, then a sliding window (a full forward per "
            f"token) for {n - cached}")


__all__ = ["HELP", "ONLY_WITH", "RANK", "START", "TEMPERATURE", "configure", "nonnegative_float",
           "prompt_bytes", "run"]
