import re

from trafficsplit.operator.dataplane_names import dataplane_name, publish_service_name, selector_labels

RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def test_names_fit_a_service_name_and_a_label_value_for_the_longest_gateway() -> None:
    for ns, name in (("default", "gw"), ("n" * 63, "g" * 253), ("Team-A", "edge.example.com")):
        assert RFC1035.match(publish_service_name(ns, name)) and len(publish_service_name(ns, name)) <= 63
        assert all(len(v) <= 63 for v in selector_labels(ns, name).values())


def test_names_are_unique_per_gateway_even_when_the_readable_part_is_cut() -> None:
    long = "g" * 253
    assert dataplane_name("ns", long) != dataplane_name("ns", long[:-1])
    assert dataplane_name("a-b", "c") != dataplane_name("a", "b-c")  # same readable prefix, different identity
    assert dataplane_name("default", "gw").startswith("ts-default-gw-")


def test_gateways_whose_readable_prefix_and_old_32_bit_digest_collide_get_distinct_names() -> None:
    """Found by a 2^32 search against `ts-<ns>-<name>` cut to 46 characters plus 8 hex digits: the same prefix once
    cut, and the same 32-bit digest. A tenant of `shop-storefront` could so take over `shop`'s data plane; with a
    128-bit digest no search finds a pair. The birthday pair (2^16 work) the same."""
    for (ns_a, name_a), (ns_b, name_b) in (
        (("shop", "storefront-public-gateway-production-eu-west"),
         ("shop-storefront", "public-gateway-production-eu-west-canary-blue-a-70cvbmc")),
        (("shop", "storefront-public-gateway-production-eu-west-35217"),
         ("shop-storefront", "public-gateway-production-eu-west-6590")),
    ):  # fmt: skip
        assert dataplane_name(ns_a, name_a) != dataplane_name(ns_b, name_b)
        assert publish_service_name(ns_a, name_a) != publish_service_name(ns_b, name_b)
