"""Stage 3: a model wrapped in ``DistributedDataParallel``, compiled, trained by two processes.

DDP's own ``forward`` (buffers synced, the reducer told what to expect) runs uncompiled; the
module it calls is compiled as a frame of its own, and the gradients' all-reduce stays DDP's
(its reducer's hooks fire as the compiled backward accumulates each gradient). Two gloo
processes on CPU each train on half of a batch; their averaged gradients must equal one
eager process's gradients of the mean loss over the whole batch.
"""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

import tutorcompile as tc

pytestmark = pytest.mark.stage3

WORLD = 2


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 3))


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    return torch.randn(8, 6), torch.randn(8, 3)


def _train_one_rank(rank: int, port: int, backend: str, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        model = nn.parallel.DistributedDataParallel(_model())
        compiled = tc.compile(model, backend=backend)
        x, y = _batch()
        shard = slice(rank * 4, rank * 4 + 4)
        for _ in range(2):   # a second step runs the cached graph
            model.zero_grad()
            loss = nn.functional.mse_loss(compiled(x[shard]), y[shard])
            loss.backward()
        graphs = tc.explain(model.module)(x[shard]).graph_count
        torch.save({"grads": [p.grad for p in model.parameters()], "graphs": graphs},
                   f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_ddp_training_step_matches_one_process_on_the_whole_batch(backend, tmp_path):
    out = str(tmp_path / "grads")
    mp.spawn(_train_one_rank, args=(_free_port(), backend, out), nprocs=WORLD, join=True)
    model = _model()
    x, y = _batch()
    nn.functional.mse_loss(model(x), y).backward()
    for rank in range(WORLD):
        saved = torch.load(f"{out}.{rank}")
        assert saved["graphs"] == 1
        for got, p in zip(saved["grads"], model.parameters(), strict=True):
            torch.testing.assert_close(got, p.grad, rtol=1e-5, atol=1e-6)


def test_the_module_inside_ddp_is_compiled():
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        model = nn.parallel.DistributedDataParallel(_model())
        x, _ = _batch()
        explained = tc.explain(model)(x)
        assert explained.graph_count == 1   # the inner module's (DDP's frame is skipped)
        assert explained.op_count >= 4      # linear, layer norm, gelu, linear
        torch.testing.assert_close(tc.compile(model)(x), model(x))
    finally:
        dist.destroy_process_group()
