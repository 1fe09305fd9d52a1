"""The operator process freezes the heap its start-up listing and first pass left (operator/heap.py), once; an engine
in any other process (these tests') freezes nothing, or the objects of every test after it would never be collected
when they form a cycle."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any
from unittest import mock

from tests.unit.test_operator_engine import FakeReplica, body, make_engine, run, running, started, until
from trafficsplit.operator import engine as engine_module
from trafficsplit.operator import heap


def _passes_freezing(tmp_path: Any, freeze: bool) -> tuple[int, int]:
    """The objects frozen after the first pass, and the freezes over two passes."""
    counts: list[int] = []

    async def main() -> None:
        async with started(FakeReplica("a")) as (a,):
            engine = make_engine(tmp_path, [a])
            engine.settings = dataclasses.replace(engine.settings, freeze_heap=freeze)
            engine.store.apply("trafficsplit", None, body("s", (100, 0)))
            async with running(engine):
                await until(lambda: a.held == 1)
                counts.append(gc.get_freeze_count())
                engine.apply("trafficsplit", "MODIFIED", body("s", (0, 100), generation=2))
                await until(lambda: a.held == 2)

    with mock.patch.object(engine_module, "freeze_loaded_heap", wraps=heap.freeze_loaded_heap) as freezes:
        try:
            run(main)
        finally:
            gc.unfreeze()
    return counts[0], freezes.call_count


def test_the_operators_engine_freezes_the_loaded_heap_once(tmp_path: Any) -> None:
    gc.unfreeze()
    frozen, freezes = _passes_freezing(tmp_path, freeze=True)
    assert frozen > 0
    assert freezes == 1, "the heap was frozen again after a later pass"


def test_an_engine_elsewhere_freezes_nothing(tmp_path: Any) -> None:
    gc.unfreeze()
    assert _passes_freezing(tmp_path, freeze=False) == (0, 0)
