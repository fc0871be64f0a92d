"""The third outside review's findings, each at its source: subscription targets shown to
non-owners, numbers that are not ASCII digits, callback numbers and timestamps the database
cannot hold, token lifetimes past the calendar, non-hex SHAs in signed webhooks, redirects to
reported run URLs, and control characters in text we write upstream. (The sweep over every page
and parameter is test_hostile_sweep.py; slow clients are test_slow_clients.py.)"""

import pytest

from relay.models.notify import Notification, NotificationEvent, Subscription
from relay.notify.targets import target_scrubbed, target_shown
from tests.factories import JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db
SECRET_HOOK = "https://crcr-bot:hunter2@hooks.example.com:8443/services/T0/B1/s3cr3tpath?token=q5ecret"


# --- 1. subscription targets ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "channel, target, shown",
    [
        ("webhook", SECRET_HOOK, "https://hooks.example.com:8443/…"),
        ("slack", "https://hooks.slack.com/services/T0/B1/XYZ", "https://hooks.slack.com/…"),
        ("webhook", "https://user@[2001:db8::1]/x", "https://[2001:db8::1]/…"),
        ("webhook", "https://a:b@host:99999/x", "…"),
        ("email", "alice.smith@example.org", "…@example.org"),
    ],
)
def test_a_target_is_shown_as_its_scheme_and_host_only(channel, target, shown):
    assert target_shown(channel, target) == shown


def test_an_error_that_echoes_the_target_is_stored_without_its_secrets():
    text = f"HTTP 404: no route for {SECRET_HOOK} (user crcr-bot:hunter2, path /services/T0/B1/s3cr3tpath)"
    scrubbed = target_scrubbed(text, "webhook", SECRET_HOOK)
    assert not any(secret in scrubbed for secret in ("hunter2", "s3cr3tpath", "q5ecret", "crcr-bot"))
    assert "hooks.example.com" in scrubbed


@pytest.fixture
def subscriptions(django_user_model):
    alice = django_user_model.objects.create_user("alice", "alice@example.org", "x" * 24)
    bob = django_user_model.objects.create_user("bob", "bob@example.org", "x" * 24)
    mine = Subscription.objects.create(name="alice hook", channel="webhook", target=SECRET_HOOK, user=alice)
    other = Subscription.objects.create(name="bob mail", channel="email", target="bob.private@corp.example", user=bob)
    return {"alice": alice, "bob": bob, "mine": mine, "other": other}


def test_the_notifications_page_needs_a_sign_in(client, subscriptions):
    response = client.get("/notifications")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=/notifications")
    assert b"hunter2" not in response.content


def test_the_sign_in_page_says_why_notifications_need_it_and_lands_back_there(client, subscriptions):
    page = client.get("/accounts/login/?next=/notifications").content.decode()
    assert "Notifications are personal" in page and 'name="next" value="/notifications"' in page
    subscriptions["alice"].set_password("a-long-enough-password")
    subscriptions["alice"].save()
    signed_in = client.post(
        "/accounts/login/", {"username": "alice", "password": "a-long-enough-password", "next": "/notifications"}
    )
    assert signed_in.status_code == 302 and signed_in["Location"] == "/notifications"
    assert "alice hook" in client.get("/notifications").content.decode()
    wrong = client.post("/accounts/login/", {"username": "alice", "password": "nope", "next": "/notifications"})
    assert wrong.status_code == 200 and "do not match an active account" in wrong.content.decode()


def test_each_notification_event_links_to_the_page_it_is_about(client, subscriptions):
    from relay.notify.events import event_emit

    event_emit("upstream_broken", "upstream_broken:x", "Upstream broke the reference", head_sha="a" * 40)
    client.force_login(subscriptions["alice"])
    assert (
        f'<a href="/commit/{"a" * 40}">Upstream broke the reference</a>'
        in client.get("/notifications").content.decode()
    )


def test_a_user_sees_only_their_own_subscriptions_and_never_a_targets_secrets(client, subscriptions):
    client.force_login(subscriptions["alice"])
    html = client.get("/notifications").content.decode()
    assert "alice hook" in html and "https://hooks.example.com:8443/…" in html
    assert "bob mail" not in html and "bob.private" not in html
    for secret in ("hunter2", "crcr-bot", "s3cr3tpath", "q5ecret"):
        assert secret not in html


def test_staff_see_every_subscription_and_still_no_secrets(client, subscriptions, django_user_model):
    client.force_login(django_user_model.objects.create_user("op", is_staff=True))
    html = client.get("/notifications").content.decode()
    assert "alice hook" in html and "bob mail" in html and "…@corp.example" in html
    for secret in ("hunter2", "crcr-bot", "s3cr3tpath", "q5ecret", "bob.private"):
        assert secret not in html


def test_a_sinks_answer_echoing_the_url_is_recorded_scrubbed(subscriptions, monkeypatch):
    from relay.notify import channels
    from relay.notify.delivery import NOTIFICATIONS

    def echoing(url, body, headers):
        raise channels.SendError(f"HTTP 400: unknown hook {url}", permanent=True, status=400)

    monkeypatch.setattr(channels, "webhook_post", echoing)
    event = NotificationEvent.objects.create(kind="recovery", key="k1", title="recovered")
    notification = Notification.objects.create(subscription=subscriptions["mine"], event=event)
    NOTIFICATIONS.send(notification.pk)
    notification.refresh_from_db()
    [attempt] = notification.attempt_log.all()
    for text in (notification.last_error, attempt.error):
        assert "hooks.example.com" in text and "hunter2" not in text and "s3cr3tpath" not in text


# --- 2. numbers that are not ASCII digits -----------------------------------------------------------


@pytest.fixture
def pages(db):
    project = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", display_name="Intel XPU")
    commit = UpstreamCommitFactory(sha="a" * 40)
    JobRunFactory(project=project, head_sha=commit.sha, conclusion="failure", check_run_id="²")
    return {"project": project, "commit": commit}


@pytest.mark.parametrize("digit", ["²", "١", "٣", "𝟗", "1_0", " 1", "+1", "9" * 30])
def test_a_number_that_is_not_ascii_digits_is_never_a_500(client, pages, digit, django_user_model):
    sha = pages["commit"].sha
    for url, convention in [
        (f"/?tip={sha}.{digit}", {404}),
        (f"/?log={sha}.{digit}", {400}),
        (f"/commit/{sha}?open={digit}", {200}),
        (f"/crcr/intel/torch-xpu-ops?page={digit}", {200}),
        (f"/?page={digit}", {200}),
        (f"/known-issues/new?project={digit}", {200, 302}),
    ]:
        assert client.get(url).status_code in convention, url
    client.force_login(django_user_model.objects.create_user("op", is_staff=True))
    assert client.get(f"/notifications?subscription={digit}").status_code == 200
    assert client.get(f"/relay/deliveries?page={digit}").status_code == 200


def test_numbers_are_read_from_ascii_digits_only():
    from relay.inputs.params import int_list_param, int_param

    assert [int_param(v) for v in ("7", "0007", "²", "١", " 7", "+7", "7_0", "", None, "9" * 19)] == [
        7,
        7,
        *[None] * 8,
    ]
    assert int_param("0", default=1, low=1) == 1 and int_param("12", high=10) is None
    assert int_list_param("3, 7,²,١,x,12") == {3, 7, 12}


def test_a_shard_name_with_a_superscript_digit_groups_nothing_and_breaks_nothing():
    from hud.selectors_backend import _natural, shard_of

    assert shard_of("test (², 3)") is None and shard_of("test (2, 3)") == ("test", 2)
    assert shard_of("test-١") is None and shard_of("test-1") == ("test", 1)
    assert sorted(["b²", "²", "a10", "a9"], key=_natural) == ["a9", "a10", "b²", "²"]


def test_retry_after_headers_that_are_not_ascii_digits_are_ignored():
    import httpx

    from relay.github.client import _retry_after
    from relay.notify.channels import _retry_after as notify_retry_after

    for header in ("²", "١٠", "1e3"):
        response = httpx.Response(429, headers={"retry-after": header.encode(), "x-ratelimit-reset": header.encode()})
        assert _retry_after(response) is None and notify_retry_after(response) is None
    assert notify_retry_after(httpx.Response(429, headers={"retry-after": "30"})) == 30.0


# --- 5. SHAs that are not 40 hex characters ---------------------------------------------------------

ODD_SHAS = ["abc", "<script>alert(1)</script>", "g" * 40, "A" * 39 + "²"]


def _set(payload, path: str, value) -> None:
    """Set `path` (a list on the way: in each of its items), creating nothing."""
    step, _, rest = path.partition(".")
    for item in payload if isinstance(payload, list) else [payload]:
        if rest:
            _set(item[step], rest, value)
        else:
            item[step] = value


@pytest.mark.parametrize("sha", ODD_SHAS)
@pytest.mark.parametrize(
    "fixture, path",
    [
        ("pull_request.opened", "pull_request.head.sha"),
        ("pull_request.synchronize", "pull_request.base.sha"),
        ("push", "after"),
        ("push", "before"),
        ("push", "head_commit.id"),
        ("push", "commits.id"),
    ],
)
def test_a_signed_webhook_with_a_sha_that_is_not_40_hex_is_a_400_naming_the_field(post_webhook, fixture, path, sha):
    from relay.models import Delivery, UpstreamCommit
    from tests.conftest import fixture_payload

    payload = fixture_payload(fixture)
    if fixture == "push":  # the stored push deletes a tag: make it a trunk push of one commit
        commit = {"id": "b" * 40, "message": "Fix (#1)", "timestamp": "2026-01-01T00:00:00Z", "author": None}
        payload.update(ref="refs/heads/main", deleted=False, after="b" * 40, commits=[commit], head_commit=dict(commit))
    _set(payload, path, sha)
    response = post_webhook(fixture.split(".")[0], payload)
    named = path.replace("commits.id", "commits[].id")
    assert response.status_code == 400 and f"'{named}'" in response.json()["detail"], response.content
    assert sha not in response.json()["detail"]
    assert not Delivery.objects.exists() and not UpstreamCommit.objects.filter(sha=sha).exists()


@pytest.mark.parametrize("sha", ODD_SHAS)
def test_pages_never_fail_on_one_stored_row_with_an_odd_sha(client, sha, django_user_model):
    """Rows written before the intake checked (or by hand): each page still answers."""
    from relay.models import PullRequest
    from tests.factories import DeliveryFactory, DispatchFactory

    project = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    UpstreamCommitFactory(sha="a" * 40, parent_sha=sha)
    UpstreamCommitFactory(sha=sha)
    UpstreamCommitFactory(sha=sha[:39] + "x", is_trunk=False, pr_number=7)
    PullRequest.objects.create(number=7, head_sha=sha, base_sha=sha)
    JobRunFactory(project=project, head_sha=sha, pr_number=7, conclusion="failure")
    DispatchFactory(project=project, delivery=DeliveryFactory(head_sha=sha, pr_number=7), head_sha=sha, pr_number=7)
    urls = ["/", "/pr/7", "/?heads=pr", "/commit/" + "a" * 40, "/crcr", "/crcr/intel/torch-xpu-ops", "/search?q=7"]
    urls += ["/api/v1/prs/7", "/api/v1/commits/", "/known-issues/suggested"]
    for url in urls:
        assert client.get(url).status_code < 500, url
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.org", "x" * 24))
    assert client.get("/known-issues/new?sha=" + sha).status_code == 200


# --- 3. callback numbers and timestamps the database cannot hold -------------------------------------


def _callback(client, oidc, *, token=None, raw: bytes | None = None, **workflow):
    """A verified L2 callback for a sent dispatch, with `workflow` fields changed (or a raw body)."""
    import json

    from django.utils import timezone

    from relay.dispatch.sending import dispatch_client_payload
    from tests.conftest import action_body
    from tests.factories import DispatchFactory

    project = ProjectFactory(full_name="sec-org/backend", github_repo_id=9100, level="L2")
    dispatch = DispatchFactory(project=project, state="sent", sent_at=timezone.now())
    body = json.dumps(action_body(dispatch_client_payload(dispatch), "in_progress", **workflow)).encode()
    token = token or oidc.mint(repository=project.full_name, repository_id="9100")
    return client.post(
        "/github/callback",
        data=raw(body) if callable(raw) else body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_a_well_formed_callback_is_accepted_by_the_same_helper(client, oidc):
    assert _callback(client, oidc).status_code == 200


@pytest.mark.parametrize(
    "number, field",
    [
        ("1e999", "workflow.environment.torch"),
        ("-1e999", "workflow.environment.torch"),
        ("123456789e400", "workflow.extra[1].x"),
    ],
)
def test_a_json_number_no_double_holds_is_a_400_naming_the_field(client, oidc, number, field):
    from relay.models import JobRun

    def with_number(body: bytes) -> bytes:
        return body.replace(b'"workflow": {', b'"workflow": {"environment": {"torch": %s}, ' % number.encode(), 1)

    def in_a_list(body: bytes) -> bytes:
        return body.replace(b'"workflow": {', b'"workflow": {"extra": [1, {"x": %s}], ' % number.encode(), 1)

    response = _callback(client, oidc, raw=with_number if "environment" in field else in_a_list)
    assert response.status_code == 400 and f"'{field}'" in response.json()["detail"], response.content
    assert not JobRun.objects.exists()


@pytest.mark.parametrize(
    "stamp",
    ["0001-01-01T00:00:00+05:00", "9999-12-31T23:00:00-05:00", "2026-13-01T00:00:00Z", "2026-01-01T00:00:00"],
)
def test_a_timestamp_that_leaves_the_calendar_in_utc_is_a_400_naming_the_field(client, oidc, stamp):
    from relay.models import JobRun

    response = _callback(client, oidc, started_at=stamp)
    assert response.status_code == 400 and "'workflow.started_at'" in response.json()["detail"]
    assert not JobRun.objects.exists()


def test_edge_timestamps_that_fit_in_utc_are_stored_in_utc(client, oidc):
    from datetime import UTC, datetime

    from relay.models import JobRun

    assert _callback(client, oidc, started_at="0001-01-01T00:00:00-05:00").status_code == 200
    assert JobRun.objects.get().reported_started_at == datetime(1, 1, 1, 5, tzinfo=UTC)


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_signed_webhook_with_a_number_no_database_holds_is_a_400(post_webhook, text):
    import json

    from relay.models import Delivery
    from tests.conftest import fixture_payload

    body = json.dumps(fixture_payload("pull_request.opened")).replace('"number": 2,', f'"number": 2, "odd": {text},', 1)
    response = post_webhook("pull_request", body.encode())
    assert response.status_code == 400 and not Delivery.objects.exists()


def test_a_commit_timestamp_that_leaves_the_calendar_is_left_out_not_a_500(post_webhook):
    from relay.models import UpstreamCommit
    from tests.conftest import fixture_payload

    payload = fixture_payload("push")
    commit = {"id": "b" * 40, "message": "Fix (#1)", "timestamp": "0001-01-01T00:00:00+05:00", "author": None}
    payload.update(ref="refs/heads/main", deleted=False, after="b" * 40, commits=[commit], head_commit=dict(commit))
    assert post_webhook("push", payload).status_code < 300
    assert UpstreamCommit.objects.get(sha="b" * 40).committed_at is None


# --- 4. token lifetimes past the calendar -------------------------------------------------------------


@pytest.mark.parametrize("exp", [253402300799, 10**15, 10**18, "99999999999"])
def test_a_correctly_signed_token_with_a_huge_exp_is_a_401(client, oidc, exp):
    from relay.models import JobRun

    token = oidc.mint(repository="sec-org/backend", repository_id="9100", exp=exp)
    response = _callback(client, oidc, token=token)
    assert response.status_code == 401 and "expires more than" in response.json()["detail"]
    assert not JobRun.objects.exists()


def test_a_token_living_within_the_limit_is_accepted(client, oidc, settings):
    import time

    settings.CRCR_OIDC_MAX_LIFETIME_SECONDS = 3600
    token = oidc.mint(repository="sec-org/backend", repository_id="9100", exp=int(time.time()) + 3000)
    assert _callback(client, oidc, token=token).status_code == 200


# --- 6. redirects to reported run URLs -----------------------------------------------------------------


@pytest.mark.parametrize(
    "provider, url, redirected",
    [
        ("github", "https://github.com/intel/torch-xpu-ops/actions/runs/5", True),
        ("github", "https://evil.example/phish", False),
        ("github", "https://github.com.evil.example/actions/runs/5", False),
        ("github", "https://github.com@evil.example/actions/runs/5", False),
        ("github", "http://github.com/intel/torch-xpu-ops/actions/runs/5", False),
        ("github", "https://buildkite.com/org/pipe/builds/5", False),
        ("buildkite", "https://buildkite.com/org/pipe/builds/5", True),
        ("gitlab", "https://gitlab.example.org/group/proj/-/pipelines/5", True),
        ("gitlab", "https://gitlab.com/group/proj/-/pipelines/5", False),
    ],
)
def test_a_cells_log_redirects_only_to_a_host_its_ci_provider_owns(client, settings, provider, url, redirected):
    settings.CRCR_OIDC_ISSUERS = [
        {"issuer": "https://token.actions.githubusercontent.com", "kind": "github"},
        {"issuer": "https://agent.buildkite.com", "kind": "buildkite"},
        {"issuer": "https://gitlab.example.org", "kind": "gitlab"},
    ]
    project = ProjectFactory(full_name="intel/torch-xpu-ops", level="L2", ci_provider=provider)
    UpstreamCommitFactory(sha="a" * 40)
    JobRunFactory(project=project, head_sha="a" * 40, conclusion="failure", workflow_url=url, check_run_id="x")
    response = client.get("/", {"log": f"{'a' * 40}.{project.pk}"})
    if redirected:
        assert response.status_code == 302 and response["Location"] == url
    else:
        html = response.content.decode()
        assert response.status_code == 200 and "Location" not in response
        assert "not a host its CI provider runs on" in html and 'rel="noopener noreferrer nofollow"' in html


def test_check_runs_and_comments_link_a_run_only_on_its_providers_host():
    from relay.checks.checkruns import job_details_url, job_summary

    project = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    evil = JobRunFactory(project=project, workflow_url="https://evil.example/run/5", check_run_id="77", run_id="5")
    good = JobRunFactory(project=project, check_run_id="77")
    assert job_details_url(evil) == "" and "evil.example" not in job_summary(evil)
    assert job_details_url(good) == f"{good.workflow_url}/job/77" and good.workflow_url in job_summary(good)


# --- 7. control and bidi characters ------------------------------------------------------------------

SNEAKY = "test\n\x1b[2J\u202egnp.exe\u2066x\u2069\x85\u2028\r"


def test_a_check_run_name_and_external_id_are_plain_lines():
    from relay.checks.checkruns import external_id, job_check_run_name

    project = ProjectFactory(full_name="intel/torch-xpu-ops")
    name = job_check_run_name(project, "ci" + SNEAKY, "job" + SNEAKY)
    assert name == "crcr/intel/torch-xpu-ops/citest [2J gnp.exe x /jobtest [2J gnp.exe x"
    assert external_id("5\u202e1", 7, "a/b") == "5 1:7:a/b"


def test_every_body_sent_upstream_loses_controls_and_bidi_but_markdown_keeps_its_lines():
    from relay.github.markdown import upstream_body

    body = upstream_body(
        {"name": SNEAKY, "output": {"title": SNEAKY, "summary": "line 1\n" + SNEAKY}, "body": SNEAKY, "n": 3}
    )
    assert body["name"] == body["output"]["title"] == "test [2J gnp.exe x"
    assert body["output"]["summary"] == "line 1\ntest\n[2Jgnp.exex" and body["body"] == "test\n[2Jgnp.exex"
    assert body["n"] == 3


def test_the_outbox_sends_what_upstream_body_makes_of_a_plan(monkeypatch):
    from relay.checks import outbox
    from relay.github.writes import Plan

    sent = []
    monkeypatch.setattr(outbox.github, "as_installation", lambda *args, json=None: sent.append(json))
    outbox._execute(Plan("POST", "/repos/o/r/check-runs", 1, body={"name": "a\u202eb", "output": {"title": "t\n"}}))
    assert sent == [{"name": "a b", "output": {"title": "t"}}]


def test_pages_show_invisible_characters_as_code_points(client):
    project = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", display_name="XPU")
    UpstreamCommitFactory(sha="a" * 40, title="Fix \u202etxt.exe (#1)")
    JobRunFactory(project=project, head_sha="a" * 40, conclusion="failure", job_name="build\u202egnp.exe\x1b[2J")
    for url in ("/", "/commit/" + "a" * 40, "/crcr/intel/torch-xpu-ops"):
        html = client.get(url).content.decode()
        assert "\u202e" not in html and "\x1b" not in html, url
    assert "⟨U+202E⟩" in client.get("/commit/" + "a" * 40).content.decode()


@pytest.mark.parametrize(
    "url",
    ["/search?q=%00", "/?tip=a%00b", "/crcr?range=7d%00", "/api/v1/jobs/?repo=%00", "/api/v1/commits/?branch=x%00"],
)
def test_a_nul_in_a_url_is_a_400_on_every_database(client, url):
    """PostgreSQL refuses NUL in text: before, a search answered 503 there (SQLite let it by)."""
    response = client.get(url)
    assert response.status_code == 400 and "NUL" in response.json()["detail"]
