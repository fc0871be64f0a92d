"""The search: a range of k commits decided in ceil(log2 k) probes plus two to verify, the culprit
verified only by failing with it and passing without it, and every other ending said so."""

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from relay.bisect.probes import budget_left
from relay.bisect.search import bisection_advance, bisection_claim
from relay.bisect.start import probes_needed
from relay.dispatch.results_sweep import results_sweep
from relay.models import BISECT_EVENT, Bisection, BisectProbe, Delivery, Dispatch
from relay.stats.runkinds import Figure, jobs_counted
from tests.factories import JobRunFactory, ProjectFactory

from .conftest import answer, bisection_of, open_probes, run_to_the_end, sha_of

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("k", "breaks_at"), [(2, 1), (2, 2), (3, 2), (12, 7), (17, 1), (17, 17), (64, 40)])
def test_a_range_of_k_commits_names_the_culprit_in_ceil_log2_k_probes_plus_two(xpu, k, breaks_at):
    bisection = run_to_the_end(bisection_of(xpu, k), breaks_at)
    assert bisection.state == Bisection.State.VERIFIED
    assert bisection.culprit_sha == sha_of(breaks_at)
    assert bisection.probes.filter(role="search").count() <= math.ceil(math.log2(k))
    assert bisection.probes.count() <= probes_needed(k)


def test_sixty_four_commits_cost_eight_dispatches_at_most():
    assert probes_needed(64) == 8
    assert probes_needed(12) == 6


def test_the_verification_re_runs_the_culprit_and_its_parent(xpu):
    bisection = run_to_the_end(bisection_of(xpu, 12), 7)
    runs = {p.role: p.sha for p in bisection.probes.exclude(role="search")}
    assert runs == {"culprit": sha_of(7), "parent": sha_of(6)}
    assert bisection.note == "fails with the culprit, passes on its parent"


def test_a_culprit_whose_re_run_passes_is_not_reproducible(xpu):
    bisection = run_to_the_end(
        bisection_of(xpu, 12), 7, verdict=lambda probe, honest: honest and probe.role == "search"
    )
    assert bisection.state == Bisection.State.NOT_REPRODUCIBLE
    assert bisection.culprit_sha == sha_of(7)
    assert bisection.note == "re-run: suspect passed, its parent passed"


def test_a_not_reproducible_bisection_names_no_culprit_and_calls_nothing_flaky(xpu):
    """Issue 50 item 4: the suspect that did not reproduce is nobody's culprit, and a test red on
    every trunk commit since is not 'likely flaky'."""
    from relay.models import NotificationEvent
    from relay.results.bisections import bisection_found, culprits_of_commit

    bisection = run_to_the_end(
        bisection_of(xpu, 12), 7, verdict=lambda probe, honest: honest and probe.role == "search"
    )
    found = bisection_found(bisection.pk)
    assert "flaky" not in found.sentence and "culprit of" not in found.sentence
    assert "not reproducible, no culprit named" in found.sentence
    assert culprits_of_commit(sha_of(7)) == [] and found.verified_by is None
    event = NotificationEvent.objects.get(kind="bisected")
    assert event.head_sha == sha_of(12) and event.details["culprit_sha"] is None


def test_a_parent_whose_re_run_fails_is_not_reproducible_either(xpu):
    bisection = run_to_the_end(bisection_of(xpu, 5), 3, verdict=lambda probe, honest: honest or probe.role == "parent")
    assert bisection.state == Bisection.State.NOT_REPRODUCIBLE


def test_each_probe_is_a_dispatch_of_its_own_to_the_backend_naming_the_commit(xpu):
    bisection = bisection_of(xpu, 12)
    bisection_advance(bisection.pk)
    probe = BisectProbe.objects.get()
    assert (probe.number, probe.role, probe.index, probe.sha) == (1, "search", 6, sha_of(6))
    dispatch = probe.dispatch
    assert (dispatch.project, dispatch.event_type, dispatch.head_sha, dispatch.state) == (
        xpu,
        BISECT_EVENT,
        sha_of(6),
        Dispatch.State.PENDING,
    )
    assert dispatch.delivery.guid == f"bisect-{bisection.pk}-1"


def test_a_probe_counts_for_nothing_on_its_commit(xpu):
    bisection = bisection_of(xpu, 4)
    bisection_advance(bisection.pk)
    answer(open_probes(bisection)[0], fails=True)
    assert jobs_counted(Figure.CELLS, [sha_of(2)]).count() == 0
    assert not Delivery.objects.counted().filter(head_sha=sha_of(2)).exists()
    assert not Dispatch.objects.counted().filter(head_sha=sha_of(2)).exists()


def test_an_unanswered_probe_times_out_like_any_dispatch_and_the_bisection_says_so(xpu, settings):
    bisection = bisection_of(xpu, 8)
    bisection_advance(bisection.pk)
    Dispatch.objects.update(state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(hours=7))
    results_sweep(now=timezone.now())  # the sweeper's "never started" row for the silent dispatch
    assert bisection_advance(bisection.pk) == Bisection.State.TIMED_OUT
    bisection.refresh_from_db()
    assert bisection.note.startswith("probe 1 on ") and "timed out" in bisection.note


def test_a_pending_probe_waits(xpu):
    bisection = bisection_of(xpu, 8)
    bisection_advance(bisection.pk)
    assert bisection_advance(bisection.pk) == Bisection.State.SEARCHING
    assert BisectProbe.objects.count() == 1


def test_the_daily_budget_is_never_exceeded(xpu):
    xpu.bisect_daily_budget = 3
    xpu.save()
    bisection = run_to_the_end(bisection_of(xpu, 64), 40)
    assert bisection.state == Bisection.State.OVER_BUDGET
    assert BisectProbe.objects.filter(project=xpu).count() == 3
    assert budget_left(xpu) == 0


def test_the_budget_comes_back_the_next_utc_day(xpu):
    xpu.bisect_daily_budget = 1
    xpu.save()
    bisection = bisection_of(xpu, 4)
    bisection_advance(bisection.pk)
    assert budget_left(xpu) == 0
    assert budget_left(xpu, now=timezone.now() + timedelta(days=1)) == 1


def test_probes_of_two_backends_never_mix(xpu):
    npu = ProjectFactory(full_name="Ascend/pytorch", bisect_enabled=True)
    first, second = bisection_of(xpu, 12), bisection_of(npu, 17, salt="npu")
    bisection_advance(first.pk)
    bisection_advance(second.pk)
    first, second = run_to_the_end(first, 3), run_to_the_end(second, 11)
    assert (first.culprit_sha, second.culprit_sha) == (sha_of(3), sha_of(11, "npu"))
    for bisection in (first, second):
        assert {p.dispatch.project_id for p in bisection.probes.all()} == {bisection.project_id}
        assert set(bisection.probes.values_list("sha", flat=True)) <= set(bisection.span)


def test_a_backend_runs_one_bisection_at_a_time(xpu):
    from django.db import IntegrityError, transaction

    bisection_of(xpu, 4)
    with pytest.raises(IntegrityError), transaction.atomic():
        bisection_of(xpu, 6, salt="again")


def test_a_bisection_held_by_a_live_claim_is_left_alone_and_one_whose_claim_ran_out_resumes(xpu):
    bisection = bisection_of(xpu, 12)
    assert bisection_claim(bisection.pk)
    assert bisection_advance(bisection.pk) is None
    Bisection.objects.filter(pk=bisection.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert bisection_advance(bisection.pk) == Bisection.State.SEARCHING
    assert BisectProbe.objects.count() == 1


def test_a_restart_in_the_middle_resumes_from_the_rows(xpu):
    bisection = bisection_of(xpu, 12)
    bisection_advance(bisection.pk)
    answer(open_probes(bisection)[0], fails=False)
    # the worker that would have taken the step died holding the claim
    Bisection.objects.filter(pk=bisection.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    from relay.bisect.tasks import bisections_sweep

    assert bisections_sweep() == 1
    bisection.refresh_from_db()
    assert (bisection.good_index, bisection.bad_index, bisection.probes.count()) == (6, 12, 2)
    assert run_to_the_end(bisection, 9).culprit_sha == sha_of(9)


def test_a_run_that_says_nothing_about_the_tests_ends_the_bisection_inconclusive(xpu):
    bisection = bisection_of(xpu, 4)
    bisection_advance(bisection.pk)
    answer(open_probes(bisection)[0], fails=False, conclusion="failure", tests_total=None)
    assert bisection_advance(bisection.pk) == Bisection.State.INCONCLUSIVE


def test_the_backend_s_oncall_hears_of_the_verified_culprit_in_the_pages_words(xpu):
    from relay.models import Notification, NotificationEvent, Subscription
    from relay.notify.delivery import event_message

    oncall = Subscription.objects.create(
        name="xpu oncall", project=xpu, channel="webhook", target="https://example.org/hook", origin="oncall"
    )
    bisection = run_to_the_end(bisection_of(xpu, 17), 9)
    event = NotificationEvent.objects.get(kind="bisected")
    assert event.title.startswith(
        "verified culprit of test_add_float32 on Intel XPU (by Intel XPU's own probes at L2), bisected over 17 commits in "
    )
    assert (event.head_sha, event.project, event.test_ids) == (sha_of(9), xpu, ["test_ops.TestFoo.test_add_float32"])
    assert Notification.objects.get().subscription == oncall
    message = event_message(event)
    assert message.url.endswith(f"/commit/{sha_of(9)}#backend-{xpu.pk}")
    assert message.lines[0] == bisection.note


def test_a_bisection_that_timed_out_pages_nobody(xpu):
    from relay.models import NotificationEvent

    bisection = bisection_of(xpu, 8)
    bisection_advance(bisection.pk)
    Dispatch.objects.update(state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(hours=7))
    results_sweep(now=timezone.now())
    bisection_advance(bisection.pk)
    assert not NotificationEvent.objects.filter(kind="bisected").exists()


def test_an_operator_reads_a_bisection_and_its_probes_in_the_admin(xpu, admin_client):
    bisection = run_to_the_end(bisection_of(xpu, 12), 7)
    assert admin_client.get("/admin/relay/bisection/").status_code == 200
    page = admin_client.get(f"/admin/relay/bisection/{bisection.pk}/change/").content.decode()
    assert sha_of(7) in page and "culprit re-run" in page
    assert admin_client.get("/admin/relay/bisection/add/").status_code == 403


def test_a_probe_cannot_be_re_dispatched_by_hand_past_the_budget(xpu):
    from relay.dispatch.fan_out import ResendRefused, dispatches_resend

    bisection = bisection_of(xpu, 4)
    bisection_advance(bisection.pk)
    with pytest.raises(ResendRefused, match="bisection probe"):
        dispatches_resend(BisectProbe.objects.get().dispatch.delivery, [xpu], by="alice")


def test_a_probe_s_jobs_count_in_no_level_tally(xpu, fresh_tallies):
    from relay.tallies.buckets import bucket_compute, window_buckets
    from relay.tallies.tally import tallies_merge

    bisection = bisection_of(xpu, 4)
    bisection_advance(bisection.pk)
    answer(open_probes(bisection)[0], fails=True)
    other = ProjectFactory(full_name="ROCm/pytorch")
    JobRunFactory(project=other, head_sha=sha_of(2), conclusion="failure")  # an ordinary job: counted
    tallies = tallies_merge(bucket_compute(bucket) for bucket in window_buckets(1, timezone.now()))
    assert {project_id for project_id, _ in tallies} == {other.pk}


def test_an_l2_backend_s_culprit_reaches_its_own_subscribers_only_and_names_no_upstream_pr(xpu):
    """Issue 52 item 9: a verified culprit is the backend's own word; upstream takes it from L3 up."""
    from relay.models import Notification, NotificationEvent, Subscription

    everyone = Subscription.objects.create(name="all", channel="webhook", target="https://example.org/all")
    oncall = Subscription.objects.create(
        name="xpu oncall", project=xpu, channel="webhook", target="https://example.org/hook", origin="oncall"
    )
    run_to_the_end(bisection_of(xpu, 4), 2)
    event = NotificationEvent.objects.get(kind="bisected")
    assert event.details["verified_by"] == {"backend": xpu.full_name, "label": "Intel XPU", "level": "L2"}
    assert event.details["upstream_trusted"] is False and event.details["culprit_pr"] is None
    assert [n.subscription for n in Notification.objects.all()] == [oncall]
    xpu.level, xpu.device = "L3", "xpu"
    xpu.save()
    run_to_the_end(bisection_of(xpu, 4, salt="again"), 2)
    event = NotificationEvent.objects.filter(kind="bisected").latest("id")
    assert event.details["upstream_trusted"] is True
    assert {n.subscription for n in Notification.objects.filter(event=event)} == {oncall, everyone}


def test_a_probe_reads_only_the_exact_test_failing_not_one_whose_name_ends_the_same(xpu):
    """Issue 52 item 9: `other_module.TestFooXPU.test_add_xpu_float32` failing is not the wanted
    `test_ops.TestFoo.test_add_float32` failing; the probe reads a pass."""
    from tests.factories import FailedTestFactory

    bisection = bisection_of(xpu, 2)
    bisection_advance(bisection.pk)
    probe = open_probes(bisection)[0]
    job = answer(probe, fails=False, conclusion="failure", tests_failed=1)
    other = {"classname": "other_module.TestFooXPU", "name": "test_add_xpu_float32", "file": "test/other_module.py"}
    FailedTestFactory(job_run=job, **other)
    bisection_advance(bisection.pk)
    probe.refresh_from_db()
    assert probe.outcome == BisectProbe.Outcome.PASS
