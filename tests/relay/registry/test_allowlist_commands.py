import io
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from relay.management.commands.allowlist_import import raw_url
from relay.models import LevelChange, Project
from relay.registry.allowlist import parse_allowlist

pytestmark = pytest.mark.django_db

SAMPLE_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "allowlist.yml"
SAMPLE = SAMPLE_PATH.read_text()


def run(*args, **kwargs) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err, **kwargs)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def served():
    """A tiny local web server answering every GET with `served.body`, recording the paths asked."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            server.paths.append(self.path)
            status, body = (200, server.body.encode()) if self.path != "/missing" else (404, b"not found")
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.body, server.paths = SAMPLE, []
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_it_imports_a_file_and_prints_a_summary():
    out, _ = run("allowlist_import", str(SAMPLE_PATH))
    assert "11 created" in out and "created: ROCm/pytorch" in out
    assert Project.objects.count() == 11


def test_it_records_the_reason_given_on_every_level_change():
    run("allowlist_import", str(SAMPLE_PATH), "--reason", "sync with pytorch/pytorch#123")
    assert set(LevelChange.objects.values_list("reason", flat=True)) == {"sync with pytorch/pytorch#123"}


def test_it_imports_from_stdin():
    run("allowlist_import", "-", stdin=io.StringIO(SAMPLE))
    assert Project.objects.filter(full_name="intel/torch-xpu-ops", level="L3", device="xpu").exists()


def test_it_imports_from_a_url(served):
    out, _ = run("allowlist_import", f"{served.url}/.github/allowlist.yml")
    assert served.paths == ["/.github/allowlist.yml"]
    assert "11 created" in out


def test_it_turns_a_github_blob_url_into_the_raw_file_url():
    blob = "https://github.com/pytorch/pytorch/blob/main/.github/allowlist.yml"
    assert raw_url(blob) == "https://raw.githubusercontent.com/pytorch/pytorch/main/.github/allowlist.yml"
    assert raw_url("https://example.com/allowlist.yml") == "https://example.com/allowlist.yml"


def test_it_fails_with_every_error_on_stderr_and_writes_nothing(tmp_path):
    bad = tmp_path / "allowlist.yml"
    bad.write_text(SAMPLE + "  - not-a-repo\n  - 42\n")
    err = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("allowlist_import", str(bad), stdout=io.StringIO(), stderr=err)
    assert caught.value.returncode == 1 and "nothing was written" in str(caught.value)
    assert "L4 entry 2 ('not-a-repo')" in err.getvalue() and "L4 entry 3 (42)" in err.getvalue()
    assert not Project.objects.exists() and not LevelChange.objects.exists()


def test_it_fails_on_a_missing_file(tmp_path):
    with pytest.raises(CommandError):
        run("allowlist_import", str(tmp_path / "nope.yml"))


def test_it_fails_on_a_url_that_does_not_answer_200(served):
    with pytest.raises(CommandError):
        run("allowlist_import", f"{served.url}/missing")
    assert not Project.objects.exists()


def test_it_exports_the_registry_to_stdout():
    run("allowlist_import", str(SAMPLE_PATH))
    out, _ = run("allowlist_export")
    assert out.startswith("# allowlist.yml exported by CRCR HUD")
    assert parse_allowlist(out) == parse_allowlist(SAMPLE)


def test_it_seeds_the_sandbox_registry_idempotently():
    from devtools.sandbox_registry import SANDBOX_PROJECTS

    run("seed_sandbox")
    out, _ = run("seed_sandbox")
    expected = len(SANDBOX_PROJECTS)
    assert f"{expected} projects" in out and Project.objects.count() == expected


EVERY_SHAPE_PATH = SAMPLE_PATH.parent / "allowlist_every_shape.yml"


def test_it_stores_each_entrys_events_on_the_project():
    run("allowlist_import", str(EVERY_SHAPE_PATH))
    events = dict(Project.objects.values_list("full_name", "events"))
    assert events["TorchedHat/pytorch-redhat-ci"] == ["nightly"] and events["intel/torch-xpu-ops"] == ["pull_request"]
    assert events["huggingface/transformers"] == [] and events["example/gating"] == ["nightly", "pull_request"]
    redhat = Project.objects.get(full_name="TorchedHat/pytorch-redhat-ci")
    assert redhat.oncalls == ["someone"] and redhat.nightly_only and not redhat.takes_pull_requests


def test_a_file_mixing_every_accepted_shape_round_trips_through_import_and_export_without_loss(tmp_path):
    run("allowlist_import", str(EVERY_SHAPE_PATH))
    exported, _ = run("allowlist_export")
    assert parse_allowlist(exported) == parse_allowlist(EVERY_SHAPE_PATH.read_text())
    (tmp_path / "again.yml").write_text(exported)
    out, _ = run("allowlist_import", str(tmp_path / "again.yml"))
    assert "0 created, 0 updated, 0 deactivated, 18 unchanged" in out
    assert run("allowlist_export")[0] == exported


def test_the_issues_example_imports_where_it_used_to_stop_with_an_oncalls_error(tmp_path):
    (tmp_path / "allowlist.yml").write_text(
        "L2:\n  - TorchedHat/pytorch-redhat-ci:\n      events: [nightly]\n      oncalls: [someone]\n"
        "L3:\n  xpu:\n    intel/torch-xpu-ops:\n      events: [pull_request]\n      oncalls: someone-else\n"
    )
    out, _ = run("allowlist_import", str(tmp_path / "allowlist.yml"))
    assert "2 created" in out
    assert Project.objects.get(full_name="intel/torch-xpu-ops").device == "xpu"
