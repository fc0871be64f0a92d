"""make run's supervisor: a worker that dies (e.g. its broker connection dropped) comes back; a
crash loop, or the web server dying, stops everything."""

import sys
import time

import pytest
from django.core.management import CommandError

from devtools.management.commands.runstack import MAX_RESTARTS, Command


@pytest.fixture
def supervisor():
    command = Command()
    command.children = []
    yield command
    command.stop_all()


def test_a_dead_worker_is_restarted(supervisor):
    supervisor.spawn("worker", [sys.executable, "-c", "raise SystemExit(3)"], None)
    time.sleep(0.5)
    supervisor.check_children()
    assert len(supervisor.children) == 1 and len(supervisor.children[0].crcr_restarts) == 1


def test_a_crash_looping_worker_stops_everything(supervisor):
    child = supervisor.spawn("worker", [sys.executable, "-c", "raise SystemExit(3)"], None)
    child.crcr_restarts = [time.monotonic()] * MAX_RESTARTS
    time.sleep(0.5)
    with pytest.raises(CommandError, match="worker exited"):
        supervisor.check_children()


def test_the_web_server_dying_stops_everything(supervisor):
    supervisor.spawn("web", [sys.executable, "-c", "raise SystemExit(1)"], None)
    time.sleep(0.5)
    with pytest.raises(CommandError, match="web exited"):
        supervisor.check_children()


# --- the calm terminal ----------------------------------------------------------------------------


@pytest.fixture
def quiet_supervisor(tmp_path):
    import io

    from django.core.management.base import OutputWrapper

    command = Command(stdout=io.StringIO())
    command.stdout = OutputWrapper(command.stdout._out)
    command.children, command.log_dir = [], tmp_path
    yield command
    command.stop_all()


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def test_a_childs_output_goes_to_its_log_file_not_the_terminal_and_errors_are_counted(quiet_supervisor, tmp_path):
    script = (
        "print('GET / 200'); print('2026-12-02 10:00:00 ERROR relay boom'); print('Traceback (most recent call last):')"
    )
    child = quiet_supervisor.spawn("worker", [sys.executable, "-c", script], None)
    child.wait(timeout=10)
    assert wait_for(lambda: child.crcr_errors == 2)
    log = (tmp_path / "worker.log").read_text()
    assert "GET / 200" in log and "ERROR relay boom" in log and "worker started" in log
    assert "GET / 200" not in quiet_supervisor.stdout._out.getvalue()


def test_with_logs_on_every_line_also_reaches_the_terminal_prefixed_by_its_process(quiet_supervisor, tmp_path):
    quiet_supervisor.verbose = True
    child = quiet_supervisor.spawn("web", [sys.executable, "-c", "print('GET /crcr 200')"], None)
    child.wait(timeout=10)
    assert wait_for(lambda: "    web | GET /crcr 200" in quiet_supervisor.stdout._out.getvalue())
    assert "GET /crcr 200" in (tmp_path / "web.log").read_text()


def test_the_minute_summary_counts_what_changed_and_points_at_logs_with_errors():
    from devtools.management.commands.runstack import summary_line

    before = {"webhooks": 10, "dispatches": 40, "callbacks": 70, "failures": 1, "results": 30}
    after = {"webhooks": 13, "dispatches": 52, "callbacks": 90, "failures": 2, "results": 40}
    assert (
        summary_line(before, after, {})
        == "last minute: 3 webhooks · 12 dispatches · 20 callbacks · 1 dispatch given up · 0 errors logged"
    )
    assert summary_line(before, after, {"worker": 2}).endswith(
        "1 dispatch given up · 2 errors logged (in var/log/worker.log)"
    )


@pytest.mark.django_db
def test_the_activity_counts_read_the_relays_tables():
    from relay.selectors import activity_counts
    from tests.factories import DeliveryFactory, DispatchFactory, JobRunFactory

    delivery = DeliveryFactory()
    DispatchFactory(delivery=delivery, state="sent")
    DispatchFactory(delivery=DeliveryFactory(), state="failed")
    JobRunFactory(status="completed", conclusion="success")
    JobRunFactory(status="in_progress", conclusion="", in_progress_at=None)
    counts = activity_counts()
    assert counts["webhooks"] == 2 and counts["dispatches"] == 1 and counts["failures"] == 1 and counts["results"] == 1


@pytest.mark.django_db
def test_first_results_get_one_line_with_the_url(quiet_supervisor):
    from devtools.management.commands.runstack import StatusReporter
    from tests.factories import JobRunFactory

    reporter = StatusReporter(quiet_supervisor, "http://127.0.0.1:8160", every=3600)
    reporter.watch_first_results()
    assert "first results" not in quiet_supervisor.stdout._out.getvalue()
    JobRunFactory(status="completed", conclusion="success")
    reporter.watch_first_results()
    reporter.watch_first_results()
    out = quiet_supervisor.stdout._out.getvalue()
    assert out.count("first results are in (1 job reported) — see them at http://127.0.0.1:8160/") == 1


@pytest.mark.django_db
def test_sandbox_admin_gets_a_generated_password_kept_in_a_private_file(tmp_path):
    from django.contrib.auth import get_user_model

    from devtools.management.commands.runstack import sandbox_admin

    path = tmp_path / "admin-password"
    password = sandbox_admin(path)
    user = get_user_model().objects.get(username="admin")
    assert user.is_superuser and user.check_password(password) and len(password) >= 16
    assert path.read_text() == password and path.stat().st_mode & 0o777 == 0o600
    assert sandbox_admin(path) == password, "the next run says the same password"
    user.set_password("changed-by-hand-123")
    user.save()
    assert sandbox_admin(path) is None, "a password someone changed is neither shown nor reset"
    assert get_user_model().objects.get(username="admin").check_password("changed-by-hand-123")


def test_the_embedded_broker_connects_without_kombus_no_hostname_warning(caplog, settings, tmp_path):
    """The filesystem broker has no host; kombu used to warn "No hostname was supplied" on every
    connection of every process, once a second in `make run`'s output."""
    from kombu import Connection

    folders = {
        key: str(tmp_path) for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")
    }
    with (
        caplog.at_level("WARNING", logger="kombu.connection"),
        Connection("crcrfs://", transport_options=folders) as connection,
    ):
        connection.default_channel.queue_declare(queue="q")
        assert connection.info()["hostname"] is None
    assert "No hostname" not in caplog.text
