"""The daily digest: a subscription with `digest` on has its notifications held; once a day the
held ones of the previous day (UTC) are collected into one digest notification, sent like any
other. One digest per subscription and day (a unique constraint), so a second run adds nothing."""

from datetime import UTC, date, datetime, time, timedelta

from django.db import IntegrityError, transaction

from ..models.notify import Notification


def digests_build(day: date) -> list[int]:
    """Collect the events of `day` held for digest subscriptions; the ids of the digests made."""
    end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)
    held = Notification.objects.filter(state=Notification.State.HELD, event__occurred_at__lt=end)
    made = []
    for subscription_id in held.values_list("subscription_id", flat=True).distinct():
        digest = _digest_for(subscription_id, day, held.filter(subscription_id=subscription_id))
        if digest is not None:
            made.append(digest.pk)
    from .delivery import NOTIFICATIONS

    for pk in made:
        transaction.on_commit(lambda pk=pk: NOTIFICATIONS.kick(pk))
    return made


def _digest_for(subscription_id: int, day: date, held) -> Notification | None:
    try:
        with transaction.atomic():
            digest = Notification.objects.create(subscription_id=subscription_id, digest_date=day)
            held.update(state=Notification.State.DIGESTED, digest=digest)
    except IntegrityError:
        return None  # this day's digest exists already
    return digest
