"""The sandbox's upstream: its PR numbers stay unique when the sandbox restarts on the same state
dir (`make run` again on the same var/), as the relay keeps the earlier PRs."""

import socket

import pytest

from devtools.standin import StandIn
from devtools.standin.sandbox import UPSTREAM, Upstream


@pytest.fixture
def nowhere() -> str:
    """A relay URL nothing listens on: the sandbox's webhooks are refused at once (and logged)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def _upstream(app_key_pem, nowhere, state_dir) -> Upstream:
    return Upstream(StandIn(app_id=1001, app_private_key_pem=app_key_pem), nowhere, "secret", ["xpu"], state_dir)


def test_the_first_pr_takes_the_first_number(app_key_pem, nowhere, tmp_path):
    assert _upstream(app_key_pem, nowhere, tmp_path).open_pr().number == Upstream.FIRST_PULL


def test_a_restarted_sandbox_opens_prs_above_every_earlier_one(app_key_pem, nowhere, tmp_path):
    before = _upstream(app_key_pem, nowhere, tmp_path)
    earlier = [before.open_pr().number for _ in range(3)]
    after = _upstream(app_key_pem, nowhere, tmp_path)  # a new process: a fresh stand-in, the same dir
    assert after.open_pr().number == max(earlier) + 1


def test_a_pr_number_the_relay_took_for_a_demotion_pr_is_not_reused(app_key_pem, nowhere, tmp_path):
    upstream = _upstream(app_key_pem, nowhere, tmp_path)
    first = upstream.open_pr().number
    upstream.standin.add_pull(UPSTREAM, first + 1, "d" * 40)  # the relay's demotion PR, through the API
    assert upstream.open_pr().number == first + 2
