"""DATABASE_REPLICA_URL: HUD pages and API reads run on the replica, everything else on the primary.

The replica here is a second connection to the test database (what `TEST: {"MIRROR": "default"}`
gives a configured one), so pages answer with the rows the test wrote (committed: a mirror does
not see the primary's open transaction, hence transactional tests) and each query is counted on
the alias that ran it."""

import copy
import json
import os
import subprocess
import sys
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.test import RequestFactory
from django.utils import timezone

from crcr.dbrouter import PRIMARY, REPLICA, ReadOnlyRequestMiddleware, ReplicaRouter, read_only_view
from relay.dispatch.sending import dispatch_client_payload
from relay.models import Dispatch, JobRun, Project
from tests.conftest import action_body, fixture_payload
from tests.factories import DispatchFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db(transaction=True, databases=[PRIMARY, REPLICA])

ROOT = Path(__file__).resolve().parents[2]
REPO, REPO_ID = "intel/torch-xpu-ops", 123456


@pytest.fixture(scope="module", autouse=True)
def replica_alias(django_db_setup, django_db_blocker):
    """A `replica` alias on the test database, as a configured mirror gets it (declared before the
    tests' database access is set up, which names the aliases a test may use)."""
    connections.settings[REPLICA] = copy.deepcopy(connections[PRIMARY].settings_dict)
    connections.settings[REPLICA]["TEST"]["MIRROR"] = PRIMARY
    yield
    with django_db_blocker.unblock():
        connections[REPLICA].close()
    del connections[REPLICA]
    del connections.settings[REPLICA]


@pytest.fixture
def replica(settings):
    """The router and the middleware switched on."""
    settings.DATABASE_ROUTERS = ["crcr.dbrouter.ReplicaRouter"]
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "crcr.dbrouter.ReadOnlyRequestMiddleware"]


@contextmanager
def queries_by_alias():
    """{alias: [sql, ...]} of every statement run on the primary and on the replica."""
    seen = {PRIMARY: [], REPLICA: []}

    def recorder(alias):
        def record(execute, sql, params, many, context):
            seen[alias].append(sql)
            return execute(sql, params, many, context)

        return record

    with ExitStack() as stack:
        for alias in seen:
            stack.enter_context(connections[alias].execute_wrapper(recorder(alias)))
        yield seen


@pytest.fixture
def history():
    """One backend, one trunk commit with a finished job: enough for every HUD page to show it.
    The summary's rollups are fresh, as beat keeps them (a page that finds them stale refreshes
    them itself: a write, which goes to the primary)."""
    from relay.tallies.rollups import rollups_refresh

    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    commit = UpstreamCommitFactory(is_trunk=True, branch="main")
    JobRunFactory(project=project, head_sha=commit.sha, status="completed", conclusion="success")
    rollups_refresh()
    return project, commit


@pytest.mark.parametrize(
    "path",
    ["/", "/commit/{sha}", "/crcr", "/crcr/{repo}", "/api/v1/jobs", "/api/v1/projects/", "/api/v1/commits"],
)
def test_hud_pages_and_api_reads_answer_from_the_replica(client, replica, history, path):
    project, commit = history
    with queries_by_alias() as seen:
        response = client.get(path.format(sha=commit.sha, repo=project.full_name))
    assert response.status_code == 200
    assert seen[REPLICA] and seen[PRIMARY] == []


def test_the_grid_and_the_job_list_show_the_rows_read_on_the_replica(client, replica, history):
    project, commit = history
    assert commit.sha[:7] in client.get("/").content.decode()
    jobs = client.get("/api/v1/jobs").json()["results"]
    assert [(job["head_sha"], job["conclusion"]) for job in jobs] == [(commit.sha, "success")]


def test_a_head_request_reads_from_the_replica_too(client, replica, history):
    with queries_by_alias() as seen:
        assert client.head("/api/v1/jobs").status_code == 200
    assert seen[REPLICA] and seen[PRIMARY] == []


def test_a_staff_page_knows_who_signed_in_from_the_primary_and_reads_the_rest_on_the_replica(
    admin_client, replica, history
):
    project, _ = history
    with queries_by_alias() as seen:
        assert admin_client.get(f"/known-issues/new?project={project.pk}").status_code == 200
    assert any("django_session" in sql for sql in seen[PRIMARY])
    assert any("auth_user" in sql for sql in seen[PRIMARY])
    assert not any("django_session" in sql or "auth_user" in sql for sql in seen[REPLICA])
    assert any("relay_project" in sql for sql in seen[REPLICA])


def test_a_webhook_uses_only_the_primary(post_webhook, replica):
    ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L3", device="xpu")
    with queries_by_alias() as seen:
        assert post_webhook("pull_request", fixture_payload("pull_request.opened")).status_code == 202
    assert seen[PRIMARY] and seen[REPLICA] == []


def test_a_callback_uses_only_the_primary(client, oidc, replica):
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    dispatch = DispatchFactory(
        project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(seconds=90)
    )
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    body = action_body(dispatch_client_payload(dispatch), "in_progress")
    with queries_by_alias() as seen:
        response = client.post(
            "/github/callback",
            data=json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
    assert response.json() == {"ok": True, "status": "in_progress"}
    assert JobRun.objects.filter(dispatch=dispatch).exists()
    assert seen[PRIMARY] and seen[REPLICA] == []


def test_an_api_write_uses_only_the_primary(alice, replica):
    with queries_by_alias() as seen:
        response = alice.post("/api/v1/projects/", {"full_name": "ROCm/pytorch", "level": "L1"}, format="json")
    assert response.status_code == 201
    assert Project.objects.filter(full_name="ROCm/pytorch").exists()
    assert seen[PRIMARY] and seen[REPLICA] == []


def test_an_api_token_is_checked_on_the_primary(bob, replica, history):
    with queries_by_alias() as seen:
        assert bob.get("/api/v1/jobs").status_code == 200
    assert any("api_apitoken" in sql for sql in seen[PRIMARY])
    assert not any("api_apitoken" in sql for sql in seen[REPLICA])


def test_an_admin_page_uses_only_the_primary(admin_client, replica, history):
    with queries_by_alias() as seen:
        assert admin_client.get("/admin/relay/project/").status_code == 200
    assert seen[PRIMARY] and seen[REPLICA] == []


def test_a_relay_page_uses_only_the_primary(admin_client, replica, history):
    with queries_by_alias() as seen:
        assert admin_client.get("/relay/deliveries").status_code == 200
    assert seen[PRIMARY] and seen[REPLICA] == []


def _hud_view(request):
    """A stand-in view that reads, writes, then reads again."""


_hud_view.__module__ = "hud.views_example"


def test_a_write_in_a_read_request_goes_to_the_primary_and_the_reads_after_it_follow(replica, history):
    router, where = ReplicaRouter(), []

    def view(request):
        where.append(router.db_for_read(JobRun))
        where.append(router.db_for_write(JobRun))
        where.append(router.db_for_read(JobRun))

    request = RequestFactory().get("/")
    middleware = ReadOnlyRequestMiddleware(lambda r: middleware.process_view(r, _hud_view, (), {}) or view(r))
    middleware(request)
    assert where == [REPLICA, PRIMARY, None]
    assert router.db_for_read(JobRun) is None  # the mark ends with the request


def test_only_safe_methods_on_hud_and_api_views_are_read_only():
    factory = RequestFactory()

    def view_of(module):
        def view(request):
            return None

        view.__module__ = module
        return view

    assert read_only_view(factory.get("/"), view_of("hud.views_grid"))
    assert read_only_view(factory.head("/api/v1/jobs"), view_of("api.views"))
    assert not read_only_view(factory.post("/known-issues/new"), view_of("hud.views_triage"))
    assert not read_only_view(factory.get("/relay/deliveries"), view_of("relay.pages"))
    assert not read_only_view(factory.get("/admin/"), view_of("django.contrib.admin.sites"))
    assert not read_only_view(factory.get("/github/webhook"), view_of("relay.views"))


def test_without_a_replica_the_router_is_inert(client, history, monkeypatch):
    monkeypatch.delitem(connections.settings, REPLICA)
    router, where = ReplicaRouter(), []
    request = RequestFactory().get("/")
    middleware = ReadOnlyRequestMiddleware(
        lambda r: middleware.process_view(r, _hud_view, (), {}) or where.append(router.db_for_read(JobRun))
    )
    middleware(request)
    assert where == [None]
    assert client.get("/").status_code == 200


def test_the_settings_add_the_replica_only_when_its_url_is_set():
    def settings_with(**env):
        code = (
            "import json, crcr.settings as s; print(json.dumps([sorted(s.DATABASES), s.DATABASES.get('replica', {}).get('TEST'),"
            " s.DATABASE_ROUTERS, 'crcr.dbrouter.ReadOnlyRequestMiddleware' in s.MIDDLEWARE]))"
        )
        environment = {k: v for k, v in os.environ.items() if k != "DATABASE_REPLICA_URL"} | env
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    assert settings_with() == [["default"], None, [], False]
    assert settings_with(DATABASE_REPLICA_URL="postgres://reader@replica.internal:5432/crcr") == [
        ["default", "replica"],
        {"MIRROR": "default"},
        ["crcr.dbrouter.ReplicaRouter"],
        True,
    ]
