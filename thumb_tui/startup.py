"""The start of a command that opens a screen: CPython's cyclic garbage collector is held off
from the command's start until the app has drawn its first screen.

Start-up builds some 150,000 objects that live as long as the app (the modules of Textual and
SQLAlchemy, the tables, the session's worklist), and the collector, which runs after every
few hundred new objects, traverses them again and again: about a fifth of the CPU time to
`thumb annotate`'s first screen on a 100,000-caption project
(`benchmarks/annotate_latency.py`). Reference counting frees everything else as before.
Once the first screen is drawn, what start-up built is frozen (`gc.freeze`: never traversed
again, so no later key waits on a full collection of it; the little of it that later
becomes garbage in a cycle, such as the first image's cards, is not reclaimed) and the
collector runs as usual."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_held = False  # whether `collector_held` holds the collector off now


@contextmanager
def collector_held() -> Iterator[None]:
    """Hold the collector off for the block, or until `first_screen_drawn` if that comes
    first; a decorator for a command that runs an app. Where the collector is off already,
    whoever turned it off turns it back on."""
    global _held
    if not gc.isenabled():
        yield
        return
    gc.disable()
    _held = True
    try:
        yield
    finally:
        if _held:  # the command ended before a first screen (an error, nothing to do)
            _held = False
            gc.enable()


def first_screen_drawn() -> None:
    """The app's first screen is on the terminal: freeze what start-up built and let the
    collector run again (nothing to do where `collector_held` does not hold it)."""
    global _held
    if _held:
        _held = False
        gc.freeze()
        gc.enable()
