"""The level criteria's derived read model: tallies rolled up per hour and per day
(relay.tallies.rollups), a copy of what the relay recorded shaped for windowed counts,
written only by the periodic refresh and read by relay.levels (the criteria, the summary pages
through it). Callbacks never write them. The tables keep the names they had when the HUD owned
them (`hud_…`): the move to relay.levels changed Django's state only (migration 0022)."""

from django.db import models


class TallyRollup(models.Model):
    """One bucket's Tally (relay.tallies.tally) for one backend and kind of run, as
    relay.tallies.buckets computes it: size `h` is one UTC hour, `d` the merge of a UTC day's hours."""

    size = models.CharField(max_length=1, choices=[("h", "hour"), ("d", "day")])
    start = models.DateTimeField()
    project_id = models.IntegerField(help_text="relay.Project id (no foreign key: a derived copy)")
    kind = models.CharField(max_length=16)
    tally = models.JSONField()

    class Meta:
        db_table = "hud_tallyrollup"
        constraints = [
            models.UniqueConstraint(fields=["size", "start", "project_id", "kind"], name="tally_rollup_unique"),
        ]

    def __str__(self):
        return f"{self.size} {self.start:%Y-%m-%d %H:00} project {self.project_id} {self.kind}"


class ExcusedRollup(models.Model):
    """How many of one backend's failed PR/push jobs dated in one UTC hour the excused-jobs rule
    (relay.results.excused) excuses as upstream's; hours with none have no row (relay.tallies.excused)."""

    start = models.DateTimeField()
    project_id = models.IntegerField(help_text="relay.Project id (no foreign key: a derived copy)")
    excused = models.IntegerField()

    class Meta:
        db_table = "hud_excusedrollup"
        constraints = [models.UniqueConstraint(fields=["start", "project_id"], name="excused_rollup_unique")]

    def __str__(self):
        return f"{self.start:%Y-%m-%d %H:00} project {self.project_id}: {self.excused} excused"


class RollupState(models.Model):
    """The refresh's watermark (one row): what it has seen, and which hours it must look at again."""

    last_id = models.BigIntegerField(default=0, help_text="the highest JobRun id seen by the last refresh")
    refreshed_at = models.DateTimeField(null=True, blank=True, help_text="when the last refresh started")
    finished_at = models.DateTimeField(
        null=True, blank=True, help_text="when a refresh last finished with nothing pending"
    )
    generation = models.BigIntegerField(default=0, help_text="a new random number from every refresh that stored rows")
    open_hours = models.JSONField(default=list, help_text="hours whose jobs were still running: looked at again")
    pending_hours = models.JSONField(default=list, help_text="hours found changed but not recomputed yet")
    claimed_until = models.DateTimeField(null=True, blank=True, help_text="a refresh is running until then")
    excused_facts = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="known issues and registry as the excused counts last saw them",
    )

    class Meta:
        db_table = "hud_rollupstate"

    def __str__(self):
        return f"rollups up to job {self.last_id}, refreshed {self.refreshed_at}"
