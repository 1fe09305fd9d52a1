"""Test pods: backends in their own network namespaces are reachable by address and leave nothing behind."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.support.netns import Pod, TestPods, link_exists, list_netns

pytestmark = pytest.mark.netns


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status, dict(resp.headers.items()), resp.read()


def test_two_pods_answer_with_their_names(testpods: TestPods) -> None:
    blue, green = testpods.start("blue"), testpods.start("green")
    assert blue.ip != green.ip
    assert not blue.ip.startswith("127.")

    for pod in (blue, green):
        status, headers, body = get(pod.url)
        assert status == 200
        assert body == pod.name.encode()
        assert headers["x-backend"] == pod.name

    _, _, echoed = get(green.url + "echo", {"x-probe": "42"})
    doc = json.loads(echoed)
    assert doc["name"] == "green"
    assert doc["headers"]["x-probe"] == "42"


def test_teardown_removes_namespaces_and_links(tmp_path: Path) -> None:
    with TestPods(log_dir=tmp_path) as pods:
        started: list[Pod] = [pods.start("a"), pods.start("b")]
        assert {p.netns for p in started} <= set(list_netns())
        assert all(link_exists(p.host_if) for p in started)
        assert get(started[0].url)[2] == b"a"

    assert not {p.netns for p in started} & set(list_netns())
    assert not any(link_exists(p.host_if) for p in started)
    with pytest.raises(OSError):
        get(started[0].url)


def test_teardown_after_a_failure_inside_the_block(tmp_path: Path) -> None:
    started: list[Pod] = []
    with pytest.raises(RuntimeError, match="boom"), TestPods(log_dir=tmp_path) as pods:
        started.append(pods.start("c"))
        raise RuntimeError("boom")
    assert started[0].netns not in list_netns()
    assert not link_exists(started[0].host_if)
