"""The stand-in's job-log endpoint (a 302 to plain text, as GitHub answers) and its S3-shaped
public bucket, which the reference import reads."""

import httpx

from .conftest import DOWNSTREAM, SHA, UPSTREAM


def test_a_job_log_redirects_to_plain_text_that_refuses_our_token(gh, api, upstream_token):
    run = gh.add_workflow_run(UPSTREAM, SHA, jobs=[{"name": "test (openreg, 1, 1, x)", "log": "Ran 0 tests in 0s\n"}])
    response = api.get(f"/repos/{UPSTREAM}/actions/jobs/{run.jobs[0]['id']}/logs", headers=upstream_token)
    assert response.status_code == 302
    blob = response.headers["location"]
    assert httpx.get(blob, headers=upstream_token).status_code == 400
    text = httpx.get(blob)
    assert (text.text, text.headers["content-type"]) == ("Ran 0 tests in 0s\n", "text/plain; charset=utf-8")


def test_a_job_without_a_log_or_of_another_repo_answers_404(gh, api, upstream_token, downstream_token):
    run = gh.add_workflow_run(UPSTREAM, SHA, jobs=[{"name": "a"}, {"name": "b", "log": "x"}])
    without, other = run.jobs[0]["id"], run.jobs[1]["id"]
    assert api.get(f"/repos/{UPSTREAM}/actions/jobs/{without}/logs", headers=upstream_token).status_code == 404
    assert api.get(f"/repos/{DOWNSTREAM}/actions/jobs/{other}/logs", headers=downstream_token).status_code == 404


def test_the_bucket_serves_objects_anonymously_and_answers_like_s3_for_missing_keys(gh):
    gh.add_s3_object("pytorch/pytorch/1/1/artifact/a.zip", b"PK")
    assert httpx.get(f"{gh.s3_url()}/pytorch/pytorch/1/1/artifact/a.zip").content == b"PK"
    missing = httpx.get(f"{gh.s3_url()}/pytorch/pytorch/1/1/artifact/b.zip")
    assert (missing.status_code, missing.headers["content-type"]) == (404, "application/xml")
    assert "<Code>NoSuchKey</Code>" in missing.text
    gh.s3_deny_missing()
    assert "<Code>AccessDenied</Code>" in httpx.get(f"{gh.s3_url()}/pytorch/pytorch/1/1/artifact/b.zip").text
