"""Print the registry as JSON for the sandbox simulators (which run outside Django), with the
allowlist it exports."""

import json

from django.core.management import BaseCommand

from relay.models import Project
from relay.registry.service import allowlist_export

FIELDS = (
    "full_name",
    "github_repo_id",
    "level",
    "device",
    "ci_provider",
    "hardware_kind",
    "is_reference",
    "is_health_probe",
    "buildkite_pipeline",
    "events",
)


class Command(BaseCommand):
    help = "Dump active projects as JSON (sandbox mode)."

    def handle(self, *args, **options):
        projects = list(Project.objects.filter(active=True).values(*FIELDS))
        # The stand-in's upstream repo serves this as .github/allowlist.yml, for the demotion loop.
        self.stdout.write(json.dumps({"projects": projects, "allowlist": allowlist_export()}, indent=2))
