"""What a process refuses to start with: a public or missing SECRET_KEY outside sandbox/DEBUG,
and some-but-not-all of the GitHub App's credentials; what the sandbox refuses to write to; and
the compose file forwarding every secret, including the `_FILE` forms, and never a placeholder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

ROOT = Path(__file__).resolve().parents[2]
REAL_KEY = "startup-test-" + "k3y-" * 12
PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"


def run_manage(tmp_path, *args, **env) -> subprocess.CompletedProcess:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY") and not k.startswith(("GITHUB_", "CRCR_"))
    }
    base.update(
        DJANGO_SETTINGS_MODULE="crcr.settings",
        CRCR_VAR_DIR=str(tmp_path),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
    )
    base.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=base, capture_output=True, text=True, timeout=90
    )


# --- SECRET_KEY ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        None,
        "",
        "change-me",
        "dev-only-insecure-secret-key-change-me-in-production-0123456789",
        "django-insecure-abcdefghijklmnopqrstuvwxyz0123456789",
        "short-key",
    ],
)
def test_production_refuses_to_start_without_a_real_secret_key(tmp_path, key):
    env = {"CRCR_SANDBOX": "0"} | ({"SECRET_KEY": key} if key is not None else {})
    result = run_manage(tmp_path, "check", **env)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr and "ImproperlyConfigured" in result.stderr


def test_a_secret_key_file_is_accepted(tmp_path):
    (tmp_path / "key").write_text(REAL_KEY + "\n")
    assert run_manage(tmp_path, "check", CRCR_SANDBOX="0", SECRET_KEY_FILE=str(tmp_path / "key")).returncode == 0


def test_sandbox_and_debug_runs_get_a_private_random_key_that_check_deploy_flags(tmp_path):
    script = "from django.conf import settings; print(settings.SECRET_KEY_IS_GENERATED, len(settings.SECRET_KEY))"
    for env in ({"CRCR_SANDBOX": "1"}, {"CRCR_SANDBOX": "0", "DEBUG": "1"}):
        result = run_manage(tmp_path, "shell", "-c", script, **env)
        assert result.returncode == 0 and result.stdout.split()[-2:] == ["True", "86"], result.stderr
    key_file = tmp_path / "secret-key"
    assert key_file.stat().st_mode & 0o077 == 0, "the generated key is readable by its owner only"
    assert key_file.read_text().strip() not in (REAL_KEY, "change-me")
    deploy = run_manage(tmp_path, "check", "--deploy", DEBUG="1", CRCR_SANDBOX="0")
    assert deploy.returncode != 0 and "crcr.E001" in deploy.stderr + deploy.stdout


def test_the_compose_file_carries_no_placeholder_secret_and_never_runs_the_sandbox():
    text = (ROOT / "docker-compose.yml").read_text()
    assert "change-me" not in text
    environment = yaml.safe_load(text)["x-app"]["environment"]
    assert environment["CRCR_SANDBOX"] == "0"
    for name in ("SECRET_KEY", "GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET"):
        assert environment[name] == f"${{{name}:-}}" and environment[f"{name}_FILE"] == f"${{{name}_FILE:-}}"


# --- partial GitHub App credentials -------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        ("GITHUB_APP_ID", "GITHUB_WEBHOOK_SECRET"),
        ("GITHUB_APP_PRIVATE_KEY",),
        ("GITHUB_APP_ID",),
        ("GITHUB_WEBHOOK_SECRET", "GITHUB_APP_PRIVATE_KEY"),
    ],
)
def test_partial_app_credentials_are_a_startup_error_not_sandbox_mode(tmp_path, given):
    values = {"GITHUB_APP_ID": "1001", "GITHUB_APP_PRIVATE_KEY": PRIVATE_KEY, "GITHUB_WEBHOOK_SECRET": "whsec"}
    result = run_manage(tmp_path, "check", SECRET_KEY=REAL_KEY, **{name: values[name] for name in given})
    assert result.returncode != 0
    assert "Partial GitHub App credentials" in result.stderr


def test_credentials_given_as_files_count_as_given(tmp_path):
    (tmp_path / "app.pem").write_text(PRIVATE_KEY)
    (tmp_path / "hook").write_text("whsec\n")
    script = "from django.conf import settings; print(settings.CRCR_SANDBOX, settings.GITHUB_WEBHOOK_SECRET)"
    result = run_manage(
        tmp_path,
        "shell",
        "-c",
        script,
        SECRET_KEY=REAL_KEY,
        GITHUB_APP_ID="1001",
        GITHUB_APP_PRIVATE_KEY_FILE=str(tmp_path / "app.pem"),
        GITHUB_WEBHOOK_SECRET_FILE=str(tmp_path / "hook"),
    )
    assert result.returncode == 0 and result.stdout.split()[-2:] == ["False", "whsec"], result.stderr


# --- the sandbox's database ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_sandbox_refuses_a_database_holding_a_registry_it_did_not_seed(settings):
    from relay.models import Project, RelayState
    from tests.factories import ProjectFactory

    ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    settings.CRCR_SANDBOX_FORCE = False
    with pytest.raises(CommandError, match="Refusing to run the sandbox"):
        call_command("seed_sandbox")
    assert list(Project.objects.values_list("full_name", flat=True)) == ["intel/torch-xpu-ops"]
    assert not RelayState.objects.filter(key="sandbox-database").exists()


@pytest.mark.django_db
def test_the_sandbox_refuses_a_database_holding_deliveries(settings):
    from tests.factories import DeliveryFactory

    DeliveryFactory(guid="production-delivery")
    settings.CRCR_SANDBOX_FORCE = False
    with pytest.raises(CommandError, match="CRCR_SANDBOX_FORCE"):
        call_command("seed_sandbox")


@pytest.mark.django_db
def test_the_sandbox_claims_a_fresh_database_and_keeps_using_it(settings):
    from relay.models import Project, RelayState

    settings.CRCR_SANDBOX_FORCE = False
    call_command("seed_sandbox")
    assert RelayState.objects.filter(key="sandbox-database").exists() and Project.objects.count() > 5
    call_command("seed_sandbox")  # its own database: no refusal the second time


@pytest.mark.django_db
def test_forcing_the_sandbox_onto_a_used_database_is_recorded(settings):
    from relay.models import RelayState
    from tests.factories import ProjectFactory

    ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    settings.CRCR_SANDBOX_FORCE = True
    call_command("seed_sandbox")
    assert RelayState.objects.get(key="sandbox-database").value["forced"] is True
