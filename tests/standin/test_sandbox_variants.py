"""The sandbox shows hardware variants and a wrapper-style runner (issue 53 item 7): ROCm's test
shards run on MI300 and MI250, MI250 behind, MI300 now and then failing a test alone ("fails on
MI300 only" on the commit page); torch-spyre's shards name upstream's modules as its runner's
generated `<stem>__oot_wrapper` files, and still count under upstream's modules."""

import pytest

from devtools.sandbox_registry import SANDBOX_PROJECTS
from devtools.standin.sandbox import TEST_POOL, VARIANT_ONLY_FAILURES, VARIANTS, JobPlan
from devtools.standin.sandbox_enablement import SUITE
from relay.callbacks.body import module_counts_read
from relay.enablement.counts import by_module
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

SHA = "ef" * 20


def plan(repo: str, sha: str = SHA) -> JobPlan:
    return JobPlan({"full_name": repo, "level": "L3"}, {"payload": {"after": sha}})


def passing(sandbox: JobPlan, name: str) -> dict:
    return {**sandbox.job(name, "success"), "conclusion": "success", "failed_tests": [], "flaky": False}


def test_rocm_declares_its_variant_key_and_runs_each_shard_on_each_gpu_family():
    [rocm] = [p for p in SANDBOX_PROJECTS if p["full_name"] == "ROCm/pytorch"]
    assert rocm["variant_keys"] == ["device"]
    sandbox = plan("ROCm/pytorch")
    names = [job["name"] for job in sandbox.jobs()]
    assert names[1:] == [f"test (default, {n}, 2, {v})" for v in VARIANTS["ROCm/pytorch"] for n in (1, 2)]
    devices = {sandbox.body(passing(sandbox, n), "completed")["workflow"]["environment"]["device"] for n in names[1:]}
    assert devices == {"MI300", "MI250"}


def test_mi250_passes_less_of_the_suite_than_mi300():
    sandbox = plan("ROCm/pytorch")

    def passed(variant: str) -> int:
        total = 0
        for n in (1, 2):
            body = sandbox.body(passing(sandbox, f"test (default, {n}, 2, {variant})"), "completed")
            total += sum(c["passed"] for c in module_counts_read(body["workflow"]["module_counts"]).values())
        return total

    assert passed("MI250") < passed("MI300")


def test_the_variant_only_failure_falls_on_its_variant_s_first_shard_alone(monkeypatch):
    variant, spec, _ = VARIANT_ONLY_FAILURES["ROCm/pytorch"]
    monkeypatch.setitem(VARIANT_ONLY_FAILURES, "ROCm/pytorch", (variant, spec, 1.0))
    sandbox = plan("ROCm/pytorch")
    failing = sandbox.with_variant_failure(passing(sandbox, f"test (default, 1, 2, {variant})"))
    assert failing["conclusion"] == "failure" and failing["failed_tests"] == [sandbox.failed_test(spec)]
    other = passing(sandbox, "test (default, 1, 2, MI250)")
    assert sandbox.with_variant_failure(other) == other


@pytest.mark.django_db
def test_the_commit_page_reads_the_sandbox_s_mi300_failure_as_mi300_s_only(client, monkeypatch):
    variant, spec, _ = VARIANT_ONLY_FAILURES["ROCm/pytorch"]
    monkeypatch.setitem(VARIANT_ONLY_FAILURES, "ROCm/pytorch", (variant, spec, 1.0))
    [seed] = [p for p in SANDBOX_PROJECTS if p["full_name"] == "ROCm/pytorch"]
    rocm = ProjectFactory(full_name="ROCm/pytorch", level="L3", variant_keys=seed["variant_keys"])
    UpstreamCommitFactory(sha=SHA)
    sandbox = plan("ROCm/pytorch")
    for name in ("test (default, 1, 2, MI300)", "test (default, 1, 2, MI250)"):
        job = sandbox.with_variant_failure(passing(sandbox, name))
        workflow = sandbox.body(job, "completed")["workflow"]
        row = JobRunFactory(
            project=rocm,
            head_sha=SHA,
            job_name=name,
            conclusion=job["conclusion"],
            environment=workflow["environment"],
            tests_total=10,
        )
        for test in workflow["failed_tests"]:
            FailedTestFactory(job_run=row, name=test["name"], classname=test["classname"], file=test["file"])
    html = client.get("/commit/" + SHA).content.decode()
    assert html.count("fails on MI300 only") >= 1


def test_spyre_s_wrapped_modules_count_under_upstream_s_modules():
    sandbox = plan("torch-spyre/torch-spyre")
    counts = {}
    for n in (1, 2):
        counts.update(
            module_counts_read(
                sandbox.body(passing(sandbox, f"test (default, {n}, 2)"), "completed")["workflow"]["module_counts"]
            )
        )
    assert all("__oot_wrapper.py" in name for name in counts)
    assert set(by_module(counts)) == set(SUITE)
    failed = sandbox.failed_test(TEST_POOL[0])
    assert failed["classname"] == "test_ops__oot_wrapper.TestCommonPRIVATEUSE1"
    assert failed["file"] == "test_ops__oot_wrapper.py" and "_spyre_" in failed["name"]
