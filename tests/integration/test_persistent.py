"""sticky.mode: persistent through a real Envoy: a ramp moves no existing session while new ones split by the weights
(chi-square), a flip moves everyone, a tampered cookie is re-sessioned, and a rotated key keeps sessions for its
grace period. The processor gets its HMAC keys from a file, as the gateway gets them from a Secret."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.dataplane import Dataplane, NameBackends, Response, split_doc
from tests.support.decided import decided_sessions
from tests.support.waiting import poll

pytestmark = [pytest.mark.envoy]

HOST = "app.example"
DECISION = "x-trafficsplit-decision"
K1, K2, K3 = "a" * 32, "b" * 32, "c" * 32
CHI2_1DF_P001 = 10.83  # chi-square critical value, 1 degree of freedom, p = 0.001


@pytest.fixture
def sealed(name_backends: NameBackends) -> Iterator[tuple[Dataplane, Path]]:
    with tempfile.TemporaryDirectory(prefix="ts-persistent-") as d:
        keys = Path(d) / "cookie-keys"
        keys.write_text(K1 + "\n")
        dp = Dataplane.start(Path(d), name_backends, extra_processor_args=["--cookie-key-file", str(keys)])
        try:
            yield dp, keys
        finally:
            with contextlib.suppress(Exception):
                dp.stop()


def _publish(dp: Dataplane, weights: dict[str, int]) -> None:
    spec = split_doc(HOST, weights, sticky=True)
    spec["sticky"]["mode"] = "persistent"
    dp.publish([spec])


def _visit(dp: Dataplane, cookies: Sequence[str | None]) -> list[Response]:
    return decided_sessions(dp.port, HOST, "ts", cookies)


def _new_sessions(dp: Dataplane, n: int) -> tuple[list[str], list[str]]:
    """n fresh sessions: their sealed cookies and the backend each was given."""
    rs = _visit(dp, [None] * n)
    cookies = [r.cookie("ts") for r in rs]
    assert all(c is not None and c.count(".") == 2 for c in cookies)
    return [c for c in cookies if c is not None], [r.backend for r in rs]


def _chi2_even(counts: Sequence[int]) -> float:
    expected = sum(counts) / len(counts)
    return sum((c - expected) ** 2 / expected for c in counts)


def test_a_ramp_moves_no_existing_session_and_new_sessions_follow_the_weights(sealed: tuple[Dataplane, Path]) -> None:
    dp, _ = sealed
    _publish(dp, {"blue": 95, "canary": 5})
    cookies, given = _new_sessions(dp, 2000)
    assert 0.03 < given.count("canary") / 2000 < 0.07
    _publish(dp, {"blue": 50, "canary": 50})
    again = _visit(dp, cookies)
    moved = sum(r.backend != b for r, b in zip(again, given, strict=True))
    assert moved == 0
    assert all(r.cookie("ts") is None and "path=pinned" in (r.header(DECISION) or "") for r in again)
    _, fresh = _new_sessions(dp, 2000)
    counts = [fresh.count("blue"), fresh.count("canary")]
    assert _chi2_even(counts) < CHI2_1DF_P001, counts
    print(f"\npersistent 95/5 -> 50/50: {moved}/2000 existing sessions moved; new sessions {counts}")


def test_a_flip_moves_every_session(sealed: tuple[Dataplane, Path]) -> None:
    dp, _ = sealed
    _publish(dp, {"blue": 100, "green": 0})
    cookies, given = _new_sessions(dp, 500)
    assert set(given) == {"blue"}
    _publish(dp, {"blue": 0, "green": 100})
    flipped = _visit(dp, cookies)
    assert {r.backend for r in flipped} == {"green"}
    assert all(".green." in (r.cookie("ts") or "") for r in flipped)  # re-sealed to the new backend


def test_a_tampered_cookie_is_re_sessioned(sealed: tuple[Dataplane, Path]) -> None:
    dp, _ = sealed
    _publish(dp, {"blue": 99, "canary": 1})
    cookies, given = _new_sessions(dp, 200)
    on_blue = [c for c, b in zip(cookies, given, strict=True) if b == "blue"]
    forged = [c.replace(".blue.", ".canary.") for c in on_blue]
    rs = _visit(dp, forged)
    assert all("key=minted" in (r.header(DECISION) or "") for r in rs)
    assert all(r.cookie("ts") is not None and r.cookie("ts") not in forged for r in rs)
    assert sum(r.backend == "canary" for r in rs) < 10  # the weights decide, not the edit (1 % of ~198)


def test_a_stale_same_name_cookie_on_a_narrower_path_does_not_shadow_the_sealed_one(
    sealed: tuple[Dataplane, Path],
) -> None:
    """A browser sends the cookie of the longer Path first: `ts=<stale>; ts=<sealed>` keeps the session pinned, with
    no new cookie (before: re-sessioned on every request)."""
    dp, _ = sealed
    _publish(dp, {"blue": 50, "canary": 50})
    cookies, given = _new_sessions(dp, 50)
    stale = cookies[0].split(".")[0] + ".blue.AAAAAAAAAAAAAAAAAAAAAA"  # a seal that fails
    for cookie, backend in zip(cookies, given, strict=True):
        r = dp.get(HOST, headers={"cookie": f"ts={stale}; ts={cookie}"})
        assert (r.backend, r.cookie("ts")) == (backend, None), r.headers
        assert "key=cookie; path=pinned" in (r.header(DECISION) or ""), r.headers


def _restart_with_keys(dp: Dataplane, keys: Path, text: str, weights: dict[str, int]) -> None:
    keys.write_text(text)
    dp.processor.kill()
    dp.processor.start()
    _publish(dp, weights)
    # Envoy reconnects to the restarted processor: wait until requests are decided by it again.
    poll(lambda: "path=fallback" not in (dp.get(HOST).header(DECISION) or "path=fallback"), 20, "the processor back")


def test_a_rotated_key_keeps_sessions_for_the_grace_period(sealed: tuple[Dataplane, Path]) -> None:
    dp, keys = sealed
    weights = {"blue": 50, "canary": 50}
    _publish(dp, weights)
    cookies, given = _new_sessions(dp, 300)
    # Rotation: K2 signs, K1 is still accepted. Every session keeps its backend and is re-sealed with K2.
    _restart_with_keys(dp, keys, f"{K2}\n{K1}\n", {"blue": 10, "canary": 90})
    kept = _visit(dp, cookies)
    assert [r.backend for r in kept] == given
    resealed = [r.cookie("ts") for r in kept]
    assert all(c is not None and c != old for c, old in zip(resealed, cookies, strict=True))
    # Grace over: K1 is dropped. Re-sealed sessions stay; cookies only K1 signed are re-sessioned.
    _restart_with_keys(dp, keys, f"{K3}\n{K2}\n", {"blue": 10, "canary": 90})
    assert [r.backend for r in _visit(dp, [c for c in resealed if c])] == given
    stale = _visit(dp, cookies)
    assert all("key=minted" in (r.header(DECISION) or "") for r in stale)


def test_a_replica_without_keys_refuses_the_persistent_split_alone_and_serves_the_rest(dataplane: Dataplane) -> None:
    spec = split_doc(HOST, {"blue": 1}, sticky=True)
    spec["sticky"]["mode"] = "persistent"
    _, msg = dataplane.generation([spec, split_doc("other.example", {"green": 1})])
    reply = dataplane.processor.publish(msg)
    assert reply.result == reply.ACCEPTED and reply.held_number == msg.number, reply
    assert [(r.split, r.reason) for r in reply.refused] == [("default/split-0", "NoCookieKeys")], reply
    assert "no cookie keys" in reply.refused[0].message
    assert not reply.capabilities.cookie_keys
    # The rest of the generation is served; the refused split is not (held as served, and GetHeld says so).
    assert poll(lambda: dataplane.get("other.example").status == 200, 5, "the other split served")
    assert dataplane.get("other.example").backend == "green"
    assert dataplane.get(HOST).status != 200
    held = dataplane.processor.get_held()
    assert [r.split for r in held.refused] == ["default/split-0"] and not held.capabilities.cookie_keys
