"""Admin and token privileges: re-dispatch is its own permission and only ever adds; a token
never carries more than its owner may do; only a superuser mints tokens for someone else; the
raw token is shown once in the page, never in the messages cookie."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from api.models import ApiToken
from relay.models import Dispatch, DispatchAttempt, JobRun, Project
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db
ALLOWLIST = "L1:\n  - a/b\n"


def staff(username: str, *perms: str):
    user = get_user_model().objects.create_user(username, password="pw-" + "x" * 20, is_staff=True)
    codes = [p.split(".")[1] for p in perms]
    user.user_permissions.add(*Permission.objects.filter(codename__in=codes))
    client = Client()
    client.force_login(user)
    return user, client


# --- re-dispatch ---------------------------------------------------------------------------------------


def redispatch_post(client, dispatch, *projects):
    data = {
        "action": "redispatch",
        "_selected_action": [dispatch.delivery.pk],
        "apply": "1",
        "projects": [p.pk for p in projects],
    }
    return client.post("/admin/relay/delivery/", data)


def test_viewing_deliveries_does_not_allow_re_dispatching_them():
    dispatch = DispatchFactory(state="failed")
    _, client = staff("viewer", "relay.view_delivery", "relay.view_project")
    redispatch_post(client, dispatch, dispatch.project)
    assert Dispatch.objects.get(pk=dispatch.pk).state == "failed"


def test_the_redispatch_permission_allows_it():
    dispatch = DispatchFactory(state="failed")
    _, client = staff("operator", "relay.view_delivery", "relay.redispatch_delivery")
    assert redispatch_post(client, dispatch, dispatch.project).status_code == 302
    assert Dispatch.objects.get(pk=dispatch.pk).state == "pending"


def test_re_dispatching_keeps_every_dispatch_attempt_and_job_that_answered(
    admin_client, django_capture_on_commit_callbacks
):
    dispatch = DispatchFactory(state="sent", attempts=3)
    for number in (1, 2, 3):
        DispatchAttempt.objects.create(dispatch=dispatch, number=number, outcome="transient" if number < 3 else "sent")
    jobs = [
        JobRun.objects.create(
            project=dispatch.project,
            dispatch=dispatch,
            delivery_key=dispatch.delivery.guid,
            run_id=str(n),
            workflow_name="ci",
            status="completed",
            conclusion="failure",
        )
        for n in range(91)
    ]
    other = ProjectFactory(full_name="new/backend")
    with django_capture_on_commit_callbacks(execute=False):
        assert redispatch_post(admin_client, dispatch, dispatch.project, other).status_code == 302
    reopened = Dispatch.objects.get(pk=dispatch.pk)
    assert (reopened.state, reopened.attempts, reopened.attempts_before_resend, reopened.resent_by) == (
        "pending",
        3,
        3,
        "admin",
    )
    assert DispatchAttempt.objects.filter(dispatch=dispatch).count() == 3
    assert JobRun.objects.filter(dispatch=dispatch).count() == len(jobs) == 91
    assert Dispatch.objects.filter(delivery=dispatch.delivery, project=other, state="pending").exists()


def test_a_reopened_dispatch_gets_a_fresh_retry_budget(settings):
    from relay.dispatch.fan_out import dispatches_resend
    from relay.dispatch.sending import DISPATCHES

    _exhausted = DISPATCHES.exhausted

    settings.CRCR_DISPATCH_MAX_ATTEMPTS = 3
    dispatch = DispatchFactory(state="failed", attempts=3)
    assert _exhausted(dispatch, 4)
    dispatches_resend(dispatch.delivery, [dispatch.project], by="op")
    dispatch.refresh_from_db()
    assert not _exhausted(dispatch, 4) and _exhausted(dispatch, 6)


def test_deliveries_and_attempts_cannot_be_deleted_in_admin(admin_client):
    dispatch = DispatchFactory(state="sent")
    attempt = DispatchAttempt.objects.create(dispatch=dispatch, number=1, outcome="sent")
    assert (
        admin_client.post(f"/admin/relay/delivery/{dispatch.delivery.pk}/delete/", {"post": "yes"}).status_code == 403
    )
    assert admin_client.post(f"/admin/relay/dispatchattempt/{attempt.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Dispatch.objects.filter(pk=dispatch.pk).exists()


# --- tokens --------------------------------------------------------------------------------------------


def token_add(client, user, scopes):
    return client.post("/admin/api/apitoken/add/", {"user": str(user.pk), "name": "probe", "scopes": scopes})


def test_a_staff_user_cannot_mint_a_token_for_someone_else():
    boss = get_user_model().objects.create_superuser("boss", "b@example.org", "pw-" + "y" * 20)
    _, client = staff("clerk", "api.add_apitoken", "api.view_apitoken")
    response = token_add(client, boss, ["admin"])
    assert response.status_code == 200 and not ApiToken.objects.exists()


def test_a_staff_user_cannot_mint_more_than_they_may_do_for_themselves():
    clerk, client = staff("clerk", "api.add_apitoken", "api.view_apitoken")
    for scopes in (["admin"], ["write:projects"]):
        response = token_add(client, clerk, scopes)
        assert response.status_code == 200 and "more than" in response.content.decode()
    assert not ApiToken.objects.exists()
    assert (
        token_add(client, clerk, ["read"]).status_code == 200
        and ApiToken.objects.filter(user=clerk, scopes=["read"]).exists()
    )


def test_an_admin_scope_token_of_a_non_superuser_cannot_replace_the_registry(client):
    ProjectFactory(full_name="keep/me", level="L4")
    user = get_user_model().objects.create_user("minted-for", is_staff=True)
    _, raw = ApiToken.issue(user, "made before the form checked", ["admin"])
    response = client.put(
        "/api/v1/allowlist",
        data=json.dumps({"yaml": ALLOWLIST}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert response.status_code == 403
    assert Project.objects.get(full_name="keep/me").level == "L4"
    write = client.post(
        "/api/v1/projects/",
        data=json.dumps({"full_name": "c/d", "level": "L1"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert write.status_code == 403


def test_a_token_loses_what_its_owner_loses():
    user = get_user_model().objects.create_superuser("was-admin", "w@example.org", "pw-" + "z" * 20)
    token, _ = ApiToken.issue(user, "t", ["admin"])
    assert token.allows("admin") and token.allows("write:projects")
    get_user_model().objects.filter(pk=user.pk).update(is_superuser=False)
    token = ApiToken.objects.select_related("user").get(pk=token.pk)
    assert not token.allows("admin") and not token.allows("write:projects") and token.allows("read")


def test_the_raw_token_is_shown_once_in_the_page_and_never_in_a_cookie(admin_client, admin_user):
    response = admin_client.post(
        "/admin/api/apitoken/add/", {"user": str(admin_user.pk), "name": "ci", "scopes": ["read"]}
    )
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    raw = response.context["raw_token"]
    assert raw.startswith("crcr_") and raw in response.content.decode()
    cookies = (
        " ".join(f"{c.key}={c.value}" for c in response.cookies.values())
        + " "
        + " ".join(m.value for m in admin_client.cookies.values())
    )
    assert raw not in cookies and raw[5:] not in cookies
    assert raw not in admin_client.get("/admin/api/apitoken/").content.decode()
