"""Text from downstream never renders upstream: job and workflow names, run ids and failed-test
names and messages reach check-run summaries, oncall comments and the gate only inside code
spans, so GitHub shows no @-mention, link, autolink, image or HTML from them. Checked by
rendering what the relay writes as GitHub-flavoured Markdown and reading what is left outside
code."""

import json
import re

import pytest
from django.utils import timezone
from markdown_it import MarkdownIt

from relay.checks.checkruns import job_summary
from relay.checks.gate import gate_summary
from relay.checks.oncall import failing_body, head_outcome
from relay.github.markdown import md_code, md_link
from relay.models import FailedTest, JobRun
from relay.results.gate import gate_verdict
from tests.factories import DispatchFactory, ProjectFactory
from tests.security.hostile_values import INVISIBLE

pytestmark = pytest.mark.django_db
HEAD = "ab" * 20
HOSTILE = [
    "@pytorch/everyone please look",
    "[click](https://evil.example/x)",
    "![img](https://evil.example/i.png)",
    "<img src=x onerror=alert(1)>",
    "https://evil.example/bare",
    "`@pytorch/everyone`",
    "``` @pytorch/core ```",
    "a | b | @ezyang",
    "line\n@pytorch/everyone\n# heading",
    "</code>@pytorch/everyone<code>",
    "**bold** _em_ ~~s~~ :tada:",
    "\\`@someone\\`",
    "<!-- x -->@a",
    "[x]: https://evil.example/ref",
]


def outside_code(markdown: str) -> str:
    """The text GitHub would process for mentions and autolinks: rendered HTML minus code, tags
    and our own links."""
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    html = re.sub(r"<code>.*?</code>", "", html, flags=re.S)
    links = re.findall(r'<a href="([^"]*)"', html)
    images = re.findall(r"<img", html)
    text = re.sub(r"<[^>]+>", " ", html)
    return text, links, images


def assert_inert(markdown: str, allowed_links=()):
    text, links, images = outside_code(markdown)
    assert (
        "@pytorch" not in text
        and "@someone" not in text
        and "@ezyang" not in text
        and "@a" not in text.replace("@ ", "")
    ), text
    assert "evil.example" not in text, text
    assert not images, markdown
    assert all(any(link.startswith(ok) for ok in allowed_links) for link in links), links


def l4_with_a_dispatch(settings):
    settings.CRCR_PUBLIC_URL = "https://hud.example.org"
    project = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", oncalls=["xpu-oncall"])
    return project, DispatchFactory(project=project, state="sent", pr_number=7, head_sha=HEAD, sent_at=timezone.now())


def failing_job(dispatch, text: str, run_id: str, **fields) -> JobRun:
    """A failed job of the dispatch whose names, run id and one failed test carry `text`."""
    job = JobRun.objects.create(
        project=dispatch.project,
        dispatch=dispatch,
        delivery_key=dispatch.delivery.guid,
        run_id=run_id[:100],
        workflow_name=text,
        job_name=text,
        status="completed",
        conclusion="failure",
        head_sha=HEAD,
        pr_number=7,
        tests_failed=1,
        tests_total=2,
        **fields,
    )
    FailedTest.objects.create(job_run=job, name=text, classname=text, message=text)
    return job


@pytest.fixture
def failing_l4(db, settings):
    project, dispatch = l4_with_a_dispatch(settings)
    url = 'https://ci.example.org/runs/{}?q=(x)[y]<z> "w"'
    jobs = [failing_job(dispatch, h, f"{n} {h}", workflow_url=url.format(n)) for n, h in enumerate(HOSTILE)]
    return project, jobs


def test_check_run_summaries_render_no_downstream_markup(failing_l4):
    _, jobs = failing_l4
    for job in jobs:
        assert_inert(job_summary(job), allowed_links=("https://ci.example.org/runs/",))


def test_the_oncall_comment_mentions_only_the_registered_oncalls(failing_l4):
    project, _ = failing_l4
    outcome, failing = head_outcome(project, 7, HEAD)
    body = failing_body(project, 7, HEAD, failing)
    assert outcome == "failing" and "@xpu-oncall" in outside_code(body)[0]
    assert_inert(body, allowed_links=("https://ci.example.org/runs/", "https://hud.example.org/pr/7"))
    html = MarkdownIt("commonmark").enable("table").render(body)
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)[1:]
    assert len(rows) == len(HOSTILE) and all(row.count("<td") == 4 for row in rows), (
        "no name or message splits a table cell"
    )


def test_the_gate_summary_renders_no_downstream_markup(failing_l4):
    assert_inert(gate_summary(gate_verdict(7, HEAD)))


@pytest.mark.parametrize("text", HOSTILE)
def test_one_code_span_holds_any_text(text):
    span = md_code(text)
    rendered = MarkdownIt("commonmark").render(span)
    assert (
        rendered.count("<code>") == 1
        and rendered.strip().startswith("<p><code>")
        and rendered.strip().endswith("</code></p>")
    )


@pytest.mark.parametrize("url", ["javascript:alert(1)", "data:text/html,x", "//evil.example", "ftp://evil.example/x"])
def test_only_http_links_are_linked(url):
    assert md_link("`run`", url) == "`run`"


# --- invisible characters (issue 45) ---------------------------------------------------------------------


@pytest.mark.parametrize("char", INVISIBLE, ids=lambda c: f"U+{ord(c):04X}")
def test_no_invisible_character_reaches_any_text_written_upstream(db, settings, char):
    """Check-run names, external ids, summaries, the oncall comment and the gate, as built and as
    the outbox sends them (upstream_body)."""
    from relay.checks.checkruns import external_id, job_check_run_name
    from relay.github.markdown import upstream_body

    project, dispatch = l4_with_a_dispatch(settings)
    sneaky = f"test{char}add"
    job = failing_job(dispatch, sneaky, f"1{char}")
    _, failing = head_outcome(project, 7, HEAD)
    written = {
        "check-run name": job_check_run_name(project, sneaky, sneaky),
        "external id": external_id(job.run_id, 7, project.full_name),
        "summary": job_summary(job),
        "oncall comment": failing_body(project, 7, HEAD, failing),
        "gate": gate_summary(gate_verdict(7, HEAD)),
    }
    sent = upstream_body({"name": written["check-run name"], "output": {"summary": written["summary"]}})
    assert [
        where for where, text in {**written, "as sent": json.dumps(sent, ensure_ascii=False)}.items() if char in text
    ] == []
