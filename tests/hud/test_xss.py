"""Names, messages and URLs reported by downstream CI are data, never markup or script."""

import re

import pytest

from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db

SHA = "a" * 40
HOSTILE = [
    "<script>alert('test')</script>",
    '"><img src=x onerror=alert("cls")>',
    "<svg onload=alert('job')>",
    "</pre><script>alert('msg')</script>",
    "<b onmouseover=alert('name')>",
    "<iframe src=//evil.example>",
]
HOSTILE_URLS = [
    "javascript:alert('run')",
    "data:text/html,<script>alert(1)</script>",
    "//evil.example/x",
    " javascript:alert(2)",
]


@pytest.fixture
def hostile():
    ref = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, display_name=HOSTILE[4])
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", display_name=HOSTILE[4] + "xpu")
    UpstreamCommitFactory(sha=SHA, title=HOSTILE[0] + " (#7)", author=HOSTILE[1], pr_number=None)
    UpstreamCommitFactory(sha="c" * 40, is_trunk=False, pr_number=7, title=HOSTILE[0])
    JobRunFactory(project=ref, head_sha=SHA, conclusion="success", tests_total=3, workflow_name=HOSTILE[2])
    jobs = [
        JobRunFactory(
            project=xpu,
            head_sha=sha,
            pr_number=7,
            conclusion="failure",
            workflow_name=HOSTILE[2],
            job_name=HOSTILE[5],
            workflow_url=url,
            artifact_url=url,
            check_run_id="1",
            tests_total=3,
            tests_failed=1,
        )
        for sha, url in ((SHA, HOSTILE_URLS[0]), ("c" * 40, HOSTILE_URLS[1]))
    ]
    for job in jobs:
        FailedTestFactory(
            job_run=job, name=HOSTILE[0], classname=HOSTILE[1], message=HOSTILE[3], hw_classification=HOSTILE[5]
        )
    JobRunFactory(
        project=xpu,
        head_sha=SHA,
        conclusion="failure",
        job_name="x",
        workflow_url=HOSTILE_URLS[2],
        artifact_url=HOSTILE_URLS[3],
    )
    return {"ref": ref, "xpu": xpu}


def pages(client, hostile) -> dict[str, str]:
    urls = [
        "/",
        "/?expand=intel/torch-xpu-ops",
        "/?heads=pr",
        "/?name=" + HOSTILE[0],
        "/?name=" + HOSTILE[1] + "&regex=1",
        f"/commit/{SHA}",
        "/pr/7",
        f"/?tip={SHA}.{hostile['xpu'].id}",
        f"/?tip=cccccccccccc.{hostile['xpu'].id}",
    ]
    return {url: client.get(url).content.decode() for url in urls}


def test_hostile_names_and_messages_are_escaped_everywhere(client, hostile):
    for url, html in pages(client, hostile).items():
        for text in HOSTILE:
            assert text not in html, f"{text!r} unescaped on {url}"
        for tag in ("<img", "<svg", "<iframe", "<b "):
            assert tag not in html, f"raw {tag} on {url}"


def test_hostile_names_are_shown_as_text(client, hostile):
    html = client.get(f"/commit/{SHA}").content.decode()
    assert "&lt;script&gt;alert(&#x27;test&#x27;)&lt;/script&gt;" in html
    assert "&lt;/pre&gt;&lt;script&gt;" in html


def test_only_http_urls_become_links(client, hostile):
    for url, html in pages(client, hostile).items():
        hrefs = re.findall(r'(?:href|src)="([^"]*)"', html)
        for href in hrefs:
            assert href.startswith(("/", "?", "#", "https://", "http://")) and not href.startswith("//"), (
                f"{href!r} on {url}"
            )


def test_no_inline_script_carries_data(client, hostile):
    for url, html in pages(client, hostile).items():
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), f"inline script on {url}"
        assert not re.search(r'\son[a-z]+="', html), f"inline event handler on {url}"
