"""Re-match stored failed tests under relay.policy.testids' identity rule (any PrivateUse1 backend, every
device type PyTorch knows).

Identities are computed when rows are read, so every page uses the rule as soon as it ships;
what was *stored* under the earlier rule is each known-issue occurrence's `test_id`. `rematch`
walks every FailedTest once (per job, with its backend's `device_type` and the job's
`environment.device`, as the pages read it), counts the rows whose identity the rule changed,
and rewrites the occurrences recorded under the old identity."""

import re
from dataclasses import dataclass, field
from itertools import groupby

from django.db import transaction
from django.db.models.fields.json import KeyTextTransform

from relay.models import FailedTest
from relay.models.triage import IssueOccurrence
from relay.policy.testids import (
    TestId,
    _module,
    _module_from_file,
    _split_class,
    _split_params,
    _split_qualified,
    report_ids,
)

BATCH = 5000
_OLD_DEVICES = ("privateuse1", "openreg", "cuda", "xpu", "mps", "hpu", "mtia")
_OLD_CLASS_SUFFIX = re.compile("(?:" + "|".join(d.upper() for d in _OLD_DEVICES) + ")$")
_OLD_METHOD_SUFFIX = re.compile("_(?:" + "|".join(_OLD_DEVICES) + ")(?=_|$)")


@dataclass
class Rematch:
    rows: int = 0
    rematched: int = 0
    """Rows whose identity the current rule gives differently from the fixed-list rule."""
    occurrences: int = 0
    examples: list[tuple[str, str]] = field(default_factory=list)


def old_test_id(name: str, classname: str = "", file: str = "") -> TestId:
    """The rule before any PrivateUse1 name was learned and before every torch device type was
    a device word: a fixed list of device words (kept only to tell which stored rows the
    current rule re-matches)."""
    method, params = _split_params((name or "").strip())
    qualifier = (classname or "").strip()
    if not qualifier:
        qualifier, method = _split_qualified(method)
    path, cls = _split_class(qualifier)
    bare = _OLD_CLASS_SUFFIX.sub("", cls)
    bare = cls if bare in ("", "Test") else bare
    if bare != cls or not cls:
        matches = list(_OLD_METHOD_SUFFIX.finditer(method))
        if matches:
            method = method[: matches[-1].start()] + method[matches[-1].end() :]
    return TestId(_module(path) or _module_from_file(file), ".".join(p for p in (bare, method + params) if p))


def rematch(write: bool = True) -> Rematch:
    result = Rematch()
    rows = (
        FailedTest.objects.annotate(env_device=KeyTextTransform("device", "job_run__environment"))
        .values("job_run_id", "name", "classname", "file", "env_device", "job_run__project__device_type")
        .order_by("job_run_id", "id")
    )
    for job_id, group in groupby(rows.iterator(chunk_size=BATCH), key=lambda r: r["job_run_id"]):
        _job(job_id, list(group), result, write)
    return result


def _job(job_id: int, tests: list[dict], result: Rematch, write: bool) -> None:
    new_ids = report_ids(tests, tests[0]["job_run__project__device_type"], {"device": tests[0]["env_device"] or ""})
    changed = {}
    for test, new in zip(tests, new_ids, strict=True):
        result.rows += 1
        old = old_test_id(test["name"], test["classname"], test["file"])
        if old != new:
            result.rematched += 1
            changed[old.full] = new.full
            if len(result.examples) < 10:
                result.examples.append((old.full, new.full))
    if changed and write:
        result.occurrences += _occurrences_rewrite(job_id, changed)


def _occurrences_rewrite(job_id: int, changed: dict[str, str]) -> int:
    """Occurrences stored under an old identity take the new one; one that the new identity
    already has (the same issue matched both) is the same occurrence, so it goes."""
    count = 0
    with transaction.atomic():
        for row in IssueOccurrence.objects.select_for_update().filter(job_run_id=job_id, test_id__in=list(changed)):
            new = changed[row.test_id][:1000]
            if IssueOccurrence.objects.filter(issue_id=row.issue_id, job_run_id=job_id, test_id=new).exists():
                row.delete()
            else:
                IssueOccurrence.objects.filter(pk=row.pk).update(test_id=new)
            count += 1
    return count
