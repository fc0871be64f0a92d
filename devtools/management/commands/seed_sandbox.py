"""`manage.py seed_sandbox`: upsert the sandbox registry (idempotent), into a sandbox database only."""

import os

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from devtools.sandbox_registry import SANDBOX_SEED_BY, seed_sandbox_registry
from devtools.sandbox_triage import seed_sandbox_triage
from relay.models import Delivery, LevelChange, Project, RelayState

SANDBOX_MARKER = "sandbox-database"


def sandbox_database_claim(force: bool = False) -> None:
    """The sandbox writes only to a database it owns: one it marked before, one whose registry it
    seeded, or a fresh one (which it marks now). A database holding anyone else's registry or
    deliveries is refused unless CRCR_SANDBOX_FORCE=1: the sandbox seeds a fake registry and
    trusts issuers that mint any identity."""
    if RelayState.objects.filter(key=SANDBOX_MARKER).exists():
        return
    seeded_by_us = LevelChange.objects.filter(changed_by=SANDBOX_SEED_BY).exists()
    foreign = Project.objects.exists() or Delivery.objects.exists()
    if foreign and not seeded_by_us and not force:
        raise CommandError(
            f"Refusing to run the sandbox against {settings.DATABASES['default']['NAME']}: it holds a registry or deliveries the "
            "sandbox did not create. Configure the GitHub App credentials for production, point DATABASE_URL at a sandbox "
            "database, or set CRCR_SANDBOX_FORCE=1 if this database really is disposable."
        )
    RelayState.objects.update_or_create(
        key=SANDBOX_MARKER, defaults={"value": {"claimed_at": timezone.now().isoformat(), "forced": force}}
    )


class Command(BaseCommand):
    help = "Upsert the sandbox registry: the mission systems, the OpenReg reference and the health probe."

    def handle(self, **options):
        sandbox_database_claim(force=settings.CRCR_SANDBOX_FORCE)
        projects = seed_sandbox_registry()
        self.stdout.write(f"sandbox registry: {len(projects)} projects")
        triage = seed_sandbox_triage(os.environ.get("CRCR_SANDBOX_SINK_URL", ""))
        self.stdout.write(
            f"sandbox triage: {triage['issues']} known issues made, expectations and the webhook sink subscription in place"
        )
