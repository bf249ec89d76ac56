"""tutorcompile.viz -- drawings and widgets for every stage of the course.

::

    draw, GraphDrawing        a graph as graphviz SVG (text without graphviz); save() to disk
                              (drawing.py)
    GraphExplorer             every graph the available stages make from one function
    register_stage            how a stage adds its graphs to the explorer (one call)
    Timing                    bench.compare behind a size slider and a Run button, with a chart
                              (timing.py)
    inspect_guards, GuardInspector     change an input: which Dynamo guard fails? (guards.py)
    PartitionView, partition_view      what the forward saves for the backward, and its bytes
    compare_partitions                 default vs min-cut: saved bytes, ops, recomputation
                                       (partition.py)
    FusionView, fusion_view            which graph nodes became which kernel (stage 5;
                                       fusion.py)
    CUDAGraphView, cudagraphs_view     recorded CUDA Graphs, replays and skip reasons (stage 6;
                                       cudagraphs.py)

Every view also works from a script: it returns data (``rows()``, ``text()``, ``summary()``)
or saves a file (``save(path)``). ipywidgets is imported only when a widget is shown, so
importing this package needs no running Jupyter.
"""

from .cudagraphs import CUDAGraphView, cudagraphs_view, find_cudagraphed
from .drawing import GraphDrawing, draw, graphviz_available
from .explorer import GraphExplorer, node_details
from .fusion import FusionView, fusion_view
from .guards import GuardCheck, GuardInspector, GuardReport, inspect_guards
from .partition import (
    PartitionComparison,
    PartitionView,
    SavedTensor,
    compare_partitions,
    partition_view,
    torch_partition,
)
from .stages import (
    StageGraph,
    StageOutput,
    register_stage,
    registered_stages,
    run_stages,
    unregister_stage,
)
from .timing import Timing

__all__ = [
    "CUDAGraphView", "cudagraphs_view", "find_cudagraphed",
    "FusionView", "GraphDrawing", "GraphExplorer", "GuardCheck", "GuardInspector",
    "GuardReport", "PartitionComparison", "PartitionView", "SavedTensor", "StageGraph",
    "StageOutput", "Timing", "compare_partitions", "draw", "fusion_view",
    "graphviz_available", "inspect_guards", "node_details", "partition_view",
    "register_stage", "registered_stages", "run_stages", "torch_partition",
    "unregister_stage",
]
