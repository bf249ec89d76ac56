"""Graph passes: plain functions that return a new graph or GraphModule, stamped with their name.

Passes never edit their input: they return a new graph, so a learner can print the graph
before and after a pass side by side, and the printed code's header says which pass made it.

* ``dce``, ``cse``                        Graph -> Graph (dce_cse.py)
* ``replace_pattern``, ``match_pattern``  rewrite every match of a traced pattern
* ``fuse_conv_bn``                        fold eval-mode BatchNorm into the conv before it
* ``count_flops``                         FLOPs and bytes per node (an analysis, no new graph)
* ``ShapeProp``                           shapes and dtypes per node (an Interpreter)
"""

from ..interpreter import ShapeProp
from .dce_cse import cse, dce, is_impure, is_random
from .flop_counter import FlopReport, NodeCost, classify, count_flops
from .fuse_conv_bn import fold_conv_bn_weights, fuse_conv_bn
from .pattern_matcher import Match, match_pattern, replace_pattern

__all__ = ["FlopReport", "Match", "NodeCost", "ShapeProp", "classify", "count_flops", "cse",
           "dce", "fold_conv_bn_weights", "fuse_conv_bn", "is_impure", "is_random",
           "match_pattern", "replace_pattern"]
