"""Flags, the file source (parse, reload, last good kept) and the Lease decisions: the operator's pure edges."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from pathlib import Path

import pytest

from trafficsplit.core.control.resolve import SplitObject
from trafficsplit.core.control.status import EventIntent, SplitStatus, StatusResult
from trafficsplit.core.model.condition import Condition
from trafficsplit.core.model.vocabulary import EventReason, EventType
from trafficsplit.operator.config import parse_config
from trafficsplit.operator.filesource import FileSource, log_status, parse_documents
from trafficsplit.operator.leader import lease_decision, micro_time

GOOD = """\
apiVersion: trafficsplit.dev/v1alpha1
kind: TrafficSplit
metadata: {name: shop}
spec:
  hosts: [shop.local]
  backends:
    - {name: stable, weight: 95, endpoints: ["127.0.0.1:9001"]}
    - {name: canary, weight: 5, endpoints: ["127.0.0.1:9002"]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
"""


def test_config_flags_and_env() -> None:
    cfg = parse_config(["--dataplane", "a=127.0.0.1:1,127.0.0.1:2", "--namespaces", "x, y"], {})
    assert [r.name for r in cfg.static_dataplanes] == ["a", "127.0.0.1:2"]
    assert cfg.namespaces == ("x", "y") and cfg.leader_election and not cfg.local
    env = {"TRAFFICSPLIT_GATEWAY_SERVICE": "gw", "POD_NAMESPACE": "ts-system", "POD_NAME": "op-0"}
    cfg = parse_config([], env)
    assert (cfg.gateway_service, cfg.gateway_namespace, cfg.identity, cfg.namespaces) == ("gw", "ts-system", "op-0", ())
    cfg = parse_config(["--file-source", "/tmp/x", "--dataplane", "127.0.0.1:1"], {})
    assert cfg.local and not cfg.leader_election and cfg.empty_grace == 60
    local = ["--file-source", "/tmp/x", "--dataplane", "127.0.0.1:1"]
    assert parse_config([*local, "--empty-grace", "5"], {}).empty_grace == 5
    with pytest.raises(SystemExit):
        parse_config(["--file-source", "/tmp/x", "--dataplane", "127.0.0.1:1", "--empty-grace", "0"], {})
    with pytest.raises(SystemExit):
        parse_config([], {})  # neither discovery nor static replicas
    with pytest.raises(SystemExit):
        parse_config(["--dataplane", "127.0.0.1:1", "--lease-duration", "1", "--lease-renew", "2"], {})


def test_gateway_api_flags_need_kubernetes_mode() -> None:
    base = ["--gateway-service", "gw"]
    assert not parse_config(base, {}).gateway_api
    files = ["--dataplane-settings", "/s.json"]
    cfg = parse_config([*base, "--gateway-api", "true", *files], {})
    assert cfg.gateway_api and cfg.dataplane_settings == "/s.json"
    env = {"TRAFFICSPLIT_GATEWAY_API": "true", "TRAFFICSPLIT_DATAPLANE_SETTINGS": "/s.json"}
    assert parse_config(base, env).gateway_api
    local = ["--file-source", "/tmp/x", "--dataplane", "127.0.0.1:1"]
    # Served without provisioning (the publish Services made otherwise) when no settings file is given.
    assert parse_config([*base, "--gateway-api", "true"], {}).dataplane_settings is None
    # The Envoy bootstrap is no operator input any more (the data-plane pod makes its own): the flag is refused.
    for argv in ([*local, "--gateway-api", "true", *files], [*base, "--dataplane-bootstrap", "/b.json"]):
        with pytest.raises(SystemExit):
            parse_config(argv, {})


def test_no_gateway_is_said_explicitly_and_only_with_gateway_api() -> None:
    """A Gateway-API-only operator (the chart's gateway.enabled=false): no TrafficSplit data plane, said by a flag
    rather than by leaving both targets out, which stays the error it was (a forgotten flag is not a mode)."""
    api = ["--gateway-api", "true"]
    cfg = parse_config(["--no-gateway", *api], {})
    assert cfg.no_gateway and cfg.gateway_api and cfg.gateway_service is None and cfg.static_dataplanes == ()
    assert cfg.discovered_gateway is None and cfg.gateway_label == "none"
    assert parse_config([], {"TRAFFICSPLIT_NO_GATEWAY": "true", "TRAFFICSPLIT_GATEWAY_API": "true"}).no_gateway
    # The other two answers keep theirs.
    found = parse_config(["--gateway-service", "gw", "--gateway-namespace", "ts"], {})
    assert not found.no_gateway and (found.discovered_gateway, found.gateway_label) == (("ts", "gw"), "ts/gw")
    static = parse_config(["--dataplane", "127.0.0.1:1"], {})
    assert (static.discovered_gateway, static.gateway_label) == (None, "static")
    refused = {
        "excludes --gateway-service": ["--no-gateway", *api, "--gateway-service", "gw"],
        "excludes --gateway-service and --dataplane": ["--no-gateway", *api, "--dataplane", "127.0.0.1:1"],
        "needs Kubernetes mode": ["--no-gateway", *api, "--file-source", "/tmp/x"],
        "needs --gateway-api true": ["--no-gateway"],
        "or --no-gateway (Gateway API only)": api,  # neither target nor --no-gateway
    }
    for message, argv in refused.items():
        with pytest.raises(SystemExit, match=re.escape(message)):
            parse_config(argv, {})


def test_parse_documents_reads_trafficsplits_only() -> None:
    loaded = parse_documents(GOOD, "a.yaml")
    assert loaded.problems == ()
    (s,) = loaded.splits
    assert (s.namespace, s.name) == ("default", "shop")


def test_parse_documents_reports_field_messages() -> None:
    bad = GOOD.replace("weight: 95", "weight: -1")
    loaded = parse_documents(bad, "a.yaml")
    assert loaded.splits == ()
    assert any("a.yaml[0] default/shop: spec.backends[0].weight" in p for p in loaded.problems)
    assert parse_documents("{: nope", "b.yaml").problems[0].startswith("b.yaml:1:")


def _write(p: Path, text: str, bump: int) -> None:
    p.write_text(text)
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + bump))  # make the change visible even within one tick


def test_file_source_reload_keeps_the_last_good_content(tmp_path: Path) -> None:
    src = FileSource(tmp_path, settle=0)
    f = tmp_path / "shop.yaml"
    _write(f, GOOD, 0)
    assert src.reload() and list(src.splits()) == [("default", "shop")]
    assert not src.reload()  # unchanged directory: nothing to do
    _write(f, GOOD.replace("weight: 95", "weight: 2000000"), 10_000_000)
    assert not src.reload()  # invalid: skipped, reported, last good kept
    assert src.errors[f] and src.splits()[("default", "shop")].spec["backends"][0]["weight"] == 95
    _write(f, GOOD.replace("weight: 95", "weight: 90"), 20_000_000)
    assert src.reload() and src.splits()[("default", "shop")].spec["backends"][0]["weight"] == 90
    assert f not in src.errors
    f.unlink()
    assert src.reload() and src.splits() == {}


def test_lease_decisions() -> None:
    now = 1_000_000.0
    assert lease_decision(None, "me", now).action == "create"
    held = {"holderIdentity": "other", "renewTime": micro_time(now - 5), "leaseDurationSeconds": 15}
    assert lease_decision(held, "me", now).action == "wait"
    assert lease_decision(held, "me", now + 11).action == "take"  # expired
    assert lease_decision({**held, "holderIdentity": "me"}, "me", now).action == "renew"
    assert lease_decision({**held, "holderIdentity": ""}, "me", now).action == "take"  # released


class Clock:
    """The file source's clock (wall time, as file mtimes are)."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _put(p: Path, text: str | bytes, mtime: float) -> None:
    """Write `p` with its mtime set to `mtime` (the clock's time of the write)."""
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    os.utime(p, ns=(int(mtime * 1e9), int(mtime * 1e9)))


OTHER = GOOD.replace("name: shop}", "name: other}").replace("shop.local", "other.local")


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("apiVersion: trafficsplit.dev/v1alpha1\nkind: TrafficSplit\nmetadata: oops\nspec: {}\n", "metadata"),
        (GOOD.encode().replace(b"shop.local", b"sh\xffop.local"), "UTF-8"),
    ],
)
def test_one_bad_file_is_named_and_does_not_freeze_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str | bytes, why: str
) -> None:
    clock = Clock()
    src = FileSource(tmp_path, clock=clock)
    _put(tmp_path / "bad.yaml", GOOD, clock.now - 5)
    _put(tmp_path / "other.yaml", OTHER, clock.now - 5)
    assert src.reload() and set(src.splits()) == {("default", "shop"), ("default", "other")}
    _put(tmp_path / "bad.yaml", content, clock.now)
    clock.now += 0.5
    src.reload()  # a changed stamp is read once it held still for a scan
    clock.now += 1.5
    src.reload()
    assert [p.name for p in src.errors] == ["bad.yaml"] and why in " ".join(src.errors[tmp_path / "bad.yaml"])
    assert any("bad.yaml" in r.getMessage() and why in r.getMessage() for r in caplog.records)
    assert ("default", "shop") in src.splits()  # that file's last good form keeps serving
    _put(tmp_path / "other.yaml", OTHER.replace("weight: 95", "weight: 90"), clock.now)
    clock.now += 0.5
    src.reload()
    clock.now += 1.5
    assert src.reload()
    assert src.splits()[("default", "other")].spec["backends"][0]["weight"] == 90  # the others still move


def test_an_unknown_field_is_refused_as_the_crd_refuses_it() -> None:
    loaded = parse_documents(GOOD.replace("  hosts:", "  stickyy: {}\n  hosts:"), "a.yaml")
    assert loaded.splits == ()
    assert any("spec.stickyy" in p and "unknown field" in p for p in loaded.problems), loaded.problems
    loaded = parse_documents(GOOD.replace("weight: 95,", "weigth: 95, weight: 95,"), "a.yaml")
    assert any("spec.backends[0].weigth" in p for p in loaded.problems), loaded.problems


def test_namespace_and_name_are_checked_as_the_api_server_does_so_keys_cannot_collide() -> None:
    """`x/y` + `z` and `x` + `y/z` would both be the split `x/y/z` (and its clusters `x/y/z/<backend>`)."""
    a = GOOD.replace("metadata: {name: shop}", "metadata: {namespace: x/y, name: z}")
    b = GOOD.replace("metadata: {name: shop}", "metadata: {namespace: x, name: y/z}")
    assert any("metadata.namespace" in p for p in parse_documents(a, "a.yaml").problems)
    assert any("metadata.name" in p for p in parse_documents(b, "b.yaml").problems)
    assert parse_documents(GOOD.replace("{name: shop}", "{name: shop.v2}"), "c.yaml").splits  # a DNS subdomain


def test_a_second_file_with_the_same_namespace_and_name_is_refused_naming_both(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    src = FileSource(tmp_path, clock=clock)
    _put(tmp_path / "a.yaml", GOOD, clock.now - 5)
    _put(tmp_path / "b.yaml", GOOD.replace("weight: 95", "weight: 1"), clock.now - 5)
    src.reload()
    assert src.splits()[("default", "shop")].spec["backends"][0]["weight"] == 95  # the first file keeps it
    message = " ".join(src.errors.get(tmp_path / "b.yaml", ()))
    assert "a.yaml" in message and "b.yaml" in message and "default/shop" in message
    assert any("a.yaml" in r.getMessage() and "b.yaml" in r.getMessage() for r in caplog.records)


def test_a_file_missing_briefly_keeps_its_splits_and_one_gone_for_the_settle_window_is_withdrawn(
    tmp_path: Path,
) -> None:
    clock = Clock()
    src = FileSource(tmp_path, settle=1.0, clock=clock)
    f = tmp_path / "shop.yaml"
    _put(f, GOOD, clock.now - 5)
    src.reload()
    f.unlink()  # an editor's delete-and-rewrite
    clock.now += 0.7
    src.reload()
    assert ("default", "shop") in src.splits()
    _put(f, GOOD, clock.now - 5)
    clock.now += 0.7
    src.reload()
    assert ("default", "shop") in src.splits()
    f.unlink()
    clock.now += 0.5
    src.reload()  # noticed missing here
    assert ("default", "shop") in src.splits() and src.pending
    clock.now += 1.0
    assert src.reload() and src.splits() == {}
    assert not src.pending


def test_a_file_written_in_two_chunks_publishes_only_the_whole(tmp_path: Path) -> None:
    clock = Clock()
    src = FileSource(tmp_path, settle=1.0, clock=clock)
    f = tmp_path / "shop.yaml"
    whole = GOOD.split("---")[0]
    half = whole[: whole.index("    - {name: canary")]  # valid on its own: one backend at weight 95
    _put(f, half, clock.now)
    clock.now += 0.5
    src.reload()
    assert src.splits() == {} and src.pending
    _put(f, whole, clock.now)
    clock.now += 0.5
    src.reload()
    assert src.splits() == {}  # changed again: still settling
    clock.now += 0.6
    assert src.reload() and len(src.splits()[("default", "shop")].spec["backends"]) == 2
    assert not src.pending


def test_local_mode_logs_why_a_split_is_not_served(caplog: pytest.LogCaptureFixture) -> None:
    """No API server to write status to: a split refused for a host conflict says why in the log, naming its file."""
    obj = SplitObject(
        namespace="default", name="late", uid="file:b.yaml#0", generation=1, created="b.yaml#0000", spec={}, status={}
    )
    refused = Condition(
        type="Accepted",
        status="False",
        reason="HostConflict",
        message="shop.local: default/shop has it",
        observed_generation=1,
        last_transition_time=None,
    )
    asyncio.run(log_status(obj, StatusResult(SplitStatus(conditions=(refused,)), ())))
    (record,) = [r for r in caplog.records if "default/late" in r.getMessage()]
    assert "b.yaml" in record.getMessage() and "HostConflict" in record.getMessage()
    assert "shop.local: default/shop has it" in record.getMessage()


# --- reads the source cannot trust never withdraw a split ------------------------------------------------------------

COMMENTS = "# the shop's split\n# (a generator writes the rest)\n"


@pytest.mark.parametrize(("content", "state"), [("", "empty"), (COMMENTS, "comment-only"), ("---\n", "empty")])
def test_an_empty_or_comment_only_read_keeps_the_last_good_splits_and_names_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str, state: str
) -> None:
    """`gen > shop.yaml` with a slow generator: the file is empty, then holds only its leading comments, for longer
    than the settle window. That is a file being written, not a request to withdraw its split."""
    caplog.set_level(logging.INFO)
    clock = Clock()
    src = FileSource(tmp_path, clock=clock)
    f = tmp_path / "shop.yaml"
    _put(f, GOOD, clock.now - 5)
    assert src.reload() and list(src.splits()) == [("default", "shop")]
    _put(f, content, clock.now)
    for _ in range(6):  # 3 s of scans, well past the settle window
        clock.now += 0.5
        assert not src.reload()
        assert list(src.splits()) == [("default", "shop")]
    assert src.pending
    messages = [r.getMessage() for r in caplog.records if "shop.yaml" in r.getMessage()]
    assert any("empty" in m and "default/shop" in m and "keep" in m for m in messages), messages
    assert len([m for m in messages if "empty" in m]) == 1  # said once, not every scan
    _put(f, COMMENTS + GOOD.replace("weight: 95", "weight: 90"), clock.now)
    for _ in range(4):
        clock.now += 0.5
        src.reload()
    assert src.splits()[("default", "shop")].spec["backends"][0]["weight"] == 90 and not src.pending
    assert any("shop.yaml" in r.getMessage() and "again" in r.getMessage() for r in caplog.records)


def test_a_truncation_seen_with_the_old_mtime_is_not_read_as_the_new_content(tmp_path: Path) -> None:
    """ext4 during an in-place rewrite (`cp`, an editor): the new size with the old mtime, which passes a settle
    check on mtime alone. A changed stamp is read only once it held still for a scan."""
    clock = Clock()
    src = FileSource(tmp_path, clock=clock)
    f = tmp_path / "shop.yaml"
    whole = GOOD.split("---")[0]
    _put(f, whole, clock.now - 5)
    src.reload()
    half = whole[: whole.index("    - {name: canary")]  # valid on its own: one backend at weight 95
    _put(f, half, clock.now - 5)  # the half-written file, still showing the old mtime
    clock.now += 0.5
    assert not src.reload() and src.pending
    assert len(src.splits()[("default", "shop")].spec["backends"]) == 2
    _put(f, whole, clock.now - 5)  # the rest written
    clock.now += 0.5
    src.reload()
    clock.now += 0.5
    src.reload()
    assert len(src.splits()[("default", "shop")].spec["backends"]) == 2 and not src.pending


def test_a_file_that_changes_while_it_is_read_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import trafficsplit.operator.filesource as filesource

    clock = Clock()
    src = FileSource(tmp_path, settle=0, clock=clock)
    f = tmp_path / "shop.yaml"
    whole = GOOD.split("---")[0]
    _put(f, whole, clock.now - 5)
    reads: list[int] = []
    real = filesource.read_bytes

    def racing(path: Path) -> bytes:
        reads.append(1)
        if len(reads) == 1:  # a writer finishes while the first read is under way: that read saw half the file
            _put(path, whole, clock.now)
            return whole[: whole.index("    - {name: canary")].encode()
        return real(path)

    monkeypatch.setattr(filesource, "read_bytes", racing)
    assert src.reload()
    assert len(reads) == 2 and len(src.splits()[("default", "shop")].spec["backends"]) == 2


def test_a_file_empty_for_the_empty_grace_is_withdrawn_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    src = FileSource(tmp_path, clock=clock, empty_grace=60)
    f = tmp_path / "shop.yaml"
    _put(f, GOOD, clock.now - 5)
    src.reload()
    _put(f, "", clock.now)
    clock.now += 59
    src.reload()
    src.reload()
    assert ("default", "shop") in src.splits()
    clock.now += 2
    assert src.reload() and src.splits() == {}
    assert any(
        "shop.yaml" in r.getMessage() and "withdraw" in r.getMessage() and "60" in r.getMessage()
        for r in caplog.records
    )


def test_a_deleted_file_is_withdrawn_and_the_log_names_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    src = FileSource(tmp_path, clock=clock)
    f = tmp_path / "shop.yaml"
    _put(f, GOOD, clock.now - 5)
    src.reload()
    f.unlink()
    clock.now += 0.5
    src.reload()
    clock.now += 1.0
    assert src.reload() and src.splits() == {}
    assert any(
        "shop.yaml" in r.getMessage() and "deleted" in r.getMessage() and "default/shop" in r.getMessage()
        for r in caplog.records
    )


def test_a_yaml_error_names_the_file_line_and_column_on_one_line() -> None:
    (problem,) = parse_documents("spec:\n  hosts: [a\n  backends: x: y\n", "shop.yaml").problems
    assert problem.startswith("shop.yaml:3:"), problem
    assert "\n" not in problem


def test_a_file_rewritten_through_empty_states_for_longer_than_the_grace_is_not_withdrawn(tmp_path: Path) -> None:
    """The grace counts how long the file stays empty and unchanged: a generator that rewrites it every 1.5 s (each
    time empty or comment-only for 1.3 s, the whole file too briefly to be read) is never "empty for 60 s"."""
    clock = Clock()
    src = FileSource(tmp_path, clock=clock, empty_grace=60)
    f = tmp_path / "shop.yaml"
    _put(f, GOOD, clock.now - 5)
    src.reload()
    for i in range(60):  # 90 s
        _put(f, COMMENTS if i % 2 else "", clock.now)
        for _ in range(3):
            clock.now += 0.5
            src.reload()
        assert ("default", "shop") in src.splits(), i


def test_a_file_rewritten_between_the_scan_and_the_read_is_not_published_from_that_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trafficsplit.operator.filesource as filesource

    clock = Clock()
    src = FileSource(tmp_path, clock=clock)
    f = tmp_path / "shop.yaml"
    whole = GOOD.split("---")[0]
    half = whole[: whole.index("    - {name: canary")]  # valid on its own: one backend at weight 95
    _put(f, whole, clock.now - 5)
    src.reload()
    _put(f, whole.replace("weight: 95", "weight: 90"), clock.now - 3)  # an edit, settled and seen by two scans
    clock.now += 0.5
    src.reload()
    real_scan = filesource.scan

    def racing_scan(directory: Path) -> dict[Path, filesource.Stamp]:
        out = real_scan(directory)
        _put(f, half, clock.now)  # a writer starts an in-place rewrite right after the scan
        return out

    monkeypatch.setattr(filesource, "scan", racing_scan)
    clock.now += 0.5
    assert not src.reload() and src.pending
    assert len(src.splits()[("default", "shop")].spec["backends"]) == 2  # the half was not published


def test_local_mode_logs_the_events_a_cluster_would_get_but_not_each_publish(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    obj = SplitObject(
        namespace="default", name="t", uid="file:t.yaml#0", generation=1, created="t.yaml#0000", spec={}, status={}
    )
    events = (
        EventIntent(EventType.NORMAL, EventReason.DRAINED, "blue: weight 0 and no live session on 1 dataplanes"),
        EventIntent(EventType.NORMAL, EventReason.PUBLISHED, "generation 2 serves this spec on 1/1 dataplanes"),
    )
    asyncio.run(log_status(obj, StatusResult(SplitStatus(), events)))
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["default/t (t.yaml[0]): Drained: blue: weight 0 and no live session on 1 dataplanes"]
