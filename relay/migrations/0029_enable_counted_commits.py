"""CountedCommit: one row per (backend, commit) with module counts, so the enablement pages find
a backend's counted trunk commits without reading its rows per module (27 M at the issue's
scale); filled from the counts already stored. ModuleCount's (project, sha) index served only
that read and goes."""

import django.db.models.deletion
from django.db import migrations, models

BACKFILL = """
INSERT INTO relay_countedcommit (project_id, sha, created_at)
SELECT project_id, sha, MIN(created_at) FROM relay_modulecount GROUP BY project_id, sha
"""


class Migration(migrations.Migration):
    dependencies = [
        ("relay", "0028_flaky_vocabulary"),
    ]

    operations = [
        migrations.CreateModel(
            name="CountedCommit",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("sha", models.CharField(max_length=40)),
                (
                    "created_at",
                    models.DateTimeField(help_text="the first counted job row's created_at (retention's prune)"),
                ),
                (
                    "project",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="relay.project",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["sha", "project"], name="countedcommit_sha_idx"),
                    models.Index(fields=["created_at"], name="countedcommit_created_idx"),
                ],
                "constraints": [models.UniqueConstraint(fields=("project", "sha"), name="counted_commit_unique")],
            },
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.RemoveIndex(model_name="modulecount", name="modulecount_project_sha_idx"),
    ]
