"""Realistic relay and HUD history for benchmarks, written fast (`manage.py bench_seed`).

What it builds, for `jobs` JobRun rows:

- a registry of 40 backends at mixed levels (the OpenReg reference, 4 × L4, 8 × L3, 16 more × L2,
  10 × L1) plus the relay's health probe, all installed but one;
- trunk commits (about 115 a day, each with its first parent) and PR heads (about 230 a day: PRs
  with up to three heads, some labelled `ciflow/crcr/<device>`), each with its webhook Delivery
  and one Dispatch per backend;
- JobRun rows the way callbacks, the sweeper and the reference import leave them: every non-L1
  backend runs its own jobs (a build and 1–8 test shards) with backend-specific queue and
  execution times, failure rates, flaky failures re-run as attempt 2, cancellations, timeouts,
  never-started dispatches, superseded PR heads, jobs still running near "now"; upstream-broken
  commits fail on the reference and most backends with the same tests; FailedTest rows for the
  failed test jobs;
- at the default rates a million rows span about 30 days.

Every commit's content comes from its own random stream (seeded by its position counted from the
newest), so the newest 50 trunk commits — the grid's first page — are identical whatever the store's
size: the grid benchmark compares the same page over 10 k and 1 M rows.

Rows are written with explicit ids in the order callbacks would have created them (created_at),
with COPY on PostgreSQL and batched executemany on SQLite, JOB_CHUNK job rows per transaction: a
commit's rows are counted when commits are chosen, then generated again from the same stream when
written, so the seeder never holds the store (its peak memory is flat in --jobs)."""

import gc
import hashlib
import heapq
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.apps import apps
from django.core.management.color import no_style
from django.db import connection, transaction

DAY = 86400.0
HOUR = 3600.0
PAGE_COMMITS = 50
UPSTREAM = "pytorch/pytorch"
NEVER_STARTED_AFTER = 6 * HOUR
JOB_TIMEOUT_AFTER = 6 * HOUR
PR_BLOCK_WIDTH = 16
"""PR heads are laid out in blocks of 16 PRs × 3 heads; a PR's next head comes 16 heads later."""
PR_BLOCK_HEADS = 3
BATCH = 10_000
JOB_CHUNK = 100_000
"""Job rows written per COPY: the seeder holds one chunk, not the store (its peak stays flat in --jobs)."""


# --- the registry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backend:
    index: int
    full_name: str
    display_name: str
    level: str
    hardware: str
    device: str = ""
    device_word: str = "privateuse1"
    is_reference: bool = False
    is_probe: bool = False
    installed: bool = True


_NAMED = (
    ("pytorch/openreg-ci", "OpenReg (reference)", "L2", "reference", "", "privateuse1", True),
    ("intel/torch-xpu-ops", "Intel XPU", "L4", "gpu", "", "xpu", False),
    ("ROCm/pytorch", "AMD ROCm", "L3", "gpu", "rocm", "cuda", False),
    ("pytorch-mps/mps-ci", "Apple MPS", "L2", "gpu", "", "mps", False),
    ("quic/ai-engine-direct-torch", "Qualcomm AI Engine", "L3", "npu", "qnn", "privateuse1", False),
    ("vllm-project/vllm", "vLLM", "L2", "ecosystem", "", "cuda", False),
    ("sgl-project/sglang", "SGLang", "L1", "ecosystem", "", "cuda", False),
    ("huggingface/transformers", "Hugging Face Transformers", "L2", "ecosystem", "", "cuda", False),
)
_SYNTHETIC_LEVELS = ["L4"] * 3 + ["L3"] * 6 + ["L2"] * 14 + ["L1"] * 9
_DEVICES = ["npu", "hpu", "mtia", "tpu", "mlu", "dcu", "gcu", "ipu", "sdaa", "musa", "vpu", "dpu"]
_HARDWARE = ["gpu", "npu", "npu", "cpu", "other", "gpu"]


def registry() -> list[Backend]:
    """40 backends (the grid's columns) and the health probe, in a fixed order."""
    backends = [Backend(i, n, d, lvl, hw, dev, word, ref) for i, (n, d, lvl, hw, dev, word, ref) in enumerate(_NAMED)]
    for k, level in enumerate(_SYNTHETIC_LEVELS):
        device = _DEVICES[k % len(_DEVICES)]
        word = "hpu" if device == "hpu" else "mtia" if device == "mtia" else "privateuse1"
        backends.append(
            Backend(
                len(backends),
                f"accel{k + 1:02d}/torch-{device}",
                f"Accel {k + 1:02d} {device.upper()}",
                level,
                _HARDWARE[k % len(_HARDWARE)],
                device if level == "L3" else "",
                word,
                installed=k != len(_SYNTHETIC_LEVELS) - 1,
            )
        )
    backends.append(
        Backend(
            len(backends), "pytorch/crcr-test", "CRCR health probe", "L2", "probe", "", "privateuse1", is_probe=True
        )
    )
    return backends


@dataclass
class Profile:
    """How one backend behaves, fixed per backend."""

    workflow: str
    jobs: list[tuple[str, str]]  # (job name, "build" | "test")
    fail_rate: float
    queue_median: float
    build_seconds: float
    test_seconds: float
    pr_share: float
    environment: str


def backend_profile(b: Backend, seed: int) -> Profile:
    rng = random.Random(f"{seed}:backend:{b.full_name}")
    if b.is_probe:
        return Profile("crcr-probe", [("smoke", "probe"), ("xfail", "probe")], 0.0, 20.0, 60.0, 60.0, 1.0, "{}")
    if b.is_reference:
        jobs = [(f"test (openreg, {i}, 3)", "test") for i in (1, 2, 3)]
        return Profile("trunk", jobs, 0.01, 0.0, 0.0, rng.uniform(1500, 2400), 1.0, "{}")
    short = b.full_name.split("/")[1].replace("torch-", "")[:12]
    jobs = [("build", "build")] if rng.random() < 0.8 else []
    shards = rng.choice([1, 2, 3, 4, 4, 5, 6, 8])
    jobs += [(f"test (default, {i}, {shards})", "test") for i in range(1, shards + 1)]
    if rng.random() < 0.3:
        jobs += [(f"test (inductor, {i}, 2)", "test") for i in (1, 2)]
    queue = 40 * 60.0 if rng.random() < 0.08 else rng.uniform(20, 600)
    env = json.dumps(
        {
            "runner": f"{short}-runner-{rng.randint(1, 9)}",
            "driver": f"{rng.randint(1, 30)}.{rng.randint(0, 9)}",
            "torch_backend": b.device_word,
        },
        separators=(",", ":"),
    )
    return Profile(
        f"crcr-{short}",
        jobs,
        rng.uniform(0.01, 0.07),
        queue,
        rng.uniform(600, 2100),
        rng.uniform(900, 4200),
        1.0 if b.level == "L4" else rng.uniform(0.2, 0.9),
        env,
    )


# --- tests that fail -------------------------------------------------------------------------------

_CLASSES = [
    "TestCommon",
    "TestTorchDeviceType",
    "TestNN",
    "TestOps",
    "TestLinalg",
    "TestReductions",
    "TestBinaryUfuncs",
    "TestUnaryUfuncs",
    "TestIndexing",
    "TestSparse",
    "TestAutogradDevice",
    "TestInductorOpInfo",
]
_OPS = [
    "addmm",
    "baddbmm",
    "conv2d",
    "layer_norm",
    "softmax",
    "index_put",
    "scatter_add",
    "cumsum",
    "topk",
    "sort",
    "linalg_svd",
    "matmul",
    "einsum",
    "gather",
    "embedding_bag",
    "nll_loss",
    "max_pool2d",
    "upsample_bilinear2d",
    "grid_sampler_2d",
    "nonzero",
]
_VARIANTS = [
    "out",
    "noncontiguous_samples",
    "compare_cpu",
    "variant_consistency_eager",
    "dtypes",
    "fn_grad",
    "python_ref",
]
_DTYPES = ["float32", "float16", "bfloat16", "float64", "int64", "complex64"]
_MESSAGES = [
    "AssertionError: Tensor-likes are not close!\n\nMismatched elements: {n} / 4096 ({p}%)\nGreatest absolute difference: 0.0{n} at index (3, 17)",
    "RuntimeError: {dev} kernel for aten::{op} is not implemented for '{dt}'",
    "AssertionError: Scalars are not equal!\n\nExpected 0 but got {n}.",
    "RuntimeError: UR error: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
    "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: LoweringException: {op}",
    "TimeoutError: test exceeded 600 s",
]


def test_identity(rng: random.Random) -> tuple[str, str, str]:
    """(class stem, method stem, file) of a device-generic test; devices are spliced in later."""
    cls = rng.choice(_CLASSES)
    return cls, f"test_{rng.choice(_VARIANTS)}_{rng.choice(_OPS)}", f"test/test_{cls[4:].lower()}.py"


def failed_test_values(ident: tuple, dtype: str, b: Backend, rng: random.Random) -> tuple:
    cls, method, file = ident
    word = b.device_word
    op = method.rsplit("_", 1)[-1]
    message = rng.choice(_MESSAGES).format(n=rng.randint(1, 99), p=rng.randint(1, 9), dev=word.upper(), op=op, dt=dtype)
    stack = (
        f'Traceback (most recent call last):\n  File "{file}", line {rng.randint(100, 9000)}, in {method}_{word}_{dtype}\n'
        f'    self.assertEqual(actual, expected)\n  File "torch/testing/_internal/common_utils.py", line 4088, in assertEqual\n'
        f"    raise error_metas.pop()[0].to_error(msg)\n{message.splitlines()[0]}"
    )
    hw = "HW" if rng.random() < 0.1 else ""
    return (f"{method}_{word}_{dtype}", f"{cls}{word.upper()}", file, message, stack, hw, False, "failed")


# --- commits ------------------------------------------------------------------------------------------


@dataclass
class Commit:
    kind: str  # "trunk" | "pr"
    index: int  # position in its stream, 0 = newest
    sha: str
    landed: float
    pr_number: int | None = None
    head_no: int = 0
    newer_head_at: float | None = None
    labels: tuple[str, ...] = ()
    broken: bool = False
    title: str = ""
    author: str = ""
    parent_sha: str = ""
    jobs: list = field(default_factory=list)
    kept: int = 0  # job rows this commit contributes (the last chosen one is cut to fit the budget)
    delivery_uuid: str = ""
    delivery_fields: tuple = ()
    delivery_pk: int = 0
    dispatch_base: int = 0


def _sha(seed: int, kind: str, index: int) -> str:
    return hashlib.sha1(f"bench:{seed}:{kind}:{index}".encode()).hexdigest()


_AREAS = [
    "inductor",
    "dynamo",
    "aten",
    "autograd",
    "distributed",
    "export",
    "mps",
    "xpu",
    "nn",
    "quant",
    "cuda",
    "fx",
    "optim",
]
_VERBS = ["Fix", "Add", "Remove", "Support", "Refactor", "Speed up", "Skip", "Enable", "Handle"]
_THINGS = [
    "lowering for {op}",
    "decomposition of {op}",
    "dtype promotion in {op}",
    "meta kernel for {op}",
    "flaky test_{op}",
    "guard on dynamic shapes",
    "stride handling in {op}",
    "fallback for {op} on privateuse1",
]
_AUTHORS = [
    "ezyang",
    "malfet",
    "albanD",
    "jansel",
    "eellison",
    "huydhn",
    "guangyey",
    "jerryzh168",
    "kulinseth",
    "pytorchbot",
]


class Timeline:
    """Trunk commits and PR heads at fixed rates, newest first, each from its own random stream."""

    def __init__(self, seed: int, now: float, trunk_per_day: float, pr_heads_per_day: float):
        self.seed, self.now = seed, now
        self.trunk_gap, self.pr_gap = DAY / trunk_per_day, DAY / pr_heads_per_day

    def rng(self, kind: str, index: int) -> random.Random:
        return random.Random(self.seed * 1_000_003 + (0 if kind == "trunk" else 500_000_000) + index)

    def trunk_time(self, i: int) -> float:
        return self.now - 120.0 - i * self.trunk_gap - self.rng("trunk", i).random() * 0.8 * self.trunk_gap

    def pr_time(self, m: int) -> float:
        return self.now - 60.0 - m * self.pr_gap - self.rng("pr", m).random() * 0.8 * self.pr_gap

    def trunk(self, i: int) -> Commit:
        rng = self.rng("trunk", i)
        rng.random()  # the jitter draw
        pr = 170_000 - 3 * i
        c = Commit(
            "trunk", i, _sha(self.seed, "trunk", i), self.trunk_time(i), parent_sha=_sha(self.seed, "trunk", i + 1)
        )
        c.broken = rng.random() < 0.02
        c.title = self._title(rng, pr)
        c.author = rng.choice(_AUTHORS)
        return c

    def pr(self, m: int) -> Commit:
        rng = self.rng("pr", m)
        rng.random()
        per_block = PR_BLOCK_WIDTH * PR_BLOCK_HEADS
        block, within = divmod(m, per_block)
        slot, from_newest = within % PR_BLOCK_WIDTH, within // PR_BLOCK_WIDTH
        number = 180_000 - block * PR_BLOCK_WIDTH - slot
        c = Commit(
            "pr",
            m,
            _sha(self.seed, "pr", m),
            self.pr_time(m),
            pr_number=number,
            head_no=PR_BLOCK_HEADS - 1 - from_newest,
        )
        c.newer_head_at = self.pr_time(m - PR_BLOCK_WIDTH) if from_newest > 0 else None
        pr_rng = random.Random(self.seed * 7 + number)
        c.labels = tuple(f"ciflow/crcr/{d}" for d in ["rocm", "qnn", *_DEVICES] if pr_rng.random() < 0.15)
        c.title = self._title(pr_rng, None)
        c.author = pr_rng.choice(_AUTHORS[:-1])
        c.broken = rng.random() < 0.06
        return c

    @staticmethod
    def _title(rng: random.Random, pr: int | None) -> str:
        thing = rng.choice(_THINGS).format(op=rng.choice(_OPS))
        text = f"[{rng.choice(_AREAS)}] {rng.choice(_VERBS)} {thing}"
        return f"{text} (#{pr})" if pr else text


# --- the generator --------------------------------------------------------------------------------------

JOB_FIELDS = (
    "id",
    "project_id",
    "dispatch_id",
    "delivery_key",
    "event_type",
    "run_id",
    "run_attempt",
    "job_name",
    "workflow_name",
    "status",
    "conclusion",
    "ended_by",
    "head_sha",
    "pr_number",
    "workflow_url",
    "artifact_url",
    "check_run_id",
    "reported_started_at",
    "reported_completed_at",
    "in_progress_at",
    "completed_at",
    "start_unknown",
    "queue_seconds",
    "execution_seconds",
    "tests_passed",
    "tests_failed",
    "tests_skipped",
    "tests_total",
    "failed_tests_truncated",
    "environment",
    "body",
    "created_at",
    "updated_at",
    "tests_error",
    "tests_xfailed",
    "tests_xpassed",
    "tests_source",
    "triage_verdict",
    "job_id",
    "tests_accelerator_ran",
)
_J = {name: i for i, name in enumerate(JOB_FIELDS)}
NO_OUTCOME_DETAIL = (None, None, None, "", None, "", None)
"""tests_error, tests_xfailed, tests_xpassed, tests_source, triage_verdict, job_id,
tests_accelerator_ran: the seed's jobs report passed/failed/skipped only, from their own CI (no
reference import), with no triage verdict, no workflow.job_id and no hw_classification."""
FAILED_FIELDS = (
    "id",
    "job_run_id",
    "name",
    "classname",
    "file",
    "message",
    "stacktrace",
    "hw_classification",
    "truncated",
    "outcome",
)
DELIVERY_FIELDS = (
    "id",
    "guid",
    "event",
    "action",
    "outcome",
    "reason",
    "repo_full_name",
    "pr_number",
    "head_sha",
    "ref",
    "label",
    "sender",
    "payload",
    "payload_bytes",
    "payload_pruned_at",
    "received_at",
)
DISPATCH_FIELDS = (
    "id",
    "delivery_id",
    "project_id",
    "state",
    "event_type",
    "pr_number",
    "head_sha",
    "attempts",
    "next_attempt_at",
    "lease_expires_at",
    "sent_at",
    "last_error",
    "resent_at",
    "resent_by",
    "attempts_before_resend",
    "created_at",
    "updated_at",
)
COMMIT_FIELDS = (
    "id",
    "sha",
    "title",
    "author",
    "committed_at",
    "landed_at",
    "branch",
    "is_trunk",
    "pr_number",
    "parent_sha",
)


@dataclass
class SeedResult:
    jobs: int = 0
    failed_tests: int = 0
    commits: int = 0
    trunk_commits: int = 0
    pr_heads: int = 0
    deliveries: int = 0
    dispatches: int = 0
    projects: int = 0
    rollup_hours: int = 0
    span_days: float = 0.0
    seconds: dict = field(default_factory=dict)

    @property
    def total_seconds(self) -> float:
        return round(sum(self.seconds.values()), 2)


class Generator:
    """Builds rows (times already in the database's form) commit by commit and writes them."""

    def __init__(
        self,
        jobs: int,
        seed: int = 1,
        now: float | None = None,
        trunk_per_day: float = 115,
        pr_heads_per_day: float = 230,
        page_commits: int = PAGE_COMMITS,
    ):
        self.target, self.seed, self.page_commits = jobs, seed, page_commits
        self.now = now if now is not None else time.time()
        self.timeline = Timeline(seed, self.now, trunk_per_day, pr_heads_per_day)
        self.backends = registry()
        self.profiles = [backend_profile(b, seed) for b in self.backends]
        self.vendor = connection.vendor
        self.ts = _sqlite_time if self.vendor == "sqlite" else _aware_time

    # --- choosing commits ----------------------------------------------------------------------

    def commits(self) -> list[Commit]:
        """The newest `page_commits` (50) trunk commits always; then trunk commits and PR heads newest first until
        the job budget is spent (the last one cut to fit exactly)."""
        chosen = [self.timeline.trunk(i) for i in range(self.page_commits)]
        for c in chosen:
            c.kept, c.jobs = len(self.jobs_for(c)), []
        total = sum(c.kept for c in chosen)
        i, m = self.page_commits, 0
        while total < self.target:
            t_time, p_time = self.timeline.trunk_time(i), self.timeline.pr_time(m)
            if t_time >= p_time:
                c, i = self.timeline.trunk(i), i + 1
            else:
                c, m = self.timeline.pr(m), m + 1
            c.kept = min(len(self.jobs_for(c)), self.target - total)
            c.jobs = []  # counted, not kept: regenerated from the commit's own stream when written
            total += c.kept
            chosen.append(c)
            if i > 10_000_000 or m > 20_000_000:
                raise RuntimeError("job budget cannot be reached")
        return chosen

    # --- one commit --------------------------------------------------------------------------------

    def jobs_for(self, c: Commit) -> list:
        """The commit's job rows. Their dispatch_id holds the backend's index until ids are given
        out (in arrival order, once the commits are chosen)."""
        self.describe_delivery(c)
        rng = random.Random(f"{self.seed}:jobs:{c.kind}:{c.index}")
        shared = [(test_identity(rng), rng.choice(_DTYPES)) for _ in range(rng.randint(1, 6))]
        c.jobs = []
        for b, prof in zip(self.backends, self.profiles):
            if b.level == "L1":
                continue
            self._backend_jobs(c, b, prof, rng, shared)
        return c.jobs

    def _runs_on(self, c: Commit, b: Backend, prof: Profile, rng: random.Random) -> bool:
        if c.kind == "trunk":
            return b.is_reference or b.is_probe or rng.random() < 0.97
        if b.is_probe:
            return False
        if b.level == "L3":
            return f"ciflow/crcr/{b.device}" in c.labels and rng.random() < 0.97
        return rng.random() < prof.pr_share

    def _backend_jobs(self, c: Commit, b: Backend, prof: Profile, rng: random.Random, shared) -> None:
        now = self.now
        sent = c.landed + rng.uniform(0.5, 4.0)
        if not self._runs_on(c, b, prof, rng):
            if (
                not b.is_reference
                and c.kind == "trunk"
                and now - sent > NEVER_STARTED_AFTER + 120
                and rng.random() < 0.3
            ):
                self._never_started(c, b, sent + NEVER_STARTED_AFTER + rng.uniform(0, 120))
            return
        run_id = 9_000_000_000 + (0 if c.kind == "trunk" else 400_000_000) + c.index * 64 + b.index
        for n, (job_name, job_kind) in enumerate(prof.jobs):
            self._job(c, b, prof, rng, shared, run_id, n, job_name, job_kind, sent)

    def _job(self, c, b, prof, rng, shared, run_id, n, job_name, job_kind, sent) -> None:
        now = self.now
        if b.is_reference:
            queue = rng.uniform(60, 900)
            duration = prof.test_seconds * rng.uniform(0.8, 1.2)
        else:
            queue = prof.queue_median * rng.lognormvariate(0, 0.8) * (10 if rng.random() < 0.01 else 1)
            base = prof.build_seconds if job_kind == "build" else prof.test_seconds if job_kind == "test" else 90
            duration = base * rng.uniform(0.7, 1.3)
        start = sent + queue + (prof.build_seconds if job_kind == "test" and prof.jobs[0][1] == "build" else 0)
        if start >= now:
            return  # dispatched, not started yet: no row
        failing_tests = self._failure(c, b, prof, rng, shared, job_kind)
        roll = rng.random()
        conclusion, ended_by, end = ("failure" if failing_tests is not None else "success"), "", start + duration
        if failing_tests is None and job_kind != "probe":
            if roll < 0.006:
                conclusion = "cancelled"
            elif roll < 0.009:
                conclusion = "timed_out"
            elif roll < 0.012:
                conclusion, ended_by, end = "timed_out", "timed_out", start + JOB_TIMEOUT_AFTER + rng.uniform(0, 120)
            elif roll < 0.02:
                conclusion = "skipped" if job_kind == "test" else "neutral"
        if b.is_probe:
            conclusion, failing_tests = (
                ("failure" if "xfail" in job_name else "success"),
                None,
            )  # crcr-test's x-probe naming
        if c.newer_head_at is not None and c.newer_head_at < end and not b.is_reference:
            conclusion, ended_by, end, failing_tests = (
                "cancelled",
                "superseded",
                c.newer_head_at + rng.uniform(30, 120),
                None,
            )
        attempt1 = self._row(
            c, b, prof, rng, run_id, n, 1, job_name, job_kind, start, end, conclusion, ended_by, failing_tests, queue
        )
        if attempt1 is None or failing_tests is None or ended_by:
            return
        flaky = failing_tests == "flaky"
        if not (flaky or rng.random() < 0.3):
            return
        requested = end + rng.uniform(120, 3600)
        start2 = requested + prof.queue_median * rng.lognormvariate(0, 0.8)
        if start2 >= now:
            return
        again = None if flaky else self._failure(c, b, prof, rng, shared, job_kind, force=True)
        self._row(
            c,
            b,
            prof,
            rng,
            run_id,
            n,
            2,
            job_name,
            job_kind,
            start2,
            start2 + duration * rng.uniform(0.9, 1.1),
            "success" if again is None else "failure",
            "",
            again,
            start2 - requested if rng.random() < 0.5 else None,
        )

    def _failure(self, c, b, prof, rng, shared, job_kind, force=False):
        """None (passes), "flaky" (fails, passes when re-run) or the failing tests [(identity, dtype)]."""
        if job_kind == "probe":
            return None
        if c.broken and job_kind == "test" and (b.is_reference or rng.random() < 0.75):
            return shared
        rate = prof.fail_rate if job_kind == "test" else prof.fail_rate / 4
        if not force and rng.random() >= rate:
            return None
        if not force and rng.random() < 0.45:
            return "flaky"
        own = random.Random(f"{self.seed}:{b.full_name}:{rng.randint(0, 40)}")
        return [(test_identity(own), own.choice(_DTYPES)) for _ in range(1 + min(19, int(rng.expovariate(0.45))))]

    def _row(
        self, c, b, prof, rng, run_id, n, attempt, job_name, job_kind, start, end, conclusion, ended_by, failing, queue
    ):
        now, ts = self.now, self.ts
        completed = end <= now
        if not completed and now - start > JOB_TIMEOUT_AFTER:
            conclusion, ended_by, end, completed, failing = (
                "timed_out",
                "timed_out",
                start + JOB_TIMEOUT_AFTER + 60,
                True,
                None,
            )
        if not completed:
            conclusion, ended_by, failing = "", "", None
        imported = b.is_reference
        event_type = "push" if c.kind == "trunk" else "pull_request"
        tests = (None, None, None, None)
        failed_rows = None
        if job_kind == "test" and completed and ended_by == "":
            total = rng.randint(1500, 30000)
            if failing == "flaky":
                failing = [(test_identity(rng), rng.choice(_DTYPES))]
            failed_rows = (
                [failed_test_values(ident, dtype, b, rng) for ident, dtype in failing]
                if isinstance(failing, list)
                else None
            )
            n_failed = len(failed_rows) if failed_rows else 0
            skipped = int(total * rng.uniform(0.02, 0.12))
            tests = (total - skipped - n_failed, n_failed, skipped, total)
        workflow = ("trunk" if c.kind == "trunk" else "pull") if imported else prof.workflow
        status = "completed" if completed else "in_progress"
        dispatch_id = None if imported else b.index
        delivery_key = c.sha if imported else c.delivery_uuid
        start_unknown = not imported and attempt == 1 and rng.random() < 0.004
        in_progress_at = None if imported or start_unknown else start
        created = end if imported and completed else (end if start_unknown else start)
        body = (
            '{"event_type":"%s","delivery_id":"%s","workflow":{"status":"%s","conclusion":%s,"name":"%s","run_id":"%d",'
            '"run_attempt":"%d","job_name":"%s"}}'
        ) % (
            event_type,
            delivery_key,
            status,
            f'"{conclusion}"' if conclusion else "null",
            workflow,
            run_id,
            attempt,
            job_name,
        )
        row = [
            0,
            b.index,
            dispatch_id,
            delivery_key,
            event_type,
            str(run_id),
            attempt,
            job_name,
            workflow,
            status,
            conclusion,
            "imported" if imported else ended_by,
            c.sha,
            c.pr_number,
            f"https://github.com/{b.full_name}/actions/runs/{run_id}/job/{run_id * 16 + n}",
            "",
            f"{run_id * 16 + n}",
            ts(start - 2),
            ts(end) if completed else None,
            ts(in_progress_at) if in_progress_at else None,
            ts(end) if completed else None,
            start_unknown,
            None if imported or start_unknown or attempt > 1 and queue is None else round(queue, 3),
            round(end - start, 3)
            if completed and not imported and not start_unknown and ended_by in ("", "timed_out")
            else None,
            *tests,
            False,
            prof.environment,
            body,
            ts(created),
            ts(end if completed else start),
            *NO_OUTCOME_DETAIL,
            failed_rows,
        ]
        c.jobs.append(row)
        return row

    def _never_started(self, c: Commit, b: Backend, at: float) -> None:
        ts = self.ts
        body = "{}"
        c.jobs.append(
            [
                0,
                b.index,
                b.index,
                c.delivery_uuid,
                "push",
                "-",
                1,
                "",
                "(no run started)",
                "completed",
                "timed_out",
                "never_started",
                c.sha,
                c.pr_number,
                "",
                "",
                "",
                None,
                None,
                None,
                ts(at),
                True,
                None,
                None,
                None,
                None,
                None,
                None,
                False,
                "{}",
                body,
                ts(at),
                ts(at),
                *NO_OUTCOME_DETAIL,
                None,
            ]
        )

    # --- deliveries, dispatches, commits ---------------------------------------------------------

    def describe_delivery(self, c: Commit) -> None:
        """The commit's webhook delivery (its id is what callbacks echo as delivery_id)."""
        rng = random.Random(f"{self.seed}:delivery:{c.kind}:{c.index}")
        c.delivery_uuid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if c.kind == "trunk":
            payload = {
                "ref": "refs/heads/main",
                "before": c.parent_sha,
                "after": c.sha,
                "repository": {"full_name": UPSTREAM, "default_branch": "main"},
                "head_commit": {"id": c.sha, "message": c.title, "author": {"username": c.author}},
                "pusher": {"name": "pytorchmergebot"},
            }
            event, action, ref, sender = "push", "", "refs/heads/main", "pytorchmergebot"
        else:
            action = "opened" if c.head_no == 0 else "synchronize"
            ref = f"gh/{c.author}/{c.pr_number % 1000}/head"
            payload = {
                "action": action,
                "number": c.pr_number,
                "repository": {"full_name": UPSTREAM, "default_branch": "main"},
                "pull_request": {
                    "number": c.pr_number,
                    "title": c.title,
                    "user": {"login": c.author},
                    "state": "open",
                    "head": {"sha": c.sha, "ref": ref},
                    "base": {"ref": "main"},
                    "labels": [{"name": name} for name in c.labels],
                },
            }
            event, sender = "pull_request", c.author
        c.delivery_fields = (
            c.delivery_uuid,
            event,
            action,
            "relayed",
            "",
            UPSTREAM,
            c.pr_number,
            c.sha,
            ref,
            "",
            sender,
            json.dumps(payload, separators=(",", ":")),
            rng.randint(8_000, 40_000),
            None,
            self.ts(c.landed),
        )

    def dispatch_rows(self, c: Commit):
        ts, rng = self.ts, random.Random(f"{self.seed}:dispatch:{c.kind}:{c.index}")
        event = "push" if c.kind == "trunk" else "pull_request"
        for b in self.backends:
            created = c.landed + 0.05
            sent = c.landed + rng.uniform(0.5, 4.0)
            state, attempts, error = (
                ("sent", 1, "") if b.installed else ("not_installed", 0, "the App is not installed on this repository")
            )
            if b.installed and rng.random() < 0.003:
                attempts, error = 2, "502 Bad Gateway (retried)"
            yield (
                c.dispatch_base + b.index,
                c.delivery_pk,
                b.index,
                state,
                event,
                c.pr_number,
                c.sha,
                attempts,
                ts(created),
                None,
                ts(sent) if state == "sent" else None,
                error,
                None,
                "",
                0,
                ts(created),
                ts(sent),
            )

    def commit_row(self, c: Commit, pk: int) -> tuple:
        ts = self.ts
        rng = random.Random(f"{self.seed}:commit:{c.kind}:{c.index}")
        branch = "main" if c.kind == "trunk" else f"gh/{c.author}/{(c.pr_number or 0) % 1000}/head"
        return (
            pk,
            c.sha,
            c.title[:300],
            c.author,
            ts(c.landed - rng.uniform(HOUR, 3 * DAY)),
            ts(c.landed),
            branch,
            c.kind == "trunk",
            c.pr_number,
            c.parent_sha,
        )

    # --- the whole store --------------------------------------------------------------------------------

    def run(self, reset: bool = False, progress=None) -> SeedResult:
        say = progress or (lambda text: None)
        result = SeedResult()
        started = time.monotonic()
        if reset:
            store_reset()
        elif store_rows() > 0:
            raise SeedRefused(
                f"the database already holds relay data ({store_rows():,} projects and job rows); pass --reset to replace it"
            )
        result.seconds["reset"] = round(time.monotonic() - started, 2)
        gc_was = gc.isenabled()
        gc.disable()
        try:
            return self._run(result, say)
        finally:
            if gc_was:
                gc.enable()

    def _run(self, result: SeedResult, say) -> SeedResult:
        mark = time.monotonic()
        projects = self.projects_create()
        result.projects = len(projects)
        # Backend.index → project pk (the generator wrote indexes into project_id/dispatch maps).
        pk_of = {b.index: projects[b.full_name.lower()] for b in self.backends}
        chosen = self.commits()
        self.ids_assign(chosen)
        say(f"chose {len(chosen):,} commits for {sum(c.kept for c in chosen):,} job rows")
        result.seconds["generate"] = round(time.monotonic() - mark, 2)
        mark = time.monotonic()
        next_commit = _next_pk("relay", "UpstreamCommit")
        write(
            "relay",
            "UpstreamCommit",
            COMMIT_FIELDS,
            (self.commit_row(c, next_commit + k) for k, c in enumerate(chosen)),
        )
        write("relay", "Delivery", DELIVERY_FIELDS, ((c.delivery_pk, *c.delivery_fields) for c in chosen))
        write(
            "relay",
            "Dispatch",
            DISPATCH_FIELDS,
            (_mapped(row, 2, pk_of) for c in chosen for row in self.dispatch_rows(c)),
        )
        result.seconds["write_commits_deliveries_dispatches"] = round(time.monotonic() - mark, 2)
        result.jobs, result.failed_tests = self.jobs_write(chosen, pk_of, result.seconds)
        mark = time.monotonic()
        sequences_reset()
        analyze()
        result.seconds["analyze"] = round(time.monotonic() - mark, 2)
        mark = time.monotonic()
        from relay.tallies.rollups import rollups_refresh

        report = rollups_refresh()  # what beat does every minute in production: here every hour at once
        result.rollup_hours = report.recomputed if report else 0
        result.seconds["hud_rollups"] = round(time.monotonic() - mark, 2)
        result.commits = len(chosen)
        result.trunk_commits = sum(1 for c in chosen if c.kind == "trunk")
        result.pr_heads = result.commits - result.trunk_commits
        result.deliveries, result.dispatches = len(chosen), len(chosen) * len(self.backends)
        result.span_days = round((self.now - min(c.landed for c in chosen)) / DAY, 1) if chosen else 0.0
        return result

    def jobs_write(self, chosen: list[Commit], pk_of: dict, seconds: dict) -> tuple[int, int]:
        """Job rows and their failed tests, JOB_CHUNK rows per COPY, ids in arrival order."""
        first_job, first_test = _next_pk("relay", "JobRun"), _next_pk("relay", "FailedTest")
        jobs_n = failed_n = 0
        seconds["write_jobs"] = seconds["write_failed_tests"] = 0.0
        project_col = _J["project_id"]
        chunk, failed = [], []
        for row in self.jobs_in_order(chosen):
            row[0] = first_job + jobs_n + len(chunk)
            row[project_col] = pk_of[row[project_col]]
            tests = row.pop()
            if tests:
                base = first_test + failed_n + len(failed)
                failed.extend((base + t, row[0], *values) for t, values in enumerate(tests))
            chunk.append(row)
            if len(chunk) >= JOB_CHUNK:
                jobs_n, failed_n = jobs_n + len(chunk), failed_n + len(failed)
                _timed_writes(seconds, chunk, failed)
                chunk, failed = [], []
        _timed_writes(seconds, chunk, failed)
        seconds["write_jobs"], seconds["write_failed_tests"] = (
            round(seconds["write_jobs"], 2),
            round(seconds["write_failed_tests"], 2),
        )
        return jobs_n + len(chunk), failed_n + len(failed)

    def jobs_in_order(self, chosen: list[Commit]):
        """Every chosen commit's job rows in (created_at, run_attempt) order, ties in commit and row
        order — what a stable sort of them all gives — holding only the rows still in flight: a
        commit's rows are all created after it landed, so a row older than the next commit's
        landing can go."""
        pending: list = []
        for position, c in enumerate(chosen):
            landed = self.ts(c.landed)
            while pending and pending[0][0] < landed:
                yield heapq.heappop(pending)[-1]
            for k, row in enumerate(self.commit_jobs(c)):
                heapq.heappush(pending, (row[_J["created_at"]], row[_J["run_attempt"]], position, k, row))
        while pending:
            yield heapq.heappop(pending)[-1]

    def commit_jobs(self, c: Commit) -> list:
        """The commit's job rows again (its own random stream gives the same rows), cut as chosen,
        their dispatch_id turned from the backend's index into the dispatch's id."""
        rows = self.jobs_for(c)[: c.kept]
        c.jobs = []
        column = _J["dispatch_id"]
        for row in rows:
            if row[column] is not None:
                row[column] += c.dispatch_base
        return rows

    def ids_assign(self, chosen: list[Commit]) -> None:
        """Deliveries and dispatches get ids in arrival order."""
        chosen.sort(key=lambda c: c.landed)
        next_delivery, next_dispatch = _next_pk("relay", "Delivery"), _next_pk("relay", "Dispatch")
        for k, c in enumerate(chosen):
            c.delivery_pk, c.dispatch_base = next_delivery + k, next_dispatch + k * len(self.backends)

    def projects_create(self) -> dict[str, int]:
        from relay.models import Installation, InstalledRepo, LevelChange, Project, RelayState

        positions: dict[str, int] = {}
        rows = []
        for b in self.backends:
            positions[b.level] = positions.get(b.level, -1) + 1
            rows.append(
                Project(
                    full_name=b.full_name,
                    github_repo_id=700_100_000 + b.index,
                    level=b.level,
                    device=b.device,
                    display_name=b.display_name,
                    hardware_kind=b.hardware,
                    is_reference=b.is_reference,
                    is_health_probe=b.is_probe,
                    position=positions[b.level],
                    oncalls=[f"{b.full_name.split('/')[0].lower()}-oncall"] if b.level in ("L3", "L4") else [],
                )
            )
        with transaction.atomic():
            Project.objects.bulk_create(rows)
            pks = {
                p.full_name.lower(): p.pk
                for p in Project.objects.filter(full_name__in=[b.full_name for b in self.backends])
            }
            LevelChange.objects.bulk_create(
                LevelChange(project_id=pks[b.full_name.lower()], to_level=b.level, changed_by="bench-seed")
                for b in self.backends
            )
            inst, _ = Installation.objects.get_or_create(
                installation_id=4_200_001, defaults={"account_login": "bench", "repository_selection": "selected"}
            )
            InstalledRepo.objects.bulk_create(
                InstalledRepo(full_name=b.full_name, repo_id=700_100_000 + b.index, installation=inst)
                for b in self.backends
                if b.installed
            )
            RelayState.objects.update_or_create(
                key="installations-synced", defaults={"value": {"repos": sum(b.installed for b in self.backends)}}
            )
        return pks


class SeedRefused(Exception):
    pass


def _mapped(row: tuple, column: int, pk_of: dict) -> tuple:
    return (*row[:column], pk_of[row[column]], *row[column + 1 :])


def _timed_writes(seconds: dict, jobs: list, failed: list) -> None:
    mark = time.monotonic()
    write("relay", "JobRun", JOB_FIELDS, jobs)
    seconds["write_jobs"] += time.monotonic() - mark
    mark = time.monotonic()
    write("relay", "FailedTest", FAILED_FIELDS, failed)
    seconds["write_failed_tests"] += time.monotonic() - mark


def _sqlite_time(value: float) -> str:
    # Django stores aware datetimes on SQLite as naive UTC text, str(datetime).
    return str(datetime.fromtimestamp(value, UTC).replace(tzinfo=None))


def _aware_time(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


# --- writing -----------------------------------------------------------------------------------------


def _model(app: str, name: str):
    return apps.get_model(app, name)


def _columns(model, fields: tuple) -> list[str]:
    concrete = {f.attname: f.column for f in model._meta.concrete_fields}
    missing = set(concrete) - set(fields)
    unknown = set(fields) - set(concrete)
    if unknown or missing:
        raise RuntimeError(
            f"bench.seed is out of date with {model.__name__}: unknown {sorted(unknown)}, missing {sorted(missing)}"
        )
    return [concrete[name] for name in fields]


def _next_pk(app: str, name: str) -> int:
    model = _model(app, name)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {connection.ops.quote_name(model._meta.db_table)}")
        return cursor.fetchone()[0]


def write(app: str, name: str, fields: tuple, rows) -> int:
    """COPY (PostgreSQL) or batched executemany in one transaction (SQLite)."""
    model = _model(app, name)
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in _columns(model, fields))
    count = 0
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
                    count += 1
        else:
            sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
            batch = []
            for row in rows:
                batch.append(row)
                if len(batch) >= BATCH:
                    cursor.executemany(sql, batch)
                    count += len(batch)
                    batch = []
            if batch:
                cursor.executemany(sql, batch)
                count += len(batch)
    return count


def sequences_reset() -> None:
    if connection.vendor != "postgresql":
        return  # SQLite's AUTOINCREMENT follows the largest id by itself
    models = list(apps.get_app_config("relay").get_models())
    with connection.cursor() as cursor:
        for sql in connection.ops.sequence_reset_sql(no_style(), models):
            cursor.execute(sql)


def analyze() -> None:
    """PostgreSQL's autovacuum would analyze these tables within a minute of such a load; do it now
    so the first measurement does not race it. SQLite gets its statistics from the HUD's periodic
    task (relay.ops.statistics), run here as it would run after such a load."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    else:
        from relay.ops.statistics import statistics_refresh

        statistics_refresh(force=True)


def relay_tables() -> list[str]:
    """The relay's tables and the HUD's rollups derived from them (emptied together)."""
    return [m._meta.db_table for app in ("relay", "hud") for m in apps.get_app_config(app).get_models()]


def store_rows() -> int:
    return _model("relay", "JobRun").objects.count() + _model("relay", "Project").objects.count()


def store_reset() -> None:
    """Empty every relay table (projects, deliveries, dispatches, jobs, commits, tokens, outbox)."""
    tables = relay_tables()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"TRUNCATE {', '.join(connection.ops.quote_name(t) for t in tables)} RESTART IDENTITY CASCADE"
            )
            return
        # Foreign keys off (outside a transaction, where SQLite honours the pragma) so DELETE can
        # use SQLite's truncate optimisation instead of checking every row's children.
        cursor.execute("PRAGMA foreign_keys = OFF")
        try:
            with transaction.atomic():
                for table in tables:
                    cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")
        finally:
            cursor.execute("PRAGMA foreign_keys = ON")


def seed(jobs: int, seed: int = 1, reset: bool = False, progress=None, **rates) -> SeedResult:
    return Generator(jobs, seed, **rates).run(reset=reset, progress=progress)
