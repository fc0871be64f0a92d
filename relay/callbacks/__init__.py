"""The callback: downstream CI reporting a job, one step of the per-job state machine.

- receive: the endpoint's service (`callback_receive`, `job_record`);
- body: the body's fields within their caps; job_rows: the job and failed-test rows it writes,
  and the prepared row reader (`row_read`) identity reads a project with;
- tokens: the signed callback token a dispatch carries; oidc: the CI's OIDC token (GitHub
  Actions, Buildkite, GitLab); identity: who the caller is, by immutable ids;
- ratelimit: the per-project budget; triage_verdict: the advisory verdict a downstream may send."""
