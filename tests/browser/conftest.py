"""Pages in Debian Chromium (the session's one `browser`, from tests/conftest.py) against
pytest-django's live server, plus a realistic HUD store to look at."""

import os
import random
from datetime import timedelta
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in the test thread; the ORM calls the fixtures make
# from that thread are still synchronous.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1680, "height": 1050})
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@pytest.fixture
def hud_store(transactional_db):
    from django.core.cache import cache

    cache.clear()  # tallies cached for the previous test's backends (other ids) would hide these
    return seed_hud_store()


# --- a realistic store --------------------------------------------------------------------------

EXTRA_BACKENDS = [
    ("huawei/torch-npu", "L3", "npu", "npu", "Huawei Ascend"),
    ("cambricon/torch-mlu", "L2", "", "npu", "Cambricon MLU"),
    ("tenstorrent/tt-torch", "L2", "", "npu", "Tenstorrent"),
    ("openxla/torch-xla", "L2", "", "other", "PyTorch/XLA"),
    ("mthreads/torch-musa", "L1", "", "gpu", "Moore Threads MUSA"),
]
AUTHORS = ["ezyang", "malfet", "albanD", "jansel", "huydhn", "atalman", "guangyey", "jeffdaily", "kulinseth", "zou3519"]
TITLES = [
    "[inductor] Fuse pointwise epilogues into mm templates",
    "Add privateuse1 hooks for stream priorities",
    "[dynamo] Graph-break on unsupported generator.send",
    "Fix aten::_foreach_add for mixed dtypes",
    "[MPS] Implement index_fill for complex",
    "[xpu] Enable SDPA flash backend",
    'Revert "[aot] Cache joint graphs"',
    "[export] Preserve module call signatures",
    "Use accelerator API in DataLoader pin_memory",
    "[ROCm] Skip flaky rng test on gfx942",
    "[c10d] Timeout watchdog for NCCL abort",
    "Deprecate torch.cuda.amp.autocast",
    "[profiler] Record privateuse1 kernel names",
    "[BE] Remove dead TorchScript paths",
    "[quant] Fix per-channel observer on meta",
]
JOBS = {
    "default": [("ci", "build"), ("ci", "test (default, 1, 2)"), ("ci", "test (default, 2, 2)")],
    "ecosystem": [("nightly-compat", "integration")],
}
TEST = ("TestBinaryUfuncs{dev}", "test_add_{dev}_float32")
TEST2 = ("TestNNDeviceType{dev}", "test_conv2d_{dev}_float16")
DEVICE_WORDS = {
    "reference": ("PRIVATEUSE1", "privateuse1"),
    "gpu": ("XPU", "xpu"),
    "npu": ("PRIVATEUSE1", "privateuse1"),
}


def seed_hud_store() -> dict:
    """~30 trunk commits × 14 backends with every state the policy knows, an upstream-broken
    commit, shared and backend-specific failures, and a PR with three heads."""
    from devtools.sandbox_registry import seed_sandbox_registry
    from relay.models import Project

    seed_sandbox_registry()
    for position, (name, level, device, kind, label) in enumerate(EXTRA_BACKENDS, start=10):
        Project.objects.create(
            full_name=name, level=level, device=device, hardware_kind=kind, display_name=label, position=position
        )
    return _seed_commits(random.Random(7))


def _seed_commits(rng: random.Random) -> dict:
    from django.utils import timezone

    from relay.models import Project, UpstreamCommit

    now = timezone.now().replace(microsecond=0)
    # nightly-only repos take no PR or push work, so they have no results on these commits
    projects = [p for p in Project.objects.filter(is_health_probe=False) if p.takes_pull_requests]
    commits = [
        UpstreamCommit(
            sha=f"{rng.getrandbits(160):040x}",
            title=f"{TITLES[i % len(TITLES)]} (#{151900 - i})",
            author=AUTHORS[i % len(AUTHORS)],
            landed_at=now - timedelta(minutes=37 * i),
            is_trunk=True,
            branch="main",
        )
        for i in range(30)
    ]
    for child, parent in zip(commits, commits[1:]):
        child.parent_sha = parent.sha
    UpstreamCommit.objects.bulk_create(commits)
    pr_heads = _seed_pr(rng, now)
    rows, tests, dispatches = [], [], []
    for index, commit in enumerate(commits):
        for project in projects:
            _seed_cell(rng, index, commit.sha, project, now - timedelta(minutes=37 * index), rows, tests, dispatches)
    for index, sha in enumerate(pr_heads):
        for project in projects:
            _seed_cell(
                rng,
                40 + index,
                sha,
                project,
                now - timedelta(hours=3 - index),
                rows,
                tests,
                dispatches,
                pr_number=151999,
            )
    _store(rows, tests, dispatches)
    test_id = _test_store_record()
    _seed_bisections(commits, test_id)
    _seed_module_counts(commits[:3])
    from relay.models import FailureCause
    from relay.teststore.causes import causes_sweep

    causes_sweep()
    return {
        "cause": FailureCause.objects.values_list("pk", flat=True).first() or 0,
        "commits": commits,
        "pr_number": 151999,
        "pr_heads": pr_heads,
        "upstream_broken": commits[4].sha,
        "shared": commits[7].sha,
        "test_id": test_id,
    }


MODULES = (
    "test_ops",
    "test_torch",
    "test_autograd",
    "test_nn",
    "nn.test_convolution",
    "test_linalg",
    "test_sparse_csr",
    "profiler.test_profiler",
    "distributed.fsdp.test_fsdp_core_with_a_rather_long_module_name",
    "dynamo.test_repros",
    "inductor.test_torchinductor_opinfo",
    "export.test_export",
    "test_cuda",
)


def _seed_module_counts(commits) -> None:
    """Counts per module on the newest trunk commits (the enablement pages), as the sweep writes
    them: each backend far along some paths, barely started on others, skipping more lately."""
    from relay.enablement.counts import counts_write
    from relay.models import JobRun

    jobs = JobRun.objects.filter(head_sha__in=[c.sha for c in commits], status="completed").order_by("id")
    for job in jobs:
        age = [c.sha for c in commits].index(job.head_sha)
        counts = {
            module: {
                "passed": 4000 // (i + 1) - 50 * (job.project_id % 5),
                "failed": i % 3,
                "skipped": 20 * (3 - age) + i,
            }
            for i, module in enumerate(MODULES[: 6 + job.project_id % 8])
        }
        counts_write(job.id, job.project_id, job.head_sha, job.created_at, counts)


def _seed_bisections(commits, test_id: str) -> None:
    """A verified culprit and a not reproducible one at the shared commit, on Intel XPU (the
    pages' width with the bisection lines: long test ids, SHAs, the PR)."""
    from relay.models import Bisection, BisectProbe, Project

    xpu = Project.objects.get(full_name="intel/torch-xpu-ops")
    span = [c.sha for c in reversed(commits[3:12])]  # oldest first: good, then 8 commits
    tests = [{"test_id": test_id or "test_ops.TestFoo.test_add_float32", "job": "ci / test (default, 1, 2)"}]
    for state, note in (
        ("verified", "fails with the culprit, passes on its parent"),
        ("not_reproducible", "re-run: suspect passed, its parent passed"),
    ):
        bisection = Bisection.objects.create(
            project=xpu,
            state=state,
            good_sha=span[0],
            bad_sha=span[-1],
            commits=span[1:],
            tests=tests * 3,
            good_index=3,
            bad_index=4,
            culprit_sha=span[4],
            note=note,
            finished_at=commits[0].landed_at,
        )
        for number, (role, index, outcome) in enumerate(
            [
                ("search", 4, "fail"),
                ("search", 2, "pass"),
                ("search", 3, "pass"),
                ("culprit", 4, "fail"),
                ("parent", 3, "pass"),
            ],
            start=1,
        ):
            BisectProbe.objects.create(
                bisection=bisection,
                number=number,
                role=role,
                sha=span[index],
                index=index,
                project=xpu,
                outcome=outcome,
            )


def _test_store_record() -> str:
    """The test store, as the minute sweep would have written it; the shared test's id."""
    from relay.models import JobRun, Project, TestIdentity
    from relay.teststore.store import commit_record

    projects = {p.pk: p for p in Project.objects.all()}
    for sha, pid in JobRun.objects.values_list("head_sha", "project_id").distinct():
        if projects[pid].level != "L1":
            commit_record(sha, projects[pid])
    return TestIdentity.objects.filter(method="test_add").values_list("identity", flat=True).first() or ""


def _seed_pr(rng, now) -> list[str]:
    from relay.models import UpstreamCommit

    shas = [f"{rng.getrandbits(160):040x}" for _ in range(3)]
    UpstreamCommit.objects.bulk_create(
        UpstreamCommit(
            sha=sha,
            title="[xpu] Enable SDPA flash backend",
            author="guangyey",
            pr_number=151999,
            branch="xpu-sdpa",
            landed_at=now - timedelta(hours=3 - i),
        )
        for i, sha in enumerate(shas)
    )
    return shas


def _seed_cell(rng, index, sha, project, when, rows, tests, dispatches, pr_number=None):
    if project.level == "L1":
        dispatches.append(
            (
                sha,
                project,
                "not_installed" if project.full_name.startswith("mthreads") and index % 3 else "sent",
                pr_number,
            )
        )
        return
    if rng.random() < 0.08 and not project.is_reference:
        return  # this backend skipped the commit entirely: "~"
    for workflow, job in JOBS["ecosystem" if project.hardware_kind == "ecosystem" else "default"]:
        outcome = _outcome(rng, index, project, job)
        rows.append(_job_row(sha, project, workflow, job, outcome, when, pr_number))
        if outcome.get("failed_tests"):
            tests.append((rows[-1], outcome["failed_tests"]))
        if outcome.get("retry"):
            rows.append(
                _job_row(
                    sha,
                    project,
                    workflow,
                    job,
                    {"conclusion": "success", "attempt": 2},
                    when + timedelta(minutes=40),
                    pr_number,
                )
            )


def _outcome(rng, index, project, job) -> dict:
    """Scripted stories on a few commits, background noise elsewhere."""
    dev, suffix = DEVICE_WORDS.get(project.hardware_kind, ("CUDA", "cuda"))
    if index in (0, 40 + 2) and "test" in job and not project.is_reference:
        return {"status": "in_progress"} if rng.random() < 0.6 else {"conclusion": "success"}
    if index == 4 and project.is_reference and job == "build":
        return {"conclusion": "failure", "tests_total": None}  # upstream broken
    if index == 7 and "1, 2" in job and project.hardware_kind in ("reference", "gpu", "npu"):
        return {"conclusion": "failure", "failed_tests": [(TEST[0].format(dev=dev), TEST[1].format(dev=suffix))]}
    if index in (11, 41) and project.level == "L4" and "2, 2" in job:
        return {
            "conclusion": "failure",
            "failed_tests": [(TEST2[0].format(dev=dev), TEST2[1].format(dev=suffix), "ACCELERATOR")],
        }
    if index == 15 and project.device == "rocm":
        return {"conclusion": "timed_out", "ended_by": "timed_out"}
    roll = rng.random()
    if roll < 0.04 and not project.is_reference:
        return {"conclusion": "failure", "failed_tests": [(f"TestOps{dev}", f"test_noise_{index}_{suffix}")]}
    return {"conclusion": "success", "retry": False} if roll > 0.07 else {"conclusion": "failure", "retry": True}


def _job_row(sha, project, workflow, job, outcome, when, pr_number):
    from relay.models import JobRun

    in_progress = outcome.get("status") == "in_progress"
    attempt = outcome.get("attempt", 1)
    run_id = f"{abs(hash((sha, project.id, job))) % 10**10}"
    return JobRun(
        project=project,
        delivery_key=f"{sha[:12]}-{project.id}",
        event_type="pull_request" if pr_number else "push",
        run_id=run_id,
        run_attempt=attempt,
        workflow_name=workflow,
        job_name=job,
        status="in_progress" if in_progress else "completed",
        conclusion="" if in_progress else outcome["conclusion"],
        ended_by=outcome.get("ended_by", ""),
        head_sha=sha,
        pr_number=pr_number,
        workflow_url=f"https://github.com/{project.full_name}/actions/runs/{run_id}",
        check_run_id=str(int(run_id) + attempt),
        artifact_url="" if in_progress else f"https://github.com/{project.full_name}/actions/runs/{run_id}/artifacts",
        queue_seconds=30 + (hash(job) % 400),
        execution_seconds=None if in_progress else 900 + (hash(sha) % 3000),
        tests_total=None if in_progress else outcome.get("tests_total", 4200),
        tests_passed=None if in_progress else 4200 - len(outcome.get("failed_tests", [])),
        tests_failed=len(outcome.get("failed_tests", [])) or None,
        created_at=when + timedelta(minutes=attempt - 1),
        in_progress_at=when,
    )


def _store(rows, tests, dispatches):
    from relay.models import Delivery, Dispatch, FailedTest, JobRun

    JobRun.objects.bulk_create(rows)
    FailedTest.objects.bulk_create(
        FailedTest(
            job_run=row,
            classname=t[0],
            name=t[1],
            hw_classification=t[2] if len(t) > 2 else "",
            message="AssertionError: Tensor-likes are not close!\nMismatched elements: 3 / 1024 (0.3%)",
        )
        for row, failed in tests
        for t in failed
    )
    for sha, project, state, pr_number in dispatches:
        delivery, _ = Delivery.objects.get_or_create(
            guid=f"d-{sha[:16]}",
            defaults={
                "event": "pull_request" if pr_number else "push",
                "outcome": "relayed",
                "head_sha": sha,
                "pr_number": pr_number,
            },
        )
        Dispatch.objects.create(
            delivery=delivery,
            project=project,
            state=state,
            event_type=delivery.event,
            head_sha=sha,
            pr_number=pr_number,
        )
