import factory

from relay.models import Delivery, Dispatch, Project


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project
        skip_postgeneration_save = True

    full_name = factory.Sequence(lambda n: f"backend{n}/pytorch-ci")
    github_repo_id = factory.Sequence(lambda n: 900000 + n)
    level = "L2"
    hardware_kind = "gpu"
    device = factory.LazyAttribute(lambda p: "dev" if p.level == "L3" else "")


class DeliveryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Delivery

    guid = factory.Faker("uuid4")
    event = "pull_request"
    action = "opened"
    outcome = Delivery.Outcome.RELAYED
    repo_full_name = "pytorch/pytorch"
    pr_number = 2
    head_sha = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
    payload = factory.LazyFunction(
        lambda: {"action": "opened", "number": 2, "repository": {"full_name": "pytorch/pytorch"}}
    )


class DispatchFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Dispatch

    delivery = factory.SubFactory(DeliveryFactory)
    project = factory.SubFactory(ProjectFactory)
    event_type = "pull_request"
    pr_number = 2
    head_sha = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


# --- HUD: upstream commits, job attempts and their failed tests ---------------------------------

from relay.models import FailedTest, JobRun, UpstreamCommit  # noqa: E402


class UpstreamCommitFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = UpstreamCommit

    sha = factory.Sequence(lambda n: f"{n:08x}" + "c0ffee" * 5 + "ab")
    title = factory.Sequence(lambda n: f"[inductor] Fix lowering for op {n} (#{150000 + n})")
    author = "octocat"
    branch = "main"
    is_trunk = True


class JobRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobRun

    project = factory.SubFactory(ProjectFactory)
    delivery_key = factory.Faker("uuid4")
    event_type = "push"
    run_id = factory.Sequence(lambda n: str(7000000 + n))
    run_attempt = 1
    workflow_name = "ci"
    job_name = "test"
    status = JobRun.Status.COMPLETED
    conclusion = "success"
    head_sha = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
    workflow_url = factory.LazyAttribute(lambda j: f"https://github.com/{j.project.full_name}/actions/runs/{j.run_id}")


class FailedTestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = FailedTest

    job_run = factory.SubFactory(JobRunFactory, conclusion="failure")
    name = factory.Sequence(lambda n: f"test_case_{n}_xpu_float32")
    classname = "test_ops.TestCommonXPU"
