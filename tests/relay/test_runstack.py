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
