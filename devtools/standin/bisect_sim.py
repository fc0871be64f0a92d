"""The sandbox's bisection world: backend-only failures injected at known upstream commits, which
every run of that backend on a descendant commit fails (a regular dispatch, a nightly, a probe),
and the probe workflow a backend adds to answer the relay's bisection probes (docs/downstream-ci.md,
"Bisection probes"): it runs only the tests the probe names, on the commit it names, and reports
them through the ordinary callback, echoing the probe's client_payload.

Three injections a sandbox session makes (devtools/standin/sandbox.py: `simulate`):

- inside a multi-commit push, on Ascend NPU: the bisection names the culprit and verifies it;
- inside a 12-commit nightly range, on the nightly-only Red Hat repo: the same, in 4 + 2 probes;
- flaky, on Ascend NPU: it passes its culprit re-run, so the bisection reads not reproducible.

Ancestry is kept here as the simulator makes commits (trunk order, and each PR head's base)."""

from dataclasses import dataclass

TRUNK_INDEX: dict[str, int] = {}
"""Trunk commit → its place on trunk's first-parent history."""
BASE_OF: dict[str, str] = {}
"""A PR head → the trunk commit it was made on."""


@dataclass(frozen=True)
class Injection:
    backend: str
    culprit: str
    spec: tuple[str, str, str, str]
    """(file, class, method, hw), as the sandbox's TEST_POOL holds tests."""
    flaky: bool = False


INJECTIONS: list[Injection] = []


def trunk_record(sha: str) -> None:
    TRUNK_INDEX.setdefault(sha, len(TRUNK_INDEX))


def head_record(sha: str, base: str) -> None:
    BASE_OF[sha] = base


def descends(sha: str, ancestor: str) -> bool:
    """Whether `sha` (a trunk commit or a PR head) has `ancestor` (a trunk commit) in its history."""
    at = TRUNK_INDEX.get(sha, TRUNK_INDEX.get(BASE_OF.get(sha, ""), -1))
    return ancestor in TRUNK_INDEX and at >= TRUNK_INDEX[ancestor]


def inject(backend: str, culprit: str, spec: tuple, flaky: bool = False) -> Injection:
    injection = Injection(backend, culprit, spec, flaky)
    INJECTIONS.append(injection)
    return injection


def injected(backend: str, sha: str, role: str = "") -> list[tuple]:
    """The injected tests a run of `backend` on `sha` fails. A flaky one passes when it is re-run
    to verify its culprit, as a flaky test does now and then."""
    return [
        i.spec
        for i in INJECTIONS
        if i.backend.lower() == backend.lower() and descends(sha, i.culprit) and not (i.flaky and role == "culprit")
    ]


def is_probe(client_payload: dict) -> bool:
    return client_payload.get("event_type") == "bisect" and isinstance(client_payload.get("bisect"), dict)


def probe_jobs(project: dict, client_payload: dict, shaped) -> list[dict]:
    """The probe workflow's one job: the named tests run on the named commit; the injected ones
    that apply there fail (`shaped(spec)` writes one as the backend's producer reports it)."""
    probe = client_payload["bisect"]
    failing = [shaped(spec) for spec in injected(project["full_name"], probe["sha"], probe.get("role", ""))]
    asked = len(probe.get("tests") or [])
    return [
        {
            "name": "bisect " + ", ".join(probe.get("jobs") or ["tests"]),
            "attempt": 1,
            "conclusion": "failure" if failing else "success",
            "queue": 2.0,
            "duration": 6.0,
            "never_starts": False,
            "hangs": False,
            "flaky": False,
            "broken_before_tests": False,
            "failed_tests": failing,
            "test_results": {"passed": max(0, asked - len(failing)), "failed": len(failing), "skipped": 0},
        }
    ]
