"""Two sides measured in turn, and judged by neighbouring rounds: the one way the benchmark
compares two things on a host whose speed drifts (docs/performance.md, "What this host does to a
ratio"). A ratio of two figures taken minutes apart moves with the host; a ratio of two rounds
taken seconds apart, each side first as often as last, mostly does not.

Used by the regression guard (this tree against a revision, devtools/bench/cost.py), the public
relay beside us (devtools/bench/public_relay.py) and the callback's floor (the callback against
the empty view, devtools/bench/figures.py)."""

from .load import median


def alternated(sides: list[str] | tuple[str, ...], rounds: int) -> list[str]:
    """A B, B A, A B …: `rounds` turns of every side, each side first as often as last, so a drift
    of the host's speed within a turn favours neither."""
    order: list[str] = []
    for r in range(rounds):
        order += list(sides) if r % 2 == 0 else list(reversed(sides))
    return order


def paired_rounds(measure, sides: tuple[str, str], pairs: int, value: str = "rate") -> dict:
    """`measure(side)` (→ a dict with `value` and "errors") for each side in turn (`alternated`);
    judged by the median of each pair's own ratio, first side's `value` ÷ the second's (None when
    no pair measured both)."""
    rounds = [{"side": side, **measure(side)} for side in alternated(sides, pairs)]
    ratios = pair_ratios(rounds, sides, value)
    return {
        "rounds": rounds,
        "ratios": ratios,
        "ratio": middle([r for r in ratios if r is not None]),
        "medians": {
            side: middle([r[value] for r in rounds if r["side"] == side and r[value] is not None]) for side in sides
        },
        "errors": sum(r["errors"] for r in rounds),
    }


def pair_ratios(rounds: list[dict], sides: tuple[str, str], value: str) -> list[float | None]:
    """Each pair's first side's `value` ÷ its second's; None where either was not measured (a
    round with nothing answered), so no ratio is made of nothing."""
    first, second = sides
    ratios = []
    for i in range(0, len(rounds) - 1, 2):
        values = {r["side"]: r[value] for r in rounds[i : i + 2]}
        ratios.append(round(values[first] / values[second], 3) if values[first] and values[second] else None)
    return ratios


def middle(values: list[float]) -> float | None:
    """The median (devtools.bench.load's), rounded as the figures are; None of nothing."""
    value = median(values)
    return None if value is None else round(value, 3)
