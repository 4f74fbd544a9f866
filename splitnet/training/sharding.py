"""Fully sharded data parallelism (PyTorch's FSDP2, ``torch.distributed.fsdp.fully_shard``).

``splitnet train --parallel fsdp`` under torchrun: every rank holds ``1 / world`` of each
parameter, of its gradient and of its AdamW state. The units, each all-gathered for its own
forward and backward and freed after: every layer of every stack (a language model's
``layers``; a translation model's ``encoder_layers`` and ``decoder_layers``; a layer's learned
coefficients go with it), and the root (the embeddings, the tied head, the final norms) --
:func:`shard`. On CUDA a ``MixedPrecisionPolicy`` computes in bfloat16 and reduces gradients
in float32; on the CPU (gloo) everything stays float32. Residual updates are out of place
(``x = x + dx``), as FSDP2 asks.

**Checkpoints** are sharded (:func:`save_shards`): every rank writes its own shards of the
weights and of the AdamW state through ``torch.distributed.checkpoint`` (nothing is gathered),
and rank 0 writes ``checkpoint.pt`` naming the folder, under the trainer's guarantees (atomic,
the run lock, the last good checkpoint kept on a full disk or a kill, the corpus fingerprint,
bit-exact resume): :mod:`splitnet.runs.shards`. Ranks resuming under fsdp read it shard by
shard (:func:`load_shards`: the model sharded first, each rank reading its own chunks, resharded
on read); any other reader takes it whole (a full state is loaded into the unsharded model,
which is then sharded: :func:`restore`), so a run resumes at any world size, under either
parallelism and any ``--tp``, and every command reads it as any other checkpoint.

**Gradient accumulation**: the micro-batches before the last skip the reduce-scatter
(:func:`no_sync`), as DDP's ``no_sync``.
"""

from __future__ import annotations

import contextlib

import torch

FSDP_TORCH = "2.6"   # the first release with torch.distributed.fsdp.fully_shard public
# the layer lists a network shards unit by unit
STACKS = ("layers", "encoder_layers", "decoder_layers")


def _fsdp():
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:
        raise ValueError(f"--parallel fsdp needs torch >= {FSDP_TORCH} "
                         f"(torch.distributed.fsdp.fully_shard); this is torch "
                         f"{torch.__version__}: use --parallel ddp") from None
    return fully_shard, MixedPrecisionPolicy


def shard(model, device: torch.device, world: int, amp: bool = True, tp: int = 1):
    """Shard ``model`` in place over a 1-D mesh of ``world`` ranks on ``device``'s type: each
    layer of each stack a unit, then the root. With ``tp`` > 1 the mesh is 2-D, ``(world / tp,
    tp)``: each field is split over ``tp`` first (:mod:`splitnet.training.tensor_parallel`),
    then FSDP shards over ``dp``. Returns the model (now an FSDP module)."""
    fully_shard, MixedPrecisionPolicy = _fsdp()
    from torch.distributed.device_mesh import init_device_mesh

    if tp > 1:
        from .tensor_parallel import parallelize

        mesh = init_device_mesh(device.type, (world // tp, tp), mesh_dim_names=("dp", "tp"))
        parallelize(model, mesh["tp"])
        mesh = mesh["dp"]
    else:
        mesh = init_device_mesh(device.type, (world,))
    kw = {"mesh": mesh}
    if device.type == "cuda" and amp:
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                               reduce_dtype=torch.float32)
    for name in STACKS:
        for layer in getattr(model, name, None) or ():
            fully_shard(layer, **kw)
    fully_shard(model, **kw)
    return model


def is_sharded(model) -> bool:
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in model.parameters())


def save_shards(model, opt, out, step: int, is_main: bool) -> str | None:
    """Every rank writes its shards of the model and of the optimiser state
    (``torch.distributed.checkpoint``) into ``OUT/shards-<step>.tmp``; once all have, rank 0
    renames the folder (:mod:`splitnet.runs.shards`) and gets its name (the others None)."""
    import shutil

    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_optimizer_state_dict,
    )
    from torch.utils._pytree import tree_map

    from ..runs import shards
    from .tensor_parallel import checkpoint_ready

    torn = shards.folder_for(out, step, torn=True)
    if is_main and torn.exists():           # a save of this step that was interrupted
        shutil.rmtree(torn)
    dist.barrier()
    state = {"model": get_model_state_dict(model),
             "optimizer": get_optimizer_state_dict(model, opt)}
    dcp.save(tree_map(checkpoint_ready, state), checkpoint_id=str(torn))   # (--tp: re-laid)
    dist.barrier()
    return shards.publish(out, step) if is_main else None


def named_optimizer_state(state: dict) -> bool:
    """Whether an optimiser state is keyed by parameter name (written by :func:`full_state`)
    rather than by position (``Optimizer.state_dict``)."""
    return any(isinstance(k, str) for k in state.get("state", {}))


def load_optimizer(model, opt, state: dict) -> None:
    """Load an optimiser state of either keying into ``opt`` (``model`` sharded or not)."""
    if not named_optimizer_state(state):
        opt.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_optimizer_state_dict,
    )

    for mine, saved in zip(opt.param_groups, state.get("param_groups", ())):
        for k, v in saved.items():      # what a scheduler added (initial_lr) must be there
            if k != "params":
                mine.setdefault(k, v)
    set_optimizer_state_dict(model, opt, state, options=StateDictOptions(full_state_dict=True))
    _fix_headwise_state(model, opt, state["state"])


def _fix_headwise_state(model, opt, named: dict) -> None:
    """Under ``--tp``: the AdamW state of a per-head split tensor laid out as its parameter
    (``set_optimizer_state_dict`` distributes a whole tensor by DTensor's labels, which do not
    describe that layout: :mod:`splitnet.training.tensor_parallel`)."""
    from .tensor_parallel import headwise_groups, local_rows

    for name, p in model.named_parameters():
        if not headwise_groups(p) or name not in named:
            continue
        for key, value in opt.state[p].items():
            if key in named[name] and hasattr(value, "to_local") and value.shape == p.shape:
                value.to_local().copy_(local_rows(named[name][key], p))


def restore(model, opt, build_optimizer, device, world: int, amp: bool, tp: int = 1):
    """``model`` and ``opt`` (unsharded, their states already loaded) sharded: the optimiser
    state taken by name, the model sharded, a new optimiser built on the shards and given that
    state. Returns the new optimiser."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_optimizer_state_dict,
    )

    fresh = not opt.state                 # a new run: nothing to carry over
    named = None if fresh else get_optimizer_state_dict(
        model, opt, options=StateDictOptions(full_state_dict=True))
    shard(model, device, world, amp, tp)
    new = build_optimizer(model)
    if named is not None:   # (setting a state on a fresh optimiser would step it once first)
        load_optimizer(model, new, named)
    return new


def load_shards(model, build_optimizer, folder, device, world: int, amp: bool, tp: int = 1):
    """Resume shard by shard: ``model`` (fresh, unsharded) sharded, an optimiser built on its
    shards, and each rank reads only its own chunks of the weights and of the AdamW state from
    the shards ``folder`` (``torch.distributed.checkpoint`` reshards on read, whatever world
    size or ``--tp`` wrote them). Returns the optimiser."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_optimizer_state_dict,
        set_model_state_dict,
        set_optimizer_state_dict,
    )
    from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

    from .tensor_parallel import checkpoint_ready, headwise_groups, local_rows

    shard(model, device, world, amp, tp)
    opt = build_optimizer(model)
    state = {"model": get_model_state_dict(model),          # (the AdamW state: zeros to
             "optimizer": get_optimizer_state_dict(model, opt)}      # read into)
    ready = tree_map(checkpoint_ready, state)
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        from ..runs.shards import quiet

        with quiet():
            dcp.load(ready, checkpoint_id=str(folder))
    except (Exception, CheckpointException) as e:  # (a BaseException) damaged: one line
        from ..runs.shards import first_line

        raise ValueError(f"{folder}: the sharded weights cannot be read ({first_line(e)})") \
            from None
    leaves, spec = tree_flatten(ready)
    for i, mine in enumerate(tree_flatten(state)[0]):
        if headwise_groups(mine):   # --tp's per-head rows, read re-laid: back to their layout
            mine.to_local().copy_(local_rows(leaves[i].full_tensor(), mine))
            leaves[i] = mine
    ready = tree_unflatten(leaves, spec)
    set_model_state_dict(model, ready["model"])
    set_optimizer_state_dict(model, opt, ready["optimizer"])
    return opt


def no_sync(model, last: bool):
    """Within: the backward of a micro-batch before the last skips the gradient reduction."""
    if last:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def _off():
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    return _off()


def scoring_model(model, cfg, env):
    """The model to decode with outside the training forward (translation's test scores):
    ``model`` itself, or under ``--parallel fsdp`` a plain copy of the gathered weights on rank 0
    (every rank takes part in the gathering; the others get None)."""
    if not (env.distributed and cfg.parallel == "fsdp"):
        return model
    from ..tasks.task import get_task
    from .tensor_parallel import whole

    state = {}
    for k, v in model.state_dict().items():   # every rank gathers; rank 0 alone keeps it
        w = whole(v)
        if env.is_main:
            state[k] = w.cpu()
    if not env.is_main:
        return None
    plain = get_task(cfg.task).build(cfg.model)
    plain.load_state_dict(state)
    return plain.to(env.device)


def micro_batch_sync(fwd, model, parallel: str, distributed: bool, last: bool):
    """The context of one micro-batch's backward: before the last, no gradient reduction
    (DDP's ``no_sync`` on the wrapped ``fwd``, FSDP's switch on the sharded ``model``)."""
    if not distributed or last:
        return contextlib.nullcontext()
    return no_sync(model, last) if parallel == "fsdp" else fwd.no_sync()


def local_norm(gnorm):
    """A gradient norm of sharded gradients (a DTensor) as a plain tensor."""
    return gnorm.full_tensor() if hasattr(gnorm, "full_tensor") else gnorm


def clip_grad_norm(params, max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` for gradients that may be DTensors on several meshes
    (``--tp``: the split fields' on the 2-D mesh, the rest on ``dp`` alone, which one foreach
    call cannot mix): the 2-norm of each mesh's gradients made whole, their root sum of squares
    the total, each group scaled by ``min(1, max_norm / total)``. Returns the total."""
    from torch.nn.utils import clip_grads_with_norm_, get_total_norm

    groups: dict = {}
    for p in params:
        if p.grad is not None:
            groups.setdefault(getattr(p.grad, "device_mesh", None), []).append(p)
    norms = [local_norm(get_total_norm([p.grad for p in g])) for g in groups.values()]
    if len(norms) == 1:                  # (one mesh, or none: clip_grad_norm_'s own number)
        total = norms[0]
    else:
        total = torch.stack(norms).square().sum().sqrt() if norms else torch.zeros(())
    for g in groups.values():
        clip_grads_with_norm_(g, max_norm, total)
    return total


__all__ = ["FSDP_TORCH", "STACKS", "clip_grad_norm", "is_sharded", "load_optimizer", "load_shards",
           "local_norm", "micro_batch_sync", "named_optimizer_state", "no_sync", "restore",
           "save_shards", "scoring_model", "shard"]
