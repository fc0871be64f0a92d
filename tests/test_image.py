"""The production image, built the way the Dockerfile builds it but without a Docker daemon: its
COPY lines are read from the Dockerfile and exactly those paths go into an empty directory; the
wheel is built from that directory and installed into a fresh virtualenv; then the image's own
steps run there with production settings (a real SECRET_KEY, DEBUG off, App credentials set):
`check --deploy`, `migrate` against a throwaway SQLite file, `collectstatic`, and gunicorn (the
Dockerfile's CMD) answering /healthz. Nothing comes from the source tree or the dev virtualenv."""

import json
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
DEV_ONLY = {"devtools", "standin", "bench", "tests", "client"}
STEP_TIMEOUT_SECONDS = 300
SERVE_TIMEOUT_SECONDS = 60

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


# --- reading the Dockerfile -----------------------------------------------------------------------


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, with continuation lines joined."""
    joined = text.replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def exec_form(arguments: str) -> list[str]:
    return json.loads(arguments) if arguments.startswith("[") else shlex.split(arguments)


def copied_paths(text: str) -> list[str]:
    """Every source path the Dockerfile COPYs from the build context (not from other stages)."""
    sources = []
    for instruction, arguments in dockerfile_instructions(text):
        if instruction not in ("COPY", "ADD"):
            continue
        words = exec_form(arguments)
        if any(word.startswith("--from") for word in words):
            continue
        sources += [word for word in words[:-1] if not word.startswith("--")]
    return sources


def image_cmd(text: str) -> list[str]:
    return exec_form(
        [arguments for instruction, arguments in dockerfile_instructions(text) if instruction == "CMD"][-1]
    )


def test_the_dockerfile_reader_follows_copy_lines_and_the_cmd():
    text = 'FROM x\nCOPY a.toml b.md ./\nCOPY --chown=1 pkg pkg\nCOPY --from=build /w /w\nCOPY ["c d", "e"]\nCMD ["gunicorn", "x"]\n'
    assert copied_paths(text) == ["a.toml", "b.md", "pkg", "c d"]
    assert image_cmd(text) == ["gunicorn", "x"]


# --- building ------------------------------------------------------------------------------------


def run(command: list, cwd: Path, env: dict, timeout: float = STEP_TIMEOUT_SECONDS) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, command))} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return result


def private_key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def production_env(venv: Path, database: Path) -> dict:
    """Only what production sets: nothing inherited from the test process (no DATABASE_URL,
    no sandbox), TLS behind a proxy so `check --deploy` has nothing to warn about."""
    return {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(database.parent),
        "LANG": "C.UTF-8",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "crcr.example.org,127.0.0.1",
        "DATABASE_URL": f"sqlite:///{database}",
        "GITHUB_APP_ID": "424242",
        "GITHUB_APP_PRIVATE_KEY": private_key_pem(),
        "GITHUB_WEBHOOK_SECRET": secrets.token_hex(20),
        "CRCR_PUBLIC_URL": "https://crcr.example.org",
        "BEHIND_TLS_PROXY": "1",
        "SECURE_SSL_REDIRECT": "1",
        "SECURE_COOKIES": "1",
        "SECURE_HSTS_SECONDS": "31536000",
    }


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The app directory (only what the Dockerfile copies), the fresh venv with the wheel
    installed, the wheel itself, and production settings."""
    base = tmp_path_factory.mktemp("image")
    app, venv, wheels = base / "app", base / "venv", base / "wheels"
    app.mkdir()
    for source in copied_paths(DOCKERFILE.read_text()):
        origin = ROOT / source
        if origin.is_dir():
            shutil.copytree(origin, app / source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(origin, app / source)
    pip_env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    run([sys.executable, "-m", "venv", venv], base, pip_env)
    run([venv / "bin/python", "-m", "pip", "wheel", "--no-deps", "-w", wheels, app], base, pip_env)
    (wheel,) = wheels.glob("*.whl")
    run([venv / "bin/python", "-m", "pip", "install", wheel], base, pip_env)
    return {"app": app, "venv": venv, "wheel": wheel, "env": production_env(venv, base / "throwaway.sqlite3")}


def manage(image, *args) -> subprocess.CompletedProcess:
    return run([image["venv"] / "bin/python", "manage.py", *args], image["app"], image["env"])


# --- the image ------------------------------------------------------------------------------------


def test_the_wheel_ships_exactly_the_python_packages_the_dockerfile_copies(image):
    copied = {path for path in copied_paths(DOCKERFILE.read_text()) if (ROOT / path / "__init__.py").exists()}
    with zipfile.ZipFile(image["wheel"]) as wheel:
        shipped = {name.split("/")[0] for name in wheel.namelist() if name.endswith(".py")}
    assert shipped == copied
    assert {"crcr", "relay", "hud", "api"} <= shipped
    assert not shipped & DEV_ONLY


def test_the_installed_wheel_imports_every_product_module_without_the_source_tree(image, tmp_path):
    """Run from an empty directory, so only site-packages can answer."""
    script = (
        "import importlib, pkgutil, django\n"
        "django.setup()\n"
        "from django.conf import settings\n"
        "assert 'devtools' not in settings.INSTALLED_APPS, settings.INSTALLED_APPS\n"
        "for top in ('crcr', 'relay', 'hud', 'api'):\n"
        "    package = importlib.import_module(top)\n"
        "    assert 'site-packages' in package.__file__, package.__file__\n"
        "    for module in pkgutil.walk_packages(package.__path__, top + '.'):\n"
        "        if module.name != 'crcr.wsgi':\n"
        "            importlib.import_module(module.name)\n"
    )
    env = {**image["env"], "DJANGO_SETTINGS_MODULE": "crcr.settings", "CRCR_VAR_DIR": str(tmp_path / "var")}
    run([image["venv"] / "bin/python", "-c", script], tmp_path, env)


def test_check_deploy_is_clean_with_production_settings(image):
    result = manage(image, "check", "--deploy", "--fail-level", "WARNING")
    assert "no issues" in result.stdout


def test_migrate_builds_a_throwaway_database_and_leaves_nothing_unmigrated(image):
    manage(image, "migrate", "--noinput")
    result = manage(image, "makemigrations", "--check", "--dry-run")
    assert "No changes detected" in result.stdout


def test_collectstatic_gathers_the_app_and_admin_assets(image):
    manage(image, "collectstatic", "--noinput")
    collected = image["app"] / "var" / "staticfiles"
    assert (collected / "admin" / "css" / "base.css").exists()
    assert any(collected.rglob("*.css.gz")), "whitenoise compresses what it serves"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def served_command(cmd: list[str], port: int) -> list[str]:
    """The Dockerfile's CMD, bound to a free local port with one worker."""
    served = list(cmd)
    served[served.index("--bind") + 1] = f"127.0.0.1:{port}"
    served[served.index("--workers") + 1] = "1"
    return served


def get_healthz(port: int) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/healthz", headers={"Host": "crcr.example.org", "X-Forwarded-Proto": "https"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_gunicorn_serves_healthz_from_the_image(image):
    manage(image, "migrate", "--noinput")
    port = free_port()
    command = served_command(image_cmd(DOCKERFILE.read_text()), port)
    assert command[0] == "gunicorn"
    server = subprocess.Popen(
        [str(image["venv"] / "bin" / command[0]), *command[1:]],
        cwd=image["app"],
        env=image["env"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        status, report = wait_for_healthz(server, port)
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert status == 200, output[-4000:]
    assert report["sandbox"] is False
    assert all(report["checks"][name]["ok"] for name in ("database", "cache", "broker")), report
    # No worker runs here, so the heartbeat is missing and the stack is degraded, not down.
    assert report["status"] == "degraded" and "heartbeat" in report["checks"]["worker"]["error"]


def wait_for_healthz(server: subprocess.Popen, port: int) -> tuple[int, dict]:
    deadline = time.monotonic() + SERVE_TIMEOUT_SECONDS
    while time.monotonic() < deadline and server.poll() is None:
        try:
            return get_healthz(port)
        except (ConnectionError, urllib.error.URLError, TimeoutError):
            time.sleep(0.3)
    return 0, {"error": f"gunicorn did not answer within {SERVE_TIMEOUT_SECONDS} s (exit {server.poll()})"}
