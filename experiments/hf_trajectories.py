"""Figure of docs/trajectories.md: token particles in an imported GPT-2-architecture model.

    python experiments/hf_trajectories.py                 # writes docs/figures/traj_gpt2_random.png

Needs ``pip install 'splitnet[hf]'``; downloads nothing. The model is a *randomly initialised*
GPT-2 small (12 layers, d_model 768, 12 heads, context 1024, transformers' own GPT-2
initialisation, seed 0) whose vocabulary is a byte-level BPE tokenizer trained here on the
running Python's standard library (4096 tokens), so the token labels are real BPE tokens. Both
are written with ``save_pretrained`` to a temporary directory and imported the way a user's
model is (``splitnet.interop.load_hf_for_analysis``, what ``splitnet trajectories --hf DIR``
does). Prints the import check (logits against transformers) and the numbers quoted in the docs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

import splitnet.analyses.trajectories as tr
from splitnet import data, interop, plots

ROOT = Path(__file__).resolve().parents[1]
TEXT = "for i in range(n):\n    total += x[i] * w[i]"
VOCAB = 4096


def stdlib_tokenizer(n_files: int = 400):
    """A byte-level BPE tokenizer (GPT-2's pre-tokenizer) trained on the first stdlib files."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    texts = [p.read_text(encoding="utf-8", errors="replace")
             for _, p in data.stdlib_files()[:n_files]]
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def random_gpt2(directory: Path, tokenizer) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(tokenizer), n_positions=1024, n_embd=768, n_layer=12,
                     n_head=12, bos_token_id=None, eos_token_id=None)
    GPT2LMHeadModel(cfg).eval().save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "figures"), help="figure directory")
    p.add_argument("--text", default=TEXT, help=f"input (default {TEXT!r})")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as d:
        random_gpt2(Path(d), stdlib_tokenizer())
        imported = interop.load_hf_for_analysis(d)
        ids = imported.encode(args.text)
        with torch.no_grad():
            ref = AutoModelForCausalLM.from_pretrained(d).eval()(ids[None]).logits
            diff = float((imported.model(ids[None]) - ref).abs().max())
    model = imported.model
    print(f"imported: {model.config.n_layers} layers, d_model {model.d_model}, "
          f"{model.n_params():,} parameters; max |logit difference| against transformers "
          f"{diff:.2g} (float32)")
    labels = tr.token_labels(ids.tolist(), imported.tokenizer)
    print(f"text {args.text!r}: {len(ids)} BPE tokens {list(labels)}")
    traj = tr.collect(model, args.text, tokenizer=imported.tokenizer, continuous=True,
                      points_per_layer=8)
    c, g = tr.clustering(traj), traj.gap(relative=True)
    print(f"{'layer':>5} {'mean cos':>9} {'eff. rank':>9} {'rel. ODE gap':>13}")
    for k in range(len(c.times)):
        print(f"{k:>5} {c.mean_cosine[k]:9.3f} {c.effective_rank[k]:9.2f} {g[k]:13.3g}")
    norms = traj.layer_states().norm(dim=-1).mean(dim=-1)
    print("mean token norm per layer:", np.round(norms.numpy(), 2))
    path = plots.save_trajectory_plot(traj, out / "traj_gpt2_random.png", text=args.text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
