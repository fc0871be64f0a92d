"""Hardware variants inside one backend (issue 53 item 5): ROCm tests several GPU families and
operating systems from one repository, so a backend declares which keys of its callbacks'
`workflow.environment` make a variant (`Project.variant_keys`, of VARIANT_KEYS). A job's variant
is read here once, from the environment its callback stored (JobRun.environment); the commit
page, the enablement table and the "on <variant> only" mark all call `variant_of`."""

from collections.abc import Iterable, Mapping

from relay.models import JobRun, Project

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
