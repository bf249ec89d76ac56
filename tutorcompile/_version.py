"""The package's version, on the lowest floor so that every module may read it (``environment``'s
doctor report prints it; ``tutorcompile.__version__`` re-exports it). Keep it equal to
``version`` in pyproject.toml."""

__version__ = "0.1.0"
