"""Hardware variants inside one backend (issue 53 item 5): ROCm tests several GPU families and
operating systems from one repository, so a backend declares which keys of its callbacks'
`workflow.environment` make a variant (`Project.variant_keys`, of VARIANT_KEYS). A job's variant
is read here once, from the environment its callback stored (JobRun.environment); the commit
page, the enablement table and the "on <variant> only" mark all call `variant_of`.

The mark's one rule, `only_variant`: a failure is one variant's alone when several variants
reported on the commit, every job of each done, and that one alone fails it. It is asked of a
test (the commit page, its API) and of a cell's failing jobs (the grid, its tooltip, the backend
page): a cell failing on MI300 alone has every failing test on MI300 alone."""

from collections.abc import Iterable, Mapping

from relay.models import JobRun, Project
from relay.policy.verdicts import FAILING

SEPARATOR = " · "


def variant_of(environment: Mapping | None, keys: Iterable[str]) -> str:
    """The job's variant: the declared keys' values in the declared order (`MI300 · ubuntu-22.04`);
    "" when the backend declares none or the job sent none of them (one variant)."""
    env = environment if isinstance(environment, Mapping) else {}
    return SEPARATOR.join(str(env[key]).strip() for key in keys if str(env.get(key) or "").strip())


def job_variants(project: Project, job_ids: Iterable[int]) -> dict[int, str]:
    """Per job of `project`, its variant ("" for every job when the backend declares no keys)."""
    ids = list(job_ids)
    if not project.variant_keys:
        return dict.fromkeys(ids, "")
    rows = JobRun.objects.filter(id__in=ids).values_list("id", "environment")
    return {job_id: variant_of(env, project.variant_keys) for job_id, env in rows}


def only_variant(failing_on: Iterable[str], reported: set[str]) -> str:
    """The variant a failure is seen on when it is one of several variants that reported on the
    commit and the only one failing it; "" otherwise (one variant, or several fail it)."""
    failing = set(failing_on)
    if len(reported) < 2 or len(failing) != 1:
        return ""
    [variant] = failing
    return variant if variant and variant in reported else ""


def variants_done(jobs: Iterable[tuple[str, bool]]) -> set[str]:
    """Of each job on a commit its (variant, completed): the variants whose every job has
    completed. One still running may yet fail the same test, so no mark counts it."""
    jobs = list(jobs)
    pending = {variant for variant, completed in jobs if not completed}
    return {variant for variant, _ in jobs} - pending


def cell_variants(cells: Iterable) -> dict[int, str]:
    """Each job's variant in these cells (relay.results.cells.Cell) of backends declaring
    variant keys: from the jobs as loaded when they carry their environment, else one query."""
    keys = {v.job.id: c.project.variant_keys for c in cells if c.project.variant_keys for v in c.verdicts}
    jobs = {v.job.id: v.job for c in cells for v in c.verdicts if v.job.id in keys}
    if all(hasattr(job, "environment") for job in jobs.values()):
        return {job_id: variant_of(job.environment, keys[job_id]) for job_id, job in jobs.items()}
    rows = JobRun.objects.filter(id__in=list(keys)).values_list("id", "environment")
    return {job_id: variant_of(env, keys[job_id]) for job_id, env in rows}


def _done(cell, variants: Mapping[int, str]) -> set[str]:
    return variants_done((variants.get(v.job.id, ""), v.job.status == JobRun.Status.COMPLETED) for v in cell.verdicts)


def failing_alone(cell, variants: Mapping[int, str]) -> str:
    """The variant a backend's cell fails on alone: every failing job's, one of several variants
    whose jobs have all completed on the commit; "" otherwise (only_variant, for its jobs)."""
    if not cell.project.variant_keys or not cell.failing:
        return ""
    failing = {variants.get(v.job.id, "") for v in cell.verdicts if v.state in FAILING}
    return only_variant(failing, _done(cell, variants))


def cells_failing_alone(cells: Mapping) -> dict:
    """failing_alone of each failing cell (by its key) that has such a variant, one query for all."""
    keyed = [cell for cell in cells.values() if cell.failing and cell.project.variant_keys]
    variants = cell_variants(keyed) if keyed else {}
    marks = {(cell.sha, cell.project.id): failing_alone(cell, variants) for cell in keyed}
    return {key: variant for key, variant in marks.items() if variant}


def tests_failing_alone(cell, failing_jobs: Mapping, variants: Mapping[int, str]) -> dict:
    """Per failed test (any key, with the ids of the cell's attempts failing it) the variant it
    fails on alone, as failing_alone for a job: the commit page's "fails on MI300 only"."""
    done = _done(cell, variants) if cell.project.variant_keys else set()
    if len(done) < 2:
        return {}
    marks = {test: only_variant({variants.get(j, "") for j in jobs}, done) for test, jobs in failing_jobs.items()}
    return {test: variant for test, variant in marks.items() if variant}
