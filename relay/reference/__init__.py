"""The OpenReg reference's results, imported from upstream's own CI: which runs to read
(`imports`), where their per-test reports are (`reports`: S3 test-report zips, GitHub artifacts,
the job's log) and the two parsers of what PyTorch's CI writes (`junit`, `unittest_log`)."""
