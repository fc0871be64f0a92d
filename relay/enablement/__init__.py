"""Enablement: how far each backend has come through PyTorch's own suite, per upstream test
module and integration path, against the OpenReg reference (issue 53).

`counts` writes each job's counts per module (off the callback); `paths` maps a module to its
integration path; `table` reads backends × paths, a backend's modules and its history."""
