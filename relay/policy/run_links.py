"""Which hosts a project's CI provider can own, for sending a visitor on to a reported run.

A downstream reports its run URL itself; the HUD answers a double-clicked cell with a redirect
to that run's log. Redirecting to any reported URL would lend our origin to whatever a
downstream (or a stolen token) wrote there, so a redirect goes only to the provider's own hosts:
github.com for GitHub Actions, buildkite.com when a Buildkite issuer is configured, and the hosts
of the configured GitLab issuers (gitlab.com or a self-hosted instance). Any other URL is shown
on a page that names its host, for the visitor to follow or not."""

from urllib.parse import urlsplit

from django.conf import settings

GITHUB_HOSTS = frozenset({"github.com"})
BUILDKITE_HOSTS = frozenset({"buildkite.com"})


def provider_hosts(ci_provider: str) -> frozenset[str]:
    """The web hosts runs of `ci_provider` live on, given the configured OIDC issuers."""
    if ci_provider == "github":
        return GITHUB_HOSTS
    issuers = [i for i in settings.CRCR_OIDC_ISSUERS if i.get("kind") == ci_provider]
    if ci_provider == "buildkite":
        return BUILDKITE_HOSTS if issuers else frozenset()
    if ci_provider == "gitlab":
        return frozenset(filter(None, (_host(i.get("issuer", "")) for i in issuers)))
    return frozenset()


def run_host_trusted(url: str, ci_provider: str) -> bool:
    """Whether `url` is https on a host `ci_provider` owns (no userinfo tricks: the host parsed)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme == "https" and "@" not in parts.netloc and _host(url) in provider_hosts(ci_provider)


def run_host(url: str) -> str:
    """The host a URL points at, as a visitor should read it."""
    return _host(url)


def _host(url: str) -> str:
    try:
        return (urlsplit(url).hostname or "").rstrip(".")
    except ValueError:
        return ""


def github_job_id(job) -> str:
    """The job's numeric GitHub job id, for its page `<run url>/job/<id>`: the callback's
    `workflow.job_id` when it sent one, else its check-run id when that is GitHub's numeric id
    (the two are the same number on GitHub Actions); "" when neither is a number."""
    for value in (getattr(job, "job_id", ""), getattr(job, "check_run_id", "")):
        text = str(value or "").strip()
        if text.isascii() and text.isdigit() and len(text) <= 20:
            return text
    return ""
