"""Shared pytest set-up: fixtures live in tests/support as plugins, so each tier imports only what it uses."""

pytest_plugins: list[str] = [
    "tests.support.controlplane",
    "tests.support.netns",
    "tests.support.dataplane",
    "tests.support.operator",
]
