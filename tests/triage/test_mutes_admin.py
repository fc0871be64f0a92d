"""Mutes in the admin: made, extended and lifted through the service (audited); a token can be
given a backend's maintainer scope."""

import pytest

from api.models import ApiToken
from relay.models import TestMute

pytestmark = pytest.mark.django_db
ADDMM = "test_ops.TestCommon.test_addmm_float32"


def test_an_admin_mutes_extends_and_lifts_in_the_admin_each_audited(admin_client, backends):
    added = admin_client.post(
        "/admin/relay/testmute/add/",
        {"project": backends["xpu"].pk, "test_id": ADDMM, "reason": "upstream #1", "owner": "oncall", "days": 7},
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    mute = TestMute.objects.get()
    assert (mute.identity.identity, mute.created_by) == (ADDMM, "admin")
    for action in ("extend_two_weeks", "lift"):
        admin_client.post("/admin/relay/testmute/", {"action": action, "_selected_action": [mute.pk]})
    assert list(mute.events.values_list("action", flat=True)) == ["muted", "extended", "lifted"]


def test_a_second_mute_of_the_same_test_is_refused_on_the_form(admin_client, backends):
    data = {"project": backends["xpu"].pk, "test_id": ADDMM, "reason": "r", "owner": "o", "days": 7}
    admin_client.post("/admin/relay/testmute/add/", data)
    again = admin_client.post("/admin/relay/testmute/add/", data)
    assert again.status_code == 200 and "already muted" in again.content.decode()
    assert TestMute.objects.count() == 1


def test_a_token_made_in_the_admin_can_carry_a_backend_s_maintainer_scope(admin_client, admin_user, backends):
    admin_client.post(
        "/admin/api/apitoken/add/",
        {"user": admin_user.pk, "name": "xpu ci", "scopes": ["read"], "backends": [backends["xpu"].pk]},
    )
    assert ApiToken.objects.get().scopes == ["backend:intel/torch-xpu-ops", "read"]


def test_the_form_says_a_backend_mutes_only_with_a_tracking_issue(admin_client, backends):
    backends["xpu"].mute_needs_issue = True
    backends["xpu"].save(update_fields=["mute_needs_issue"])
    data = {"project": backends["xpu"].pk, "test_id": ADDMM, "reason": "r", "owner": "o", "days": 7}
    refused = admin_client.post("/admin/relay/testmute/add/", data)
    assert refused.status_code == 200 and "only with its tracking issue" in refused.content.decode()
    tracker = "https://github.com/intel/torch-xpu-ops/issues/4961"
    assert admin_client.post("/admin/relay/testmute/add/", {**data, "tracking_issue": tracker}).status_code == 302
    assert TestMute.objects.get().tracking_issue == tracker
