"""Traced Python memory of one call (tracemalloc), for the tests that bound a peak."""

from __future__ import annotations

import tracemalloc
from typing import Any, Callable


def traced_peak(fn: Callable[[], Any]) -> tuple[Any, int]:
    """fn() with tracemalloc on: (what fn returned, the peak of traced memory in bytes)."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
