"""A relay wired to the GitHub stand-in over HTTP: signed webhooks in, dispatches and upstream
writes sent by the real code (the Celery kicks replaced by explicit `drain()`), callbacks posted
with OIDC tokens the way the downstream action does."""

import copy
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from relay.dispatch import sending as dispatching
from relay.models import Delivery, Dispatch, UpstreamWrite
from tests.conftest import UPSTREAM, action_body, fixture_payload
from tests.factories import ProjectFactory

HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
NEW_HEAD = "b" * 40
UPSTREAM_INSTALLATION = 1


class Relay:
    def __init__(self, client, standin, oidc, post_webhook, capture):
        self.client, self.gh, self.oidc, self.post_webhook, self.capture = client, standin, oidc, post_webhook, capture
        self._ids = iter(range(5000, 6000))

    # --- the world ---

    def backend(self, repo: str, level: str, device: str = "", oncalls=(), **fields):
        installation = next(self._ids)
        self.gh.add_installation(installation_id=installation, account=repo.split("/")[0] + str(installation))
        repo_id = next(self._ids) + 100000
        self.gh.add_repo(repo, repo_id=repo_id, installation_id=installation)
        return ProjectFactory(
            full_name=repo, level=level, device=device, oncalls=list(oncalls), github_repo_id=repo_id, **fields
        )

    def pr(
        self,
        action: str = "opened",
        number: int = 2,
        head: str = HEAD,
        labels=(),
        label: str | None = None,
        fork: bool = False,
    ) -> Delivery:
        """A pull_request webhook, then every dispatch it made sent to the stand-in."""
        payload = copy.deepcopy(fixture_payload("pull_request.opened"))
        payload.update(action=action, number=number)
        pr = payload["pull_request"]
        pr.update(number=number, labels=[{"name": name} for name in labels])
        pr["head"]["sha"] = head
        if fork:
            pr["head"]["repo"] = {**pr["head"]["repo"], "full_name": "contributor/pytorch", "id": 4242424}
        if label is not None:
            payload["label"] = {"name": label}
        with self.capture(execute=True):
            response = self.post_webhook("pull_request", payload)
        assert response.status_code in (200, 202), response.content
        delivery = Delivery.objects.get(guid=response.json()["delivery"])
        self.send_dispatches(delivery)
        return delivery

    def send_dispatches(self, delivery: Delivery) -> None:
        for pk in delivery.dispatches.filter(state=Dispatch.State.PENDING).values_list("pk", flat=True):
            with self.capture(execute=True):
                dispatching.dispatch_send(pk)

    def webhook(self, event: str, payload: dict) -> dict:
        with self.capture(execute=True):
            response = self.post_webhook(event, payload)
        assert response.status_code in (200, 202), response.content
        return response.json()

    def report(
        self,
        project,
        status: str,
        conclusion: str | None = None,
        *,
        pr: int = 2,
        head: str = HEAD,
        job: str = "build",
        attempt: str = "1",
        run_id: str = "4242",
        **extra,
    ) -> dict:
        """One callback of a downstream job, as the existing action posts it."""
        dispatch = Dispatch.objects.filter(project=project, pr_number=pr, head_sha=head, state="sent").latest(
            "created_at", "id"
        )
        body = action_body(
            dispatching.dispatch_client_payload(dispatch),
            status,
            conclusion,
            run_id=run_id,
            attempt=attempt,
            job=job,
            url=f"https://github.com/{project.full_name}/actions/runs/{run_id}",
            **extra,
        )
        token = self.oidc.mint(repository=project.full_name, repository_id=str(project.github_repo_id))
        with self.capture(execute=True):
            response = self.client.post(
                "/github/callback",
                data=json.dumps(body),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {token}",
            )
        assert response.status_code == 200, response.content
        return response.json()

    def sweep_results(self, hours_later: float = 7) -> None:
        from relay.dispatch.results_sweep import results_sweep

        with self.capture(execute=True):
            results_sweep(now=timezone.now() + timedelta(hours=hours_later))

    # --- the outbox, as a worker would run it ---

    def drain(self, rounds: int = 30) -> int:
        """Send every due upstream write until none is left; returns how many were sent."""
        from relay.checks.outbox import write_send

        sent = 0
        for _ in range(rounds):
            due = list(
                UpstreamWrite.objects.filter(
                    state__in=UpstreamWrite.UNSENT_STATES, next_attempt_at__lte=timezone.now()
                ).values_list("pk", flat=True)
            )
            if not due:
                return sent
            for pk in due:
                with self.capture(execute=True):
                    sent += write_send(pk) is not None
        raise AssertionError("upstream writes kept coming")

    def make_due(self) -> None:
        UpstreamWrite.objects.filter(state__in=UpstreamWrite.UNSENT_STATES).update(
            next_attempt_at=timezone.now() - timedelta(seconds=1)
        )

    # --- what GitHub shows ---

    def check_runs(self, name: str | None = None, head: str | None = None) -> list[dict]:
        return [
            r
            for r in self.gh.check_runs
            if (name is None or r["name"] == name) and (head is None or r["head_sha"] == head)
        ]

    def check_run(self, name: str, head: str = HEAD) -> dict:
        [run] = self.check_runs(name, head)
        return run

    def writes_to(self, method: str, path: str) -> list:
        return self.gh.requests(method, path)


@pytest.fixture
def relay(client, standin, oidc, post_webhook, django_capture_on_commit_callbacks, monkeypatch, settings):
    """The relay, the stand-in with the App installed on the upstream, and no Celery: tests drain."""
    from relay.dispatch import fan_out
    from relay.github import writes

    standin.add_installation(installation_id=UPSTREAM_INSTALLATION, account="pytorch")
    standin.add_repo(UPSTREAM, repo_id=65600975, installation_id=UPSTREAM_INSTALLATION)
    monkeypatch.setattr(writes, "write_kick", lambda pk, countdown=0.0: None)
    monkeypatch.setattr(fan_out, "_kick_fan_out", lambda pk: None)
    settings.CRCR_PUBLIC_URL = "https://hud.example.org"
    return Relay(client, standin, oidc, post_webhook, django_capture_on_commit_callbacks)
