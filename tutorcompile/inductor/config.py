"""Stage 5's knobs: ``tutorcompile.inductor.config``, every tuning constant of the stage in
one place, each with the reason for its value.

::

    from tutorcompile.inductor import config
    config.max_fusion_size = 16                  # smaller kernels from now on
    with config.patch(cpp_parallel_min_elements=1 << 20):
        ...                                      # fewer parallel loops, for one block
    print(config.describe())                     # every knob, its value and why

Knobs are read while a graph compiles: what is already compiled keeps the code it was
compiled with, and a graph compiled again under other knob values is compiled anew (the
values are part of ``codecache.graph_key``). Setting one is checked at once: a name that is
not a knob (a typo names the close match) or a value of the wrong type raises there
(``tutorcompile/_config.py``). The numbers behind the values are in
``benchmarks/MEASUREMENTS.md``.

Mirrors: torch/_inductor/config.py (``max_fusion_size``, ``cpp.*``, ``triton.*``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from .. import _config

# -- lowering ----------------------------------------------------------------------------

index_add_dense_limit: int = 1 << 12
"""``index_add`` becomes a kernel when (output elements) x (indices) is at most this: it is
generated as a reduction that compares every output row with every index (deterministic, no
atomics), which pays only while that product is small: PyTorch's scatter is linear in the
indices. Notebook 07's GPT's embedding gradients are far past the limit."""

partitioner: str = "default"
"""How stage 4 splits a training graph into forward and backward for these kernels.
``"default"`` (``aot.default_partition``): save whatever the backward reads, as eager
autograd does. ``"min_cut"`` (``aot.kernel_min_cut_partition``, as Inductor's
``min_cut_rematerialization_partition``): save the fewest bytes and recompute cheap pointwise
ops inside the backward's kernels, where they fuse. Neither wins everywhere
(benchmarks/MEASUREMENTS.md): over eight models' training steps on CPU the min-cut is faster
on ResNet-18 and BERT, slower on MobileNet-V3 and EfficientNet, 1.18x eager in geomean
against the default's 1.20x, and it compiles training graphs more slowly."""

conv_layout: str = "measure"
"""The memory layout a CPU convolution runs in. ``"measure"``: time PyTorch's call on the
real sizes both ways -- on the contiguous (NCHW) tensors, and on channels-last copies with
the result copied back -- once per distinct convolution (forward and backward apart) and
keep the faster (``autotune.conv_channels_last``). Which wins depends on the window, the
groups, the sizes, the thread count and the CPU (1x1 convolutions of EfficientNet and RegNet
faster on channels-last, a dense 3x3 of ResNet-18 and a depthwise 3x3 slower:
benchmarks/MEASUREMENTS.md), so no fixed rule holds. ``"contiguous"`` or
``"channels_last"`` force one (tests; reproducible kernels)."""

conv_layout_margin: float = 0.9
"""Under ``conv_layout = "measure"`` channels-last is kept only when it takes at most this
fraction of the contiguous call's time: a near tie stays contiguous, the layout eager uses,
so that a timing that noise decided changes nothing."""

reduction_split_min_inner: int = 16
"""A reduction over dims that are not a trailing block is split in two (first over the
trailing reduced dims, then over the rest: ``compile_fx.split_reductions``) only when the
trailing part reduces at least this many elements: fewer leave its vectorised inner loop
too little to run over."""

# -- scheduling --------------------------------------------------------------------------

max_fusion_size: int = 64
"""A kernel holds at most this many buffers (compile time grows with kernel size)."""

horizontal_window: int = 64
"""Siblings are fusion candidates only when at most this many groups apart in the order.
Without a bound, a weight read once per layer makes every pair of layers a candidate: work
that grows with the square of the depth, for fusions that the cycle check would refuse
anyway. Inductor bounds the same search (``max_fusion_buffer_group_pairwise_attempts``)."""

unrelated_span: int = 32
"""Kernels over the same loops that share nothing share a kernel only when their buffers lie
within this many buffers of the graph (see ``Scheduler.unrelated_kernels``): their inputs
then stay alive until the shared kernel runs, so the span bounds the memory it holds."""

unrelated_scalar_bytes: int = 64
"""...unless neither holds memory of the graph's: each reads graph inputs and buffers of at
most this many bytes (an optimizer's bias corrections, one number per parameter) and stores
new values of inputs and such buffers. Moved anywhere, these keep nothing alive worth
counting."""

inline_op_limit: int = 8
"""A buffer whose loops do not line up with its kernel's is computed inside it, at each index
its readers load (phase ``inline``), only when that is cheap: computing it -- with what it
reads from the same kernel -- takes at most this many operations, or it has at least as many
elements as the kernel iterates (a larger buffer read through a slice: only the elements read
are computed). Recomputing costs arithmetic; a kernel of its own costs a launch and a trip
through memory for its result."""

# -- C++ kernels ---------------------------------------------------------------------------

cpp_tile: int = 32
"""Outputs per tile in reductions over an outer dimension (two AVX-512 vectors of floats)."""

cpp_nest_min_inner: int = 8
"""A reduction's r loop is nested (an inner loop over the last reduced dim) only when that
dim has at least this many elements: fewer leave the vectoriser nothing to work with."""

cpp_sum_chunk: int = 512
"""A flat float sum over more values than twice this adds them in chunks of this many (a
float per lane), and the chunks' sums in double (``CppKernel.emit_reduction``): double
accumulators all the way halve the vector width, float all the way loses digits."""

cpp_split_min: int = 4
"""The vectorised loop is split at a divisor of its index (``CppKernel.note_split``) only
when the inner part is at least this long: four floats fill an SSE vector, and the split
loop of a 2x2 image beats the flat loop's gathers, which g++ leaves scalar."""

cpp_parallel_min_elements: int = 32768
"""Below this many elements a kernel runs on one thread: starting a parallel region costs
microseconds, more than the work."""

kernels_per_run: int = 8
"""A graph's C++ kernels build in batches over the pool's threads, but a compiler run gets
at least this many kernels: each run pays ~0.1-0.2 s to start and load the precompiled
prelude, about what compiling two or three small kernels costs."""

# -- the wrapper ---------------------------------------------------------------------------

keep_buffers: bool = True
"""On a CPU, a buffer no caller sees (a graph's intermediate, a training forward's value
saved for the backward) keeps its memory from one call to the next: the wrapper takes it
again when nothing holds it any more (``wrapper.KeptBuffers``) instead of asking the
allocator. glibc gives large blocks freed at the top of its heap back to the system, and
the next call then pays a page fault for every 4 KiB it writes: the course GPT's training
step (batch 32) faulted 140-1370 pages a step, eager and torch.compile none. The memory
stays held between calls (about a step's saved values and intermediates) until the
compiled graph is dropped (``tutorcompile.reset()``). False: every call allocates anew."""

keep_buffers_min_bytes: int = 1 << 17
"""Only buffers of at least this many bytes are kept (``keep_buffers``): glibc serves smaller
blocks (below its first mmap threshold, 128 KiB) from free lists it keeps anyway, and taking
a kept buffer is a Python call, where ``empty_strided`` is a C call."""

# -- Triton kernels ------------------------------------------------------------------------

triton_xblock: int = 1024
"""The most elements one program of a pointwise Triton kernel takes on a GPU: a GPU wants
many programs in flight, each with a block its warps cover."""

triton_xblock_interpreted: int = 1 << 16
"""The same under ``TRITON_INTERPRET=1``, where each program is a Python call on NumPy
arrays: few, large programs run fastest."""

triton_persistent_rblock: int = 2048
"""A reduction whose row (rounded up to a power of 2) is at most this long is *persistent*
on a GPU: one program loads its whole row into registers once; a longer row is looped."""

triton_persistent_rblock_interpreted: int = 1 << 14
"""The same under the interpreter, which has no registers to run out of: a longer
persistent row is fewer, larger NumPy operations."""

triton_looped_rblock: int = 1024
"""The row block a looped reduction walks its row with, on a GPU: large enough for wide
loads, small enough that the tile's accumulators stay in registers."""

triton_looped_rblock_interpreted: int = 4096
"""The same under the interpreter, larger: each step of the loop is a Python iteration."""

triton_tile: int = 4096
"""Elements of a reduction program's ``[XBLOCK, RBLOCK]`` tile on a GPU: rows per program
are this divided by the row block."""

triton_tile_interpreted: int = 1 << 18
"""The same under the interpreter, larger: each program is a Python call, so fewer programs
of more rows run faster."""

triton_num_stages: int = 1
"""Software-pipelining depth of a pointwise or reduction kernel's loops: Inductor's configs
use 1 (their loads are streamed once; deeper pipelines pay off for matmul tiles)."""

template_group_m: int = 8
"""The matmul template walks this many rows of tiles column by column, so that a group of
programs reuses the same blocks of both operands from the L2 cache
(``codegen/triton_template.py``)."""

scan_xblock: int = 128
"""Positions of a scan's outer x inner plane that one Triton program takes (each walks the
scan dimension for all of them)."""


def patch(**changes: Any) -> contextlib.AbstractContextManager:
    """``with config.patch(max_fusion_size=16): ...``: knobs set for a block."""
    return _config.patch(__name__, **changes)


def describe() -> str:
    """Each knob, its value and why it has it."""
    return _config.describe(__name__)


def snapshot() -> tuple[tuple[str, Any], ...]:
    """Every knob's current value: a part of what a compiled graph is cached under."""
    return _config.snapshot(__name__)


_config.install(__name__)
