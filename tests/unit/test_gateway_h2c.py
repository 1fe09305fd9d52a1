"""A backendRef to a Service port whose appProtocol is `kubernetes.io/h2c` (HTTPRouteBackendProtocolH2C): Envoy speaks
HTTP/2 with prior knowledge to it, HTTP/1.1 (its default) to every other port; the flag goes through the wire, and a
Service whose port changes appProtocol is translated again (the rule memo keys on it)."""

from __future__ import annotations

from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2

from tests.unit.test_gateway_translate import CLASS, gateway, route
from trafficsplit.core.control.resolve import ServiceInfo, ServicePort
from trafficsplit.core.gatewayapi.httproute import parse_httproute
from trafficsplit.core.gatewayapi.objects import parse_gateway
from trafficsplit.core.gatewayapi.translate import Inputs, TranslationMemo, gateway_content, translate
from trafficsplit.core.model.generation import Generation
from trafficsplit.operator.cluster import service_from_body
from trafficsplit.wire import envoy
from trafficsplit.wire.generation import generation_from_proto, generation_to_proto


def _service(app_protocol: str = "") -> ServiceInfo:
    return ServiceInfo("ns", "a", (ServicePort(name="http", port=80, target_port=8080, app_protocol=app_protocol),))


def _gen(svc: ServiceInfo, memo: TranslationMemo | None = None) -> Generation:
    r = route(rules=[{"backendRefs": [{"name": "a", "port": 80}]}])
    inputs = Inputs(
        classes=(CLASS,),
        gateways=(parse_gateway(gateway()),),
        routes=(parse_httproute(r),),
        services={("ns", "a"): svc},
    )
    return gateway_content(translate(inputs, memo) if memo else translate(inputs), "ns/gw").stamp(1)


def _http2(gen: Generation) -> list[bool]:
    out = []
    for split in gen.splits:
        for b in split.backends:
            c = envoy.backend_cluster(b, split.endpoint_affinity)
            opts = c.typed_extension_protocol_options.get(envoy.HTTP_PROTOCOL_OPTIONS)
            if opts is None:
                out.append(False)
                continue
            h = http_protocol_options_pb2.HttpProtocolOptions()
            assert opts.Unpack(h)
            out.append(h.explicit_http_config.HasField("http2_protocol_options"))
    return out


def test_an_h2c_service_port_gets_an_http2_cluster_and_any_other_port_http1() -> None:
    assert _http2(_gen(_service("kubernetes.io/h2c"))) == [True]
    assert _http2(_gen(_service())) == [False]
    assert _http2(_gen(_service("kubernetes.io/ws"))) == [False]
    assert _http2(_gen(_service("http"))) == [False]


def test_the_h2c_flag_goes_through_the_publish_wire() -> None:
    gen = _gen(_service("kubernetes.io/h2c"))
    msg = generation_to_proto(gen, origin="op")
    assert [b.h2c for s in msg.splits for b in s.backends] == [True]
    back = generation_from_proto(msg)
    assert back.splits == gen.splits
    assert _http2(back) == [True]


def test_a_service_port_that_becomes_h2c_is_translated_again() -> None:
    memo = TranslationMemo()
    assert _http2(_gen(_service(), memo)) == [False]
    assert _http2(_gen(_service("kubernetes.io/h2c"), memo)) == [True]
    assert _http2(_gen(_service(), memo)) == [False]


def test_the_operator_reads_a_ports_app_protocol() -> None:
    body = {
        "metadata": {"name": "a", "namespace": "ns"},
        "spec": {"ports": [{"name": "grpc", "port": 8081, "targetPort": 3001, "appProtocol": "kubernetes.io/h2c"},
                           {"name": "http", "port": 8080, "targetPort": 3000}]},
    }  # fmt: skip
    svc = service_from_body(body)
    assert (svc.h2c(8081), svc.h2c(8080), svc.h2c(9)) == (True, False, False)
