"""/metrics for Prometheus: behind its bearer token, the relay's figures read from the database
(so every process agrees), the callbacks' answers counted across processes in prometheus_client's
multiprocess mode, the level criteria per backend, text that `promtool check metrics` accepts,
and the shipped alerting rules passing `promtool test rules`.

promtool is Debian's `prometheus` package, which .ci/run installs and asks for with
CRCR_REQUIRE_PROMTOOL=1; elsewhere the promtool tests skip when it is missing."""

import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from hud.management.commands.metrics_serve import application
from relay.health.healthz import HEARTBEAT_KEY
from relay.models import Dispatch, Project, RelayState
from tests.factories import DispatchFactory
from tests.hud.test_selectors_summary import job, project

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]
ROOT = Path(__file__).resolve().parent.parent
TOKEN = "s3cret-metrics-token-for-tests"


@pytest.fixture(autouse=True)
def metrics_settings(settings):
    settings.CRCR_METRICS_TOKEN = TOKEN
    settings.CRCR_METRICS_CACHE_SECONDS = 0


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CRCR_REQUIRE_PROMTOOL") == "1":
            pytest.fail("promtool is not installed (apt-get install prometheus) and CRCR_REQUIRE_PROMTOOL=1")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return found


def scrape(client) -> str:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain; version=0.0.4")
    return response.content.decode()


def samples(text: str) -> dict:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def world():
    """A probe with a night and two PRs (one failing), an L3 backend with results, dispatches."""
    now = timezone.now()
    probe = Project.objects.create(
        full_name="pytorch/crcr-test", level="L2", is_health_probe=True, hardware_kind="probe", github_repo_id=9
    )
    job(probe, sha="c" * 40, event_type="nightly", name="xfail", conclusion="success", at=now, completed_at=now)
    for number, conclusion in ((1, "success"), (2, "failure")):
        job(probe, sha=f"{number}" * 40, name="smoke", conclusion=conclusion, pr_number=number, run_id=str(number))
    backend = project("Ascend/pytorch", level="L3")
    for i in range(4):
        job(backend, sha=f"{i:040x}", conclusion="success" if i else "failure", queue_seconds=60, execution_seconds=600)
    DispatchFactory(project=backend, state=Dispatch.State.SENT)
    DispatchFactory(project=backend, state=Dispatch.State.RETRYING)
    RelayState.objects.create(key=HEARTBEAT_KEY, value={})
    return probe, backend


def test_metrics_are_not_served_without_a_token_configured_nor_without_the_token(client, settings):
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401
    settings.CRCR_METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 404


def test_a_scrape_reads_the_relays_figures_from_the_database(client):
    world()
    found = samples(scrape(client))
    assert found[("crcr_dispatches", (("state", "sent"),))] == 1
    assert found[("crcr_dispatches", (("state", "retrying"),))] == 1
    assert found[("crcr_outbox_depth", (("kind", "dispatch"),))] == 1
    assert found[("crcr_outbox_oldest_age_seconds", (("kind", "dispatch"),))] >= 0
    assert found[("crcr_webhook_deliveries_total", (("outcome", "relayed"),))] == 2
    assert 0 <= found[("crcr_worker_heartbeat_age_seconds", ())] < 60
    assert found[("crcr_sweeper_lag_seconds", ())] == 0
    assert found[("crcr_probe_nightly_unexpected_jobs", ())] == 1  # an xfail job that passed
    assert found[("crcr_probe_pr_pass_rate", ())] == 0.5
    assert found[("crcr_probe_prs_counted", ())] == 2
    assert timezone.now().timestamp() - found[("crcr_probe_nightly_last_completed_timestamp_seconds", ())] < 60
    assert found[("crcr_alert_firing", (("rule", "probe_nightly_silent"),))] == 0


def test_a_scrape_gives_every_backends_level_criteria(client):
    world()
    found = samples(scrape(client))
    key = (("criterion", "pass_rate"), ("level", "L3"), ("repo", "Ascend/pytorch"), ("window_days", "7"))
    assert found[("crcr_level_criterion_measured", key)] == 0.75
    assert found[("crcr_level_criterion_target", key)] == 0.9
    assert found[("crcr_level_criterion_met", key)] == 0
    assert not any(
        name.startswith("crcr_level") and dict(labels).get("repo") == "pytorch/crcr-test" for name, labels in found
    )


def test_the_sweepers_lag_is_how_long_the_oldest_stuck_job_is_past_its_sweep(client, settings):
    backend = project(level="L2")
    started = timezone.now() - timedelta(hours=settings.CRCR_JOB_TIMEOUT_HOURS, minutes=25 + 60)
    job(backend, status="in_progress", in_progress_at=started)
    found = samples(scrape(client))
    assert found[("crcr_sweeper_stuck_jobs", ())] == 1
    assert 3590 < found[("crcr_sweeper_lag_seconds", ())] < 3700


def test_each_callback_answer_is_counted(client):
    before = samples(scrape(client)).get(("crcr_callback_answers_total", (("answer", "bad_request"),)), 0)
    for _ in range(3):
        assert client.post("/github/callback", data=b"[]", content_type="application/json").status_code == 400
    after = samples(scrape(client))[("crcr_callback_answers_total", (("answer", "bad_request"),))]
    assert after - before == 3


def test_callback_answers_add_up_across_processes_in_multiprocess_mode(tmp_path):
    """Two processes count their answers into PROMETHEUS_MULTIPROC_DIR, as gunicorn's workers do
    (crcr/gunicorn_conf.py sets it); the collector /metrics uses sees their sum."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "crcr.settings"}
    code = (
        "import django; django.setup()\n"
        "from relay.health.metrics import callback_answered\n"
        "for _ in range({n}): callback_answered(200, 'completed')\n"
        "callback_answered(429)\n"
    )
    for n in (5, 7):
        subprocess.run([sys.executable, "-c", code.format(n=n)], cwd=ROOT, env=env, check=True, timeout=120)
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(tmp_path))
    assert registry.get_sample_value("crcr_callback_answers_total", {"answer": "completed"}) == 12
    assert registry.get_sample_value("crcr_callback_answers_total", {"answer": "rate_limited"}) == 2


def test_promtool_accepts_a_real_scrape(client, tmp_path):
    world()
    client.post("/github/callback", data=b"{}", content_type="application/json")
    text = scrape(client)
    result = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_shipped_alerting_rules_pass_their_promtool_tests():
    rules = ROOT / "deploy" / "prometheus"
    checked = subprocess.run(
        [promtool(), "check", "rules", str(rules / "crcr-alerts.yml")], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool(), "test", "rules", str(rules / "crcr-alerts.test.yml")], capture_output=True, text=True, timeout=60
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_rules_watch_the_figures_the_relay_exports(client):
    """A rule on a metric the relay stopped exporting would never fire: every name a rule reads is
    one a scrape can give."""
    import re

    import yaml

    world()
    exported = {family.name for family in text_string_to_metric_families(scrape(client))}
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "crcr-alerts.yml").read_text())["groups"][0]["rules"]
    read = {name for rule in rules for name in re.findall(r"crcr_[a-z_]+", rule["expr"])}
    assert read and read <= exported


def test_the_separate_bind_address_serves_the_same_text_without_a_token(wsgi_direct):
    world()
    answered = {}
    body = b"".join(application({"PATH_INFO": "/metrics"}, lambda status, headers: answered.update(status=status)))
    assert answered["status"] == "200 OK" and b"crcr_probe_pr_pass_rate 0.5" in body
    application({"PATH_INFO": "/admin"}, lambda status, headers: answered.update(status=status))
    assert answered["status"] == "404 Not Found"
    json.dumps(answered)
