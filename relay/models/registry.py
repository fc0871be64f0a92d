"""The registry: downstream projects and their levels, the App's installations, and the relay's
own small state."""

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone


class Level(models.TextChoices):
    L1 = "L1", "L1 · dispatch only"
    L2 = "L2", "L2 · results on the HUD"
    L3 = "L3", "L3 · check run with ciflow/crcr/<device>"
    L4 = "L4", "L4 · check run on every PR, merge-blocking"


class CIProvider(models.TextChoices):
    GITHUB = "github", "GitHub Actions"
    BUILDKITE = "buildkite", "Buildkite"
    GITLAB = "gitlab", "GitLab CI"


class Event(models.TextChoices):
    """What a downstream repo takes part in (allowlist `events`, test-infra #8855): PR and push
    dispatch with their results and check runs, and its own nightly reports."""

    PULL_REQUEST = "pull_request", "pull requests and pushes"
    NIGHTLY = "nightly", "nightly runs"


class HardwareKind(models.TextChoices):
    REFERENCE = "reference", "Reference (CPU-backed)"
    GPU = "gpu", "GPU"
    NPU = "npu", "NPU / AI accelerator"
    CPU = "cpu", "CPU"
    ECOSYSTEM = "ecosystem", "Ecosystem library"
    PROBE = "probe", "Relay health probe"
    OTHER = "other", "Other"


class PassRateBasis(models.TextChoices):
    """Which pass rate decides the level criteria (relay.results.excused)."""

    ADJUSTED = "adjusted", "upstream-adjusted (failures shared with the reference or known upstream excused)"
    RAW = "raw", "raw (every failed job counts)"


class ProjectQuerySet(models.QuerySet):
    def reference(self) -> "Project | None":
        """The OpenReg reference: the registry holds exactly one; were there several, the first
        registered (relay.results.cells.reference_backend picks the same from a list)."""
        return self.filter(is_reference=True, active=True).order_by("id").first()

    def references(self):
        """Every project flagged as the reference, active or not: what a rule leaves out as such."""
        return self.filter(is_reference=True)

    def dispatch_targets(self):
        """Who an upstream event is relayed to: every active project but a reference that does
        not report through callbacks (its results are imported from upstream CI)."""
        return self.filter(active=True).exclude(is_reference=True, reference_reports=False)


VARIANT_KEYS = ("device", "sdk", "driver", "os", "python", "torch")
"""The callback's `workflow.environment` keys a backend may declare as making a variant."""


def variant_keys_validate(value) -> None:
    """A list of distinct keys among VARIANT_KEYS (relay.results.variants reads them)."""
    keys = value if isinstance(value, list) and all(isinstance(k, str) for k in value) else None
    if keys is None or len(set(keys)) != len(keys) or not set(keys) <= set(VARIANT_KEYS):
        raise ValidationError(f"A list of distinct keys among: {', '.join(VARIANT_KEYS)}.")


class Project(models.Model):
    """A downstream repository registered with the relay (one allowlist entry)."""

    full_name = models.CharField(max_length=140, help_text="owner/repo on GitHub")
    github_repo_id = models.BigIntegerField(
        null=True,
        blank=True,
        unique=True,
        help_text="GitHub's numeric repository id, when known; OIDC identity is pinned to it",
    )
    level = models.CharField(max_length=2, choices=Level.choices, default=Level.L1)
    device = models.CharField(max_length=60, blank=True, help_text="L3 label suffix: ciflow/crcr/<device>")
    device_type = models.CharField(
        max_length=30,
        blank=True,
        validators=[
            RegexValidator(
                r"^(?!cpu$|meta$)[a-z][a-z0-9]{1,29}$",
                "One lower-case torch device name, as in test_add_<name>_float32 (not cpu or meta).",
            )
        ],
        help_text="The torch device name its tests run on, as its test names carry it (npu, spyre, xpu, cuda for ROCm); "
        "empty: learned from its reports",
    )
    variant_keys = models.JSONField(
        default=list,
        blank=True,
        validators=[variant_keys_validate],
        help_text='Which keys of its callbacks\' environment make a hardware variant, in order, e.g. ["device", "os"] '
        f"(of {', '.join(VARIANT_KEYS)}); empty: one variant",
    )
    oncalls = models.JSONField(default=list, blank=True, help_text="GitHub handles pinged on failures")
    events = models.JSONField(
        default=list,
        blank=True,
        help_text='What it takes part in, as the allowlist says: ["pull_request"], ["nightly"] or both; empty: both (the allowlist default)',
    )
    ci_provider = models.CharField(max_length=16, choices=CIProvider.choices, default=CIProvider.GITHUB)
    hardware_kind = models.CharField(max_length=16, choices=HardwareKind.choices, default=HardwareKind.OTHER)
    display_name = models.CharField(max_length=80, blank=True)
    is_reference = models.BooleanField(
        default=False, help_text="The baseline (OpenReg): a source of results, not a backend"
    )
    reference_reports = models.BooleanField(
        default=False,
        help_text="The reference also reports its own runs through /github/callback, so the relay dispatches to it; "
        "otherwise its results come only from the upstream import and it is never dispatched to",
    )
    is_health_probe = models.BooleanField(
        default=False, help_text="Relay self-test repo; kept out of product aggregates"
    )
    active = models.BooleanField(default=True)
    position = models.PositiveIntegerField(default=0, help_text="Order within its level in allowlist.yml")
    require_callback_token = models.BooleanField(null=True, blank=True, help_text="Empty: required at L3 and L4")
    rate_limit_per_min = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: the default (100/min)")
    buildkite_pipeline = models.CharField(
        max_length=80,
        blank=True,
        help_text="Buildkite identity: <organization_id>/<pipeline_id> (UUIDs; slugs can be re-claimed)",
    )
    gitlab_project_id = models.CharField(max_length=40, blank=True, help_text="GitLab identity: numeric project id")
    gitlab_project_path = models.CharField(max_length=200, blank=True, help_text="GitLab identity: group/project path")
    oidc_required_claims = models.JSONField(
        default=dict, blank=True, help_text='Claims a callback token must carry, e.g. {"build_branch": ["main"]}'
    )
    level_pass_rate = models.CharField(
        max_length=10,
        choices=PassRateBasis.choices,
        default=PassRateBasis.ADJUSTED,
        help_text="Which pass rate the level criteria (promotion, demotion) are decided on",
    )
    excuse_triage_verdicts = models.BooleanField(
        default=False,
        help_text="Also excuse a failed job whose triage verdict says upstream or infra with high confidence "
        "(advisory, written by the downstream's own analyzer)",
    )
    bisect_enabled = models.BooleanField(
        default=False,
        help_text="Bisect a new backend-only failure over the upstream commits it spans, by dispatching them "
        '(docs/downstream-ci.md, "Bisection probes"); off unless the backend\'s workflow answers probes',
    )
    bisect_daily_budget = models.PositiveIntegerField(
        default=20, help_text="Bisection probes the relay may dispatch to this repo per UTC day"
    )
    bisect_event_type = models.CharField(
        max_length=100,
        default="crcr-bisect",
        validators=[
            RegexValidator(r"^[A-Za-z0-9_.:-]{1,100}$", "A repository_dispatch event type: letters, digits, _ . : -")
        ],
        help_text="The repository_dispatch event type the backend's probe workflow listens for",
    )
    mute_needs_issue = models.BooleanField(
        default=False,
        help_text="A mute of this backend's tests must link the issue that tracks its fix (relay/triage/mutes.py)",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProjectQuerySet.as_manager()

    class Meta:
        ordering = ["level", "position", "full_name"]
        constraints = [
            models.UniqueConstraint(Lower("full_name"), name="project_full_name_ci_unique"),
            models.CheckConstraint(
                condition=~models.Q(level="L3") | ~models.Q(device=""), name="project_l3_has_device"
            ),
        ]

    def __str__(self):
        return self.full_name

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.split("/", 1)[1]

    @property
    def label(self) -> str:
        return self.display_name or self.full_name

    def takes_part_in(self, event: str) -> bool:
        """An empty `events` is the allowlist's absent key: both."""
        return not self.events or event in self.events

    @property
    def takes_pull_requests(self) -> bool:
        return self.takes_part_in(Event.PULL_REQUEST)

    @property
    def nightly_only(self) -> bool:
        return not self.takes_pull_requests


class LevelChange(models.Model):
    """Audit history: every change of a project's level (and its creation at a level)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="level_changes")
    from_level = models.CharField(max_length=2, choices=Level.choices, blank=True)
    to_level = models.CharField(max_length=2, choices=Level.choices)
    changed_by = models.CharField(max_length=150)
    reason = models.TextField(blank=True)
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self):
        return f"{self.project}: {self.from_level or '—'} → {self.to_level}"


class Installation(models.Model):
    """A GitHub App installation, kept current from installation events and a periodic sync."""

    installation_id = models.BigIntegerField(unique=True)
    account_login = models.CharField(max_length=100, blank=True)
    repository_selection = models.CharField(max_length=16, blank=True)
    suspended = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.account_login} ({self.installation_id})"


class InstalledRepo(models.Model):
    """A repository the App can act on, through its installation."""

    full_name = models.CharField(max_length=140)
    repo_id = models.BigIntegerField(null=True, blank=True)
    installation = models.ForeignKey(Installation, on_delete=models.CASCADE, related_name="repos")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(Lower("full_name"), name="installed_repo_name_ci_unique")]

    def __str__(self):
        return self.full_name


class RelayState(models.Model):
    """Small named facts, e.g. when the installed-repo set was last synced in full."""

    key = models.CharField(max_length=64, primary_key=True)
    value = models.JSONField(default=dict)

    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return self.key
