"""Start-up rules for the secrets: a production process refuses to run on a public or missing
SECRET_KEY, and on some-but-not-all of the GitHub App's credentials."""

import os
import secrets
import time
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

PUBLIC_SECRET_KEYS = frozenset(
    {
        "change-me",
        "changeme",
        "secret",
        "dev-only-insecure-secret-key-change-me-in-production-0123456789",
    }
)
"""Keys that have been published (old defaults, compose placeholders): as good as none."""
MIN_SECRET_KEY_CHARS = 32
APP_CREDENTIALS = ("GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET")


def secret_key_problem(value: str | None) -> str:
    if not value:
        return "SECRET_KEY is not set"
    if value in PUBLIC_SECRET_KEYS or value.startswith("django-insecure"):
        return "SECRET_KEY is a published placeholder"
    if len(value) < MIN_SECRET_KEY_CHARS or len(set(value)) < 8:
        return f"SECRET_KEY is too weak (at least {MIN_SECRET_KEY_CHARS} random characters)"
    return ""


def secret_key(value: str | None, *, allow_generated: bool, var_dir: Path) -> tuple[str, bool]:
    """(key, generated?). Outside sandbox and DEBUG a missing or weak key stops the process."""
    problem = secret_key_problem(value)
    if not problem:
        return value, False
    if not allow_generated:
        raise ImproperlyConfigured(
            f"{problem}. It signs sessions and every dispatch's callback_token, so production will not start without a "
            "real one: set SECRET_KEY (or SECRET_KEY_FILE) to at least 50 random characters, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(64))'`."
        )
    return _generated_key(var_dir), True


def _generated_key(var_dir: Path) -> str:
    """A random key for this checkout's sandbox, created once and shared by its processes."""
    path = Path(var_dir) / "secret-key"
    try:
        # Exclusive and private: concurrent first starts agree on one key nobody else can read.
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(secrets.token_urlsafe(64))
    except FileExistsError:
        pass
    for _ in range(50):
        key = path.read_text().strip()
        if key:
            return key
        time.sleep(0.02)  # another process created the file and is writing it
    raise ImproperlyConfigured(f"{path} is empty; delete it to let the sandbox create a new key")


def app_credentials_check(*values: str | None) -> None:
    given = [name for name, value in zip(APP_CREDENTIALS, values, strict=True) if value]
    if given and len(given) < len(APP_CREDENTIALS):
        missing = [name for name in APP_CREDENTIALS if name not in given]
        raise ImproperlyConfigured(
            f"Partial GitHub App credentials: {', '.join(given)} set but {', '.join(missing)} missing (each may also be given "
            "as NAME_FILE, a path the process can read). Set all three for production, or none for sandbox mode."
        )
