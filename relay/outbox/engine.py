"""The outbox engine (see relay/outbox/__init__.py). A kind subclasses `Outbox`, names its models
and settings prefix, and supplies `attempt` (send one row) and `final_states` (what is
permanent); claiming, recording, backoff, the sweeper's query and kicks are written once here."""

import contextlib
import functools
import logging
import random
import time
from dataclasses import dataclass
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

logger = logging.getLogger(__name__)

KICK_COUNTDOWN_LIMIT_SECONDS = 30
"""Short retries ride on a task countdown; longer ones wait for the sweeper (no long ETAs on Redis)."""
ERROR_LIMIT = 2000


class Deferred(Exception):  # noqa: N818 - a signal, not an error: the send did not happen
    """Raised by a kind's `attempt` when the row must wait before it can be sent at all (e.g.
    GitHub's write budget is spent, relay.github.ratelimit): nothing was sent, so no attempt is
    spent; the row waits `retry_after` seconds, stored on it like any retry."""

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Result:
    """What one attempt did. `method`, `path` and `note` are stored only by kinds that keep them."""

    outcome: str
    status_code: int | None = None
    error: str = ""
    retry_after: float | None = None
    method: str = ""
    path: str = ""
    note: str = ""


class Outbox:
    """One kind of outbox row. Subclasses set the class attributes and implement `attempt` and
    `task`; they may extend `committed` (what happens once a record is committed)."""

    row_model: type
    attempt_model: type
    attempt_row_field: str
    """The attempt model's foreign key to its row."""
    settings_prefix: str
    """e.g. CRCR_DISPATCH: reads CRCR_DISPATCH_MAX_ATTEMPTS and the rest, at call time."""
    final_states: dict[str, str]
    """outcome → the state that ends the row (sent, or a permanent failure). Anything else is
    transient: retried with backoff until the attempts or the age run out, then failed."""
    label: str = "outbox row"
    related: tuple[str, ...] = ()
    one_waiting_per_target: bool = False
    """Whether a unique constraint keeps one waiting row per target, so that sending a row back
    to waiting may be refused (`leave_sending`)."""

    # --- what a kind supplies ---------------------------------------------------------------------

    def attempt(self, row) -> Result:
        """Send one claimed row; GitHub's answer sorted into an outcome."""
        raise NotImplementedError

    task_name: str
    """The registered name of the Celery task that sends one row by id (`relay.dispatch_send`). The
    engine kicks it by name from the app's registry (every process registers every task at start,
    relay.apps), so a kind never imports the task module that imports it back."""

    def describe(self, row) -> str:
        return str(row.pk)

    def attempt_columns(self, result: Result) -> dict:
        return {}

    def row_columns(self, result: Result) -> dict:
        return {}

    def committed(self, row, state: str, retry_at) -> None:
        """After the record commits: a short retry rides on a countdown."""
        countdown = retry_countdown(state, retry_at)
        if countdown is not None:
            self.kick(row.pk, countdown)

    # --- the engine --------------------------------------------------------------------------------

    def setting(self, name: str):
        return getattr(settings, f"{self.settings_prefix}_{name}")

    @property
    def states(self):
        return self.row_model.State

    def claim(self, pk: int):
        """Take the row if it is due (or its sender's lease ran out). Exactly one caller wins. A
        unique constraint that forbids the row to be sending now (another send to the same
        target is in flight) is a lost claim too: the row stays due for the next kick or sweep."""
        now = timezone.now()
        lease = now + timedelta(seconds=self.setting("LEASE_SECONDS"))
        at, until = (connection.ops.adapt_datetimefield_value(moment) for moment in (now, lease))
        try:
            with refusable(), connection.cursor() as cursor:
                cursor.execute(self._claim_sql, [until, pk, at, at])
                claimed = cursor.rowcount
        except IntegrityError:
            return None
        if claimed != 1:
            return None
        return self.load(pk)

    @functools.cached_property
    def _claim_sql(self) -> str:
        """The claim's conditional UPDATE, written once: built through the ORM it was compiled
        again at every send, ~0.3 ms of the sending thread's CPU (docs/performance.md)."""
        table, pk, states = self.row_model._meta.db_table, self.row_model._meta.pk.column, self.states
        return (
            f"UPDATE {table} SET state = '{states.SENDING}', lease_expires_at = %s WHERE {pk} = %s"
            f" AND ((state IN ('{states.PENDING}', '{states.RETRYING}') AND next_attempt_at <= %s)"
            f" OR (state = '{states.SENDING}' AND lease_expires_at < %s))"
        )

    def load(self, pk: int):
        """The claimed row as `attempt` and `record` read it (a kind may read it more cheaply)."""
        return self.row_model.objects.select_related(*self.related).get(pk=pk)

    def send(self, pk: int) -> str | None:
        """Claim, send, record. Returns the row's new state, or None when there was nothing to do."""
        row = self.claim(pk)
        if row is None:
            return None
        started, started_at = time.monotonic(), timezone.now()
        try:
            result = self._attempt_recorded(row)
        except Deferred as exc:
            return self.defer(row, exc)
        return self.record(row, result, started_at, int((time.monotonic() - started) * 1000))

    def _attempt_recorded(self, row) -> Result:
        try:
            return self.attempt(row)
        except Deferred:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. the cache or database blinked, or a bug
            # Recorded and retried with backoff like any transient failure, so it ends visibly
            # (failed after the last attempt) instead of looping silently on the lease.
            logger.exception("%s %s could not be prepared or sent", self.label, row.pk)
            return Result(self.attempt_model.Outcome.TRANSIENT, error=f"{exc.__class__.__name__}: {exc}")

    def record(self, row, result: Result, started_at, duration_ms: int) -> str:
        """The attempt row and the row's next state, in one transaction."""
        number = row.attempts + 1
        state, retry_at = self.next_state(row, result, number)
        error = result.error[:ERROR_LIMIT]
        with transaction.atomic():
            attempt = self.attempt_model(
                **{self.attempt_row_field: row},
                number=number,
                started_at=started_at,
                duration_ms=duration_ms,
                status_code=result.status_code,
                outcome=result.outcome,
                error=error,
                retry_at=retry_at,
                **self.attempt_columns(result),
            )
            insert(attempt)
            fields = {
                "state": state,
                "attempts": number,
                "lease_expires_at": None,
                "last_error": error,
                **self.row_columns(result),
            }
            if retry_at:
                fields["next_attempt_at"] = retry_at
            if state == self.states.SENT:
                fields["sent_at"] = timezone.now()
            state = self.leave_sending(row, fields)
            transaction.on_commit(lambda: self.committed(row, state, retry_at))
        logger.info("%s %s (%s): %s, attempt %s", self.label, row.pk, self.describe(row), state, number)
        return state

    def defer(self, row, deferred: Deferred) -> str:
        """Not sent: the row goes back to waiting, its attempts untouched, due after the delay
        (a short one rides on a countdown, a long one waits for the sweeper)."""
        retry_at = timezone.now() + timedelta(seconds=deferred.retry_after)
        fields = {"next_attempt_at": retry_at, "lease_expires_at": None, "last_error": str(deferred)[:ERROR_LIMIT]}
        state = self.leave_sending(row, {"state": self.states.RETRYING, **fields})
        countdown = retry_countdown(state, retry_at)
        if countdown is not None:
            transaction.on_commit(lambda: self.kick(row.pk, countdown))
        logger.info("%s %s (%s) deferred: %s", self.label, row.pk, self.describe(row), deferred)
        return state

    def leave_sending(self, row, fields: dict) -> str:
        """The claimed row's next state, by a conditional UPDATE. Sent back to waiting while a newer
        row for the same target already waits (upstream writes keep one unsent row per target, a
        unique constraint), it is superseded by that row, which carries the newer truth."""
        try:
            with refusable(self.one_waiting_per_target):
                update_while(row, "state", self.states.SENDING, fields)
            return fields["state"]
        except IntegrityError:
            superseded = getattr(self.states, "SUPERSEDED", None)
            if superseded is None or fields["state"] != self.states.RETRYING:
                raise
            ended = {"state": superseded, "lease_expires_at": None, "last_error": fields.get("last_error", "")}
            self.row_model.objects.filter(pk=row.pk, state=self.states.SENDING).update(**ended)
            logger.info("%s %s (%s): superseded by a newer one for its target", self.label, row.pk, self.describe(row))
            return superseded

    def next_state(self, row, result: Result, number: int):
        final = self.final_states.get(result.outcome)
        if final is not None:
            return final, None
        if self.exhausted(row, number):
            return self.states.FAILED, None
        return self.states.RETRYING, timezone.now() + timedelta(seconds=self.retry_delay(number, result.retry_after))

    def exhausted(self, row, number: int) -> bool:
        too_old = timezone.now() - row.created_at > timedelta(hours=self.setting("MAX_AGE_HOURS"))
        return number >= self.setting("MAX_ATTEMPTS") or too_old

    def retry_delay(self, attempt: int, retry_after: float | None = None, rng=random) -> float:
        """Exponential from the base, capped, with "equal jitter" (half fixed, half random) so a
        burst of failures does not retry in lockstep; never sooner than GitHub asked."""
        ceiling = min(self.setting("BACKOFF_MAX_SECONDS"), self.setting("BACKOFF_BASE_SECONDS") * 2 ** (attempt - 1))
        delay = ceiling / 2 + rng.uniform(0, ceiling / 2)
        return delay if retry_after is None else max(delay, retry_after)

    def due(self, limit: int) -> list[int]:
        """What the sweeper should (re)send: unsent rows past their time that the on-commit kick
        has had a fair chance at, and rows whose sender died holding the lease."""
        now, states = timezone.now(), self.states
        fresh = Q(state=states.PENDING, next_attempt_at__lte=now - timedelta(seconds=settings.CRCR_SWEEP_GRACE_SECONDS))
        retry = Q(state=states.RETRYING, next_attempt_at__lte=now)
        abandoned = Q(state=states.SENDING, lease_expires_at__lt=now)
        rows = self.row_model.objects.filter(fresh | retry | abandoned).order_by("next_attempt_at")
        return list(rows.values_list("pk", flat=True)[:limit])

    def kick(self, pk: int, countdown: float = 0.0) -> None:
        row_kick(self.task_name, pk, countdown, self.label)


def refusable(may_be_refused: bool = True):
    """A savepoint around a statement a constraint may refuse, so that the refusal leaves the
    transaction around it usable. None outside a transaction, where the statement is its own
    (on PostgreSQL the BEGIN and COMMIT were two of a send's ten round trips), nor when nothing
    can refuse it."""
    return transaction.atomic() if may_be_refused and connection.in_atomic_block else contextlib.nullcontext()


# A send writes its attempt and its row's next state by SQL built once per model and set of
# columns, the values prepared as Model.save and QuerySet.update prepare them: through the ORM the
# two statements were compiled again at every send, ~0.4 ms of the sending thread's CPU.


def insert(instance) -> None:
    """INSERT the new `instance` as save() would (its defaults, its fields' pre_save); no signals
    (no outbox model has receivers), its primary key left unset."""
    fields = _insert_fields(type(instance))
    values = [field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(type(instance)), values)


def update_while(row, column: str, value: str, fields: dict) -> int:
    """UPDATE `row` to `fields` (names → plain values) if its `column` still holds `value`."""
    meta = type(row)._meta
    values = [meta.get_field(name).get_db_prep_save(field_value, connection) for name, field_value in fields.items()]
    with connection.cursor() as cursor:
        cursor.execute(_update_sql(type(row), tuple(fields), column), [*values, row.pk, value])
        return cursor.rowcount


@functools.cache
def _insert_fields(model) -> list:
    return [field for field in model._meta.concrete_fields if not field.primary_key]


@functools.cache
def _insert_sql(model) -> str:
    quote, fields = connection.ops.quote_name, _insert_fields(model)
    columns = ", ".join(quote(field.column) for field in fields)
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"


@functools.cache
def _update_sql(model, names: tuple, column: str) -> str:
    quote, meta = connection.ops.quote_name, model._meta
    assignments = ", ".join(f"{quote(meta.get_field(name).column)} = %s" for name in names)
    return (
        f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s AND {quote(column)} = %s"
    )


def row_kick(task_name: str, pk: int, countdown: float = 0.0, label: str = "outbox row") -> None:
    """Enqueue the send of one row by its task's registered name. Best effort: if the broker is
    down the row stays due and the sweeper sends it."""
    try:
        current_app.tasks[task_name].apply_async(args=[pk], countdown=countdown)
    except Exception as exc:  # noqa: BLE001 - any broker failure; the sweeper is the fallback
        logger.warning("could not enqueue %s %s (the sweeper will send it): %s", label, pk, exc)


def retry_countdown(state: str, retry_at) -> float | None:
    """The countdown for a retry short enough to ride on the task queue, else None."""
    if state != "retrying" or retry_at is None:
        return None
    wait = (retry_at - timezone.now()).total_seconds()
    return max(0.0, wait) if wait <= KICK_COUNTDOWN_LIMIT_SECONDS else None
