"""Level readiness: the rfcs#102 criteria, one verdict each (no database)."""

from datetime import UTC, datetime, timedelta

from relay.levels import criteria as rules
from relay.policy.verdicts import State
from relay.results.excused import AdjustedRates, Evidence, ExcusedJob
from relay.tallies.histograms import EDGES
from relay.tallies.tally import Tally

NOW = datetime(2026, 12, 2, 12, tzinfo=UTC)
LONG_AGO = NOW - timedelta(days=60)


def readiness(level, tally14, tally7, *args, **kwargs):
    """relay.levels.criteria.readiness with each tally's per-run end-to-end p50 (relay.levels.e2e computes it from
    the runs; these tests give it with the tally)."""
    kwargs.setdefault("e2e14", getattr(tally14, "e2e_p50", None))
    kwargs.setdefault("e2e7", getattr(tally7, "e2e_p50", None))
    return rules.readiness(level, tally14, tally7, *args, **kwargs)


def _bin(seconds: float) -> int:
    return next((i for i, edge in enumerate(EDGES) if seconds < edge), len(EDGES))


def tally(passed=95, failed=5, timed_out=0, queue=600.0, execution=3600.0, e2e=None, jobs=None) -> Tally:
    """A backend whose jobs all took the same times."""
    t = Tally()
    t.verdicts.update({State.SUCCESS: passed, State.FAILURE: failed, State.TIMED_OUT: timed_out})
    t.first_passed = passed
    n = jobs or passed + failed + timed_out
    for histogram, seconds in ((t.queue, queue), (t.execution, execution), (t.e2e, e2e or queue + execution)):
        histogram.add(_bin(seconds), n, seconds * n)
    t.e2e_p50 = e2e or queue + execution
    return t


def criteria(result, which="promotion") -> dict:
    return {c.key: c for c in getattr(result, which)}


def test_it_calls_a_healthy_l2_backend_ready_for_l3():
    result = readiness("L2", tally(), tally(), LONG_AGO, LONG_AGO, NOW)
    assert result.outlook == "ready" and result.headline.startswith("Ready for L3")
    assert all(c.met for c in result.promotion)


def test_it_needs_a_pass_rate_of_at_least_ninety_percent_inclusive():
    at_ninety = criteria(readiness("L2", tally(passed=90, failed=10), tally(), LONG_AGO, LONG_AGO, NOW))["pass_rate"]
    below = criteria(readiness("L2", tally(passed=89, failed=11), tally(), LONG_AGO, LONG_AGO, NOW))["pass_rate"]
    assert at_ninety.met is True and at_ninety.value == "90.0 %" and at_ninety.threshold == "≥ 90 %"
    assert below.met is False


def excused(n: int) -> list:
    return [
        ExcusedJob("a" * 40, i, f"job {i}", (Evidence("baseline", "shared with the reference", "/c#x"),))
        for i in range(n)
    ]


def test_the_adjusted_pass_rate_decides_by_default_and_the_headline_says_why():
    raw = tally(passed=80, failed=20)
    adjusted = AdjustedRates(raw.rates, excused(15))  # 80 of 85 counted: 94.1 %
    result = readiness("L3", tally(), raw, LONG_AGO, LONG_AGO, NOW, None, adjusted)
    pass_rate = criteria(result, "demotion")["pass_rate"]
    assert pass_rate.met is True and pass_rate.value == "94.1 %"
    assert "raw 80.0 %" in pass_rate.note and "15 failed jobs excused" in pass_rate.note
    assert result.outlook == "holds"
    assert "raw pass rate over 7 days is 80.0 %" in result.headline and "94.1 %" in result.headline


def test_the_raw_pass_rate_decides_when_the_registry_says_so():
    raw = tally(passed=80, failed=20)
    result = readiness("L3", tally(), raw, LONG_AGO, LONG_AGO, NOW, None, AdjustedRates(raw.rates, excused(15)), "raw")
    assert criteria(result, "demotion")["pass_rate"].met is False
    assert result.outlook == "at_risk" and "pass rate" in result.headline and "excused as" not in result.headline


def test_the_adjusted_rate_does_not_save_a_backend_failing_on_its_own():
    raw = tally(passed=80, failed=20)
    result = readiness("L3", tally(), raw, LONG_AGO, LONG_AGO, NOW, None, AdjustedRates(raw.rates, excused(3)))
    assert criteria(result, "demotion")["pass_rate"].value == "82.5 %"
    assert result.outlook == "at_risk"


def test_it_needs_fewer_than_one_percent_timeouts():
    result = readiness("L3", tally(), tally(passed=98, failed=0, timed_out=2), LONG_AGO, LONG_AGO, NOW)
    assert criteria(result, "demotion")["timeouts"].met is False
    assert result.outlook == "at_risk" and "timeout rate" in result.headline


def test_it_needs_an_average_queue_under_thirty_minutes():
    assert criteria(readiness("L2", tally(queue=31 * 60), tally(), LONG_AGO, LONG_AGO, NOW))["queue"].met is False
    assert criteria(readiness("L2", tally(queue=29 * 60), tally(), LONG_AGO, LONG_AGO, NOW))["queue"].met is True


def test_it_needs_an_end_to_end_median_under_three_hours():
    slow = criteria(readiness("L2", tally(e2e=3 * 3600 + 60), tally(), LONG_AGO, LONG_AGO, NOW))["e2e"]
    quick = criteria(readiness("L2", tally(e2e=2 * 3600), tally(), LONG_AGO, LONG_AGO, NOW))["e2e"]
    assert (slow.met, quick.met) == (False, True)


def test_an_end_to_end_median_of_exactly_three_hours_is_not_under_three_hours():
    at = criteria(readiness("L2", tally(), tally(), LONG_AGO, LONG_AGO, NOW, e2e14=3 * 3600.0))["e2e"]
    below = criteria(readiness("L2", tally(), tally(), LONG_AGO, LONG_AGO, NOW, e2e14=3 * 3600.0 - 1))["e2e"]
    assert (at.met, below.met) == (False, True) and at.threshold == "< 3 h"


def test_the_other_maxima_are_strict_at_their_boundaries_too():
    at = criteria(readiness("L2", tally(queue=30 * 60), tally(), LONG_AGO, LONG_AGO, NOW))["queue"]
    assert at.met is False
    one_percent = criteria(readiness("L2", tally(passed=99, failed=0, timed_out=1), tally(), LONG_AGO, LONG_AGO, NOW))
    assert one_percent["timeouts"].measured == 0.01 and one_percent["timeouts"].met is False


def test_no_run_is_no_end_to_end_data_never_met_or_missed():
    result = readiness("L3", tally(), tally(), LONG_AGO, LONG_AGO, NOW, e2e7=None)
    assert criteria(result, "demotion")["e2e"].met is None and criteria(result, "demotion")["e2e"].value == "no data"


def test_it_needs_fewer_than_one_percent_of_jobs_running_over_three_hours():
    assert (
        criteria(readiness("L2", tally(execution=4 * 3600, e2e=60), tally(), LONG_AGO, LONG_AGO, NOW))["overrun"].met
        is False
    )


def test_it_needs_a_month_at_level_and_two_weeks_of_data_for_promotion_only():
    result = readiness("L2", tally(), tally(), NOW - timedelta(days=20), NOW - timedelta(days=10), NOW)
    promotion = criteria(result)
    assert (promotion["time_at_level"].met, promotion["data_days"].met) == (False, False)
    assert "time_at_level" not in criteria(result, "demotion")
    assert result.headline == "Not ready for L3 yet: a month at its level, two weeks of data."


def test_it_never_counts_missing_data_as_met():
    result = readiness("L2", Tally(), Tally(), LONG_AGO, None, NOW)
    assert {c.verdict for c in result.promotion if c.key != "time_at_level"} == {"no data"}
    assert result.outlook == "no_data" and result.change is None


def test_it_says_an_l3_backend_that_meets_the_criteria_keeps_its_level():
    result = readiness("L3", tally(), tally(), LONG_AGO, LONG_AGO, NOW)
    assert result.outlook == "holds" and "keeps L3" in result.headline
    kept = [promotion.key for promotion, demotion in result.rows if demotion is not None]
    assert kept == ["timeouts", "pass_rate", "e2e"]  # upstream's demotion criteria; queue, overrun, tenure promote only


def test_a_slow_queue_alone_does_not_put_an_l3_backend_at_risk():
    result = readiness("L3", tally(), tally(queue=3600.0), LONG_AGO, LONG_AGO, NOW)
    assert result.outlook == "holds"


def test_it_does_not_judge_l1_backends_that_report_no_results():
    result = readiness("L1", Tally(), Tally(), LONG_AGO, None, NOW)
    assert result.outlook == "n/a" and not result.rows
