"""Shared pytest set-up: fixtures live in tests/support as plugins, so each tier imports only what it uses."""

from hypothesis import HealthCheck, settings

pytest_plugins: list[str] = [
    "tests.support.controlplane",
    "tests.support.netns",
    "tests.support.dataplane",
    "tests.support.operator",
]

# The properties check correctness, never speed (bench/ measures speed): hypothesis' default 200 ms deadline and its
# too-slow health check fail them on a loaded 2-core machine (seen: test_plan under a full parallel load).
settings.register_profile("trafficsplit", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("trafficsplit")
