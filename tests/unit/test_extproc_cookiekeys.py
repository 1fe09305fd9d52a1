"""`--cookie-key-file` re-read while serving (extproc/cookiekeys.py): a rotated Secret reaches the decisions without
a restart; a bad or missing file keeps the loaded keys."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from tests.unit.test_extproc_processor import meta, mutation, request
from trafficsplit.core.control.compiler import compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import Endpoint
from trafficsplit.core.model.cookie import AffinityMinter
from trafficsplit.core.model.errors import SpecError
from trafficsplit.core.model.generation import Generation
from trafficsplit.core.model.persistent import CookieSigner
from trafficsplit.extproc.cookiekeys import MAX_KEY_FILE_BYTES, CookieKeyFile
from trafficsplit.extproc.held import HeldGeneration
from trafficsplit.extproc.metrics import Metrics
from trafficsplit.extproc.processor import Processor
from trafficsplit.wire.envoy import META_SET_COOKIE, ROUTING_HEADER

OLD, NEW = b"o" * 32, b"n" * 32
SPLIT = "ns/shop"


def persistent_generation() -> Generation:
    spec = parse_split(
        "ns",
        "shop",
        {
            "hosts": ["shop.example"],
            "backends": [{"name": "stable", "weight": 90}, {"name": "canary", "weight": 10}],
            "sticky": {"cookie": {"name": "ts"}, "mode": "persistent"},
        },
    )
    eps = {"stable": [Endpoint("10.0.0.1", 80)], "canary": [Endpoint("10.0.0.2", 80)]}
    return Generation(4, (compile_split(spec, eps),))


def test_reload_reads_a_changed_file_and_keeps_the_keys_on_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_bytes(OLD + b"\n")
    keys = CookieKeyFile(path)
    cookie = CookieSigner(NEW, OLD).seal(SPLIT, "k" * 24, "canary")
    assert keys.signer.open(SPLIT, cookie) is None
    assert keys.reload() is None  # unchanged
    path.write_bytes(NEW + b"\n" + OLD + b"\n")
    signer = keys.reload()
    assert signer is not None and keys.signer is signer
    assert signer.open(SPLIT, cookie) == ("k" * 24, "canary", False)
    for bad in (b"short\n", b"", b"x" * (MAX_KEY_FILE_BYTES + 1)):
        path.write_bytes(bad)
        assert keys.reload() is None and keys.signer is signer
    path.unlink()
    assert keys.reload() is None and keys.signer is signer


def test_a_file_that_cannot_load_at_start_stops_the_processor(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        CookieKeyFile(tmp_path / "absent")
    (tmp_path / "short").write_bytes(b"short\n")
    with pytest.raises(SpecError):
        CookieKeyFile(tmp_path / "short")


def test_a_rotated_key_file_reaches_the_processors_decisions_without_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cookie sealed with a key this replica has not loaded is re-sessioned; once the file changes, the watch hands
    the processor the new keys and the same cookie keeps its pinned backend (the operator's staging step)."""
    path = tmp_path / "keys"
    path.write_bytes(OLD + b"\n")
    keys = CookieKeyFile(path)
    held = HeldGeneration()
    held.swap(persistent_generation(), "test")
    processor = Processor(held, Metrics(), AffinityMinter(clock_ms=lambda: 1, start=0), signer=keys.signer)
    pinned = CookieSigner(NEW).seal(SPLIT, "0" * 24, "canary")
    headers = {":authority": "shop.example", "cookie": f"ts={pinned}"}

    before = processor.handle(request(**headers))
    assert META_SET_COOKIE in meta(before)  # not verified: a new session, sealed again

    async def rotate() -> None:
        watch = asyncio.create_task(keys.watch(processor.set_signer, interval=0.01))
        path.write_bytes(OLD + b"\n" + NEW + b"\n")  # staged: OLD signs, NEW is accepted
        for _ in range(500):
            await asyncio.sleep(0.01)
            if keys.signer.open(SPLIT, pinned) is not None:
                break
        await asyncio.sleep(0.05)  # the watch's callback runs right after the reload it awaited
        watch.cancel()

    with caplog.at_level(logging.INFO):
        asyncio.run(rotate())
    after = processor.handle(request(**headers))
    assert mutation(after)[ROUTING_HEADER] == "ns/shop/canary"
    # Verified with the accepted (not the signing) key: sealed again with the signing one.
    assert meta(after)[META_SET_COOKIE].startswith("ts=" + "0" * 24 + ".canary.")
    assert "changed" in caplog.text
