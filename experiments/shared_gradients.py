"""How much of a shared field's gradient the stage calls cancel (issue 62): the masked-LM plateau
of the shared-weight compositions (docs/mlm.md).

A field shared by the s stages that advance it gets the sum of s per-call gradients,
``g = g_1 + ... + g_s``. Their *alignment* ``|g| / (|g_1| + ... + |g_s|)`` is 1 when the calls
push the weights the same way and falls towards 0 when they cancel. For each arrangement of the
masked-LM study (docs/mlm.md's sizes: d_model 64, 4 heads, 2 layers, xavier init, 15 % of the
bytes masked) this measures it per field at initialisation, over 16 batches of 32 windows of 64
bytes of the standard library (the mean and the range over the batches): each call's gradient of
every matrix of the field is ``G^T X`` of that call's input X and output gradient G, caught by
hooks, and the field's alignment is that of the concatenated matrices.

    python3 experiments/shared_gradients.py            # prints the table and writes docs/mlm.md
    python3 experiments/shared_gradients.py --print    # prints it only

Written between the ``mlm:gradients`` markers of docs/mlm.md; tests/test_mlm_study.py checks the
doc against the script's table on one batch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

from splitnet.configs.config import MLM_VOCAB
from splitnet.dev.docblocks import write_blocks
from splitnet.mlm import train_batch
from splitnet.mlm.corpora import load_run_corpus
from splitnet.nets.models import SplitTransformer

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "mlm.md"
MODEL = {"d_model": 64, "n_heads": 4, "n_layers": 2, "init": "xavier", "causal": False,
         "max_len": 64, "vocab_size": MLM_VOCAB}
ARRANGEMENTS = {"Strang (shared)": "strang", "Yoshida4 (shared)": "yoshida4",
                "Suzuki4 (shared)": "suzuki4"}
BATCHES, ROWS, CONTEXT = 16, 32, 64


class CallGradients:
    """Per-call gradients of every ``nn.Linear`` weight inside ``module`` (one entry per call in
    forward order), caught by a forward hook that hooks each call's output."""

    def __init__(self, module: nn.Module):
        self.calls: list[list[torch.Tensor]] = []
        self.handles = []
        self._open: list[list] = []
        for lin in (m for m in module.modules() if isinstance(m, nn.Linear)):
            self.handles.append(lin.register_forward_hook(self._hook))
        self.handles.append(module.register_forward_pre_hook(self._start))
        self.handles.append(module.register_forward_hook(self._end))

    def _start(self, module, args):
        self._open.append([])

    def _end(self, module, args, out):
        self.calls.append(self._open.pop())

    def _hook(self, lin, args, out):
        x, slot = args[0].detach(), len(self._open[-1])
        grads = self._open[-1]
        grads.append(None)

        def keep(g, x=x, slot=slot, grads=grads):
            grads[slot] = g.reshape(-1, g.shape[-1]).T @ x.reshape(-1, x.shape[-1])
        out.register_hook(keep)

    def alignment(self) -> float:
        """``|sum of calls| / sum of |call|`` over the concatenated matrices."""
        flat = [torch.cat([g.flatten() for g in call]) for call in self.calls]
        total = torch.stack(flat).sum(0).norm()
        return float(total / sum(f.norm() for f in flat))

    def close(self) -> None:
        for h in self.handles:
            h.remove()


def alignments(scheme: str, batches: int = BATCHES, seed: int = 0) -> dict[str, list[float]]:
    """Field name -> the alignment of its shared module's calls in each batch (layer 0's field;
    every layer's calls are summed the same way)."""
    torch.manual_seed(seed)
    model = SplitTransformer(**MODEL, scheme=scheme, weights="shared")
    corpus = load_run_corpus(None, None, 0.05, exclude=[])
    out: dict[str, list[float]] = {}
    layer = model.layers[0]
    for b in range(batches):
        hooks = {f: CallGradients(getattr(layer, f)) for f in ("diffusion", "convection")}
        x, y = train_batch(corpus, b, ROWS, CONTEXT, seed, 0, 1)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1),
                                           ignore_index=-100)
        loss.backward()
        model.zero_grad(set_to_none=True)
        for f, h in hooks.items():
            out.setdefault(f, []).append(h.alignment())
            h.close()
    return out


def table(batches: int = BATCHES) -> str:
    rows = ["| arrangement | stages (self-attention, feed-forward) | self-attention: alignment | "
            "feed-forward: alignment |", "|---|---|---|---|"]
    for label, scheme in ARRANGEMENTS.items():
        model = SplitTransformer(**MODEL, scheme=scheme)
        s = model.scheme
        a = alignments(scheme, batches)
        cells = [f"{sum(v) / len(v):.2f} ({min(v):.2f}–{max(v):.2f})" for v in
                 (a["diffusion"], a["convection"])]
        rows.append(f"| {label} | {s.n_stages('diffusion')}, {s.n_stages('convection')} | "
                    f"{cells[0]} | {cells[1]} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--print", action="store_true", help="print the table, write nothing")
    args = ap.parse_args(argv)
    text = table()
    print(text)
    if not args.print:
        write_blocks(DOC, "mlm", {"gradients": text})
        print(f"wrote {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
