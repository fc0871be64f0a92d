"""Sandbox mode's simulated world: the stand-in plus simulated upstream activity (signed PR and
push webhooks) and simulated downstream CI (runners that react to the dispatches the stand-in
receives and call back with minted OIDC tokens), all through the relay's real HTTP endpoints.

Run as `python -m standin.sandbox --relay-url URL --state-dir DIR --webhook-secret-file F`; it
writes DIR/standin.json once listening and starts simulating once DIR/registry.json appears."""

import argparse
import hashlib
import hmac
import io
import json
import logging
import random
import signal
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.etree import ElementTree

import httpx

from . import bisect_sim, causes_sim
from . import sandbox_enablement as enablement
from .__main__ import _write_atomically, load_or_create

logger = logging.getLogger("sandbox")
UPSTREAM, UPSTREAM_ID, INSTALLATION_ID = "pytorch/pytorch", 65600975, 1
AUDIENCE = "pytorch-cross-repo-ci-relay"
TEST_POOL = [
    ("test_ops.py", "TestCommon{D}", "test_out_addmm_{d}_float32", "GENERIC"),
    ("test_ops.py", "TestCommon{D}", "test_noncontiguous_samples_matmul_{d}_float16", "GENERIC"),
    ("test_nn.py", "TestNNDevice{D}", "test_conv2d_backward_{d}_bfloat16", "ACCELERATOR"),
    ("test_torch.py", "TestTorchDevice{D}", "test_storage_resize_{d}", "ACCELERATOR"),
    ("test_autograd.py", "TestAutogradDevice{D}", "test_pin_memory_{d}", "ACCELERATOR"),
    ("test_cuda_compat.py", "TestStreams{D}", "test_stream_event_sync_{d}", "ACCELERATOR"),
    ("test_binary_ufuncs.py", "TestBinaryUfuncs{D}", "test_pow_scalar_overflow_{d}_int64", "GENERIC"),
    ("test_linalg.py", "TestLinalg{D}", "test_svd_lowrank_{d}_float64", "GENERIC"),
]
PROBE_L4_LABEL = "ciflow/crcr/crcr-test-L4"
"""The label that runs the probe repo's L4 check on a PR, as upstream's pytorch/crcr-test gates it."""
PROBE_L4_WORKFLOW = "crcr-test-L4"
NEVER_COMPLETES = "never_completes"
"""A job that reports in_progress and nothing more: the sweeper ends it as timed_out."""
PROBE_L4_NAMINGS = {
    # The two versions of the probe repo's L4 workflow (reference/upstream-changes.md, "The L4
    # probe"): one names its failing jobs as expected outcomes, which pass by the probe rule once
    # the sweeper has ended the one that never completes; the other names them plainly, so its
    # failure, cancellation and timeout must fail the L4 check and block the merge gate.
    "expected": [
        ("test-L4-success", "success"),
        ("test-L4-xfail", "failure"),
        ("test-L4-xcancel", "cancelled"),  # cancelled by its own 1-minute timeout
        ("test-L4-xtimeout", NEVER_COMPLETES),
        *((f"test-L4-matrix-checkrun-creation-{leg}", "success") for leg in (1, 2, 3)),
    ],
    "plain": [
        ("test-L4-success", "success"),
        ("test-L4-failure", "failure"),
        ("test-L4-cancel", "cancelled"),
        ("test-L4-timeout", NEVER_COMPLETES),
        *((f"test-L4-matrix-checkrun-creation-{leg}", "success") for leg in (1, 2, 3)),
    ],
}


PLAIN_EVERY = 8
"""One labelled PR in eight (numbers ≡ 3 mod 8) runs the plain version: its failures are real
probe failures, which the probe's pass-rate alert counts, so they stay rare enough for the sandbox's
alerts to say something about the relay."""


def probe_l4_naming(pr_number: int | None) -> str:
    """Which version of the L4 workflow a PR runs."""
    return "plain" if (pr_number or 0) % PLAIN_EVERY == 3 else "expected"


PRODUCERS = {
    # repo: (class suffix, the device name in methods, report shape, environment.device). As PyTorch's
    # instantiate_device_type_tests names them: the class by device *type*, methods by the name the
    # backend registered (tests/fixtures/pytorch-reports has the real producers' files).
    "intel/torch-xpu-ops": ("XPU", "xpu", "pytest-root", "xpu"),
    "ROCm/pytorch": ("CUDA", "cuda", "unittest", "rocm"),  # ROCm runs as cuda
    "pytorch-mps/mps-ci": ("MPS", "mps", "client", "mps"),
    "Ascend/pytorch": ("PRIVATEUSE1", "npu", "pytest-test-dir", "npu"),  # torch_npu renames PrivateUse1
    "quic/ai-engine-direct-torch": ("PRIVATEUSE1", "qnn", "nodeid", "qnn"),  # a second PrivateUse1 name
    # torch-spyre's runner drives upstream's modules through generated <stem>__oot_wrapper.py files
    "torch-spyre/torch-spyre": ("PRIVATEUSE1", "spyre", "oot-wrapper", "spyre"),
}
DEFAULT_PRODUCER = ("CUDA", "cuda", "client", "cuda")
REFERENCE_DEVICE = ("PRIVATEUSE1", "openreg")
"""Upstream's OpenReg registers `openreg`: its methods read test_x_openreg_float32."""
SOUND_BACKENDS = {"Ascend/pytorch"}
"""Backends whose own CI is sound in the sandbox: they rarely fail on their own and never hang,
so nearly every failure is upstream's (the reference fails the same tests). Their raw pass rate
sits below 90 % and the upstream-adjusted one above it: the case issue 24's levels are for."""
STRUGGLING_BACKENDS = {"quic/ai-engine-direct-torch"}
"""An L3 backend whose own CI fails often (the reference passes those tests): its pass rate stays
well below 90 % on both rates, so the demotion loop opens a PR for it on the stand-in."""
OWN_FAILURE_RATE, SOUND_OWN_FAILURE_RATE, STRUGGLING_OWN_FAILURE_RATE = 0.14, 0.02, 0.4
RUNNER_OFFLINE_RATE = 0.03
"""Dispatches whose whole workflow never starts (the backend's runners offline): the sweeper ends
them as never started, a dispatch nobody answered (single jobs that never start beside others that
do are rarer still as a whole run)."""
FLAKY_TESTS = {"intel/torch-xpu-ops": (TEST_POOL[4], 0.3)}
"""A test that fails now and then on the first attempt and passes on the retry (test_pin_memory
on Intel XPU): the test store reads it *flaky*, with its pass-on-retry count."""
MUTED_TESTS = {"ROCm/pytorch": (TEST_POOL[6], 0.3)}
"""A test a backend fails on its own and has muted (devtools/sandbox_triage.py seeds the mute):
shown with its badge, left out of the pass rate and the gate."""
STRICT_XPASS = {"pytorch-mps/mps-ci": (TEST_POOL[4], 0.25)}
"""A test the backend lists as an expected failure that now and then passes under pytest's strict
xfail (reported xpassed): it reads "now passes — lift the expectation"."""
VARIANTS = {"ROCm/pytorch": ("MI300", "MI250")}
"""Backends testing several GPU families from one repository: each test shard runs on each, its
callback's `environment.device` naming the family (the registry declares `variant_keys: [device]`)."""
VARIANT_ONLY_FAILURES = {"ROCm/pytorch": ("MI300", TEST_POOL[7], 0.3)}
"""A test one variant fails on its own now and then (the others pass it): "fails on MI300 only"."""
OUTCOME_MIX = {"skipped": 42, "xfailed": 7}
"""Besides passed and failed, what backends' summaries count (torch-spyre's: errors, xfailed,
xpassed). An xpassed test is counted only when it is listed (a strict xfail that passed is a
failure our client lists), so a job's counts and its list agree as a real producer's do: a count
with nothing listed would leave every failure unexcusable (relay.results.excused)."""


def report_shape(file: str, cls: str, name: str, shape: str) -> dict:
    """One failed test as each producer writes it: pytest from the checkout's root or from
    test/ (PyTorch's CI), unittest-xml-reporting, our client, or a pytest node id alone."""
    module = file.removesuffix(".py")
    return {
        "pytest-root": {"name": name, "classname": f"test.{module}.{cls}"},
        "pytest-test-dir": {"name": name, "classname": f"{module}.{cls}", "file": file},
        "unittest": {"name": name, "classname": cls, "file": file},
        "client": {"name": name, "classname": cls, "file": f"test/{file}"},
        "nodeid": {"name": f"test/{file}::{cls}::{name}"},
        # pytest's JUnit of a runner's generated wrapper beside upstream's module, run from test/
        "oot-wrapper": {"name": name, "classname": f"{module}__oot_wrapper.{cls}", "file": f"{module}__oot_wrapper.py"},
    }[shape]


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _sha(*parts) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()


@dataclass
class Pull:
    number: int
    title: str
    author: str
    head: str
    labels: list
    state: str = "open"


class Upstream:
    """pytorch/pytorch as the sandbox sees it: trunk pushes and PRs, sent as signed webhooks."""

    FIRST_PULL = 170001
    """The sandbox's first upstream PR number (near pytorch/pytorch's own)."""

    def __init__(self, standin, relay_url: str, secret: str, devices: list[str], state_dir: Path):
        self.standin, self.relay_url, self.secret, self.devices = standin, relay_url, secret, devices
        self.trunk = _sha("trunk", 0)
        self.pulls: dict[int, Pull] = {}
        self.last_pull_path = state_dir / "upstream-last-pull.txt"
        self.rng = random.Random(7)
        self.http = httpx.Client(timeout=10)
        standin.add_commit(UPSTREAM, self.trunk, message="Initial sandbox trunk commit")
        bisect_sim.trunk_record(self.trunk)

    def send(self, event: str, payload: dict) -> None:
        body = json.dumps(
            {
                **payload,
                "repository": _repo(),
                "sender": {"login": "sandbox-bot", "id": 1, "type": "User"},
                "installation": {"id": INSTALLATION_ID},
            }
        ).encode()
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": "sha256=" + hmac.new(self.secret.encode(), body, hashlib.sha256).hexdigest(),
            "User-Agent": "GitHub-Hookshot/sandbox",
            "X-GitHub-Hook-Installation-Target-Type": "integration",
        }
        try:
            response = self.http.post(f"{self.relay_url}/github/webhook", content=body, headers=headers)
            logger.info("webhook %s.%s -> %s", event, payload.get("action", ""), response.status_code)
        except httpx.HTTPError as exc:
            logger.warning("webhook %s not delivered: %s", event, exc)

    def push(self, title: str, author: str) -> None:
        self.push_range([(title, author)])

    def push_range(self, changes: list[tuple[str, str]], before_send=None) -> list[str]:
        """One push of several commits (title, author each), oldest first, as a merge train
        lands them; the reference runs on the new head. `before_send(shas)` runs once the commits
        exist and before the webhook announces them. The new commits' SHAs."""
        before = self.trunk
        shas = self._commits_only(changes)
        if before_send is not None:
            before_send(shas)
        reference_run(self.standin, self.trunk, event="push")
        self._push_send(before, [_push_commit(sha, title, author) for sha, (title, author) in zip(shas, changes)])
        return shas

    def _push_send(self, before: str, commits: list[dict]) -> None:
        commit = commits[-1]
        self.send(
            "push",
            {
                "ref": "refs/heads/main",
                "before": before,
                "after": self.trunk,
                "created": False,
                "deleted": False,
                "forced": False,
                "commits": commits,
                "head_commit": commit,
                "pusher": {"name": commit["author"]["name"]},
            },
        )

    def push_injected(self, count: int, culprit_at: int, backend: str, spec: tuple, flaky: bool = False) -> str:
        """A push of `count` commits whose `culprit_at`-th (1-based) breaks `spec` on `backend` only;
        the culprit's SHA."""
        changes = [
            (f"{self.rng.choice(TRUNK_TITLES)} (#{self.pull_number_take()})", self.rng.choice(AUTHORS))
            for _ in range(count)
        ]
        what = spec[2].split("_{d}")[0].removeprefix("test_")
        changes[culprit_at - 1] = (
            f"[{backend}] Rework {what} (#{self.pull_number_take()})",
            changes[culprit_at - 1][1],
        )

        def culprit_injected(shas):  # before the webhook: the runners must know it when the dispatches come
            bisect_sim.inject(backend, shas[culprit_at - 1], spec, flaky)

        culprit = self.push_range(changes, before_send=culprit_injected)[culprit_at - 1]
        logger.info("injected %s on %s at %s (%d of %d commits)", spec[2], backend, culprit[:10], culprit_at, count)
        return culprit

    def _commits_only(self, changes: list[tuple[str, str]]) -> list[str]:
        shas = []
        self.pushes = getattr(self, "pushes", 0) + 1
        for title, author in changes:
            parent, self.trunk = self.trunk, _sha("trunk", title, time.time(), len(shas))
            if self.pushes >= LASTING_BREAK_FROM_PUSH:
                LASTING_BREAK_HEADS.add(self.trunk)
            self.standin.add_commit(UPSTREAM, self.trunk, parents=[parent], message=title, author=author)
            bisect_sim.trunk_record(self.trunk)
            shas.append(self.trunk)
        return shas

    def pr_event(self, action: str, pull: Pull, label: str | None = None) -> None:
        self.standin.add_pull(UPSTREAM, pull.number, pull.head, labels=pull.labels, state=pull.state)
        payload = {"action": action, "number": pull.number, "pull_request": _pull_payload(pull, self.trunk)}
        if label:
            payload["label"] = {"name": label}
        self.send("pull_request", payload)

    def open_pr(self) -> Pull:
        number = self.pull_number_take()
        title, author = self.rng.choice(PR_TITLES), self.rng.choice(AUTHORS)
        pull = Pull(number, title, author, _sha("pr", number, 1), [])
        if self.rng.random() < 0.5 and self.devices:
            pull.labels.append(f"ciflow/crcr/{self.rng.choice(self.devices)}")
        if self.rng.random() < 0.25:
            pull.labels.append(PROBE_L4_LABEL)
        self.pulls[number] = pull
        self.standin.add_pull(UPSTREAM, number, pull.head, labels=pull.labels)  # the number is taken now
        self.standin.add_commit(UPSTREAM, pull.head, parents=[self.trunk], message=title, author=author)
        bisect_sim.head_record(pull.head, self.trunk)
        reference_run(self.standin, pull.head)
        self.pr_event("opened", pull)
        return pull

    def pull_number_take(self) -> int:
        """A number no upstream PR of this sandbox has had: above every one this process opened,
        the relay's demotion PRs (they take numbers in the same repo) and those of an earlier
        sandbox on the same state dir, whose PRs the relay still keeps (`make run` again on the
        same var/: a reused number would read as a force-push of an old PR)."""
        earlier = self.last_pull_path.read_text().strip() if self.last_pull_path.exists() else ""
        last = max(int(earlier) if earlier.isdigit() else 0, max(self.pulls, default=0), self.FIRST_PULL - 1)
        number = max(last + 1, self.standin.next_pull_number(UPSTREAM))
        _write_atomically(self.last_pull_path, f"{number}\n")
        return number

    def synchronize(self, pull: Pull) -> None:
        pull.head = _sha("pr", pull.number, time.time())
        self.standin.add_commit(UPSTREAM, pull.head, parents=[self.trunk], message=pull.title, author=pull.author)
        bisect_sim.head_record(pull.head, self.trunk)
        reference_run(self.standin, pull.head)
        self.pr_event("synchronize", pull)

    def label(self, pull: Pull) -> None:
        free = [f"ciflow/crcr/{d}" for d in self.devices] + [PROBE_L4_LABEL]
        free = [name for name in free if name not in pull.labels]
        if free:
            name = self.rng.choice(free)
            pull.labels.append(name)
            self.pr_event("labeled", pull, label=name)

    def merge_run(self, pull: Pull) -> None:
        """pytorchbot's merge: the `ciflow/trunk/<pr>` tag pushed at the PR's head, which runs the
        trunk jobs (and the relay relays as the PR's merge run)."""
        self.send(
            "push",
            {
                "ref": f"refs/tags/ciflow/trunk/{pull.number}",
                "before": "0" * 40,
                "after": pull.head,
                "created": True,
                "deleted": False,
                "forced": False,
                "base_ref": None,
                "commits": [],
                "head_commit": {"id": pull.head, "message": pull.title, "timestamp": _now_iso(), "distinct": True},
                "pusher": {"name": "pytorchmergebot"},
            },
        )

    def step(self) -> None:
        """One piece of upstream activity, weighted like a busy day."""
        open_pulls = [p for p in self.pulls.values() if p.state == "open"]
        roll = self.rng.random()
        if roll < 0.35 or not open_pulls:
            self.push(self.rng.choice(TRUNK_TITLES), self.rng.choice(AUTHORS))
        elif roll < 0.6:
            self.open_pr()
        elif roll < 0.8:
            self.synchronize(self.rng.choice(open_pulls))
        elif roll < 0.9:
            self.label(self.rng.choice(open_pulls))
        elif roll < 0.95:
            self.merge_run(self.rng.choice(open_pulls))
        else:
            pull = self.rng.choice(open_pulls)
            pull.state = "closed"
            self.pr_event("closed", pull)


def _push_commit(sha: str, title: str, author: str) -> dict:
    return {
        "id": sha,
        "message": title,
        "timestamp": _now_iso(),
        "author": {"name": author, "username": author},
        "distinct": True,
    }


def _repo() -> dict:
    return {
        "id": UPSTREAM_ID,
        "name": "pytorch",
        "full_name": UPSTREAM,
        "private": False,
        "default_branch": "main",
        "html_url": f"https://github.com/{UPSTREAM}",
        "owner": {"login": "pytorch", "id": 21003710, "type": "Organization"},
    }


def _pull_payload(pull: Pull, base_sha: str) -> dict:
    fork = {
        "full_name": f"{pull.author}/pytorch",
        "id": 900 + pull.number % 97,
        "name": "pytorch",
        "owner": {"login": pull.author},
    }
    return {
        "number": pull.number,
        "title": pull.title,
        "state": pull.state,
        "draft": False,
        "merged": False,
        "html_url": f"https://github.com/{UPSTREAM}/pull/{pull.number}",
        "user": {"login": pull.author, "id": 5},
        "labels": [{"name": name} for name in pull.labels],
        "updated_at": _now_iso(),
        "author_association": "CONTRIBUTOR",
        "head": {
            "ref": f"fix-{pull.number}",
            "sha": pull.head,
            "label": f"{pull.author}:fix-{pull.number}",
            "repo": fork,
        },
        "base": {"ref": "main", "sha": base_sha, "label": "pytorch:main", "repo": _repo()},
    }


PR_TITLES = [
    "[inductor] Fuse pointwise epilogues into templated matmul",
    "Fix device guard leak in PrivateUse1 streams",
    "[dynamo] Graph break on unsupported context manager",
    "Add bfloat16 support to addmm on accelerators",
    "Refactor DispatchKeySet computation for backend fallbacks",
    "[autograd] Avoid sync in pin_memory path",
    "Deprecate legacy storage resize semantics",
    "[c10d] Backend hooks for custom ProcessGroup",
]
TRUNK_TITLES = [
    'Revert "[inductor] Enable cudagraph trees by default"',
    "[export] Preserve stack traces through decompositions",
    "Update xla pin",
    "[BE] Remove dead code in TensorIterator",
    "Add dtype promotion test for pow",
    "[profiler] Record PrivateUse1 memory events",
    "Fix flaky test_conv2d_backward on accelerators",
]
AUTHORS = ["alice-dev", "bob-kernels", "carol-compiler", "dmitri-ci", "eun-autograd", "farah-distributed"]


class Runners:
    """Downstream CI: each dispatch the stand-in accepts becomes a simulated workflow that calls
    the relay back (in_progress, then completed) with a fresh OIDC token per callback."""

    def __init__(self, standin, relay_url: str, projects: list[dict]):
        self.standin, self.relay_url = standin, relay_url
        self.projects = {p["full_name"].lower(): p for p in projects}
        self.http = httpx.Client(timeout=15)

    def on_dispatch(self, repo: str, event_type: str, client_payload: dict) -> None:
        project = self.projects.get(repo.lower())
        if project is None or project["level"] == "L1" or client_payload.get("payload", {}).get("action") == "closed":
            return
        if project.get("is_reference"):
            return  # the reference's results come from upstream CI (see reference_run)
        plan = JobPlan(project, client_payload)
        if bisect_sim.is_probe(client_payload):  # the backend's probe workflow (bisect_sim)
            jobs = bisect_sim.probe_jobs(project, client_payload, plan.failed_test)
        else:
            jobs = plan.jobs()
        threads = [threading.Thread(target=self.run_job, args=(plan, job), daemon=True) for job in jobs]
        [t.start() for t in threads]

    def run_job(self, plan: "JobPlan", job: dict) -> None:
        time.sleep(job["queue"])
        if job["never_starts"]:
            return
        self.callback(plan, job, "in_progress")
        time.sleep(job["duration"])
        if job["hangs"]:
            return
        self.callback(plan, job, "completed")
        if job["conclusion"] == "failure" and job["flaky"]:
            time.sleep(3)
            retry = {**job, "attempt": 2, "conclusion": "success", "failed_tests": [], "broken_before_tests": False}
            self.callback(plan, retry, "in_progress")
            time.sleep(job["duration"] / 2)
            self.callback(plan, retry, "completed")

    def callback(self, plan: "JobPlan", job: dict, status: str) -> None:
        """As our client sends it: a 429 or 503 with Retry-After is tried again after that wait
        (client/crcr_report.py: _retry_safe) until CALLBACK_RETRY_SECONDS are spent, so the relay's
        rate limit delays a burst of callbacks rather than losing the probe's results."""
        body, deadline = plan.body(job, status), time.monotonic() + CALLBACK_RETRY_SECONDS
        while True:
            response = self._callback_post(plan, job, status, body)
            wait = _retry_wait(response)
            if wait is None or time.monotonic() + wait > deadline:
                return
            time.sleep(wait)

    def _callback_post(self, plan: "JobPlan", job: dict, status: str, body: dict):
        try:
            response = self.http.post(
                f"{self.relay_url}/github/callback",
                json=body,
                headers={"Authorization": f"Bearer {self.token(plan.project)}"},
            )
        except httpx.HTTPError as exc:
            logger.warning("callback not delivered: %s", exc)
            return None
        name = f"{plan.project['full_name']} {job['name']}/{job['attempt']}"
        logger.info("callback %s %s -> %s", name, status, response.status_code)
        return response

    def token(self, project: dict) -> str:
        if project.get("ci_provider") == "buildkite":
            org, pipeline = project["buildkite_pipeline"].split("/")
            return self.standin.oidc.mint(
                kind="buildkite", audience=AUDIENCE, organization_id=org, pipeline_id=pipeline, build_branch="main"
            )
        return self.standin.oidc.mint(
            audience=AUDIENCE, repository=project["full_name"], repository_id=str(project["github_repo_id"])
        )


CALLBACK_RETRY_SECONDS = 180.0
"""How long a simulated job keeps trying a rate-limited callback (the client's --max-time)."""


def _retry_wait(response) -> float | None:
    """Seconds to wait before sending again, or None: only a 429/503 that says when is retried."""
    if response is None or response.status_code not in (429, 503):
        return None
    try:
        return max(1.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


LASTING_BREAK = TEST_POOL[2]
"""A test upstream breaks for good at the LASTING_BREAK_FROM_PUSH-th trunk push of a sandbox run
(nobody fixes it in the session): from that commit on it fails on the reference and on every
backend, so its history page reads *shared* from one commit on."""
LASTING_BREAK_FROM_PUSH = 6
LASTING_BREAK_HEADS: set[str] = set()
"""Trunk heads pushed since (the simulator and the runners share this process)."""


def commit_fate(sha: str) -> tuple[bool, list]:
    """Whether a commit broke upstream, and which tests it broke: the same answer for every
    backend and for the reference, so the baseline comparison has something true to find."""
    rng = random.Random(sha)
    broken, tests = rng.random() < 0.18, rng.sample(TEST_POOL, 2)
    if sha in LASTING_BREAK_HEADS:
        return True, [LASTING_BREAK, *(t for t in tests if t != LASTING_BREAK)][: 2 if broken else 1]
    return broken, tests


def reference_junit(sha: str) -> bytes:
    """The OpenReg job's JUnit report for a commit, as PyTorch's CI writes it from inside test/:
    the whole pool runs, broken tests fail, and the outcome mix of a real run (a skip, an
    expected failure) is there too."""
    broken, tests = commit_fate(sha)
    flaky = random.Random(f"ref:{sha}").random() < 0.05
    upper, lower = REFERENCE_DEVICE
    cases = []
    for file, cls, method, hw in TEST_POOL:
        name, classname = method.format(d=lower), f"{file[:-3]}.{cls.format(D=upper)}"
        failing = (broken and (file, cls, method, hw) in tests) or (flaky and method == TEST_POOL[-1][2])
        tag, message = _problem(method)
        inner = f'<{tag} message="{message}">Traceback: {name}</{tag}>' if failing else ""
        props = f'<properties><property name="hw_classification" value="{hw}"/></properties>'
        cases.append(
            f'<testcase classname="{classname}" name="{name}" file="{file}" time="0.5">{inner}{props}</testcase>'
        )
    extra = f'classname="test_ops.TestCommon{upper}" file="test_ops.py" time="0.01"'
    cases.append(
        f'<testcase {extra} name="test_multi_device_{lower}"><skipped type="pytest.skip" message="needs two devices"/></testcase>'
    )
    cases.append(
        f'<testcase {extra} name="test_sparse_csr_{lower}_float32"><skipped type="pytest.xfail" message="not implemented"/></testcase>'
    )
    cases += enablement.reference_cases(upper, lower)  # the suite's slice, passed in full
    return (
        '<?xml version="1.0"?><testsuites><testsuite name="pytest">' + "".join(cases) + "</testsuite></testsuites>"
    ).encode()


def _qualified(test: dict) -> str:
    """A reported test's full name: a node id alone carries its class in the name."""
    return f"{test['classname']}.{test['name']}" if test.get("classname") else test["name"]


def _problem(method: str) -> tuple[str, str]:
    """How a pool test goes wrong: the stream test raises (an error), the others assert (a failure)."""
    if method.startswith("test_stream"):
        return "error", "RuntimeError: stream synchronize failed"
    return "failure", "AssertionError: Tensor-likes are not close!"


def reference_run(standin, sha: str, event: str = "pull_request") -> None:
    """PyTorch's own CI running OpenReg on the commit (what the relay imports as the baseline).
    Its JUnit zip goes where PyTorch's Linux test jobs put theirs: the public S3 bucket, keyed by
    run, attempt and job id (GitHub artifacts only with `use-gha`). About a third of the commits
    upload none, as when the openreg config runs its suites through `unittest discover -v`: then
    the job's log is the only record of each test."""
    junit = reference_junit(sha)
    failed = b"<failure" in junit or b"<error" in junit
    job = {"name": "test (openreg, 1, 1, linux.2xlarge)", "conclusion": "failure" if failed else "success"}
    # pytorch's pull.yml runs on pull_request and on push to main: the run says which
    run = standin.add_workflow_run(UPSTREAM, sha, name="pull", event=event, jobs=[{**job, "log": reference_log(junit)}])
    if reference_log_only(sha):
        return
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("test/test-reports/python-pytest/test_openreg.xml", junit)
    name = f"test-reports-test-openreg-1-1-linux.2xlarge_{run.jobs[0]['id']}.zip"
    standin.add_s3_object(f"{UPSTREAM}/{run.id}/{run.run_attempt}/artifact/{name}", buffer.getvalue())


def reference_log_only(sha: str) -> bool:
    return random.Random(f"reference-source:{sha}").random() < 0.33


def reference_log(junit: bytes) -> str:
    """The same run as unittest's verbose runner prints it into the job log, failures' tracebacks
    and the closing `Ran N tests` included."""
    lines, blocks = [], []
    for case in ElementTree.fromstring(junit).iter("testcase"):
        name, where = case.get("name"), f"{case.get('classname')}.{case.get('name')}"
        status, message = _unittest_status(case)
        lines.append(f"{name} ({where}) ... {status}")
        if status in ("FAIL", "ERROR"):
            trace = ["Traceback (most recent call last):", f'  File "{case.get("file")}", line 1, in {name}', message]
            blocks += ["=" * 70, f"{status}: {name} ({where})", "-" * 70, *trace, ""]
    return "\n".join([*lines, "", *blocks, "-" * 70, f"Ran {len(lines)} tests in 4.000s", ""]) + "\n"


def _unittest_status(case) -> tuple[str, str]:
    for tag, status in (("failure", "FAIL"), ("error", "ERROR")):
        if (problem := case.find(tag)) is not None:
            return status, problem.get("message") or ""
    skipped = case.find("skipped")
    if skipped is None:
        return "ok", ""
    if skipped.get("type") == "pytest.xfail":
        return "expected failure", ""
    return f"skipped {skipped.get('message')!r}", ""


def job_variant(name: str) -> str:
    """The GPU family a variant's test shard runs on (`test (default, 1, 2, MI300)`), else ""."""
    parts = name.removeprefix("test (").removesuffix(")").split(", ")
    return parts[3] if name.startswith("test (") and len(parts) == 4 else ""


def shaped_test(project: dict, spec) -> dict:
    """One failing test of the pool as `project`'s producer reports it."""
    file, cls, method, hw = spec
    upper, lower, shape, _ = PRODUCERS.get(project["full_name"], DEFAULT_PRODUCER)
    name = method.format(d=lower)
    return {
        **report_shape(file, cls.format(D=upper), name, shape),
        "outcome": "error" if _problem(method)[0] == "error" else "failed",
        "hw_classification": hw,
        "message": _problem(method)[1],
        "stacktrace": f'Traceback (most recent call last):\n  File "test/{file}", line 1234, in {name}\nAssertionError',
    }


class JobPlan:
    """What one downstream workflow does for one dispatch, decided from the head SHA so every
    backend agrees on whether a commit broke upstream (then the reference fails the same tests)."""

    def __init__(self, project: dict, client_payload: dict):
        self.project, self.client_payload = project, client_payload
        payload = client_payload.get("payload") or {}
        self.head = ((payload.get("pull_request") or {}).get("head") or {}).get("sha") or payload.get("after") or ""
        self.pr_number = (payload.get("pull_request") or {}).get("number")
        labels = (payload.get("pull_request") or {}).get("labels") or []
        self.labels = {label.get("name") for label in labels if isinstance(label, dict)}
        self.upstream_broken, self.broken_tests = commit_fate(self.head)
        self.rng = random.Random(f"{self.head}:{project['full_name']}:{time.time()}")
        self.run_id = str(self.rng.randint(10**9, 10**10))

    def jobs(self) -> list[dict]:
        if self.project.get("is_health_probe"):
            # pytorch/crcr-test's convention: x-probes are built to end failure, cancelled, timed_out
            # (its xtimeout job reports timed_out itself here, so the sandbox need not wait 6 h);
            # a PR labelled ciflow/crcr/crcr-test-L4 also runs the proposed L4 check's jobs.
            jobs = [
                self.job("smoke", "success"),
                self.job("xfail", "failure"),
                self.job("xcancel", "cancelled"),
                self.job("xtimeout", "timed_out"),
            ]
            return jobs + (self.probe_l4_jobs() if PROBE_L4_LABEL in self.labels else [])
        names = ["build", "test (default, 1, 2)", "test (default, 2, 2)"]
        variants = VARIANTS.get(self.project["full_name"])
        if variants:
            names = ["build", *(f"test (default, {n}, 2, {v})" for v in variants for n in (1, 2))]
        jobs = [self.job(name, "success" if name == "build" else self.conclusion()) for name in names]
        jobs[1] = self.with_injected(jobs[1])
        jobs = [self.with_variant_failure(job) for job in jobs]
        if self.rng.random() < RUNNER_OFFLINE_RATE and not self.steady:
            jobs = [{**job, "never_starts": True} for job in jobs]  # no runner picked the workflow up
        return jobs

    def with_injected(self, job: dict) -> dict:
        """The job failing the backend-only failures injected at an ancestor of the head (bisect_sim),
        every attempt alike: a regression, not a flake."""
        extra = [self.failed_test(spec) for spec in bisect_sim.injected(self.project["full_name"], self.head)]
        if not extra:
            return job
        failed = [*(job["failed_tests"] if job["conclusion"] == "failure" else []), *extra]
        return {**job, "conclusion": "failure", "flaky": False, "broken_before_tests": False, "failed_tests": failed}

    def with_variant_failure(self, job: dict) -> dict:
        """The first shard of the variant that fails a test on its own (VARIANT_ONLY_FAILURES),
        failing it now and then where it would pass; its other variants pass it."""
        variant, spec, rate = VARIANT_ONLY_FAILURES.get(self.project["full_name"], ("", None, 0))
        if job["name"] != f"test (default, 1, 2, {variant})" or job["conclusion"] != "success":
            return job
        if self.rng.random() >= rate:
            return job
        return {**job, "conclusion": "failure", "flaky": False, "failed_tests": [self.failed_test(spec)]}

    def probe_l4_jobs(self) -> list[dict]:
        """The L4 check's jobs in this PR's version of the workflow, always as they are built to
        behave (the random hangs and failures of other backends stay out of a check of the relay)."""
        jobs = []
        for name, conclusion in PROBE_L4_NAMINGS[probe_l4_naming(self.pr_number)]:
            hangs = conclusion == NEVER_COMPLETES
            job = self.job(name, "timed_out" if hangs else conclusion)
            jobs.append({**job, "workflow": PROBE_L4_WORKFLOW, "hangs": hangs, "never_starts": False})
        return jobs

    @property
    def steady(self) -> bool:
        """Never hangs nor fails to start: a sound backend, and the probe (it checks the relay,
        so its jobs behave exactly as built; its alerts are about the relay, not random noise)."""
        return self.sound or bool(self.project.get("is_health_probe"))

    @property
    def sound(self) -> bool:
        return self.project["full_name"] in SOUND_BACKENDS

    def conclusion(self) -> str:
        if self.upstream_broken:
            return "failure"
        own = SOUND_OWN_FAILURE_RATE if self.sound else OWN_FAILURE_RATE
        own = STRUGGLING_OWN_FAILURE_RATE if self.project["full_name"] in STRUGGLING_BACKENDS else own
        return "failure" if self.rng.random() < own else "success"

    def job(self, name: str, conclusion: str) -> dict:
        special = self.special_failure(name) if conclusion == "success" else None
        if special is not None:
            return special
        fail = conclusion == "failure" and not self.project.get("is_health_probe")
        # a backend's own environment breaking (a driver, a missing library) before any test ran
        broken_before_tests = fail and not self.upstream_broken and self.rng.random() < 0.15
        return {
            "name": name,
            "attempt": 1,
            "conclusion": conclusion,
            "queue": self.rng.uniform(1, 12),
            "duration": self.rng.uniform(4, 40),
            "never_starts": self.rng.random() < 0.02 and not self.steady,
            "hangs": self.rng.random() < 0.03 and not self.steady,
            "flaky": fail and not self.upstream_broken and self.rng.random() < 0.35,
            "broken_before_tests": broken_before_tests,
            "failed_tests": self.failed_tests() if fail and not broken_before_tests else [],
        }

    def special_failure(self, name: str) -> dict | None:
        """On the first test shard of a job that would pass: the backend's flaky test failing
        (its retry passes), its muted test failing, or its strict-xfail test passing (xpassed)."""
        repo = self.project["full_name"]
        if not name.startswith("test (default, 1"):
            return None
        for table, flaky, outcome in (
            (FLAKY_TESTS, True, None),
            (MUTED_TESTS, False, None),
            (STRICT_XPASS, False, "xpassed"),
        ):
            spec, rate = table.get(repo, (None, 0))
            if spec is not None and self.rng.random() < rate:
                test = self.failed_test(spec)
                if outcome:
                    test = {**test, "outcome": outcome, "message": "[XPASS(strict)] not supported on this device yet"}
                return {**self.job(name, "success"), "conclusion": "failure", "flaky": flaky, "failed_tests": [test]}
        return None

    def failed_tests(self) -> list[dict]:
        tests = list(self.broken_tests) if self.upstream_broken else []
        own = not self.upstream_broken or (self.rng.random() < 0.3 and not self.sound)
        if own and causes_sim.standing(self.project["full_name"]):  # its own failures have causes
            return [
                *map(self.failed_test, tests),
                *causes_sim.failed(self.project["full_name"], self.failed_test, self.rng),
            ]
        if own:
            tests.append(self.rng.choice(TEST_POOL))
        return [self.failed_test(t) for t in dict.fromkeys(tests)]

    @property
    def producer(self) -> tuple[str, str, str, str]:
        return PRODUCERS.get(self.project["full_name"], DEFAULT_PRODUCER)

    def failed_test(self, spec) -> dict:
        return shaped_test(self.project, spec)

    def test_results(self, job: dict) -> dict:
        """The job's counts: a job broken before any test ran (its environment failed) reports
        one error and nothing else, as pytest does for a module that cannot be imported; a
        bisection probe's counts are its own (it runs only the tests it was asked to)."""
        if "test_results" in job:
            return job["test_results"]
        if job.get("broken_before_tests"):
            return {"passed": 0, "failed": 0, "skipped": 0, "error": 1}
        outcomes = [t.get("outcome", "failed") for t in job["failed_tests"]]
        listed = {outcome: outcomes.count(outcome) for outcome in ("failed", "error", "xpassed")}
        return {"passed": 1800 - len(outcomes), **listed, **OUTCOME_MIX}

    def body(self, job: dict, status: str) -> dict:
        workflow = {
            "schema_version": "1",
            "status": status,
            "conclusion": job["conclusion"] if status == "completed" else None,
            "name": job.get("workflow", "crcr-bisect" if bisect_sim.is_probe(self.client_payload) else "crcr"),
            "url": f"https://github.com/{self.project['full_name']}/actions/runs/{self.run_id}",
            "run_attempt": str(job["attempt"]),
            "job_name": job["name"],
            "check_run_id": str(abs(hash((self.run_id, job["name"]))) % 10**10),
            "run_id": self.run_id,
            "started_at": _now_iso() if status == "in_progress" else None,
            "completed_at": _now_iso() if status == "completed" else None,
        }
        if status == "completed":
            failed = job["failed_tests"]
            workflow["test_results"] = self.test_results(job)
            workflow["failed_tests"] = failed
            workflow.update(self.module_counts(job))
            workflow["environment"] = {
                "device": job_variant(job["name"]) or self.producer[3],
                "torch_version": "2.13.0a0+sandbox",
                "runner": "sandbox",
            }
            workflow["artifact_url"] = (
                f"https://github.com/{self.project['full_name']}/actions/runs/{self.run_id}/artifacts"
            )
            if failed and self.rng.random() < 0.6:
                workflow["triage_verdict"] = self.triage_verdict(job)
        return {**self.client_payload, "workflow": workflow}

    def module_counts(self, job: dict) -> dict:
        """A test shard's counts per module (sandbox_enablement), as our client sends them."""
        config, _, shard = job["name"].removeprefix("test (").removesuffix(")").partition(", ")
        parts = shard.split(", ")[:2]
        if config != "default" or len(parts) != 2 or not all(p.isdigit() for p in parts):
            return {}
        if job.get("broken_before_tests") or bisect_sim.is_probe(self.client_payload):
            return {}
        number, shards = int(parts[0]), int(parts[1])
        after_break = self.head in LASTING_BREAK_HEADS
        counts = enablement.module_counts(
            self.project["full_name"], number, shards, job["failed_tests"], after_break, job_variant(job["name"])
        )
        return {"module_counts": counts} if counts else {}

    def triage_verdict(self, job: dict) -> dict:
        """The backend's own analyser on a failed job, as the callback action's triage-verdict input
        carries it: upstream when the commit broke the reference too, else backend or flake; now
        and then one the relay must drop (a javascript: log link), which must cost nothing."""
        first = job["failed_tests"][0]
        log = f"https://github.com/{self.project['full_name']}/actions/runs/{self.run_id}"
        verdict = {
            "schema_version": 1,
            "category": "upstream" if self.upstream_broken else ("flake" if job["flaky"] else "backend"),
            "confidence": self.rng.choice(["high", "medium", "low"]),
            "summary": (
                f"{first['name']} also fails on the OpenReg reference: likely upstream"
                if self.upstream_broken
                else f"{first['name']} fails on this backend only"
            ),
            "evidence": [
                {"job": job["name"], "test": _qualified(t)[:200], "excerpt": t["message"], "log_url": log}
                for t in job["failed_tests"][:3]
            ],
            "reproduced_on_retry": not job["flaky"],
            "analyzer": {"name": "sandbox-triage", "version": "1.0", "model": "rules", "prompt_version": "1"},
            "analyzed_at": _now_iso(),
        }
        if self.upstream_broken:
            suspect = {"pr": self.pr_number} if self.pr_number else {"commit": self.head}
            verdict["suspected_upstream"] = {**suspect, "reason": "the reference fails the same tests on this commit"}
        if self.rng.random() < 0.1:
            verdict["evidence"].append({"log_url": "javascript:alert(document.domain)"})
        return verdict


# --- nightly reporters --------------------------------------------------------------------------------

BUILDKITE_CONCLUSIONS = {
    "passed": "success",
    "failed": "failure",
    "broken": "failure",
    "canceled": "cancelled",
    "timed_out": "timed_out",
    "skipped": "skipped",
    "not_run": "skipped",
}
VLLM_NIGHTLY_LABELS = [
    ":pytest: Basic Correctness Test",
    "Entrypoints Test (API Server) :docker:",
    "V1 e2e + engine: 'spec decode' 🚀",
    'Kernels Attention Test "flash-attn: v3"',
    "LoRA TP Test (Distributed) :: 2 GPUs 🧪",
    "Models Test: language (part 1) ✅",
]


def takes_nightly(project: dict) -> bool:
    return not project.get("events") or "nightly" in project["events"]


def buildkite_nightly_bodies(build: dict) -> list[dict]:
    """vLLM's reporter (vllm-project/vllm #51830): one completed callback per terminal script job of
    a Buildkite build, keyed buildkite-<build>-<job id>, the tested upstream SHA top-level."""
    return [
        {
            "delivery_id": f"buildkite-{build['number']}-{job['id']}",
            "event_type": "nightly",
            "pytorch_head_sha": build["commit"],
            "workflow": {
                "status": "completed",
                "conclusion": BUILDKITE_CONCLUSIONS[job["state"]],
                "run_id": int(build["number"]),
                "run_attempt": 1,
                "name": build["pipeline"]["slug"],
                "job_name": job["name"],
                "url": job["web_url"],
                "started_at": job["started_at"],
                "completed_at": job["finished_at"],
            },
        }
        for job in build["jobs"]
        if job.get("type") == "script" and job.get("state") in BUILDKITE_CONCLUSIONS
    ]


def action_nightly_body(
    sha: str, workflow: str, run_id: str, attempt: int, job: str, conclusion: str, tests: dict | None = None
) -> dict:
    """The existing callback action's nightly self-report: the SHA as delivery_id and payload.head_sha;
    `tests` adds a test job's counts and failed tests (`test_results`, `failed_tests`)."""
    now = _now_iso()
    body = {
        "event_type": "nightly",
        "delivery_id": sha,
        "payload": {"head_sha": sha},
        "workflow": {
            "schema_version": "1",
            "status": "completed",
            "conclusion": conclusion,
            "name": workflow,
            "url": f"https://github.com/example/actions/runs/{run_id}",
            "run_id": run_id,
            "run_attempt": str(attempt),
            "job_name": job,
            "check_run_id": f"{run_id}-{attempt}",
            "started_at": now,
            "completed_at": now,
        },
    }
    body["workflow"].update(tests or {})
    return body


class Nightlies:
    """Once a simulated "night", the nightly reporters test the current upstream trunk head: vLLM
    through its Buildkite reporter (one token per build), the nightly-only repo and the health
    probe through the callback action's nightly shape; now and then a second workflow, or a
    re-run of a failed job, against the same SHA."""

    def __init__(self, runners: "Runners", projects: list[dict], state_dir: Path | None = None):
        self.runners = runners
        self.stop_file = state_dir / NIGHTLY_STOP_FILE if state_dir else None
        self.stopped: set[str] = set()
        """Repos whose nightly reporter is stopped (an outage to watch the relay's alerts raise)."""
        self.reporters = [
            p
            for p in projects
            if takes_nightly(p)
            and p["level"] != "L1"
            and not p.get("is_reference")
            and (p.get("ci_provider") == "buildkite" or p.get("events") == ["nightly"] or p.get("is_health_probe"))
        ]
        self.rng = random.Random(11)
        self.build_number = 4100

    def stop(self, full_name: str) -> None:
        self.stopped.add(full_name.lower())

    def resume(self, full_name: str) -> None:
        self.stopped.discard(full_name.lower())

    def is_stopped(self, project: dict) -> bool:
        """Stopped here, or listed (one repo a line) in DIR/nightly-stopped.txt of a running sandbox."""
        listed = set()
        if self.stop_file is not None and self.stop_file.exists():
            listed = {line.strip().lower() for line in self.stop_file.read_text().splitlines() if line.strip()}
        return project["full_name"].lower() in self.stopped | listed

    def run(self, sha: str) -> None:
        for project in self.reporters:
            if self.is_stopped(project):
                logger.info("nightly for %s is stopped; not reporting %s", project["full_name"], sha[:12])
                continue
            try:
                self.report(project, sha)
            except Exception as exc:  # noqa: BLE001 - a simulator keeps simulating
                logger.warning("nightly for %s failed: %s", project["full_name"], exc)

    def report(self, project: dict, sha: str) -> None:
        if project.get("ci_provider") == "buildkite":
            self.build_number += 1
            token = self.buildkite_token(project)
            for body in buildkite_nightly_bodies(self.buildkite_build(sha)):
                self.post(project, body, token)
            return
        for workflow, jobs in self.action_runs(project):
            run_id = str(self.rng.randint(10**9, 10**10))
            for job, conclusion in jobs:
                tests = self.tests_of(project, sha, job)
                conclusion = "failure" if tests and tests["failed_tests"] else conclusion
                self.post(project, action_nightly_body(sha, workflow, run_id, 1, job, conclusion, tests))
                if tests and tests["failed_tests"]:
                    continue  # an injected regression fails its re-run too
                if conclusion == "failure" and not project.get("is_health_probe") and self.rng.random() < 0.5:
                    self.post(
                        project, action_nightly_body(sha, workflow, run_id, 2, job, "success")
                    )  # only this final attempt counts

    def tests_of(self, project: dict, sha: str, job: str) -> dict | None:
        """A test job's per-test results: its counts, and on its first shard the backend-only
        failures injected at an ancestor of `sha` (bisect_sim). The probe reports none."""
        if project.get("is_health_probe") or not job.startswith("test ("):
            return None
        first_shard = job.startswith("test (cpu, 1")
        failed = (
            [shaped_test(project, s) for s in bisect_sim.injected(project["full_name"], sha)] if first_shard else []
        )
        counts = {"passed": 900 - len(failed), "failed": len(failed), "skipped": 12}
        return {"test_results": counts, "failed_tests": failed}

    def buildkite_build(self, sha: str) -> dict:
        states = ["passed"] * 8 + ["failed", "broken", "canceled", "timed_out", "not_run"]
        now = _now_iso()
        jobs = [
            {
                "id": str(uuid.uuid4()),
                "type": "script",
                "name": label,
                "state": self.rng.choice(states),
                "web_url": f"https://buildkite.com/vllm/ci/builds/{self.build_number}#{i}",
                "started_at": now,
                "finished_at": now,
            }
            for i, label in enumerate(VLLM_NIGHTLY_LABELS)
        ]
        jobs.append({"id": str(uuid.uuid4()), "type": "waiter", "state": "passed"})
        return {"number": self.build_number, "commit": sha, "pipeline": {"slug": "ci"}, "jobs": jobs}

    def action_runs(self, project: dict) -> list:
        if project.get("is_health_probe"):
            return [
                (
                    "nightly",
                    [("smoke", "success"), ("xfail", "failure"), ("xcancel", "cancelled"), ("xtimeout", "timed_out")],
                )
            ]
        pick = lambda: "failure" if self.rng.random() < 0.2 else "success"  # noqa: E731
        runs = [("nightly", [("build", "success"), ("test (cpu, 1, 2)", pick()), ("test (cpu, 2, 2)", pick())])]
        if self.rng.random() < 0.5:
            runs.append(("nightly-aarch64", [("build", "success"), ("test (aarch64)", pick())]))
        return runs

    def buildkite_token(self, project: dict) -> str:
        org, pipeline = project["buildkite_pipeline"].split("/")
        return self.runners.standin.oidc.mint(
            kind="buildkite", audience=AUDIENCE, organization_id=org, pipeline_id=pipeline, build_branch="nightly"
        )

    def post(self, project: dict, body: dict, token: str | None = None) -> None:
        token = token or self.runners.token(project)
        try:
            response = self.runners.http.post(
                f"{self.runners.relay_url}/github/callback", json=body, headers={"Authorization": f"Bearer {token}"}
            )
            logger.info("nightly %s %s -> %s", project["full_name"], body["workflow"]["job_name"], response.status_code)
        except httpx.HTTPError as exc:
            logger.warning("nightly callback not delivered: %s", exc)


def wait_for_file(path: Path, stopping: threading.Event, timeout: float = 600) -> dict | None:
    deadline = time.monotonic() + timeout
    while not stopping.is_set() and time.monotonic() < deadline:
        if path.exists():
            return json.loads(path.read_text())
        stopping.wait(0.5)
    return None


ALLOWLIST_PATH = ".github/allowlist.yml"


def seed_world(standin, projects: list[dict], allowlist: str | None = None) -> None:
    """Installations and repos as GitHub would have them; one repo lacks the App on purpose. The
    upstream repo's main branch holds the allowlist the registry exports (the demotion loop's PRs
    move entries in it)."""
    standin.add_installation(INSTALLATION_ID, "pytorch")
    standin.add_repo(UPSTREAM, repo_id=UPSTREAM_ID, installation_id=INSTALLATION_ID)
    if allowlist:
        standin.add_file(UPSTREAM, ALLOWLIST_PATH, allowlist, message="Add the CRCR allowlist")
    for index, project in enumerate(projects, start=2):
        installed = project["level"] != "L1"
        if installed:
            standin.add_installation(index, project["full_name"].split("/")[0])
        standin.add_repo(
            project["full_name"], repo_id=project["github_repo_id"], installation_id=index if installed else None
        )


def simulate(standin, relay_url: str, secret: str, state_dir: Path, stopping: threading.Event) -> None:
    registry = wait_for_file(state_dir / "registry.json", stopping)
    if registry is None:
        return
    projects = registry["projects"]
    seed_world(standin, projects, registry.get("allowlist"))
    runners = Runners(standin, relay_url, projects)
    standin.on_dispatch(runners.on_dispatch)
    upstream = Upstream(
        standin, relay_url, secret, sorted({p["device"] for p in projects if p.get("device")}), state_dir
    )
    _wait_for_relay(relay_url, stopping)
    for _ in range(4):
        upstream.push(upstream.rng.choice(TRUNK_TITLES), upstream.rng.choice(AUTHORS))
    for _ in range(3):
        upstream.open_pr()
    nightlies, steps = Nightlies(runners, projects, state_dir), 0
    _nightly_start(nightlies, upstream.trunk)
    while not stopping.wait(upstream.rng.uniform(6, 15)):
        upstream.step()
        steps += 1
        if steps % NIGHTLY_EVERY_STEPS == 0:
            _nightly_start(nightlies, upstream.trunk)
        bisect_scenario(steps, upstream, nightlies, stopping)
        causes_sim.fix_step(steps)


BISECT_PUSH = ("Ascend/pytorch", ("test_ops.py", "TestBisect{D}", "test_index_put_accumulate_{d}_float32", "GENERIC"))
BISECT_NIGHTLY = (
    "TorchedHat/pytorch-redhat-ci",
    ("test_nn.py", "TestBisectNN{D}", "test_layer_norm_eps_{d}_float16", "GENERIC"),
)
BISECT_FLAKY = ("Ascend/pytorch", ("test_ops.py", "TestBisect{D}", "test_scatter_reduce_amax_{d}_bfloat16", "GENERIC"))
SETTLE_SECONDS = 130
"""Long enough for the runs on the head before an injection to be reported (a run queues up to 12 s
and takes up to 40 s per job) and taken by the test store (its sweep runs every minute): the
failure's last pass must be that head, so the range is exactly the injected push."""


def bisect_scenario(steps: int, upstream: Upstream, nightlies: Nightlies, stopping: threading.Event) -> None:
    """The injected backend-only failures bisection must find (bisect_sim): inside a push of five
    commits (Ascend), inside a twelve-commit nightly range (Red Hat, nightly-only: two nights back
    to back with twelve commits between), and a flaky one inside a push of six (Ascend). Upstream
    activity pauses while each settles, so each range is exactly as long as said."""
    if steps == 3:
        stopping.wait(SETTLE_SECONDS)
        upstream.push_injected(5, 3, *BISECT_PUSH)
    elif steps == 9:
        _nightly_start(nightlies, upstream.trunk)
        stopping.wait(SETTLE_SECONDS)
        upstream.push_injected(12, 7, *BISECT_NIGHTLY)
        _nightly_start(nightlies, upstream.trunk)
    elif steps == 16:
        stopping.wait(SETTLE_SECONDS)
        upstream.push_injected(6, 4, *BISECT_FLAKY, flaky=True)


NIGHTLY_STOP_FILE = "nightly-stopped.txt"
"""In the sandbox's state dir: repos (one a line, e.g. pytorch/crcr-test) whose nightly is stopped."""
NIGHTLY_EVERY_STEPS = 12
"""A sandbox "night" every dozen upstream events (about two minutes)."""


def _nightly_start(nightlies: Nightlies, sha: str) -> None:
    threading.Thread(target=nightlies.run, args=(sha,), daemon=True).start()


def _wait_for_relay(relay_url: str, stopping: threading.Event) -> None:
    while not stopping.is_set():
        try:
            if httpx.get(f"{relay_url}/healthz", timeout=3).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        stopping.wait(1)


class NotificationSink:
    """The sandbox's webhook receiver for the relay's notifications (the seeded subscriptions post
    here): logs each one and appends it to DIR/notifications.log. It answers 503 to the first try
    of every third notification, so /notifications shows retries working."""

    def __init__(self, state_dir: Path):
        self.log_path, self.tries, self.lock = state_dir / "notifications.log", {}, threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 30  # threaded, and a connection silent this long is closed

            def do_POST(self):
                length = min(int(self.headers.get("Content-Length") or 0), 1_000_000)
                status = sink.receive(self.path, self.headers.get("X-CRCR-Notification", ""), self.rfile.read(length))
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"busy, try again")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def receive(self, path: str, notification_id: str, body: bytes) -> int:
        with self.lock:
            tries = self.tries[notification_id] = self.tries.get(notification_id, 0) + 1
        if notification_id.isdigit() and int(notification_id) % 3 == 0 and tries == 1:
            logger.info("sink %s: refusing notification %s once (503) to exercise retries", path, notification_id)
            return 503
        try:
            data = json.loads(body)
        except ValueError:
            data = {"raw": body[:200].decode(errors="replace")}
        title = data.get("title") or data.get("text", "")[:200]
        logger.info("sink %s received notification %s (try %s): %s", path, notification_id, tries, title)
        with self.lock, self.log_path.open("a") as log:
            log.write(
                json.dumps(
                    {"at": _now_iso(), "path": path, "notification": notification_id, "try": tries, "title": title}
                )
                + "\n"
            )
        return 200

    def start(self) -> "NotificationSink":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m standin.sandbox")
    parser.add_argument("--relay-url", required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--webhook-secret-file", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--app-id", type=int, default=1001)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s sandbox %(message)s")
    args.state_dir.mkdir(parents=True, exist_ok=True)
    standin, key_path = load_or_create(args.state_dir, args.app_id)
    standin.start("127.0.0.1", args.port)
    sink = NotificationSink(args.state_dir).start()
    info = {
        "url": standin.url,
        "sink_url": sink.url,
        "app_id": args.app_id,
        "app_private_key_path": str(key_path.resolve()),
        "oidc_issuers": standin.oidc.issuers_config(),
    }
    _write_atomically(args.state_dir / "standin.json", json.dumps(info, indent=2) + "\n")
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    worker = threading.Thread(
        target=simulate,
        args=(standin, args.relay_url, args.webhook_secret_file.read_text().strip(), args.state_dir, stopping),
        daemon=True,
    )
    worker.start()
    while not stopping.wait(0.5):
        pass
    standin.stop()
    sink.stop()
    (args.state_dir / "standin.json").unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
