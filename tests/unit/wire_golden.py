"""The wire's own goldens in tests/testdata/wire/: the Envoy resources of one sample generation
(`wire_envoy_resources.json`: its clusters, endpoints and routes, as the snapshot holds them) and the bootstrap of one
data-plane pod (`wire_bootstrap.json`). tests/unit/test_wire_envoy.py compares them; regenerate every golden with
`python -m tests.gen_golden`.
"""

from __future__ import annotations

import json
from pathlib import Path

from google.protobuf import json_format
from google.protobuf.message import Message

from trafficsplit.core.control.compiler import assemble_generation, compile_split
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.compiled import Endpoint
from trafficsplit.core.model.generation import Generation
from trafficsplit.wire import snapshot
from trafficsplit.wire.bootstrap import Address, BootstrapOptions, bootstrap_json

CASES = Path(__file__).resolve().parents[1] / "testdata" / "wire"


def sample_generation(number: int = 7) -> Generation:
    shop = parse_split(
        "prod",
        "shop",
        {
            "hosts": ["shop.example", "www.shop.example"],
            "backends": [
                {"name": "stable", "weight": 90, "port": 8080},
                {"name": "canary", "weight": 10, "port": 8080},
            ],
            "sticky": {"cookie": {"name": "ts", "maxAge": 3600}, "endpointAffinity": True},
            "debugHeaders": True,
        },
    )
    api = parse_split(
        "prod",
        "api",
        {"hosts": ["api.example"], "backends": [{"name": "blue", "weight": 1}, {"name": "green", "weight": 0}]},
    )
    eps = {
        "stable": [Endpoint("10.0.0.1", 8080), Endpoint("10.0.0.2", 8080, ready=False)],
        "canary": [Endpoint("10.0.1.1", 8080, ready=False)],  # no ready endpoint: fails over
    }
    gen, rejected = assemble_generation(
        number,
        [
            compile_split(shop, eps),
            compile_split(api, {"blue": [Endpoint("10.1.0.1", 80)], "green": [Endpoint("10.1.1.1", 80)]}),
        ],
    )
    assert not rejected
    return gen


def _json(resources: dict[str, Message]) -> dict[str, object]:
    return {
        name: json_format.MessageToDict(msg, preserving_proto_field_name=True)
        for name, msg in sorted(resources.items())
    }


def render() -> dict[str, str]:
    """`{file name: text}` of every wire golden, from the code."""
    res = snapshot.resources(sample_generation())
    assert res.routes is not None
    doc = {
        "clusters": _json(dict(res.clusters)),
        "endpoints": _json(dict(res.endpoints)),
        "routes": _json(dict(res.routes)),
    }
    opts = BootstrapOptions(
        node_id="gw-0",
        listen=Address("0.0.0.0", 8080),
        extproc=Address(path="/run/trafficsplit/extproc.sock"),
        ads=Address(path="/run/trafficsplit/extproc.sock"),
        admin=Address("127.0.0.1", 9901),
    )
    return {
        "wire_envoy_resources.json": json.dumps(doc, indent=2, sort_keys=True) + "\n",
        "wire_bootstrap.json": bootstrap_json(opts),
    }


def regenerate() -> list[Path]:
    written: list[Path] = []
    for name, text in render().items():
        path = CASES / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
