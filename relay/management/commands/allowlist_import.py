"""`manage.py allowlist_import PATH_OR_URL`: replace the registry's levels from an upstream-format
allowlist.yml (a file, `-` for stdin, or an http(s) URL), all or nothing."""

import re
import sys
from pathlib import Path

import httpx
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from relay.registry.allowlist import AllowlistError
from relay.registry.service import allowlist_import

FETCH_TIMEOUT_SECONDS = 20
_BLOB_URL_RE = re.compile(r"https?://github\.com/([^/]+)/([^/]+)/blob/(.+)")


def raw_url(url: str) -> str:
    """A github.com blob URL turned into the raw file it shows; any other URL as given."""
    match = _BLOB_URL_RE.fullmatch(url)
    if not match:
        return url
    owner, repo, ref_and_path = match.groups()
    return f"https://raw.githubusercontent.com/{owner}/{repo}/{ref_and_path}"


def read_source(source: str, stdin=None) -> str:
    if source == "-":
        return (stdin or sys.stdin).read()
    if source.startswith(("http://", "https://")):
        response = httpx.get(raw_url(source), timeout=FETCH_TIMEOUT_SECONDS, follow_redirects=True)
        response.raise_for_status()
        return response.text
    return Path(source).read_text(encoding="utf-8")


class Command(BaseCommand):
    stealth_options = ("stdin",)
    help = "Replace the registry's levels from an upstream-format allowlist.yml (path, '-' or URL); all or nothing."

    def add_arguments(self, parser):
        parser.add_argument("source", metavar="PATH_OR_URL")
        parser.add_argument("--reason", default="allowlist import", help="recorded on every level change")
        parser.add_argument("--by", default="allowlist_import", help="who the audit rows name")

    def handle(self, source, reason, by, **options):
        try:
            result = allowlist_import(read_source(source, options.get("stdin")), by=by, reason=reason)
        except AllowlistError as exc:
            self._fail(exc.errors)
        except ValidationError as exc:
            self._fail(exc.messages)
        except (OSError, UnicodeDecodeError, httpx.HTTPError) as exc:
            self._fail([f"cannot read {source}: {exc}"])
        self.stdout.write(result.summary())
        for name in ("created", "updated", "deactivated"):
            for full_name in getattr(result, name):
                self.stdout.write(f"  {name}: {full_name}")

    def _fail(self, errors: list[str]):
        for error in errors:
            self.stderr.write(error)
        raise CommandError(
            f"allowlist not imported ({len(errors)} error{'s' if len(errors) != 1 else ''}); nothing was written"
        )
