"""Read endpoints: deliveries, dispatches, job runs (every filter), failed tests, commits."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.models import FailedTest, JobRun, UpstreamCommit
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db


def job(project, **fields):
    defaults = {
        "project": project,
        "delivery_key": "d",
        "run_id": "1",
        "workflow_name": "ci",
        "status": "completed",
        "conclusion": "success",
        "head_sha": "a" * 40,
        "pr_number": 5,
    }
    return JobRun.objects.create(**{**defaults, **fields})


@pytest.fixture
def jobs(db):
    xpu, rocm = (
        ProjectFactory(full_name="intel/torch-xpu-ops", level="L4"),
        ProjectFactory(full_name="ROCm/pytorch", level="L3", device="rocm"),
    )
    rows = [
        job(xpu, job_name="build"),
        job(xpu, job_name="test", conclusion="failure", run_id="2"),
        job(rocm, job_name="test", status="in_progress", conclusion="", head_sha="b" * 40, pr_number=6),
        job(rocm, job_name="nightly", event_type="nightly", head_sha="c" * 40, pr_number=None),
    ]
    JobRun.objects.filter(pk=rows[0].pk).update(created_at=timezone.now() - timedelta(days=3))
    FailedTest.objects.create(
        job_run=rows[1], name="test_add_xpu_float32", classname="TestOpsXPU", message="<script>x</script>"
    )
    return rows


@pytest.mark.parametrize(
    "query, expected",
    [
        ("sha=" + "a" * 40, {"build", "test"}),
        ("pr=6", {"test"}),
        ("backend=INTEL/torch-xpu-ops", {"build", "test"}),
        ("level=L3", {"test", "nightly"}),
        ("status=in_progress", {"test"}),
        ("conclusion=failure", {"test"}),
        ("event_type=nightly", {"nightly"}),
    ],
)
def test_job_runs_filter_by_commit_pr_backend_level_status_conclusion_and_event(api, jobs, query, expected):
    body = api.get(f"/api/v1/jobs/?{query}").json()
    assert {r["job_name"] for r in body["results"]} == expected


def test_job_runs_filter_by_time_range(api, jobs):
    since = (timezone.now() - timedelta(days=1)).isoformat()
    assert len(api.get("/api/v1/jobs/", {"since": since}).json()["results"]) == 3
    assert len(api.get("/api/v1/jobs/", {"until": since}).json()["results"]) == 1


def test_a_bad_filter_value_is_a_400_naming_it(api, jobs):
    response = api.get("/api/v1/jobs/?level=L9")
    assert response.status_code == 400 and "level" in response.json()["errors"]


def test_a_job_run_lists_its_failed_tests_as_data(api, jobs):
    failing = jobs[1]
    detail = api.get(f"/api/v1/jobs/{failing.pk}/").json()
    assert detail["failed_tests"][0]["message"] == "<script>x</script>"
    assert api.get(f"/api/v1/jobs/{failing.pk}/failed-tests").json()[0]["name"] == "test_add_xpu_float32"


def test_each_failed_test_says_how_it_failed_as_the_producer_reported(api, jobs):
    failing = jobs[1]
    failing.failed_tests.update(outcome="error")
    assert [t["outcome"] for t in api.get(f"/api/v1/jobs/{failing.pk}/").json()["failed_tests"]] == ["error"]
    assert api.get(f"/api/v1/jobs/{failing.pk}/failed-tests").json()[0]["outcome"] == "error"


def test_a_job_run_says_where_its_per_test_results_came_from(api, jobs):
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True)
    imported = job(reference, ended_by="imported", tests_total=9, tests_source="log")
    assert api.get(f"/api/v1/jobs/{imported.pk}/").json()["tests_source"] == "log"
    assert api.get(f"/api/v1/jobs/{jobs[0].pk}/").json()["tests_source"] == ""


def test_deliveries_show_dispatches_and_attempts(bob):
    api = bob
    dispatch = DispatchFactory(state="sent")
    dispatch.attempt_log.create(number=1, outcome="sent", status_code=204)
    listed = api.get("/api/v1/deliveries/?event=pull_request").json()["results"]
    assert listed[0]["delivery_id"] == dispatch.delivery.guid
    detail = api.get(f"/api/v1/deliveries/{dispatch.delivery.guid}/").json()
    assert detail["dispatches"][0]["attempt_log"][0]["status_code"] == 204


def test_dispatches_filter_by_state_and_repo(bob):
    api = bob
    DispatchFactory(state="failed", project=ProjectFactory(full_name="a/b"))
    DispatchFactory(state="sent")
    assert [d["repo"] for d in api.get("/api/v1/dispatches/?state=failed").json()["results"]] == ["a/b"]
    assert len(api.get("/api/v1/dispatches/?repo=A/B").json()["results"]) == 1


def test_commits_list_trunk_and_resolve_a_prefix(api):
    UpstreamCommit.objects.create(sha="ab" + "1" * 38, title="trunk", is_trunk=True)
    UpstreamCommit.objects.create(sha="cd" + "2" * 38, title="pr head", pr_number=9)
    assert [c["title"] for c in api.get("/api/v1/commits/?is_trunk=true").json()["results"]] == ["trunk"]
    assert api.get("/api/v1/commits/ab11111/").json()["title"] == "trunk"
    assert api.get("/api/v1/commits/ffffffff/").status_code == 404


def test_writes_to_read_only_resources_are_405(carol, jobs):
    response = carol.delete(f"/api/v1/jobs/{jobs[0].pk}/")
    assert response.status_code == 405 and response.json()["code"] == "method_not_allowed"


def test_anonymous_reads_are_throttled_per_client(api, settings, jobs):
    from django.core.cache import cache
    from rest_framework.settings import api_settings

    cache.clear()
    rates = {**api_settings.DEFAULT_THROTTLE_RATES, "api": "3/min"}
    from api.throttling import TokenRateThrottle

    original = TokenRateThrottle.THROTTLE_RATES
    TokenRateThrottle.THROTTLE_RATES = rates
    try:
        statuses = [api.get("/api/v1/jobs/").status_code for _ in range(4)]
    finally:
        TokenRateThrottle.THROTTLE_RATES = original
    assert statuses == [200, 200, 200, 429]


@pytest.mark.parametrize("path", ["/api/v1/", "/api/v1"])
def test_the_api_root_lists_every_resource_with_its_url(api, path):
    response = api.get(path, HTTP_ACCEPT="application/json", follow=True)
    assert response.status_code == 200
    assert set(response.json()) == {
        "projects",
        "deliveries",
        "dispatches",
        "jobs",
        "commits",
        "known-issues",
        "subscriptions",
        "allowlist",
        "level-status",
        "culprits",
        "prs",
        "pr-gate",
        "baseline",
        "expectations",
        "quality",
        "mutes",
        "test-history",
        "mute-extend",
        "mute-lift",
        "bisections",
        "bisection",
        "enablement",
        "enablement-backend",
    }
    assert response.json()["enablement-backend"] == "http://testserver/api/v1/enablement/{owner}/{repo}"
    assert response.json()["projects"] == "http://testserver/api/v1/projects"
    assert response.json()["allowlist"] == "http://testserver/api/v1/allowlist"
    assert response.json()["baseline"] == "http://testserver/api/v1/commits/{sha}/baseline"
    assert response.json()["prs"] == "http://testserver/api/v1/prs/{number}"


def test_the_api_root_s_templates_fill_only_the_path_on_a_host_with_digits(api, settings):
    """The sandbox's 127.0.0.1:8100 once read 127.{number}.{number}.1:81{number}{number}."""
    settings.ALLOWED_HOSTS = ["*"]
    root = api.get("/api/v1/", HTTP_ACCEPT="application/json", HTTP_HOST="10.0.0.1:8000").json()
    assert root["prs"] == "http://10.0.0.1:8000/api/v1/prs/{number}"
    assert root["mute-lift"] == "http://10.0.0.1:8000/api/v1/mutes/{id}/lift"
    assert root["baseline"] == "http://10.0.0.1:8000/api/v1/commits/{sha}/baseline"


def test_every_api_v1_route_is_reachable_from_the_root(api):
    from api import urls

    root = api.get("/api/v1/", HTTP_ACCEPT="application/json").json()
    listed = set(urls.Router.extra_root_entries.values()) | {name for name, *_ in urls.ApiRoot.TEMPLATED.values()}
    named = {p.name for p in urls.urlpatterns if getattr(p, "name", None) and "api/v1" in str(p.pattern)}
    assert named <= listed, f"not in the API root: {sorted(named - listed)}"
    assert len(root) == len(urls.router.registry) + len(listed)


def test_the_api_root_is_browsable_for_people_exploring(api):
    response = api.get("/api/v1/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200 and b"Api Root" in response.content


@pytest.mark.parametrize(
    "path", ["/api/v1/jobs", "/api/v1/dispatches", "/api/v1/deliveries", "/api/v1/commits", "/api/v1/projects"]
)
def test_an_unknown_filter_is_a_400_naming_it_not_the_whole_list(api, admin_user, path):
    api.force_authenticate(admin_user)  # deliveries and dispatches are operators' data
    response = api.get(path, {"head_sha": "a" * 40})
    assert response.status_code == 400
    assert "unknown filter head_sha" in str(response.json())


def test_known_filters_and_pagination_parameters_still_work(api):
    assert api.get("/api/v1/jobs", {"sha": "a" * 40, "page_size": 5}).status_code == 200


def test_an_unknown_filter_whose_name_holds_percent_signs_is_named_back(api):
    response = api.get("/api/v1/jobs", {"%s%(x)s": "1"})
    assert response.status_code == 400 and "unknown filter %s%(x)s" in str(response.json())
