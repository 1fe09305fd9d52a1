"""Flags, the file source (parse, reload, last good kept) and the Lease decisions: the operator's pure edges."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from trafficsplit.operator.config import parse_config
from trafficsplit.operator.filesource import FileSource, parse_documents
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
    assert cfg.local and not cfg.leader_election
    with pytest.raises(SystemExit):
        parse_config([], {})  # neither discovery nor static replicas
    with pytest.raises(SystemExit):
        parse_config(["--dataplane", "127.0.0.1:1", "--lease-duration", "1", "--lease-renew", "2"], {})


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
    assert parse_documents("{: nope", "b.yaml").problems[0].startswith("b.yaml: not YAML")


def _write(p: Path, text: str, bump: int) -> None:
    p.write_text(text)
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + bump))  # make the change visible even within one tick


def test_file_source_reload_keeps_the_last_good_content(tmp_path: Path) -> None:
    src = FileSource(tmp_path)
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
