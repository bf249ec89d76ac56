"""CUDA Graphs: record a compiled function's kernel launches once, then replay them.

For small models the GPU waits on the CPU: Python, the dispatcher and one launch per kernel
cost a few microseconds each, while the kernels themselves finish faster than that. A CUDA
Graph records every launch of one call (addresses included) and replays the whole sequence
with a single launch. The price is that addresses are frozen, which dictates the design:

* **static inputs**: each recorded graph owns input buffers; a call copies its arguments
  into them before the replay -- except parameters, whose addresses do not change between
  calls: the recording reads them where they live, and a call that passes a different
  tensor in a parameter's place records a new graph (a training step's update writes the
  parameters in place, so the next replay already sees the new weights);
* **static outputs**: a replay writes into the same output buffers every time, so the result
  of one call is overwritten by the next -- ``clone_outputs=True`` returns copies instead;
* **one graph per input-shape key**, all allocated from one shared memory pool;
* **warm-up first** (on a side stream, as PyTorch recommends), so lazy initialisation (cuBLAS
  handles, autotuning, allocator growth) happens outside the recording;
* **skip, and say why** when recording would be wrong or impossible: no GPU, CPU tensors,
  the function mutates its inputs, dynamic shapes, or an op that cannot be captured (one
  that synchronises with the CPU). Skipped calls simply run the function.

``mode="reduce-overhead"`` in ``tutorcompile.compile`` wraps the compiled forward (and
backward) in :class:`CUDAGraphed`.

Mirrors: early TorchDynamo's ``cudagraphs_inner`` (torchdynamo/optimizations/backends.py) and
torch/_inductor/cudagraph_trees.py (the shared pool, static outputs, skip reasons).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ._logging import log_artifact

NO_CUDA = "CUDA Graphs need a CUDA device, and none is visible; the function runs normally"


def _key(args: Sequence[Any], fixed: Sequence[int] = ()) -> tuple:
    """What a recorded graph is specialised to: tensor shapes/dtypes/strides and plain values,
    and the address of each input in ``fixed`` (read in place, not copied)."""
    return tuple((tuple(a.shape), a.dtype, a.device, a.stride(),
                  a.data_ptr() if i in fixed else None) if isinstance(a, torch.Tensor)
                 else ("value", a) for i, a in enumerate(args))


def fixed_inputs(args: Sequence[Any]) -> tuple[int, ...]:
    """The inputs a recording reads where they are instead of copying: parameters, whose
    storage lives as long as the model and is updated in place (PyTorch's cudagraph trees
    call them static inputs)."""
    return tuple(i for i, a in enumerate(args) if isinstance(a, torch.nn.Parameter))


def skip_reason(args: Sequence[Any], *, mutates_inputs: bool = False, dynamic: bool = False,
                unsupported_ops: Sequence[str] = ()) -> str | None:
    """Why these arguments cannot be replayed through a CUDA Graph (None if they can)."""
    if not torch.cuda.is_available():
        return NO_CUDA
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    on_cpu = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and not a.is_cuda]
    if on_cpu:
        return f"inputs {on_cpu} are CPU tensors; a CUDA Graph only replays GPU work"
    if not tensors:
        return "no tensor inputs: nothing for a graph to replay"
    if mutates_inputs:
        return "the function mutates its inputs; replays would write into static copies"
    if dynamic:
        return "dynamic shapes: a graph is frozen to one shape (compile with dynamic=False)"
    if torch.is_grad_enabled() and any(a.requires_grad for a in tensors):
        return ("inputs require grad: replaying a forward whose backward was not recorded "
                "would be wrong (run inference under torch.no_grad(), or use a backend that "
                "records forward and backward graphs separately)")
    if unsupported_ops:
        return f"ops that cannot be captured: {', '.join(unsupported_ops)}"
    return None


@dataclass
class Recording:
    """What recording produces: ``replay()`` re-runs the recorded work, reading the static
    inputs and writing into ``static_outputs`` in place."""
    replay: Callable[[], None]
    static_outputs: Any


def record_cuda_graph(fn: Callable, static_inputs: Sequence[Any], warmup: int = 3,
                      pool: Any = None) -> Recording:
    """Warm ``fn`` up on a side stream, then record one call of it as a CUDA Graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn(*static_inputs)
    caller = torch.cuda.current_stream()
    caller.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, pool=pool):
            static_outputs = fn(*static_inputs)
    except BaseException:
        _undo_failed_capture(graph, caller)
        raise
    return Recording(graph.replay, static_outputs)


def _undo_failed_capture(graph: Any, caller: Any) -> None:
    """Put back what a capture that raised leaves behind, so the program goes on as if it
    had not been tried.

    An op that cannot be captured (``.item()`` synchronises) invalidates the capture; the
    ``with torch.cuda.graph`` block then raises from ``capture_end`` before its own clean-up:

    * the current stream is still the capture stream (``__exit__`` restores it after
      ``capture_end``): later work would run on a side stream;
    * the CUDA generator is still in capture mode (``capture_end`` calls the generator's
      ``capture_epilogue`` after ending the stream's capture): the next random op outside a
      capture raises "Offset increment outside graph capture encountered unexpectedly" --
      seen on an H100 as a test that passes alone and fails after the capture-failure test.

    The stream is set back; the graph is reset (newer PyTorch releases the generator's
    capture state there); and one successful capture of a trivial op runs the generator's
    prologue and epilogue again, which leaves it out of capture mode in every version (see
    ``CUDAGeneratorState::capture_epilogue`` in aten/src/ATen/cuda/CUDAGeneratorImpl.cpp).
    The generator's seed and offset are not touched: random numbers drawn after a failed
    capture follow on from the warm-up calls'."""
    torch.cuda.set_stream(caller)
    graph.reset()
    scratch = torch.zeros(1, device=caller.device)
    repair = torch.cuda.CUDAGraph()
    with torch.cuda.graph(repair):
        scratch.add_(1)
    repair.reset()


def record_on_cpu(fn: Callable, static_inputs: Sequence[Any]) -> Recording:
    """A CPU stand-in with a CUDA Graph's contract, for learning without a GPU.

    ``replay()`` runs ``fn`` on the static inputs again and copies the results into the same
    output tensors, so code written against it sees exactly what a CUDA Graph does: inputs
    are read from static buffers and outputs are overwritten in place. It saves no time --
    on a CPU there are no launches to batch.
    """
    static_outputs = fn(*static_inputs)

    def replay() -> None:
        _copy_into(static_outputs, fn(*static_inputs))

    return Recording(replay, static_outputs)


def _copy_into(dst: Any, src: Any) -> None:
    if isinstance(dst, torch.Tensor):
        dst.copy_(src)
    elif isinstance(dst, (tuple, list)):
        for d, s in zip(dst, src):
            _copy_into(d, s)


@dataclass
class RecordedGraph:
    """One recording with the static input buffers it reads (a parameter: the parameter
    itself, which a call's key has already matched by address)."""
    recording: Recording
    static_inputs: list[Any]
    replays: int = 0
    copies: int = 0   # input copies made by replays (parameters are never copied)

    def replay(self, args: Sequence[Any]) -> Any:
        for static, new in zip(self.static_inputs, args):
            if isinstance(static, torch.Tensor) and static.data_ptr() != new.data_ptr():
                static.copy_(new)
                self.copies += 1
        self.recording.replay()
        self.replays += 1
        return self.recording.static_outputs


@dataclass
class CUDAGraphed:
    """``fn`` wrapped to record on first call per shape key and replay after that.

    ``mutates_inputs`` / ``dynamic`` / ``unsupported_ops`` come from the compiler (AOT knows
    about mutations, Dynamo about dynamic shapes); any of them makes every call a skip.
    """
    fn: Callable
    warmup: int = 3
    clone_outputs: bool = False
    mutates_inputs: bool = False
    dynamic: bool = False
    unsupported_ops: tuple[str, ...] = ()
    name: str = "fn"
    graphs: dict[tuple, RecordedGraph] = field(default_factory=dict)
    skips: list[str] = field(default_factory=list)
    pool: Any = None

    def __call__(self, *args: Any) -> Any:
        reason = skip_reason(args, mutates_inputs=self.mutates_inputs, dynamic=self.dynamic,
                             unsupported_ops=self.unsupported_ops)
        if reason is None:
            key = _key(args, fixed_inputs(args))
            entry = self.graphs.get(key)
            if entry is None:
                try:
                    entry = self.graphs[key] = self._record(args)
                except RuntimeError as e:  # e.g. an op that synchronises during capture
                    reason = f"capture failed: {str(e).splitlines()[0]}"
                    self.unsupported_ops += ("<capture failed>",)
            if entry is not None and reason is None:
                out = entry.replay(args)
                return _clone(out) if self.clone_outputs else out
        assert reason is not None   # a recorded graph replays above
        if reason not in self.skips:
            self.skips.append(reason)
            log_artifact("cudagraphs", reason, title=f"{self.name}: skipped")
        return self.fn(*args)

    def _record(self, args: Sequence[Any]) -> RecordedGraph:
        fixed = fixed_inputs(args)
        static_inputs = [a.clone() if isinstance(a, torch.Tensor) and i not in fixed else a
                         for i, a in enumerate(args)]
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        recording = record_cuda_graph(self.fn, static_inputs, self.warmup, self.pool)
        log_artifact("cudagraphs", lambda: f"recorded for {_describe(args)}",
                     title=f"{self.name}: graph {len(self.graphs) + 1}")
        return RecordedGraph(recording, static_inputs)

    def summary(self) -> str:
        """What was recorded, how often each graph replayed, and why calls were skipped."""
        lines = [f"{self.name}: {len(self.graphs)} recorded graph(s)"]
        for key, entry in self.graphs.items():
            shapes = ", ".join(str(list(k[0])) for k in key if k[0] != "value")
            lines.append(f"  inputs {shapes}: {entry.replays} replays, "
                         f"{entry.copies} input copies")
        lines += [f"  skipped: {reason}" for reason in self.skips]
        return "\n".join(lines)


def _clone(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.clone()
    if isinstance(out, (tuple, list)):
        return type(out)(_clone(o) for o in out)
    return out


def _describe(args: Sequence[Any]) -> str:
    return ", ".join(f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}"
                     if isinstance(a, torch.Tensor) else repr(a) for a in args)


def cudagraphify(fn: Callable, **options: Any) -> CUDAGraphed:
    """Wrap ``fn`` for record-and-replay (see :class:`CUDAGraphed` for the options)."""
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return CUDAGraphed(fn, name=name, **options)
