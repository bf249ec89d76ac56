"""Graph passes: plain functions ``Graph -> Graph`` that each stamp their name on the result.

Passes never edit their input: they return a new graph, so a learner can print the graph
before and after a pass side by side, and the printed code's header says which pass made it.
"""

from .dce_cse import cse, dce, is_impure, is_random

__all__ = ["cse", "dce", "is_impure", "is_random"]
