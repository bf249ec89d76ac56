"""tutorcompile.viz -- drawings and (later) widgets for every stage of the course.

Every view also works from a script: it returns data or saves a file.
"""

from .drawing import GraphDrawing, draw, graphviz_available

__all__ = ["GraphDrawing", "draw", "graphviz_available"]
