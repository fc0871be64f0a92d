"""`manage.py providers_import PATH_OR_URL`: replace the registry's Buildkite pipeline mappings from
an upstream-format config/ci_providers.yml (a file, `-` for stdin, or an http(s) URL), all or nothing."""

import httpx
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from relay.management.commands.allowlist_import import read_source
from relay.registry.providers import ProvidersError
from relay.registry.service import providers_import


class Command(BaseCommand):
    stealth_options = ("stdin",)
    help = "Replace the registry's Buildkite pipeline → repository mappings from an upstream-format ci_providers.yml (path, '-' or URL); all or nothing."

    def add_arguments(self, parser):
        parser.add_argument("source", metavar="PATH_OR_URL")

    def handle(self, source, **options):
        try:
            result = providers_import(read_source(source, options.get("stdin")))
        except ProvidersError as exc:
            self._fail(exc.errors)
        except ValidationError as exc:
            self._fail(exc.messages)
        except (OSError, UnicodeDecodeError, httpx.HTTPError) as exc:
            self._fail([f"cannot read {source}: {exc}"])
        self.stdout.write(result.summary())
        for name in ("updated", "cleared"):
            for full_name in getattr(result, name):
                self.stdout.write(f"  {name}: {full_name}")

    def _fail(self, errors: list[str]):
        for error in errors:
            self.stderr.write(error)
        raise CommandError(
            f"providers file not imported ({len(errors)} error{'s' if len(errors) != 1 else ''}); nothing was written"
        )
