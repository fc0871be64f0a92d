"""Job names as Buildkite writes them (`:pytorch:` shortcodes, emoji): pages show the words,
never the shortcode nor a pictograph a browser without an emoji font draws as an empty box; the
stored name (what known issues match, what the API answers) stays as reported."""

import pytest

from relay.policy.verdicts import name_shown
from tests.factories import JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db
NAME = ":pytorch: test (default, 1, 2) :docker: 🚀"


@pytest.mark.parametrize(
    "name, shown",
    [
        (":pytest: Basic Correctness Test", "Basic Correctness Test"),
        ("Entrypoints Test (API Server) :docker:", "Entrypoints Test (API Server)"),
        ("LoRA TP Test (Distributed) :: 2 GPUs 🧪", "LoRA TP Test (Distributed) :: 2 GPUs"),
        ('Kernels Attention Test "flash-attn: v3"', 'Kernels Attention Test "flash-attn: v3"'),
        ("Models Test: language (part 1) ✅", "Models Test: language (part 1)"),
        (":pytorch:", "pytorch"),
        ("test (default, 1, 2)", "test (default, 1, 2)"),
    ],
)
def test_a_name_is_shown_without_shortcodes_or_emoji(name, shown):
    assert name_shown(name) == shown


def test_the_tooltip_and_the_commit_page_show_the_words_only(client):
    project = ProjectFactory(full_name="vllm-project/vllm", level="L2", display_name="vLLM")
    commit = UpstreamCommitFactory()
    job = JobRunFactory(project=project, head_sha=commit.sha, job_name=NAME, workflow_name=":buildkite: nightly")
    for page in (client.get("/", {"tip": f"{commit.sha}.{project.id}"}), client.get(f"/commit/{commit.sha}")):
        body = page.content.decode()
        assert "nightly / test (default, 1, 2)" in body
        assert ":pytorch:" not in body and ":docker:" not in body and "🚀" not in body
    job.refresh_from_db()
    assert job.job_name == NAME
