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

    delivery_id = factory.Faker("uuid4")
    event = "pull_request"
    action = "opened"
    outcome = Delivery.Outcome.RELAYED
    repo_full_name = "pytorch/pytorch"
    pr_number = 2
    head_sha = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
    payload = factory.LazyFunction(lambda: {"action": "opened", "number": 2, "repository": {"full_name": "pytorch/pytorch"}})


class DispatchFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Dispatch

    delivery = factory.SubFactory(DeliveryFactory)
    project = factory.SubFactory(ProjectFactory)
    event_type = "pull_request"
    pr_number = 2
    head_sha = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
