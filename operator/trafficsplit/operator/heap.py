"""The operator's heap and Python's cyclic garbage collector.

After the start-up listing the heap is mostly what the store and the memos hold for as long as the objects exist
(~200,000 tracked objects in an operator holding 1,000 HTTPRoutes), and a pass keeps little of what it allocates.
Python's collector still walks the whole heap at every full collection, in the middle of whichever pass allocated the
object that crossed the threshold: ~100 ms for a heap of 430,000 objects (bench/bench_gateway_publish.py; a flip's
pass is ~45 ms of work). `freeze_loaded_heap` moves what the listing and the first pass left into the collector's
permanent generation (`gc.freeze`), so a full collection walks only what came after. What is frozen is still freed
by reference counting when dropped; only a reference cycle among it would outlive its use.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("trafficsplit.operator.heap")


def freeze_loaded_heap() -> None:
    """Collect once, then freeze what is left (see the module docstring)."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("heap: %d objects frozen after the first pass", frozen)
