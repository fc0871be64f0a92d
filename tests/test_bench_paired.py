"""devtools/bench/paired.py: two sides measured in turn and judged by neighbouring rounds — the
order the guard's revisions, the public relay and the callback's floor are measured in, and how
their rounds become one ratio. No test here times anything."""

from devtools.bench.paired import alternated, paired_rounds


def test_each_side_goes_first_in_every_other_turn():
    assert alternated(["this", "against"], 4) == [
        "this",
        "against",
        "against",
        "this",
        "this",
        "against",
        "against",
        "this",
    ]
    assert alternated(("ours", "theirs"), 3) == ["ours", "theirs", "theirs", "ours", "ours", "theirs"]


def test_one_side_alone_is_asked_once_a_turn():
    assert alternated(["this"], 2) == ["this", "this"]


def test_the_ratio_is_the_median_of_each_pairs_own_ratio():
    rates = iter([600, 300, 200, 500, 450, 300])  # a busy stretch in the second pair
    result = paired_rounds(lambda side: {"rate": next(rates), "errors": 0}, ("ours", "theirs"), 3)
    assert result["ratios"] == [2.0, 2.5, 1.5]
    assert result["ratio"] == 2.0
    assert result["medians"] == {"ours": 500, "theirs": 300}


def test_a_slow_stretch_that_falls_on_one_pair_moves_only_that_pairs_ratio():
    # The host is 2.4 times slower for the second pair: both sides' CPU per request grows there,
    # and that pair's own ratio stays near the others (its callback beside another pair's floor
    # would read 3.0 / 0.5 = 6).
    web_ms = iter([1.5, 0.5, 1.2, 3.0, 1.5, 0.5])
    result = paired_rounds(lambda side: {"web_ms": next(web_ms), "errors": 0}, ("callback", "floor"), 3, "web_ms")
    assert [r["side"] for r in result["rounds"]] == ["callback", "floor", "floor", "callback", "callback", "floor"]
    assert result["ratios"] == [3.0, 2.5, 3.0]
    assert result["ratio"] == 3.0


def test_errors_of_either_side_are_counted():
    result = paired_rounds(lambda side: {"rate": 100, "errors": 1 if side == "theirs" else 0}, ("ours", "theirs"), 2)
    assert result["errors"] == 2


def test_a_pair_with_a_round_that_measured_nothing_is_left_out_not_made_endless():
    rates = iter([10, 5, 0, 10, 12, 6])  # the second pair's first round answered nothing
    result = paired_rounds(lambda side: {"rate": next(rates), "errors": 0}, ("ours", "theirs"), 3)
    assert result["ratios"] == [2.0, None, 2.0]
    assert result["ratio"] == 2.0


def test_nothing_measured_gives_no_ratio():
    result = paired_rounds(lambda side: {"rate": None, "errors": 1}, ("ours", "theirs"), 2)
    assert result["ratios"] == [None, None]
    assert result["ratio"] is None
    assert result["medians"] == {"ours": None, "theirs": None}
