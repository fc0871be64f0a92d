"""Who hears about an event. A subscription names a scope (a backend, a level, a known issue, a
test pattern: every one set must hold) and event kinds (none: all). An event about no backend
(upstream broke the reference, relay health) reaches a backend- or level-scoped subscription
only when it names that kind explicitly.

A backend's oncalls are subscribed by default: each handle in the registry's `oncalls` that is
also a user here with an email address gets an email subscription to the backend, made the first
time the backend has an event. They may turn it off; it is never made again (one per user and
backend, by a unique constraint)."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator, URLValidator
from django.db import IntegrityError, transaction
from django.db.models import Q

from relay.registry.allowlist import oncall_list

from ..models import Project
from ..models.notify import NotificationEvent, Subscription
from ..triage.matching import id_matches

FIELDS = ("name", "project", "level", "issue", "test_pattern", "events", "channel", "target", "digest", "active")


class SubscriptionError(ValueError):
    pass


def target_check(channel: str, target: str) -> str:
    target = (target or "").strip()
    try:
        if channel == Subscription.Channel.EMAIL:
            EmailValidator()(target)
        else:
            URLValidator(schemes=["http", "https"])(target)
    except ValidationError as exc:
        raise SubscriptionError(
            "an email address" if channel == Subscription.Channel.EMAIL else "an http(s) URL"
        ) from exc
    return target


def subscription_create(user, data: dict) -> Subscription:
    fields = {k: v for k, v in data.items() if k in FIELDS}
    return Subscription.objects.create(user=user, origin=Subscription.Origin.USER, **fields)


def subscription_update(subscription: Subscription, data: dict) -> Subscription:
    for name, value in data.items():
        if name in FIELDS:
            setattr(subscription, name, value)
    subscription.save()
    return subscription


# --- matching -------------------------------------------------------------------------------------


def matches(subscription: Subscription, event: NotificationEvent) -> bool:
    if subscription.events and event.kind not in subscription.events:
        return False
    if event.project_id is None and (subscription.project_id or subscription.level):
        return event.kind in (subscription.events or [])
    if subscription.project_id and subscription.project_id != event.project_id:
        return False
    if not subscription.project_id and _backends_own_word(event):
        return False
    if subscription.level and (event.project is None or event.project.level != subscription.level):
        return False
    if subscription.issue_id and subscription.issue_id != event.issue_id:
        return False
    if subscription.test_pattern:
        return any(id_matches(subscription.test_pattern, t) for t in event.test_ids)
    return True


def _backends_own_word(event: NotificationEvent) -> bool:
    """A bisection's finding that upstream does not take on trust (not verified, or by a backend
    below L3: relay.bisect.search sets `upstream_trusted`) reaches the backend's own subscribers only."""
    return event.kind == NotificationEvent.Kind.BISECTED and not (event.details or {}).get("upstream_trusted")


def subscriptions_for(event: NotificationEvent) -> list[Subscription]:
    if event.project_id:
        oncall_defaults_ensure(event.project)
    return [s for s in Subscription.objects.filter(active=True).select_related("project") if matches(s, event)]


def oncall_defaults_ensure(project: Project) -> None:
    handles = [h.lower() for h in oncall_list(project.oncalls)]
    if not handles:
        return
    named = Q()
    for handle in handles:
        named |= Q(username__iexact=handle)
    for user in get_user_model().objects.filter(named, is_active=True).exclude(email=""):
        if not Subscription.objects.filter(user=user, project=project, origin=Subscription.Origin.ONCALL).exists():
            _oncall_create(user, project)


def _oncall_create(user, project: Project) -> None:
    try:
        with transaction.atomic():
            Subscription.objects.create(
                user=user,
                project=project,
                name=f"{project.full_name} oncall",
                channel=Subscription.Channel.EMAIL,
                target=user.email,
                origin=Subscription.Origin.ONCALL,
            )
    except IntegrityError:
        pass  # made concurrently
