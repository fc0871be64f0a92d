"""Quarantine = mute: a backend's maintainer (an API token with that backend's scope) or an admin
mutes one test for one backend, with a reason, an owner and an expiry (CRCR_MUTE_DAYS, 14, by
default; at most MAX_DAYS). A muted test still runs and still shows, with a *muted* badge; it is
left out of the backend's (upstream-adjusted) pass rate (relay/results/excused.py), of the merge
gate (the PR's verdict, relay/results/blame.py) and so of the demotion criteria, until it expires or
is lifted. A mute covers one test, never a job (`mutable`, which every reader asks through `Mutes.of`). Every mute, extension and lift is an audit row (TestMuteEvent) naming who and when.
A mute may link the issue that tracks the fix; a backend may require one (Project.mute_needs_issue:
`tracking_issue_check`, asked of every mute made, by the API, the admin or the sandbox seed).

Mutes name tests by the device-agnostic id the pages show (relay.policy.testids): a backend may mute a
test before the store has seen it fail."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from relay.inputs.text import holds_controls
from relay.policy.testids import TestId, parse_test_id

from ..models import Project, TestIdentity, TestMute, TestMuteEvent, identity_digest

MAX_DAYS = 90
"""A mute longer than the store's retention would outlive the evidence for it."""
MAX_URL = 500
_URL = URLValidator(schemes=["http", "https"])


class MuteError(ValueError):
    pass


@dataclass(frozen=True)
class Muted:
    """What excuses a failure: the active mute of its test on its backend."""

    mute: TestMute

    @property
    def label(self) -> str:
        return f"muted until {self.mute.expires_at:%Y-%m-%d} ({self.mute.owner}): {self.mute.reason}"


def _expiry(days: int | None, expires_at: datetime | None, now: datetime) -> datetime:
    if expires_at is None:
        expires_at = now + timedelta(days=settings.CRCR_MUTE_DAYS if days is None else days)
    if expires_at <= now:
        raise MuteError("the expiry must be in the future")
    if expires_at > now + timedelta(days=MAX_DAYS):
        raise MuteError(f"a mute lasts at most {MAX_DAYS} days; extend it when it runs out")
    return expires_at


def _text(value: str, name: str, limit: int) -> str:
    text = (value or "").strip()
    if not text:
        raise MuteError(f"a mute needs a {name}")
    if len(text) > limit:
        raise MuteError(f"the {name} is at most {limit} characters")
    return text


def mutable(subject) -> bool:
    """What a mute may cover, the one rule the gate, the pass rate and demotion ask: one test (a
    TestId whose method is `test…`), never a job. A failing job without a test is named by its
    label (`test / build`), which may even be stored as an identity; a mute on it must not excuse
    that job's build break, time-out or cancellation."""
    if not isinstance(subject, TestId):
        return False
    method = subject.key.split("[", 1)[0].rpartition(".")[2]
    # A job's label is words around " / "; a test's method is one word, which may hold the escapes
    # a stored name is written with (relay.inputs.text.escaped: `\n`), so not only identifier characters.
    return method.startswith("test") and method.isprintable() and not any(c.isspace() or c == "/" for c in method)


def identity_for(test_id: str) -> TestIdentity:
    text = _text(test_id, "test id", 2000)
    if holds_controls(text):
        raise MuteError(
            "a test id holds no control or invisible character: write it as the HUD shows it (a newline as \\n)"
        )
    tid = parse_test_id(text)
    if not mutable(tid):
        raise MuteError(
            f"{text[:200]!r} is not a test id (module.Class.test_method…): a mute covers one test, never a job"
        )
    found = TestIdentity.objects.filter(digest=identity_digest(text)).first()
    if found is not None:
        return found
    return TestIdentity.objects.get(pk=TestIdentity.objects.ids_for({tid})[tid])


def tracking_issue_check(project: Project, url: str) -> str:
    """The link to the issue that tracks the fix: optional, unless the backend asks every mute for
    one (Project.mute_needs_issue, as Intel's XPU team requires a tracking issue for every skip)."""
    url = (url or "").strip()
    if not url:
        if project.mute_needs_issue:
            raise MuteError(
                f"{project.full_name} mutes a test only with its tracking issue: give the URL of the issue "
                "that tracks the fix (tracking_issue)"
            )
        return ""
    if len(url) > MAX_URL:
        raise MuteError(f"the tracking issue's URL is at most {MAX_URL} characters")
    try:
        _URL(url)
    except ValidationError as exc:
        raise MuteError(
            "the tracking issue is an http(s) URL, e.g. https://github.com/<owner>/<repo>/issues/<n>"
        ) from exc
    return url


def mute_check(
    project: Project, test_id: str, reason: str, owner: str, days=None, expires_at=None, tracking_issue: str = ""
) -> tuple:
    """(identity, reason, owner, expiry, tracking issue) of a mute that may be made; MuteError says
    what is wrong."""
    now = timezone.now()
    identity = identity_for(test_id)
    reason, owner = _text(reason, "reason", 500), _text(owner, "owner", 200)
    issue = tracking_issue_check(project, tracking_issue)
    expires = _expiry(days, expires_at, now)
    if _active(project.pk, now).filter(identity=identity).exists():
        raise MuteError(f"{identity.identity} is already muted on {project.full_name}: extend that mute instead")
    return identity, reason, owner, expires, issue


@transaction.atomic
def mute_create(
    project: Project,
    test_id: str,
    reason: str,
    owner: str,
    by: str,
    days=None,
    expires_at=None,
    tracking_issue: str = "",
) -> TestMute:
    Project.objects.select_for_update().filter(pk=project.pk).exists()  # one mute at a time per backend
    identity, reason, owner, expires, issue = mute_check(
        project, test_id, reason, owner, days, expires_at, tracking_issue
    )
    mute = TestMute.objects.create(
        identity=identity,
        project=project,
        reason=reason,
        owner=owner,
        tracking_issue=issue,
        created_by=by[:200],
        expires_at=expires,
    )
    TestMuteEvent.objects.create(mute=mute, action=TestMuteEvent.Action.MUTED, by=by[:200], expires_at=expires)
    return mute


@transaction.atomic
def mute_extend(mute: TestMute, by: str, days=None, expires_at=None, note: str = "") -> TestMute:
    now = timezone.now()
    mute = TestMute.objects.select_for_update().get(pk=mute.pk)
    if mute.lifted_at is not None:
        raise MuteError("this mute was lifted; mute the test again instead")
    mute.expires_at = _expiry(days, expires_at, now)
    mute.save(update_fields=["expires_at"])
    TestMuteEvent.objects.create(
        mute=mute, action=TestMuteEvent.Action.EXTENDED, by=by[:200], expires_at=mute.expires_at, note=note[:500]
    )
    return mute


@transaction.atomic
def mute_lift(mute: TestMute, by: str, note: str = "") -> TestMute:
    mute = TestMute.objects.select_for_update().get(pk=mute.pk)
    if mute.lifted_at is not None:
        raise MuteError("this mute was lifted already")
    mute.lifted_at, mute.lifted_by = timezone.now(), by[:200]
    mute.save(update_fields=["lifted_at", "lifted_by"])
    TestMuteEvent.objects.create(mute=mute, action=TestMuteEvent.Action.LIFTED, by=by[:200], note=note[:500])
    return mute


def active_filter(now: datetime | None = None) -> Q:
    """Mutes in force: not lifted, not expired."""
    return Q(lifted_at__isnull=True, expires_at__gt=now or timezone.now())


def _active(project_id: int, now: datetime):
    return TestMute.objects.filter(active_filter(now), project_id=project_id)


class Mutes:
    """A backend's active mutes, loaded once per page or task (one query), then asked in memory."""

    def __init__(self, project_ids, now: datetime | None = None):
        now = now or timezone.now()
        rows = TestMute.objects.filter(active_filter(now), project_id__in=list(project_ids))
        self._by = {(m.project_id, m.identity.identity): m for m in rows.select_related("identity")}

    def of(self, project_id: int, subject) -> Muted | None:
        """The mute excusing this failure: `subject` is a failed test's TestId, or a failing job's
        label, which no mute covers (`mutable`)."""
        if not mutable(subject):
            return None
        mute = self._by.get((project_id, subject.full))
        return Muted(mute) if mute is not None else None

    def __bool__(self) -> bool:
        return bool(self._by)
