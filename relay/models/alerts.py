"""The relay's own alerts on its health (relay/health/alerts.py): one row per episode of a rule firing,
from the evaluation that first saw it firing to the one that saw it clear. At most one episode
of a rule is open at a time (a partial unique constraint), so two evaluations running at once
open it once, and closing it is a conditional UPDATE only one of them wins."""

from django.db import models
from django.db.models import Q
from django.utils import timezone


class AlertEpisode(models.Model):
    class Rule(models.TextChoices):
        PROBE_NIGHTLY_UNEXPECTED = "probe_nightly_unexpected", "unexpected nightly probe outcomes"
        PROBE_PR_PASS_RATE = "probe_pr_pass_rate", "probe pass rate over the last relayed PRs"
        PROBE_NIGHTLY_SILENT = "probe_nightly_silent", "no completed nightly probe"

    rule = models.CharField(max_length=32, choices=Rule.choices)
    started_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    value = models.FloatField(null=True, blank=True, help_text="the measured value when it fired (none: no data)")
    summary = models.CharField(max_length=300, help_text="what the evaluation that opened it said")
    last_value = models.FloatField(null=True, blank=True)
    last_summary = models.CharField(max_length=300, blank=True)
    last_seen_at = models.DateTimeField(default=timezone.now, help_text="the last evaluation that saw it firing")

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule"], condition=Q(resolved_at__isnull=True), name="alert_one_open_episode"
            )
        ]

    def __str__(self):
        return f"{self.rule} since {self.started_at:%Y-%m-%d %H:%M}"


__all__ = ["AlertEpisode"]
