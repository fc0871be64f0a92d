"""Two sides measured in turn, and judged by neighbouring rounds: the one way the benchmark
compares two things on a host whose speed drifts (docs/performance.md, "What this host does to a
ratio"). A ratio of two figures taken minutes apart moves with the host; a ratio of two rounds
taken seconds apart, each side first as often as last, mostly does not.

Used by the regression guard (this tree against a revision, devtools/bench/cost.py), the public
relay beside us (devtools/bench/public_relay.py) and the callback's floor (the callback against
the empty view, devtools/bench/figures.py)."""

from statistics import median


def alternated(sides: list[str] | tuple[str, ...], rounds: int) -> list[str]:
    """A B, B A, A B …: `rounds` turns of every side, each side first as often as last, so a drift
    of the host's speed within a turn favours neither."""
    order: list[str] = []
    for r in range(rounds):
        order += list(sides) if r % 2 == 0 else list(reversed(sides))
    return order


def paired_rounds(measure, sides: tuple[str, str], pairs: int, value: str = "rate") -> dict:
    """`measure(side)` (→ a dict with `value` and "errors") for each side in turn (`alternated`);
    judged by the median of each pair's own ratio, first side's `value` ÷ the second's."""
    first, second = sides
    rounds = [{"side": side, **measure(side)} for side in alternated(sides, pairs)]
    ratios = [_pair_ratio(rounds[2 * i : 2 * i + 2], first, second, value) for i in range(pairs)]
    return {
        "rounds": rounds,
        "ratios": ratios,
        "ratio": round(median(ratios), 3),
        first: round(median(r[value] for r in rounds if r["side"] == first), 3),
        second: round(median(r[value] for r in rounds if r["side"] == second), 3),
        "errors": sum(r["errors"] for r in rounds),
    }


def _pair_ratio(pair: list[dict], first: str, second: str, value: str) -> float:
    values = {r["side"]: r[value] for r in pair}
    return round(values[first] / values[second], 3) if values[second] else float("inf")
