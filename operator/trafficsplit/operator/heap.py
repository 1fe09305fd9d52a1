"""The operator's heap and Python's cyclic garbage collector.

After the start-up listing the heap is mostly what the store and the memos hold for as long as the objects exist
(1,000 HTTPRoutes: ~140,000 tracked objects in process, ~200,000 in the operator), and each pass allocates little
that survives (a one-route flip: under 2,000 objects net). Python's collector still walks the whole heap at every
full collection: 73 ms for that store, in the middle of whichever pass allocated the object that crossed the threshold
(issue 28's 1,000-route flip, measured in process with `gc.callbacks`; docs/performance.md). `freeze_loaded_heap`
moves what the listing and the first pass left into the collector's permanent generation (`gc.freeze`), so a full
collection walks only what came after (3.4 ms). What is frozen is still freed by reference counting when dropped;
only a reference cycle among it would outlive its use.
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
