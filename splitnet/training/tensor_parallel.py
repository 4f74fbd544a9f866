"""Tensor parallelism (``--tp N``, with ``--parallel fsdp``): Megatron's split of each field
over the ``tp`` ranks of a 2-D ``(dp, tp)`` mesh, with PyTorch's ``parallelize_module``.

Each rank computes a slice of every field and one all-reduce per field makes the result whole:

* feed-forward ``fc2 act(fc1 norm(x))``: ``fc1`` column-wise (rank r holds rows r of the
  hidden width), ``fc2`` row-wise (the matching columns; its outputs summed over ranks);
* self-attention: the fused q/k/v projection (3d x d, rows ``[q; k; v]``, kept fused so that a
  checkpoint and GPT-2's ``c_attn`` keep one layout) column-wise *per head*: rank r holds the
  rows ``q_r, k_r, v_r`` of its ``n_heads / tp`` heads, a strided shard (``_StridedShard`` with
  split factor 3: a plain row split would give rank 0 all of q and none of v); the heads are
  independent, so each rank attends with its own; the output projection row-wise;
* cross-attention: ``q`` column-wise, the fused k/v per head (split factor 2), ``proj``
  row-wise.

Everything else (norms, embeddings, the head, learned coefficients, other fields) is
replicated over ``tp`` and sharded over ``dp`` by FSDP (:mod:`splitnet.training.sharding`).
The fields read their local head count from the projection's width, so a field's code is the
same with and without ``--tp``. Ranks of one ``tp`` group take the same batch: the data is
split over ``dp`` (:class:`splitnet.runenv.RunEnv`'s ``dp_rank`` / ``dp_world``).
"""

from __future__ import annotations

from torch import nn

__all__ = ["check_tp", "checkpoint_ready", "headwise", "headwise_groups", "local_rows",
           "parallelize", "plan", "whole"]


def _styles():
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return ColwiseParallel, RowwiseParallel


def headwise(groups: int):
    """A column-wise split of a fused projection of ``groups`` blocks (q, k, v: 3; k, v: 2)
    that gives every rank the matching rows of each block (its heads), and hands the layer's
    output on as this rank's local ``(..., groups * d / tp)`` slice, in that block order."""
    ColwiseParallel, _ = _styles()
    from torch.distributed.tensor import distribute_tensor
    from torch.distributed.tensor.placement_types import _StridedShard

    class _Headwise(ColwiseParallel):
        def _partition_linear_fn(self, name, module, device_mesh):
            for pname, param in module.named_parameters():
                shard = distribute_tensor(param, device_mesh,
                                          [_StridedShard(0, split_factor=groups)],
                                          src_data_rank=self.src_data_rank)
                module.register_parameter(pname, nn.Parameter(shard, param.requires_grad))

        @staticmethod
        def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
            # already this rank's heads (a strided shard of the last dim): no redistribution
            return outputs.to_local()

    return _Headwise()


def plan(module: nn.Module) -> dict | None:
    """The tensor-parallel plan of one field (sub-module name -> style), None for a module
    that stays replicated."""
    from ..fields.attention import Attention
    from ..fields.cross import CrossAttention
    from ..fields.feedforward import FeedForward

    col, row = _styles()
    if isinstance(module, FeedForward):
        return {"fc1": col(), "fc2": row()}
    if isinstance(module, Attention):
        return {"qkv": headwise(3), "proj": row()}
    if isinstance(module, CrossAttention):
        return {"q": col(), "kv": headwise(2), "proj": row()}
    return None


def parallelize(model: nn.Module, tp_mesh) -> nn.Module:
    """Split every field of ``model`` over the 1-D ``tp_mesh`` in place (:func:`plan`)."""
    import logging

    from torch.distributed.tensor.parallel import parallelize_module

    # making a gradient norm (a scalar) whole over both mesh axes takes two all-reduces, which
    # DTensor reports on every rank as "suboptimal": not worth a line per rank in a run's log
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)

    for module in list(model.modules()):
        p = plan(module)
        if p is not None:   # every rank holds the same whole weights (one seed, one checkpoint)
            parallelize_module(module, tp_mesh, p, src_data_rank=None)   # so: no broadcast
    return model


def check_tp(tp: int, world: int, model) -> None:
    """Refuse (ValueError, one line) a ``--tp`` that the mesh or the fields of the network
    configured by ``model`` (a SplitConfig or Seq2SeqConfig) cannot take."""
    d_ff = model.d_ff or 4 * model.d_model
    if world % tp:
        raise ValueError(f"--tp {tp} must divide the world size {world} (the mesh is "
                         f"world/tp data-parallel x tp tensor-parallel ranks)")
    if model.n_heads % tp:
        raise ValueError(f"--tp {tp} must divide --n-heads {model.n_heads} (each rank attends "
                         f"with whole heads)")
    if d_ff % tp:
        raise ValueError(f"--tp {tp} must divide the feed-forward width {d_ff}")
    # the plan splits qkv in equal thirds per head and the output's bias with its columns
    grouped = getattr(model, "n_kv_heads", None) is not None
    if grouped or getattr(model, "attention_bias", "all") != "all" or getattr(
            model, "head_dim", None) is not None or getattr(model, "qk_norm", "none") != "none":
        what = "grouped-query attention (--n-kv-heads)" if grouped else \
            f"--attention-bias {model.attention_bias}" if model.attention_bias != "all" else \
            "--head-dim or --qk-norm"
        raise ValueError(f"--tp does not take {what} yet: the tensor-parallel plan splits "
                         f"q, k and v in equal heads; use --tp 1")


# -- the per-head shards after FSDP: whole tensors and checkpoint-ready shards ----------------
#
# FSDP shards each rank's tensor-parallel slice once more over ``dp`` (its rows chunked), and
# labels the result (_StridedShard over dp, _StridedShard over tp): a pair of labels that
# DTensor's redistribution cannot compose for a per-head (strided) tensor-parallel slice, so
# ``full_tensor()``, ``distribute_tensor`` and torch.distributed.checkpoint's chunk offsets are
# wrong for those tensors (training is not: it only reads the local rows). The functions below
# go by the physical layout instead: rank (i, j) holds chunk i (of dp) of T_j, the rows
# ``[b.chunk(tp)[j] for b in blocks]`` of the whole tensor's ``groups`` blocks.

def headwise_groups(t) -> int:
    """The block count of a per-head tensor-parallel DTensor on a (dp, tp) mesh, else 0."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.placement_types import _StridedShard

    if not isinstance(t, DTensor) or t.device_mesh.ndim != 2:
        return 0
    tp_place = t.placements[1]
    return tp_place.split_factor if isinstance(tp_place, _StridedShard) else 0


def _contiguous_stride(shape) -> tuple[int, ...]:
    stride, acc = [], 1
    for n in reversed(shape):
        stride.append(acc)
        acc *= n
    return tuple(reversed(stride))


def checkpoint_ready(t):
    """``t`` as torch.distributed.checkpoint can save it: a per-head tensor-parallel DTensor
    re-laid as rows ``j`` of the whole tensor on ``tp`` rank ``j`` (Shard(0) over ``tp``,
    replicated over ``dp``); any other value unchanged."""
    import torch
    from torch.distributed.tensor import DTensor, Shard

    if not headwise_groups(t):
        return t
    mesh = t.device_mesh
    dp_mesh, tp_mesh = mesh[mesh.mesh_dim_names[0]], mesh[mesh.mesh_dim_names[1]]
    slice_shape = (t.shape[0] // tp_mesh.size(), *t.shape[1:])
    with torch.no_grad():
        mine = DTensor.from_local(t.to_local(), dp_mesh, [Shard(0)], run_check=False,
                                  shape=slice_shape, stride=_contiguous_stride(slice_shape))
        whole_slice = mine.full_tensor()                                # T_j
        per_head = DTensor.from_local(whole_slice, tp_mesh, [t.placements[1]], run_check=False,
                                      shape=t.shape, stride=_contiguous_stride(t.shape))
        return per_head.redistribute(tp_mesh, [Shard(0)])


def whole(t):
    """The whole tensor of a DTensor (per-head tensor-parallel ones included); ``t`` if plain.
    Every rank of the mesh must call it."""
    t = checkpoint_ready(t)
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def local_rows(full, like):
    """This rank's local part of the whole tensor ``full`` laid out as the per-head
    tensor-parallel DTensor ``like`` (FSDP's chunk ``i`` of ``T_j``)."""
    import torch

    groups = headwise_groups(like)
    mesh = like.device_mesh
    i, j = mesh.get_local_rank(0), mesh.get_local_rank(1)
    dp, tp = mesh.size(0), mesh.size(1)
    t_j = torch.cat([b.chunk(tp)[j] for b in full.chunk(groups)])
    chunks = list(t_j.chunk(dp))
    chunks += [t_j[:0]] * (dp - len(chunks))        # FSDP pads a short split with empty chunks
    return chunks[i]
