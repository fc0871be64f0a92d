"""`manage.py partition_by_month [--apply] [--ahead N]`: job runs and dispatches as monthly
partitions (PostgreSQL only; relay/ops/partitions.py, docs/scaling.md). Without --apply it prints
what it would run. Run it again each month (or from cron): it then only adds the months ahead."""

from django.core.management.base import BaseCommand, CommandError

from relay.ops import partitions


class Command(BaseCommand):
    help = "Convert relay_jobrun and relay_dispatch to monthly partitions, or add the coming months' partitions."

    def add_arguments(self, parser):
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--dry-run", action="store_true", help="print the statements only (the default)")
        mode.add_argument("--apply", action="store_true", help="run them, in one transaction")
        parser.add_argument("--ahead", type=int, default=partitions.AHEAD_MONTHS, help="months past this one to create")

    def handle(self, *args, ahead: int, **options):
        if not 0 <= ahead <= 36:
            raise CommandError("--ahead must be between 0 and 36 months")
        try:
            plan_list = partitions.plans(ahead=ahead)
        except partitions.NotPostgres as exc:
            raise CommandError(str(exc)) from exc
        for plan in plan_list:
            what = "convert" if plan.convert else f"add {len(plan.statements)} partition(s) to"
            self.stdout.write(f"-- {what} {plan.table}")
            for note in plan.notes:
                self.stdout.write(f"--   {note}")
            for sql in plan.statements:
                self.stdout.write(f"{sql};")
        if options["apply"]:
            partitions.apply(plan_list)
            self.stdout.write("applied")
