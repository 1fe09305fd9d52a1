"""What local mode's log and the demo's console say a change did: the planner's figures, per the split's mode."""

from __future__ import annotations

from trafficsplit.core.control.change import describe_change
from trafficsplit.core.control.plan import plan
from trafficsplit.core.control.spec import parse_split
from trafficsplit.core.model.splitspec import SplitSpec
from trafficsplit.core.model.weights import parse_weights


def spec(weights: str, **extra: object) -> SplitSpec:
    backends = [
        {
            "name": n,
            "weight": int(w),
            "endpoints": [f"127.0.0.1:{9000 + i}"],
            **({"drain": True} if n == extra.get("drain") else {}),
        }
        for i, (n, w) in enumerate(pair.split("=") for pair in weights.split(","))
    ]
    body: dict[str, object] = {"hosts": ["shop.local"], "backends": backends, "sticky": {"cookie": {"name": "c"}}}
    if "mode" in extra:
        body["sticky"] = {"mode": extra["mode"], "cookie": {"name": "c"}}
    if "assignment" in extra:
        body["assignment"] = extra["assignment"]
    return parse_split("default", "shop", body)


def test_a_ramp_keeping_the_total_says_what_plan_says() -> None:
    note = describe_change(spec("blue=95,green=0,canary=5"), spec("blue=90,green=0,canary=10"))
    assert note is not None and note.warnings == ()
    expected = plan(parse_weights("blue=95,green=0,canary=5"), parse_weights("blue=90,green=0,canary=10"))
    share = f"{float(expected.moved_share) * 100:.2f}%"
    assert note.summary == f"default/shop: blue 95 → 90, green 0, canary 5 → 10; moves {share} of sessions " + (
        f"({', '.join(f'{m.source} → {m.target} {float(m.share) * 100:.2f}%' for m in expected.moves)})"
    )


def test_a_changed_total_warns_with_the_minimum_and_the_weights_that_keep_the_total() -> None:
    note = describe_change(spec("stable=95,canary=5"), spec("stable=95,canary=10"))
    assert note is not None
    p = plan(parse_weights("stable=95,canary=5"), parse_weights("stable=95,canary=10"))
    assert p.suggestion is not None
    (warning,) = note.warnings
    assert warning.startswith("default/shop: the total changed (100 → 105): ")
    assert f"{float(p.moved_share) * 100:.2f}% moved where {float(p.minimum_share) * 100:.2f}% would do" in warning
    assert p.suggestion.weights.format() in warning


def test_persistent_counts_only_sessions_set_to_zero_without_drain() -> None:
    flip = describe_change(spec("blue=100,green=0", mode="persistent"), spec("blue=0,green=100", mode="persistent"))
    assert flip is not None and "moves 100.00% of existing sessions" in flip.summary
    drain = describe_change(
        spec("blue=100,green=0", mode="persistent"), spec("blue=0,green=100", mode="persistent", drain="blue")
    )
    assert drain is not None and "moves 0.00% of existing sessions" in drain.summary
    assert "blue draining" in drain.summary and drain.warnings == ()


def test_minimal_added_withdrawn_and_unchanged() -> None:
    note = describe_change(spec("a=50,b=50", assignment="minimal"), spec("a=40,b=70", assignment="minimal"))
    assert note is not None and "(assignment minimal)" in note.summary and note.warnings == ()
    assert describe_change(None, spec("a=1")) == describe_change(None, spec("a=1"))
    added = describe_change(None, spec("a=1,b=0"))
    assert added is not None and added.summary == "default/shop: added, weights a 1, b 0"
    gone = describe_change(spec("a=1"), None)
    assert gone is not None and gone.summary == "default/shop: withdrawn"
    assert describe_change(spec("a=1"), spec("a=1")) is None
