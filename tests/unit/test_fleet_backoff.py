import random

from trafficsplit.operator.fleet import REFUSED_MAX, REFUSED_MIN, Backoff


class Upper(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return b


class Lower(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return a


def test_each_pause_doubles_up_to_the_cap_within_its_upper_half_and_a_reset_starts_over() -> None:
    b = Backoff()
    assert [b.pause(Upper()) for _ in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    b.reset()
    assert [b.pause(Lower()) for _ in range(3)] == [0.5, 1.0, 2.0]
    assert (REFUSED_MIN, REFUSED_MAX) == (1.0, 30.0)  # the publish refusal's curve, docs/security.md says so
