"""Sending one dispatch through the outbox engine (relay.outbox): what is particular to a
dispatch is the call (`repository_dispatch` with a signed callback token), that "not installed"
is permanent and kept apart from other failures, and the check-run reaction (relay.follow_up.dispatch_sent) once it is sent.
Retries follow the CRCR_DISPATCH_* settings."""

import functools
import logging
from datetime import timedelta

from django.db import connections
from django.utils import timezone

from .. import follow_up
from ..bisect.probes import probe_payload
from ..callbacks.tokens import CallbackBinding, callback_token_sign
from ..checks.reactions import upstream_wants_job
from ..github import client as github
from ..github.installations import installation_id_for, installation_id_sql
from ..models import BISECT_EVENT, Delivery, Dispatch, DispatchAttempt, Project
from ..outbox.engine import Outbox, Result
from .payloads import client_payload, probe_client_payload

logger = logging.getLogger(__name__)
Outcome = DispatchAttempt.Outcome


class Dispatches(Outbox):
    row_model, attempt_model, attempt_row_field = Dispatch, DispatchAttempt, "dispatch"
    settings_prefix = "CRCR_DISPATCH"
    final_states = {
        Outcome.SENT: Dispatch.State.SENT,
        Outcome.NOT_INSTALLED: Dispatch.State.NOT_INSTALLED,
        Outcome.PERMANENT: Dispatch.State.FAILED,
    }
    label = "dispatch"
    related = ("delivery", "project")

    def load(self, pk: int) -> Dispatch:
        """The claimed row, what the send reads of its delivery and project, and the App
        installation known for its repo, in one statement whose SQL is built once: the ORM's
        select_related read and the separate installation lookup cost ~1.5 ms of the sending
        thread's CPU per dispatch, most of it compiling the query (docs/performance.md)."""
        row = next(iter(Dispatch.objects.raw(_load_sql(), [pk])))
        db = row._state.db
        payload = Delivery._meta.get_field("payload").from_db_value(row.delivery_payload, None, connections[db])
        delivery = {"id": row.delivery_id, "guid": row.delivery_guid, "event": row.delivery_event, "payload": payload}
        row.delivery = _partial(Delivery, db, delivery)
        project = {"id": row.project_id, "full_name": row.project_full_name, "level": row.project_level}
        row.project = _partial(Project, db, {**project, "bisect_event_type": row.project_bisect_event_type})
        return row

    def attempt(self, dispatch: Dispatch) -> Result:
        repo = dispatch.project.full_name
        # Read with the row by `load`; a row loaded otherwise has the installation looked up.
        known = getattr(dispatch, "known_installation_id", None)
        try:
            github.repository_dispatch(
                installation_id_for(repo, known), repo, dispatch_event_type(dispatch), dispatch_client_payload(dispatch)
            )
        except github.NotInstalled as exc:
            return Result(Outcome.NOT_INSTALLED, exc.status, str(exc))
        except github.PermanentGitHubError as exc:
            return Result(Outcome.PERMANENT, exc.status, str(exc))
        except github.TransientGitHubError as exc:
            return Result(Outcome.TRANSIENT, exc.status, str(exc), exc.retry_after)
        return Result(Outcome.SENT, 204)

    task_name = Dispatch.SEND_TASK

    def describe(self, dispatch: Dispatch) -> str:
        return f"to {dispatch.project.full_name}"

    def exhausted(self, dispatch: Dispatch, number: int) -> bool:
        """Out of attempts or too old, counted from the last re-dispatch when there was one."""
        since = dispatch.resent_at or dispatch.created_at
        too_old = timezone.now() - since > timedelta(hours=self.setting("MAX_AGE_HOURS"))
        return number - dispatch.attempts_before_resend >= self.setting("MAX_ATTEMPTS") or too_old

    def committed(self, dispatch: Dispatch, state: str, retry_at) -> None:
        """Sent to an L3/L4 backend for an upstream PR: its check runs and the gate follow. Most
        backends are L1/L2, whose reaction would find nothing to do: no message, no task."""
        super().committed(dispatch, state, retry_at)
        if state == Dispatch.State.SENT and upstream_wants_job(
            dispatch.project.level, dispatch.event_type, dispatch.pr_number
        ):
            follow_up.dispatch_sent(dispatch.pk)


DISPATCHES = Dispatches()


@functools.cache
def _load_sql() -> str:
    dispatch, delivery, project = Dispatch._meta.db_table, Delivery._meta.db_table, Project._meta.db_table
    return (
        "SELECT d.*, dl.guid AS delivery_guid, dl.event AS delivery_event, dl.payload AS delivery_payload,"
        " p.full_name AS project_full_name, p.level AS project_level,"
        f" p.bisect_event_type AS project_bisect_event_type, {installation_id_sql('p')} AS known_installation_id"
        f" FROM {dispatch} d JOIN {delivery} dl ON dl.id = d.delivery_id JOIN {project} p ON p.id = d.project_id"
        " WHERE d.id = %s"
    )


def _partial(model, db: str, values: dict):
    """An instance holding only `values` (by attname): its other fields load on first use."""
    names = [f.attname for f in model._meta.concrete_fields if f.attname in values]
    return model.from_db(db, names, [values[name] for name in names])


def dispatch_claim(dispatch_pk: int) -> Dispatch | None:
    """Take the dispatch if it is due (Outbox.claim): exactly one caller wins."""
    return DISPATCHES.claim(dispatch_pk)


def dispatch_send(dispatch_pk: int) -> str | None:
    """Claim, send and record one dispatch (Outbox.send); its new state, or None."""
    return DISPATCHES.send(dispatch_pk)


def dispatches_due(limit: int) -> list[int]:
    return DISPATCHES.due(limit)


def dispatch_event_type(dispatch: Dispatch) -> str:
    """The repository_dispatch event type: the upstream event's, or for a bisection probe the one
    the backend's probe workflow listens for (its registry's `bisect_event_type`)."""
    if dispatch.event_type == BISECT_EVENT:
        return dispatch.project.bisect_event_type
    return dispatch.event_type


def dispatch_client_payload(dispatch: Dispatch) -> dict:
    delivery = dispatch.delivery
    binding = CallbackBinding(delivery.guid, dispatch.project.full_name, dispatch.pr_number, dispatch.head_sha)
    token = callback_token_sign(binding)
    if dispatch.event_type == BISECT_EVENT:
        return probe_client_payload(BISECT_EVENT, delivery.guid, dispatch.head_sha, probe_payload(dispatch), token)
    return client_payload(delivery.event, delivery.guid, delivery.payload, token)
