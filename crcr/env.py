"""Reading configuration from the environment, with `NAME_FILE` accepted for secrets."""

import os
from pathlib import Path


def env(name: str, default: str | None = None) -> str | None:
    """The value of NAME, else the contents of the file named by NAME_FILE, else default."""
    value = os.environ.get(name)
    if value is not None and value != "":
        return value
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    return default


def env_bool(name: str, default: bool) -> bool:
    value = env(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = env(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {value!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    value = env(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_int_or_off(name: str, default: int) -> int | None:
    """An integer, or None when NAME is "off"."""
    value = env(name)
    if value is not None and value.strip().lower() == "off":
        return None
    return env_int(name, default)
