"""POST /github/webhook: signatures, parsing, routing, dedupe and the rows it writes."""

import json
import threading
from urllib.parse import urlencode

import pytest

from relay.models import Delivery, Dispatch, Installation, InstalledRepo, RelayState
from tests.conftest import fixture_payload, sign
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def backends(db):
    return [ProjectFactory(level=level) for level in ("L1", "L2", "L3", "L4")] + [ProjectFactory(active=False)]


def test_it_accepts_a_signed_pull_request_and_stores_one_dispatch_per_active_project(
    post_webhook, backends, django_capture_on_commit_callbacks, monkeypatch
):
    from relay import tasks

    kicks = []
    monkeypatch.setattr(tasks.delivery_fan_out, "apply_async", lambda args: kicks.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        response = post_webhook("pull_request", fixture_payload("pull_request.opened"), delivery_id="d-1")
    assert response.status_code == 202
    assert response.json() == {"ok": True, "status": "accepted", "delivery": "d-1", "dispatches": 4}
    delivery = Delivery.objects.get(guid="d-1")
    assert (delivery.event, delivery.action, delivery.pr_number) == ("pull_request", "opened", 2)
    assert delivery.head_sha == "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
    assert sorted(d.project.level for d in delivery.dispatches.all()) == ["L1", "L2", "L3", "L4"]
    assert set(delivery.dispatches.values_list("state", flat=True)) == {"pending"}
    assert kicks == [[delivery.pk]], "one fan-out message, after commit, whatever the number of repos"


def test_it_answers_a_redelivery_as_duplicate_and_dispatches_nothing_again(post_webhook, backends):
    payload = fixture_payload("pull_request.synchronize")
    assert post_webhook("pull_request", payload, delivery_id="same").status_code == 202
    again = post_webhook("pull_request", payload, delivery_id="same")
    assert again.status_code == 200
    assert again.json() == {"ok": True, "status": "duplicate"}
    assert Dispatch.objects.count() == 4


def test_it_refuses_a_missing_signature(client, relay_settings):
    response = client.post(
        "/github/webhook",
        data=b"{}",
        content_type="application/json",
        HTTP_X_GITHUB_EVENT="ping",
        HTTP_X_GITHUB_DELIVERY="x",
    )
    assert response.status_code == 401
    assert "X-Hub-Signature-256" in response.json()["detail"]


def test_it_refuses_a_sha1_signature_alone(client, relay_settings):
    response = client.post(
        "/github/webhook",
        data=b"{}",
        content_type="application/json",
        HTTP_X_GITHUB_EVENT="ping",
        HTTP_X_GITHUB_DELIVERY="x",
        HTTP_X_HUB_SIGNATURE="sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59",
    )
    assert response.status_code == 401
    assert "SHA-1" in response.json()["detail"]


def test_it_refuses_a_bad_signature_and_stores_nothing(post_webhook, backends):
    response = post_webhook(
        "pull_request", fixture_payload("pull_request.opened"), HTTP_X_HUB_SIGNATURE_256="sha256=" + "0" * 64
    )
    assert response.status_code == 401
    assert response.json() == {"detail": "bad signature"}
    assert not Delivery.objects.exists()


def test_it_matches_githubs_published_test_vector():
    assert sign(b"Hello, World!") == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_it_refuses_a_body_that_is_not_json(post_webhook):
    response = post_webhook("pull_request", b"{not json")
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["detail"]


def test_it_refuses_a_json_array_body(post_webhook):
    assert post_webhook("pull_request", b"[1, 2]").status_code == 400


def test_it_refuses_an_unsupported_content_type(post_webhook):
    response = post_webhook("ping", b"{}", content_type="text/plain")
    assert response.status_code == 415


def test_it_refuses_a_body_over_25_mb_without_keeping_it(post_webhook):
    response = post_webhook("ping", b"{}", CONTENT_LENGTH=str(26 * 1024 * 1024))
    assert response.status_code == 413


def test_it_accepts_a_large_push_under_the_limit(post_webhook, backends):
    payload = fixture_payload("push")
    commit = {"id": "a" * 40, "message": "x" * 10_000, "author": {"name": "a", "email": "a@example.com"}}
    payload.update(ref="refs/heads/main", deleted=False, commits=[commit] * 300)
    response = post_webhook("push", payload)
    assert response.status_code == 202
    assert Delivery.objects.get().payload_bytes > 3_000_000


def test_it_accepts_a_form_encoded_body_signed_over_the_raw_bytes(post_webhook, backends):
    body = urlencode({"payload": json.dumps(fixture_payload("pull_request.reopened"))}).encode()
    response = post_webhook("pull_request", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 202
    assert Delivery.objects.get().action == "reopened"


def test_it_refuses_a_missing_delivery_id(post_webhook):
    response = post_webhook("ping", b"{}", HTTP_X_GITHUB_DELIVERY="")
    assert response.status_code == 400


def test_it_answers_ping_without_storing_anything(post_webhook):
    response = post_webhook("ping", fixture_payload("ping"))
    assert response.status_code == 200
    assert response.json()["status"] == "pong"
    assert not Delivery.objects.exists()


def test_it_ignores_a_foreign_repository(post_webhook, backends):
    response = post_webhook("pull_request", fixture_payload("pull_request.opened", upstream="someone/else"))
    assert response.status_code == 200
    assert response.json()["status"] == "ignored"
    assert not Dispatch.objects.exists()


def test_it_matches_the_upstream_name_case_insensitively(post_webhook, backends):
    response = post_webhook("pull_request", fixture_payload("pull_request.opened", upstream="PyTorch/PyTorch"))
    assert response.status_code == 202


def test_it_ignores_the_upstream_name_when_the_repository_id_differs(post_webhook, backends, relay_settings):
    relay_settings.CRCR_UPSTREAM_REPO_ID = 1
    response = post_webhook("pull_request", fixture_payload("pull_request.opened"))
    assert response.json()["status"] == "ignored"


def test_it_dispatches_pushes_to_branches(post_webhook, backends):
    payload = {**fixture_payload("push"), "ref": "refs/heads/main", "deleted": False, "after": "b" * 40}
    assert post_webhook("push", payload).status_code == 202
    assert Delivery.objects.get().head_sha == "b" * 40
    assert Dispatch.objects.filter(event_type="push").count() == 4


def test_it_maps_a_ciflow_trunk_tag_push_to_its_pr_and_head(post_webhook, backends):
    payload = {**fixture_payload("push"), "ref": "refs/tags/ciflow/trunk/170001", "deleted": False, "after": "c" * 40}
    response = post_webhook("push", payload)
    assert response.status_code == 202 and response.json()["reason"] == "ciflow/trunk merge run of PR #170001"
    assert (Delivery.objects.get().pr_number, Delivery.objects.get().head_sha) == (170001, "c" * 40)
    assert set(Dispatch.objects.values_list("event_type", "pr_number", "head_sha")) == {("push", 170001, "c" * 40)}


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"ref": "refs/tags/v2.9.0"}, "tag pushes"),
        ({"ref": "refs/tags/ciflow/trunk/0123"}, "tag pushes"),
        ({"ref": "refs/tags/ciflow/trunk/12", "deleted": True}, "deletions"),
        ({"ref": "refs/heads/gone", "deleted": True}, "deletions of a branch"),
    ],
)
def test_it_records_but_does_not_dispatch_tags_and_deletions(post_webhook, backends, change, reason):
    payload = {**fixture_payload("push"), "deleted": False, **change}
    response = post_webhook("push", payload)
    assert response.json()["status"] == "ignored"
    assert reason in response.json()["reason"]
    assert not Dispatch.objects.exists()


@pytest.mark.parametrize(
    "event, fixture", [("pull_request", "pull_request.labeled"), ("pull_request", "pull_request.unlabeled")]
)
def test_it_records_crcr_label_changes_without_dispatching(post_webhook, backends, event, fixture):
    payload = fixture_payload(fixture)
    payload["label"]["name"] = "ciflow/crcr/xpu"
    response = post_webhook(event, payload)
    assert response.status_code == 202
    assert response.json()["status"] == "recorded"
    assert Delivery.objects.get().label == "ciflow/crcr/xpu"
    assert not Dispatch.objects.exists()


def test_it_ignores_other_labels(post_webhook, backends):
    response = post_webhook("pull_request", fixture_payload("pull_request.labeled"))
    assert response.json()["status"] == "ignored"


@pytest.mark.parametrize("event", ["check_run", "check_suite"])
def test_it_records_rerun_requests(post_webhook, event):
    response = post_webhook(event, fixture_payload(f"{event}.rerequested"))
    assert response.json()["status"] == "recorded"


def test_it_keeps_the_installed_set_current_from_installation_events(post_webhook, backends):
    post_webhook("installation", fixture_payload("installation.created"))
    installation = Installation.objects.get()
    created = set(InstalledRepo.objects.values_list("full_name", flat=True))
    assert created
    removed = fixture_payload("installation_repositories.removed")
    removed["installation"]["id"] = installation.installation_id
    post_webhook("installation_repositories", removed)
    gone = {r["full_name"] for r in removed["repositories_removed"]}
    assert not InstalledRepo.objects.filter(full_name__in=gone).exists()


def test_it_marks_repos_without_the_app_not_installed_once_the_set_is_known(post_webhook, backends):
    installed = backends[1]
    inst = Installation.objects.create(installation_id=5, account_login="x")
    InstalledRepo.objects.create(full_name=installed.full_name.upper(), installation=inst)
    RelayState.objects.create(key="installations-synced")
    post_webhook("pull_request", fixture_payload("pull_request.opened"))
    states = dict(Dispatch.objects.values_list("project__full_name", "state"))
    assert states.pop(installed.full_name) == "pending"
    assert set(states.values()) == {"not_installed"}


def test_it_supersedes_unsent_dispatches_of_an_older_head(post_webhook, backends):
    first = fixture_payload("pull_request.opened")
    post_webhook("pull_request", first)
    newer = fixture_payload("pull_request.synchronize")
    newer["pull_request"]["head"]["sha"] = "1" * 40
    post_webhook("pull_request", newer)
    old = Dispatch.objects.filter(head_sha=first["pull_request"]["head"]["sha"])
    assert set(old.values_list("state", flat=True)) == {"superseded"}
    assert set(Dispatch.objects.filter(head_sha="1" * 40).values_list("state", flat=True)) == {"pending"}


def test_it_answers_without_calling_github(post_webhook, backends, settings):
    settings.GITHUB_API_URL = "http://127.0.0.1:9"  # nothing listens: any call would fail the request
    assert post_webhook("pull_request", fixture_payload("pull_request.opened")).status_code == 202


def test_it_stays_up_when_the_broker_is_down_at_intake(
    post_webhook, backends, monkeypatch, django_capture_on_commit_callbacks
):
    from relay import tasks

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker unreachable")

    monkeypatch.setattr(tasks.delivery_fan_out, "apply_async", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        response = post_webhook("pull_request", fixture_payload("pull_request.opened"))
    assert response.status_code == 202
    assert Dispatch.objects.filter(state="pending").count() == 4


@pytest.mark.django_db(transaction=True)
def test_it_stores_one_set_of_dispatches_for_concurrent_duplicate_deliveries(relay_settings, backends):
    from django.test import Client

    body = json.dumps(fixture_payload("pull_request.opened")).encode()
    headers = {
        "HTTP_X_GITHUB_EVENT": "pull_request",
        "HTTP_X_GITHUB_DELIVERY": "race",
        "HTTP_X_HUB_SIGNATURE_256": sign(body),
    }
    statuses, barrier = [], threading.Barrier(4)

    def send():
        barrier.wait()
        statuses.append(
            Client().post("/github/webhook", data=body, content_type="application/json", **headers).status_code
        )

    threads = [threading.Thread(target=send) for _ in range(4)]
    [t.start() for t in threads]
    [t.join(timeout=30) for t in threads]
    assert sorted(statuses) == [200, 200, 200, 202]
    assert Delivery.objects.count() == 1
    assert Dispatch.objects.count() == 4


def test_it_records_pushed_trunk_commits_with_their_first_parents(post_webhook, backends):
    from relay.models import UpstreamCommit

    commits = [
        {
            "id": c * 40,
            "message": f"Fix {c}\n\nlong body",
            "timestamp": "2026-12-01T10:00:00Z",
            "author": {"name": "A", "username": "alice"},
        }
        for c in "abc"
    ]
    payload = {
        **fixture_payload("push"),
        "ref": "refs/heads/main",
        "deleted": False,
        "before": "f" * 40,
        "after": "c" * 40,
        "commits": commits,
    }
    payload["repository"]["default_branch"] = "main"
    post_webhook("push", payload)
    rows = {c.sha[0]: c for c in UpstreamCommit.objects.all()}
    assert [rows[x].parent_sha[0] for x in "abc"] == ["f", "a", "b"]
    assert rows["c"].is_trunk and rows["c"].title == "Fix c" and rows["c"].author == "alice"
    assert rows["a"].landed_at < rows["b"].landed_at < rows["c"].landed_at


def test_it_records_a_pr_head(post_webhook, backends):
    from relay.models import UpstreamCommit

    post_webhook("pull_request", fixture_payload("pull_request.opened"))
    head = UpstreamCommit.objects.get()
    assert (head.pr_number, head.is_trunk, head.sha) == (2, False, "ec26c3e57ca3a959ca5aad62de7213c562f8c821")


@pytest.mark.parametrize("event", ["pull_request", "push"])
def test_a_nightly_only_repo_gets_no_pr_or_push_dispatch(post_webhook, backends, event):
    nightly = ProjectFactory(level="L2", events=["nightly"])
    pr_only = ProjectFactory(level="L2", events=["pull_request"])
    payload = (
        fixture_payload("pull_request.opened")
        if event == "pull_request"
        else {**fixture_payload("push"), "ref": "refs/heads/main", "deleted": False, "after": "c" * 40}
    )
    assert post_webhook(event, payload).status_code == 202
    dispatched = set(Dispatch.objects.values_list("project__full_name", flat=True))
    assert nightly.full_name not in dispatched and pr_only.full_name in dispatched
    assert len(dispatched) == 5


def test_a_pull_request_webhook_records_the_prs_author_labels_and_base(post_webhook, backends):
    from relay.models import PullRequest

    payload = fixture_payload("pull_request.labeled")
    payload["label"] = {"name": "ciflow/crcr/xpu"}
    payload["pull_request"]["labels"] = [{"name": "ciflow/crcr/xpu"}, "not-a-mapping"]
    assert post_webhook("pull_request", payload).status_code in (200, 202)
    pr = PullRequest.objects.get(number=payload["pull_request"]["number"])
    assert pr.labels == ["ciflow/crcr/xpu"] and pr.base_sha == payload["pull_request"]["base"]["sha"]
    assert pr.author == payload["pull_request"]["user"]["login"]
