"""Requests an outsider can send that used to answer 500 or leak: crafted API cursors, signed
webhooks with wrongly typed fields, every read while Redis is down, database errors on HUD pages
and /healthz, operator pages and data without a login, a rotating X-Forwarded-For, and pages
without a Content-Security-Policy."""

import base64
import copy
from urllib.parse import quote

import pytest
from django.db import OperationalError
from rest_framework.test import APIClient

from relay.intake.payload_shape import BY_EVENT, COMMON
from relay.ops.cache import pause_reset
from tests.conftest import fixture_payload
from tests.factories import DispatchFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db
SECRET_TEXT = "could not connect to server at 10.20.30.40 port 5432 as user crcr_prod password=hunter2"
LISTS = ["/api/v1/projects/", "/api/v1/jobs/", "/api/v1/commits/", "/api/v1/deliveries/", "/api/v1/dispatches/"]


@pytest.fixture
def world(db):
    project = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    dispatch = DispatchFactory(project=project, state="sent")
    job = JobRunFactory(project=project, dispatch=dispatch, head_sha=dispatch.head_sha or "a" * 40, pr_number=5)
    commit = UpstreamCommitFactory(pr_number=5)
    return {"project": project, "dispatch": dispatch, "job": job, "commit": commit}


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user("operator", is_staff=True)
    client = APIClient()
    client.force_authenticate(user)
    return client


# --- crafted cursors -------------------------------------------------------------------------------------


def cursor(text: str) -> str:
    return quote(base64.b64encode(text.encode()).decode())


@pytest.mark.parametrize(
    "raw",
    [
        "p=abc",
        "p=99999999999999999999999999",
        "p=-99999999999999999999999",
        "p=1e5",
        "p=",
        "p=2026-13-45T99:00:00",
        "o=abc&p=1",
        "r=1&p=x",
        "p=%00",
        "p=" + "9" * 5000,
    ],
)
def test_a_crafted_cursor_is_a_404_on_every_list(world, operator, raw):
    for url in LISTS:
        response = operator.get(f"{url}?cursor={cursor(raw)}")
        assert response.status_code == 404, (url, raw, response.status_code)
        assert response.json()["detail"] == "Invalid cursor"


def test_a_real_cursor_still_pages(world, operator):
    ProjectFactory.create_batch(3)
    first = operator.get("/api/v1/projects/?page_size=2").json()
    assert operator.get(first["next"]).status_code == 200


# --- wrongly typed webhook fields ----------------------------------------------------------------------

FIXTURES = [
    "pull_request.opened",
    "pull_request.labeled",
    "pull_request.synchronize",
    "push",
    "check_run.rerequested",
    "check_suite.rerequested",
    "installation.created",
    "installation_repositories.added",
    "installation_repositories.removed",
]
HOSTILE = [None, "x", 2**70, True, [None], {"a": None}]


def set_path(payload: dict, path: str, value) -> bool:
    """Write `value` at `path` (`[]` means the first list item); False when the path is absent."""
    target = payload
    steps = path.split(".")
    for index, step in enumerate(steps):
        key, many = step.removesuffix("[]"), step.endswith("[]")
        if not isinstance(target, dict) or key not in target:
            return False
        if index == len(steps) - 1 and not many:
            target[key] = value
            return True
        target = target[key]
        if many:
            if not isinstance(target, list) or not target:
                return False
            if index == len(steps) - 1:
                target[0] = value
                return True
            target = target[0]
    return False


def all_paths(value, prefix="", depth=0):
    if depth > 2:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            yield path
            yield from all_paths(item, path, depth + 1)
    elif isinstance(value, list) and value:
        yield from all_paths(value[0], prefix + "[]", depth + 1)


@pytest.mark.slow
def test_every_wrongly_typed_field_of_a_signed_webhook_is_a_4xx_or_handled(
    post_webhook, world, django_capture_on_commit_callbacks
):
    """Every field GitHub sends (three levels deep) and every declared field, replaced by each hostile
    value: the answer is below 500, and a refusal names the field."""
    answered = 0
    for name in FIXTURES:
        base = fixture_payload(name)
        event = name.split(".")[0]
        paths = set(all_paths(base)) | set(COMMON) | set(BY_EVENT.get(event, {}))
        for path in sorted(paths):
            for value in HOSTILE:
                payload = copy.deepcopy(base)
                if not set_path(payload, path, value):
                    continue
                with django_capture_on_commit_callbacks(execute=False):
                    response = post_webhook(event, payload)
                answered += 1
                assert response.status_code < 500, (name, path, value, response.content[:300])
                if response.status_code == 400:
                    assert "detail" in response.json()
    assert answered > 800, answered


@pytest.mark.parametrize(
    "path, value",
    [
        ("pull_request.labels", "bug"),
        ("pull_request.head", None),
        ("sender.login", None),
        ("pull_request.number", "5"),
        ("repository.id", "65600975"),
    ],
)
def test_the_reviewers_examples_are_refused_naming_the_field(post_webhook, world, path, value):
    from relay.models import Delivery

    before = Delivery.objects.count()
    payload = fixture_payload("pull_request.opened")
    set_path(payload, path, value)
    response = post_webhook("pull_request", payload)
    assert response.status_code == 400 and f"'{path}'" in response.json()["detail"]
    assert Delivery.objects.count() == before


# --- Redis down -----------------------------------------------------------------------------------------


@pytest.fixture
def redis_down(settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    pause_reset()
    yield
    pause_reset()


def test_every_api_read_and_summary_page_answers_while_redis_is_down(world, operator, client, redis_down):
    job, commit, project = world["job"], world["commit"], world["project"]
    # A job still running: the grid then asks the (cached) overdue expectations too.
    from django.utils import timezone

    JobRunFactory(
        project=project,
        head_sha=commit.sha,
        pr_number=5,
        status="in_progress",
        conclusion="",
        run_id="running",
        in_progress_at=timezone.now(),
    )
    reads = [
        *LISTS,
        f"/api/v1/projects/{project.full_name}/",
        f"/api/v1/jobs/{job.pk}/",
        f"/api/v1/jobs/{job.pk}/failed-tests",
        f"/api/v1/commits/{commit.sha}/",
        f"/api/v1/commits/{commit.sha}/baseline",
        "/api/v1/prs/5",
        "/api/v1/prs/5/gate",
        "/api/v1/allowlist",
        f"/api/v1/deliveries/{world['dispatch'].delivery.guid}/",
        "/api/schema/",
    ]
    for url in reads:
        assert APIClient().get(url).status_code < 500 if "deliveries" not in url else True, url
        assert operator.get(url).status_code == 200, url
    for page in (
        "/crcr",
        f"/crcr/{project.full_name}",
        "/crcr/metrics",
        "/",
        "/?heads=pr",
        "/pr/5",
        f"/commit/{commit.sha}",
        "/healthz",
    ):
        assert client.get(page).status_code in (200, 503) and client.get(page).status_code != 500, page
    assert client.get("/crcr").status_code == 200


# --- no exception text to anonymous visitors -----------------------------------------------------------


def broken(*args, **kwargs):
    raise OperationalError(SECRET_TEXT)


@pytest.mark.parametrize(
    "target, url",
    [
        ("hud.views_grid.grid_page", "/"),
        ("hud.views_grid.pr_page", "/pr/5"),
        ("hud.views_grid.commit_detail", "/commit/" + "a" * 40),
        ("hud.views_summary.summary_page", "/crcr"),
        ("hud.views_grid.cell_tooltip", "/?tip=1:" + "a" * 40),
    ],
)
def test_a_database_error_on_a_hud_page_says_so_without_its_text(client, world, monkeypatch, target, url):
    module, name = target.rsplit(".", 1)
    monkeypatch.setattr(f"{module}.{name}", broken, raising=False)
    response = client.get(url)
    body = response.content.decode()
    assert response.status_code in (200, 404, 503)
    assert "10.20.30.40" not in body and "hunter2" not in body and "OperationalError" not in body


def test_healthz_names_the_failing_dependency_but_not_its_error(client, monkeypatch):
    from relay.health import healthz as health

    monkeypatch.setattr(health, "_database", broken)
    monkeypatch.setattr(health, "_broker", broken)
    response = client.get("/healthz")
    body = response.content.decode()
    assert response.status_code == 503 and response.json()["checks"]["database"]["ok"] is False
    assert "10.20.30.40" not in body and "hunter2" not in body and "OperationalError" not in body


# --- operator pages and data ---------------------------------------------------------------------------


def test_operator_pages_and_data_need_a_login(client, world, operator):
    response = client.get("/relay/deliveries")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    for url in (
        "/api/v1/deliveries/",
        "/api/v1/dispatches/",
        f"/api/v1/deliveries/{world['dispatch'].delivery.guid}/",
    ):
        assert client.get(url).status_code in (401, 403), url
        assert operator.get(url).status_code == 200, url
    assert client.get("/api/v1/jobs/").status_code == 200, "results stay public"


# --- X-Forwarded-For ------------------------------------------------------------------------------------


@pytest.fixture
def three_a_minute(monkeypatch):
    from django.core.cache import cache

    from api.throttling import TokenRateThrottle

    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"api": "3/min"})
    cache.clear()
    yield
    cache.clear()


def test_a_rotating_x_forwarded_for_does_not_escape_the_anonymous_throttle(client, world, three_a_minute):
    answers = [client.get("/api/v1/projects/", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").status_code for n in range(6)]
    assert answers == [200, 200, 200, 429, 429, 429]


def test_behind_a_configured_proxy_the_forwarded_client_is_throttled_on_its_own(
    client, world, three_a_minute, settings
):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    # Our one proxy appends the address it saw; what the client wrote before it is not believed.
    first = [
        client.get("/api/v1/projects/", HTTP_X_FORWARDED_FOR=f"10.9.9.{n}, 198.51.100.7").status_code for n in range(4)
    ]
    other = client.get("/api/v1/projects/", HTTP_X_FORWARDED_FOR="10.9.9.1, 198.51.100.8").status_code
    assert first == [200, 200, 200, 429] and other == 200


# --- Content-Security-Policy ----------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/", "/crcr", "/crcr/metrics", "/api/docs/", "/admin/login/", "/api/v1/projects/"])
def test_every_page_carries_a_content_security_policy(client, world, url):
    policy = client.get(url)["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert (
        directives["script-src"] == "'self'"
        and directives["object-src"] == "'none'"
        and directives["frame-ancestors"] == "'none'"
    )
    assert "unsafe-eval" not in policy and "'unsafe-inline'" not in directives["script-src"]
