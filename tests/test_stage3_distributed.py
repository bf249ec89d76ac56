"""Stage 3: a model wrapped in ``DistributedDataParallel``, compiled, trained by two processes.

DDP's own ``forward`` (buffers synced, the reducer told what to expect) runs uncompiled; the
module it calls is compiled as a frame of its own, and the gradients' all-reduce stays DDP's
(its reducer's hooks fire as the compiled backward accumulates each gradient). Two gloo
processes on CPU each train on half of a batch; their averaged gradients must equal one
eager process's gradients of the mean loss over the whole batch.

With a small ``bucket_cap_mb`` the graph is split at DDP's bucket boundaries (DDP's
optimizer, tutorcompile/dynamo/distributed.py): one compiled piece per bucket, so a bucket's
all-reduce is launched while earlier pieces' backward has yet to run -- seen here as the
order of events (a DDP comm hook called, a piece's backward reached), never as timings.
"""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import tutorcompile as tc
from tutorcompile.dynamo import config as dynamo_config
from tutorcompile.dynamo.backends import lookup_backend
from tutorcompile.dynamo.eval_frame import cache_entries

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


# --- DDP's optimizer: the graph split at bucket boundaries ---------------------------------
# four equal layers of 16 * 16 + 16 floats = 1088 bytes: with buckets of 1088 bytes, DDP puts
# each layer in a bucket of its own (weight and bias, in either order, fill it exactly), and
# the graph splits into four pieces, one per layer
LAYER_BYTES = (16 * 16 + 16) * 4
SMALL_BUCKETS_MB = LAYER_BYTES / 2**20
PIECES = [["0.weight", "0.bias"], ["2.weight", "2.bias"], ["4.weight", "4.bias"],
          ["6.weight", "6.bias"]]


def _deep_model() -> nn.Module:
    torch.manual_seed(0)
    layers = []
    for i in range(4):
        layers += [nn.Linear(16, 16)] + ([nn.GELU()] if i < 3 else [])
    return nn.Sequential(*layers)


def _deep_batch() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    return torch.randn(8, 16), torch.randn(8, 16)


def _recording(backend: str, events: list) -> callable:
    """``backend``, each piece it compiles numbered in order; when a call's backward reaches
    a piece (the gradient of one of its outputs is computed) ``("backward", n)`` is noted."""
    compile_fn, _ = lookup_backend(backend)
    count = [0]

    def compile_piece(gm, example_inputs):
        compiled, n = compile_fn(gm, example_inputs), count[0]
        count[0] += 1

        def run(*args):
            outs = compiled(*args)
            for out in outs:
                if isinstance(out, torch.Tensor) and out.requires_grad:
                    out.register_hook(lambda g: events.append(("backward", n)))
            return outs
        return run
    return compile_piece


# (backend, optimize_ddp): each trained in turn by the same two processes (one spawn: most
# of a spawn's seconds are the processes starting)
SPLIT_RUNS = [("eager", True), ("aot_eager", True), ("inductor", True), ("aot_eager", False)]


def _train_split(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        results = {}
        for backend, optimize in SPLIT_RUNS:
            tc.reset()
            with dynamo_config.patch(optimize_ddp=optimize):
                results[backend, optimize] = _train_split_once(rank, backend)
        torch.save(results, f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


def _train_split_once(rank: int, backend: str) -> dict:
    model = nn.parallel.DistributedDataParallel(_deep_model(), bucket_cap_mb=SMALL_BUCKETS_MB)
    names = {id(p): n for n, p in model.module.named_parameters()}
    events: list = []

    def comm_hook(state, bucket):   # DDP launching one bucket's all-reduce
        events.append(("allreduce", sorted(names[id(p)] for p in bucket.parameters())))
        return default_hooks.allreduce_hook(None, bucket)
    model.register_comm_hook(None, comm_hook)
    compiled = tc.compile(model, backend=_recording(backend, events))
    x, y = _deep_batch()
    shard = slice(rank * 4, rank * 4 + 4)
    # DDP rebuilds its buckets at the second forward, in the order the first backward made
    # gradients ready; the third step runs with those buckets
    for _ in range(3):
        model.zero_grad()
        events.clear()
        loss = nn.functional.mse_loss(compiled(x[shard]), y[shard])
        loss.backward()
    (entry,) = cache_entries(model.module)
    split = getattr(entry.compiled, "ddp_split", None)
    return {"grads": [p.grad for p in model.parameters()], "events": events,
            "pieces": [p.params for p in split.pieces] if split else None,
            "bytes": [p.nbytes for p in split.pieces] if split else None}


@pytest.fixture(scope="module")
def split_runs(tmp_path_factory) -> list[dict]:
    out = str(tmp_path_factory.mktemp("ddp") / "split")
    mp.spawn(_train_split, args=(_free_port(), out), nprocs=WORLD, join=True)
    return [torch.load(f"{out}.{rank}") for rank in range(WORLD)]


def _eager_grads() -> list[torch.Tensor]:
    model = _deep_model()
    x, y = _deep_batch()
    nn.functional.mse_loss(model(x), y).backward()
    return [p.grad for p in model.parameters()]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_ddp_split_at_buckets_matches_one_process_and_overlaps(backend, split_runs):
    expected = _eager_grads()
    for ranks in split_runs:
        saved = ranks[backend, True]
        # one piece per bucket, as the bucket sizes predict, each with its layer's parameters
        assert saved["pieces"] == PIECES
        assert saved["bytes"] == [LAYER_BYTES] * 4
        for got, want in zip(saved["grads"], expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        events = saved["events"]
        # DDP's own buckets (rebuilt from the order gradients became ready) are the pieces,
        # the last piece's first
        reduced = [names for kind, names in events if kind == "allreduce"]
        assert reduced == [sorted(p) for p in reversed(PIECES)]
        # overlap: each bucket's all-reduce is launched before the backward reaches the
        # piece before it -- the first one before the earliest piece's backward has run
        assert [e for e in events if e[0] == "backward"] == [("backward", n)
                                                              for n in (3, 2, 1, 0)]
        for n, names in enumerate(PIECES[1:], 1):
            assert events.index(("allreduce", sorted(names))) < \
                events.index(("backward", n - 1))
        assert events[-1] == ("allreduce", sorted(PIECES[0]))


def test_ddp_optimizer_off_compiles_one_graph_reduced_after_its_backward(split_runs):
    expected = _eager_grads()
    for ranks in split_runs:
        saved = ranks["aot_eager", False]
        assert saved["pieces"] is None   # compiled whole, not through the splitter
        for got, want in zip(saved["grads"], expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        events = saved["events"]
        # one piece: its backward runs whole before DDP launches any all-reduce
        assert events[0] == ("backward", 0)
        assert [kind for kind, _ in events[1:]] == ["allreduce"] * 4


@pytest.fixture
def one_process_group():
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_explain_shows_the_split(one_process_group):
    model = nn.parallel.DistributedDataParallel(_deep_model(), bucket_cap_mb=SMALL_BUCKETS_MB)
    x, _ = _deep_batch()
    explained = tc.explain(model)(x)
    assert explained.graph_count == 1
    (split,) = explained.ddp_splits
    assert split.piece_count == 4 and [p.params for p in split.pieces] == PIECES
    text = str(explained)
    assert "DDP buckets of 1088 B (first bucket 1088 B): 4 piece(s)" in text
    assert "piece 4: 2 parameter(s), 1088 B (all-reduced first): 6.weight, 6.bias" in text
    with dynamo_config.patch(optimize_ddp=False):
        assert tc.explain(model)(x).ddp_splits == [None]


def test_default_buckets_leave_a_small_model_whole(one_process_group):
    model = nn.parallel.DistributedDataParallel(_deep_model())   # 25 MiB, first 1 MiB
    x, _ = _deep_batch()
    (split,) = tc.explain(model)(x).ddp_splits
    assert split.piece_count == 1 and split.first_bucket_bytes_cap == 2**20


class _Reshaping(nn.Module):
    """A size read in one piece and used in the next: the next piece computes it again."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        n = x.size(0)
        h = self.a(x).relu()
        return self.b(h).reshape(n, 2, 8).sum(1)


class _WritesAcross(nn.Module):
    """A piece writing in place into the one before's result: not split (that piece's
    compiled code may have handed out a copy)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x):
        h = self.a(x)
        g = self.b(x)
        h.mul_(2)
        return g + h


@pytest.mark.parametrize("make, pieces", [(_Reshaping, 2), (_WritesAcross, 1)])
@pytest.mark.parametrize("dynamic", [False, True])
def test_values_crossing_pieces(make, pieces, dynamic, one_process_group):
    torch.manual_seed(0)
    inner = make()
    reference = make()
    reference.load_state_dict(inner.state_dict())
    model = nn.parallel.DistributedDataParallel(inner, bucket_cap_mb=SMALL_BUCKETS_MB)
    compiled = tc.compile(model, backend="aot_eager", dynamic=dynamic)
    for batch in (4, 6, 7):
        x = torch.randn(batch, 16)
        inner.zero_grad()
        reference.zero_grad()
        got = compiled(x)
        want = reference(x)
        torch.testing.assert_close(got, want)
        got.sum().backward()
        want.sum().backward()
        for p, q in zip(inner.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
    compiled = cache_entries(inner)[-1].compiled   # (size generic: after 4, 6 or from 4)
    split = compiled.ddp_split
    assert split.piece_count == pieces
    if pieces == 1:
        assert "writes in place into" in split.reason
    else:   # the tensor crossing into piece 2 has a symbolic batch: compiled once for all
        assert [piece.num_compiles for piece in compiled.compiled] == [1, 1]


def test_optimize_ddp_is_checked_when_set():
    with pytest.raises(TypeError, match="must be a bool"):
        dynamo_config.optimize_ddp = "no"
    with pytest.raises(AttributeError, match="did you mean 'optimize_ddp'"):
        dynamo_config.optimise_ddp = False
    with pytest.raises(TypeError, match="must be a bool"):
        dynamo_config.patch(optimize_ddp=0)
    assert dynamo_config.optimize_ddp is True


def test_buckets_of_zero_bytes_give_each_layer_a_piece(one_process_group):
    model = nn.parallel.DistributedDataParallel(_deep_model(), bucket_cap_mb=0)
    x, _ = _deep_batch()
    explained = tc.explain(model, backend="aot_eager", dynamic=True)(x)
    (split,) = explained.ddp_splits
    assert [p.params for p in split.pieces] == PIECES
    # (each GELU rides with the layer before it: buckets are filled backwards, and one is
    # full once it holds a parameter)
    assert [[n.name for n in p.nodes] for p in split.pieces] == [
        ["linear", "gelu"], ["linear_1", "gelu_1"], ["linear_2", "gelu_2"], ["linear_3"]]
    # each piece compiled for a symbolic batch: explain shows the four pieces' symbols
    assert len(explained.symbolic_guards) == 4
