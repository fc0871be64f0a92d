"""`manage.py check --deploy` findings of our own: what Django cannot know is unsafe here."""

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register


@register(Tags.security, deploy=True)
def secrets_check(app_configs, **kwargs):
    problems = []
    if getattr(settings, "SECRET_KEY_IS_GENERATED", False):
        problems.append(
            Error(
                "SECRET_KEY is not configured: a development key generated under var/ is in use.",
                hint="Set SECRET_KEY (or SECRET_KEY_FILE) to at least 50 random characters; it signs sessions and callback tokens.",
                id="crcr.E001",
            )
        )
    if settings.CRCR_SANDBOX:
        problems.append(
            Warning(
                "Sandbox mode is on: the relay trusts the stand-in's OIDC issuers, which mint any identity.",
                hint="Configure the GitHub App (GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY, GITHUB_WEBHOOK_SECRET) and set CRCR_SANDBOX=0.",
                id="crcr.W002",
            )
        )
    return problems
