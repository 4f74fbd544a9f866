"""The key/value cache's beam reorder (issue 32): it permutes keys and values alike over the
filled positions, copies nothing past them and reuses its second buffer. (Beam search with
the cache against beam search without it, on beams that diverge: tests/test_seq2seq.py.)"""

import pytest
import torch

from splitnet.nets import generation as G


def _filled(cache):
    k, v = cache.k[:cache.length], cache.v[:cache.length]
    return k.permute(1, 2, 0, 3), v.permute(1, 2, 0, 3)      # (B, H, L, d_h)


def test_reorder_permutes_keys_and_values_of_the_filled_prefix():
    g = torch.Generator().manual_seed(0)
    c = G.KVCache(16)
    k, v = torch.randn(5, 2, 3, 4, generator=g), torch.randn(5, 2, 3, 4, generator=g)
    c.append(k, v)
    idx = torch.tensor([4, 4, 0, 2, 1])
    c.reorder(idx)
    kk, vv = _filled(c)
    assert torch.equal(kk, k[idx]) and torch.equal(vv, v[idx])
    k2, v2 = torch.randn(5, 2, 1, 4, generator=g), torch.randn(5, 2, 1, 4, generator=g)
    ka, va = c.append(k2, v2)                                  # then appending goes on
    assert torch.equal(ka, torch.cat([k[idx], k2], 2))
    assert torch.equal(va, torch.cat([v[idx], v2], 2))
    idx2 = torch.tensor([1, 0, 3, 3, 2])
    c.reorder(idx2)
    kk, vv = _filled(c)
    assert torch.equal(kk, torch.cat([k[idx], k2], 2)[idx2])
    assert torch.equal(vv, torch.cat([v[idx], v2], 2)[idx2])


def test_reorder_copies_the_filled_positions_only_and_allocates_once():
    c = G.KVCache(8)
    c.append(torch.ones(3, 1, 2, 2), torch.ones(3, 1, 2, 2))
    c.reorder(torch.tensor([2, 1, 0]))
    spare_k = c._spare[0]
    spare_k[2:].fill_(7.0)                  # the old buffer's unfilled part: a sentinel
    c.reorder(torch.tensor([0, 1, 2]))      # back into that buffer: positions 2.. untouched
    assert c.k.data_ptr() == spare_k.data_ptr()
    assert torch.all(c.k[2:] == 7.0) and torch.all(c.k[:2] == 1.0)
    ptrs = {c.k.data_ptr(), c._spare[0].data_ptr()}
    for _ in range(3):
        c.reorder(torch.tensor([1, 2, 0]))
        assert {c.k.data_ptr(), c._spare[0].data_ptr()} == ptrs    # two buffers, swapped


def test_reorder_empty_and_bad_index():
    c = G.KVCache(4)
    c.reorder(torch.tensor([0]))                                 # nothing cached: a no-op
    c.append(torch.zeros(2, 1, 1, 2), torch.zeros(2, 1, 1, 2))
    with pytest.raises(ValueError, match="one entry per cached row"):
        c.reorder(torch.tensor([0, 1, 1]))


def test_generation_cache_reorders_every_evaluation():
    from splitnet.nets.models import SplitTransformer
    torch.manual_seed(0)
    m = SplitTransformer(50, 16, 2, 2, scheme="strang", max_len=8)
    cache = G.GenerationCache(m, 8)
    with torch.no_grad():
        G.forward_cached(m, torch.randint(0, 50, (3, 4)), cache)
    before = [[_filled(kv) for kv in cs] for layer in cache.layers for cs in layer if cs]
    idx = torch.tensor([2, 0, 0])
    cache.reorder(idx)
    after = [[_filled(kv) for kv in cs] for layer in cache.layers for cs in layer if cs]
    assert len(after) == cache.n_caches() > 1
    for b, a in zip(before, after):
        for (k0, v0), (k1, v1) in zip(b, a):
            assert torch.equal(k1, k0[idx]) and torch.equal(v1, v0[idx])


@pytest.mark.heavy
def test_bench_vs_hf_runs_as_a_user_runs_it():
    """benchmarks/bench_vs_hf.py --quick: every row of the table, each side checked to produce
    exactly the new tokens asked for (the script asserts it)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("transformers")
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_vs_hf.py"
    r = subprocess.run([sys.executable, str(path), "--quick"], capture_output=True, text=True,
                       timeout=300, check=False, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line for line in r.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    kinds = {tuple(c.strip() for c in line.split("|")[1:4]) for line in rows[1:]}
    assert {("greedy", "1", "Marian"), ("beam 4", "4", "Marian"),
            ("translation step", "4", "nn.Transformer"), ("LM step", "4", "GPT-2"),
            ("LM step", "4", "nanoGPT-style")} <= kinds
