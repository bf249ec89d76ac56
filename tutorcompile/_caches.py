"""The caches ``tutorcompile.reset()`` empties, registered by the stages that own them.

``reset`` lives in Dynamo (stage 3), whose cache of guarded graphs it clears; caches of the
floors above it (Inductor's compiled graphs, keyed by content) register a ``clear`` here
when they are imported, so a reset forgets them too without Dynamo importing Inductor --
a notebook's ``tc.reset()`` then shows a compilation from the start, as
``torch._dynamo.reset()`` does.
"""

from __future__ import annotations

from collections.abc import Callable

_CLEARS: list[Callable[[], None]] = []


def on_reset(clear: Callable[[], None]) -> None:
    """Call ``clear`` whenever ``tutorcompile.reset()`` runs."""
    _CLEARS.append(clear)


def reset_registered() -> None:
    for clear in _CLEARS:
        clear()
