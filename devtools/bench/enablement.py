"""Enablement at size (issue 53's figures): 20 backends × 300 upstream test modules × 50 trunk
commits a day × 90 days, each (backend, commit) one job whose counts per module are stored as
the minute sweep stores them (relay.enablement.counts: a ModuleCount row per job and module) —
27 M rows at full size, what a real store holds under the 90-day retention (relay.ops.retention).
One backend declares a variant key and runs each commit on two GPU families (ROCm's shape), so
its commits hold two jobs; the reference (OpenReg) passes everything; every 40th module of every
backend skips 6 more from a commit half a day back on (the "skipped +N since" lines).

The rows are written by one INSERT … SELECT per backend (its jobs × a table of module names)
inside the database, not sent row by row: at 27 M rows that is what makes seeding possible here.
They are written job by job, as the sweep writes them, so a job's rows share a few pages (written
module by module, one job's 300 rows sat on 300 pages and reading 90 commits took 3× as long).
Every index the product declares is in place while they are written; VACUUM ANALYZE after, as
autovacuum leaves a real store.

Measured over HTTP against the benchmark's web server, as the grid: the table (`/crcr/enablement`
and `/api/v1/enablement`) and one backend's modules (`/crcr/enablement/<owner>/<repo>` and its API,
which adds the 90-day history) — the variant backend's, whose reads are the most."""

import json
import re
import time
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from relay.models import CountedCommit, JobRun, ModuleCount, Project, UpstreamCommit

from .load import median, ms, percentile

BACKENDS, MODULES, COMMITS_A_DAY, DAYS = 20, 300, 50, 90
SCALE = {"full": (BACKENDS, MODULES, DAYS), "quick": (BACKENDS, MODULES, 9), "tiny": (4, 30, 2)}
"""Per profile: backends (the reference one of them), modules, days of 50 trunk commits."""
TARGET_MS = 300.0
PREFIX = "enablement-bench"
VARIANTS = ("MI300", "MI250")
MODULE_STEMS = (
    "test_ops_",
    "nn.test_",
    "test_autograd_",
    "functorch.test_",
    "test_linalg_",
    "test_sparse_",
    "profiler.test_",
    "distributed.test_",
    "distributed.fsdp.test_",
    "dynamo.test_",
    "inductor.test_",
    "export.test_",
    "test_module_",
    "test_misc_",
)
"""Module names spread over every integration path of relay/enablement/paths.yml ("other" last)."""
MODULES_TABLE = "bench_enablement_modules"
COUNTS_SQL = f"""
INSERT INTO relay_modulecount
    (job_run_id, project_id, sha, module, passed, failed, error, skipped, xfailed, xpassed, created_at)
SELECT j.id, j.project_id, j.head_sha, m.name,
       m.size * s.share / 100,
       CASE WHEN s.share = 100 THEN 0 ELSE (j.id + m.ord) %% 3 END,
       0,
       m.size - m.size * s.share / 100 + CASE WHEN m.ord %% 40 = 0 AND j.created_at >= %s THEN 6 ELSE 0 END,
       CASE WHEN s.share = 100 THEN 0 ELSE m.ord %% 4 END,
       CASE WHEN s.share < 100 AND m.ord %% 97 = 0 THEN 1 ELSE 0 END,
       j.created_at
FROM relay_jobrun j
CROSS JOIN {MODULES_TABLE} m
JOIN (SELECT ord, CASE WHEN %s = 1 THEN 100 ELSE (%s + ord * 7) %% 100 END AS share FROM {MODULES_TABLE}) s
    ON s.ord = m.ord
WHERE j.project_id = %s
ORDER BY j.id, m.ord
"""
"""One backend's counts: per module a share of its size passed (the backend's stage; all of it
for the reference), the rest skipped, a few failures, expected failures and unexpected passes,
and every 40th module skipping 6 more on the jobs from `rise` on."""
COMMITS_SQL = """
INSERT INTO relay_countedcommit (project_id, sha, created_at)
SELECT project_id, head_sha, MIN(created_at) FROM relay_jobrun WHERE project_id = %s GROUP BY project_id, head_sha
"""
"""Its commits as counted (relay.enablement.counts.counts_write writes one with a job's rows)."""


def module_names(count: int) -> list[str]:
    return [f"{MODULE_STEMS[n % len(MODULE_STEMS)]}{n}" for n in range(count)]


def seed(backends: int, modules: int, days: int) -> dict:
    """The backends (the first the reference, the second with two variants), the trunk commits,
    one job per (backend, commit, variant) and its counts per module."""
    now = timezone.now()
    _reset()
    projects = _projects(backends)
    commits = _commits(now, days)
    _modules_table(modules)
    rise = now - timedelta(hours=12)  # within the 60 counted commits a backend's page looks back over
    rows = 0
    try:
        for n, project in enumerate(projects):
            variants = VARIANTS if project.variant_keys else ("",)
            _jobs(project, commits, variants)
            with connection.cursor() as cursor:
                at = connection.ops.adapt_datetimefield_value(rise)
                cursor.execute(COUNTS_SQL, [at, int(project.is_reference), 17 * n, project.pk])
                rows += cursor.rowcount
                cursor.execute(COMMITS_SQL, [project.pk])
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE {MODULES_TABLE}")
    _analyze()
    return {"rows": rows, "backends": backends, "modules": modules, "commits": len(commits), "days": days}


def _projects(count: int) -> list[Project]:
    projects = [
        Project(
            full_name=f"{PREFIX}/b{n:02d}",
            level="L2",
            github_repo_id=870_000 + n,
            is_reference=n == 0,
            variant_keys=["device"] if n == 1 else [],
            display_name=f"enablement {n:02d}",
            position=n,
        )
        for n in range(count)
    ]
    Project.objects.bulk_create(projects)
    return list(Project.objects.filter(full_name__startswith=f"{PREFIX}/").order_by("full_name"))


def _commits(now, days: int) -> list[tuple[str, object]]:
    count = COMMITS_A_DAY * days
    step = timedelta(days=1) / COMMITS_A_DAY
    commits = [(f"{8_000_000 + n:040x}", now - timedelta(days=days) + step * (n + 1)) for n in range(count)]
    UpstreamCommit.objects.bulk_create(
        [UpstreamCommit(sha=sha, is_trunk=True, landed_at=at, title=PREFIX) for sha, at in commits], batch_size=5000
    )
    return commits


def _jobs(project: Project, commits: list, variants: tuple[str, ...]) -> None:
    JobRun.objects.bulk_create(
        [
            JobRun(
                project=project,
                delivery_key=f"eb-{project.pk}-{n}-{variant}",
                event_type="push",
                run_id=str(n),
                workflow_name="trunk",
                job_name=f"test ({variant})" if variant else "test",
                status="completed",
                conclusion="success",
                head_sha=sha,
                environment={"device": variant} if variant else {},
                created_at=at,
            )
            for n, (sha, at) in enumerate(commits)
            for variant in variants
        ],
        batch_size=5000,
    )


def _modules_table(count: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {MODULES_TABLE}")
        cursor.execute(f"CREATE TABLE {MODULES_TABLE} (ord integer PRIMARY KEY, name varchar(300), size integer)")
        cursor.executemany(
            f"INSERT INTO {MODULES_TABLE} (ord, name, size) VALUES (%s, %s, %s)",
            [(n, name, 40 + (n * 7919) % 1900) for n, name in enumerate(module_names(count))],
        )


def _reset() -> None:
    projects = Project.objects.filter(full_name__startswith=f"{PREFIX}/")
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("TRUNCATE relay_modulecount, relay_countedcommit")
        else:
            ModuleCount.objects.filter(project__in=projects).delete()
            CountedCommit.objects.filter(project__in=projects).delete()
        JobRun.objects.filter(project__in=projects).delete()
        projects.delete()
        UpstreamCommit.objects.filter(title=PREFIX).delete()


def _analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")


def sizes() -> dict:
    if connection.vendor != "postgresql":
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, pg_total_relation_size(oid) / 1048576.0 FROM pg_class WHERE relname = 'relay_modulecount'"
        )
        return {name: round(float(size), 1) for name, size in cursor.fetchall()}


# --- the figures -----------------------------------------------------------------------------------


def enablement(b) -> None:
    """Seed at the profile's size, register only the seeded backends, and time each page and API
    answer over HTTP (the profile's warm-up and samples) against a fresh web server."""
    from .figures import projects_activate

    backends, modules, days = SCALE[b.profile.name]
    started = time.monotonic()
    seeded = seed(backends, modules, days)
    b.add(
        "enablement_seed",
        f"seed the enablement store ({seeded['rows']:,} module-count rows, {seeded['commits']:,} trunk commits)",
        round(time.monotonic() - started, 1),
        "s",
        **seeded,
        sizes_mb=sizes(),
    )
    registered = list(Project.objects.filter(active=True))
    projects_activate(list(Project.objects.filter(full_name__startswith=f"{PREFIX}/")))
    others = _trunk_aside(days)
    b.services.start_web()
    try:
        for key, label, path, check in _pages(backends, modules):
            _page_figure(b, key, label, path, check)
    finally:
        b.services.stop_web()
        UpstreamCommit.objects.filter(pk__in=others).update(is_trunk=True)
        projects_activate(registered)


def _trunk_aside(days: int) -> list[int]:
    """The other figures' trunk commits in the window (the test store's 4,500) step off trunk
    while the pages are timed, so the trunk holds 50 commits a day as the issue's scale says;
    the caller puts them back."""
    others = UpstreamCommit.objects.filter(is_trunk=True, landed_at__gte=timezone.now() - timedelta(days=days + 1))
    ids = list(others.exclude(title=PREFIX).values_list("pk", flat=True))
    UpstreamCommit.objects.filter(pk__in=ids).update(is_trunk=False)
    return ids


def _pages(backends: int, modules: int) -> list[tuple]:
    variant = f"{PREFIX}/b01"  # two variants: its reads are the most

    def table_page(reply) -> str:
        return "" if f"{PREFIX}/b{backends - 1:02d}" in reply.body.decode(errors="replace") else "a backend missing"

    def table_api(reply) -> str:
        rows = json.loads(reply.body)["backends"]
        return "" if len(rows) == backends and rows[0]["reference"] and rows[1]["variants"] else "rows wrong"

    def backend_page(reply) -> str:
        found = re.search(r"skipped \+\d+ since <a", reply.body.decode(errors="replace"))
        return "" if found else "no module skipping more"

    def backend_api(reply) -> str:
        body = json.loads(reply.body)
        return "" if len(body["modules"]) == modules and body["history"] else "modules or history wrong"

    return [
        ("enablement_table_page", "enablement page `/crcr/enablement`", "/crcr/enablement", table_page),
        ("enablement_table_api", "its API `/api/v1/enablement`", "/api/v1/enablement", table_api),
        (
            "enablement_backend_page",
            "a backend's modules `/crcr/enablement/<owner>/<repo>` (two variants)",
            f"/crcr/enablement/{variant}",
            backend_page,
        ),
        (
            "enablement_backend_api",
            "its API `/api/v1/enablement/<owner>/<repo>` (+ 90-day history)",
            f"/api/v1/enablement/{variant}",
            backend_api,
        ),
    ]


def _page_figure(b, key: str, label: str, path: str, check) -> None:
    from .figures import _page_samples, cpu_delta, cpu_per

    p = b.profile

    def checked(reply) -> str | None:
        return f"status {reply.status}" if reply.status != 200 else check(reply) or None

    b.begin()
    before = b.watch.cpu()
    times, problems = _page_samples(b, path, p.page_warmup, p.page_samples, checked)
    value = ms(median(times))
    b.add(
        key,
        label,
        value,
        "ms",
        f"≤ {TARGET_MS:.0f} ms",
        False if problems else None if value is None else value <= TARGET_MS,
        p90_ms=ms(percentile(times, 90)),
        min_ms=ms(min(times, default=None)),
        samples=len(times),
        problems=problems[:5],
        cpu_ms_per_request=cpu_per(cpu_delta(before, b.watch.cpu()), p.page_warmup + p.page_samples),
    )
