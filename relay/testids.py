"""One test identity across JUnit reports, pytest node ids and what backends send.

A test is (module, class, method): the same upstream test run on the reference and on a backend
must get the same identity, whichever producer reported it. The producers we see:

* PyTorch's own CI (the OpenReg reference): `classname="test_nn.TestNNDeviceTypePRIVATEUSE1"`,
  `file="test_nn.py"` (run from inside `test/`);
* pytest from a checkout's root: `classname="test.test_nn.TestNNDeviceTypeXPU"`,
  `file="test/test_nn.py"`, or a node id `test/test_nn.py::TestNNDeviceTypeXPU::test_x_xpu`;
* unittest-xml-reporting: `classname="test_torch.TestTorchDeviceTypeXPU"`, `file="test/test_torch.py"`;
* our client and the sandbox: `classname="TestNNDeviceTypeXPU"`, `file="test/test_nn.py"`, or
  no file at all.

**Module**: the classname's dotted prefix, else the `file` attribute (or the node id's path),
with a leading `test` directory and `.py` removed: all of the above give `test_nn`. A module may
be unknown ("").

**Class**: the last dotted part of the classname that starts with a capital letter, without its
per-device instantiation suffix (`TestFooXPU`, `TestFooCUDA`, `TestFooPRIVATEUSE1`,
`TestFooOPENREG` → `TestFoo`). Pytest function tests have no class.

**Method**: without its per-device suffix when the class was instantiated per device (or there
is no class): PyTorch splices the device in after parametrize suffixes and before the dtype,
`test_add` → `test_add_xpu_float32`. Only the last device word is removed; dtypes and
parameters stay (`test_op_xpu[add-xpu]` → `test_op[add-xpu]`).

Names that merely contain a device word stay as they are: `test_cudagraph_trees` (no word
boundary), `TestMPSGraph` (not a suffix), `TestMPS` (nothing would be left), and a method of a
class that was not instantiated per device (`TestCuda.test_to_cuda`) keeps its name. CPU is
deliberately not a device here: a CPU-instantiated test is a different test from its
accelerator twin, and both may run in the same job.

Where one side lacks the module, `TestIdResolver` fills it in from the other reports of the same
commit when class + method name exactly one module there; otherwise the identity stays without a
module and matches only another module-less one. Identities are computed when rows are read
(`FailedTest` keeps what the producer sent), so every stored row takes part."""

import re
from collections.abc import Iterable
from dataclasses import dataclass

DEVICES = ("privateuse1", "openreg", "cuda", "xpu", "mps", "hpu", "mtia")

_CLASS_SUFFIX = re.compile("(?:" + "|".join(d.upper() for d in DEVICES) + ")$")
_METHOD_SUFFIX = re.compile("_(?:" + "|".join(DEVICES) + ")(?=_|$)")
_GENERIC_CLASS_NAMES = {"", "Test"}
_TEST_ROOT = "test"
"""PyTorch's tests live under `test/`; a report made from the checkout's root names it."""


@dataclass(frozen=True, order=True)
class TestId:
    module: str
    key: str
    """`Class.method[params]`, or `method[params]` for a test without a class."""

    __test__ = False  # not a pytest test class

    @property
    def full(self) -> str:
        return f"{self.module}.{self.key}" if self.module else self.key

    def __str__(self) -> str:
        return self.full


def test_id(name: str, classname: str = "", file: str = "") -> TestId:
    """The identity of one reported test (see the module doc)."""
    method, params = _split_params((name or "").strip())
    qualifier = (classname or "").strip()
    if not qualifier:
        qualifier, method = _split_qualified(method)
    path, cls = _split_class(qualifier)
    module = _module(path) or _module_from_file(file)
    bare_cls = _strip_class_suffix(cls)
    if bare_cls != cls or not cls:
        method = _strip_method_suffix(method)
    return TestId(module, ".".join(part for part in (bare_cls, method + params) if part))


test_id.__test__ = False  # a function named test_* that pytest must not collect


def normalize_test_id(name: str, classname: str = "", file: str = "") -> str:
    """The identity as one dotted string: `module.Class.method`."""
    return test_id(name, classname, file).full


def _split_params(name: str) -> tuple[str, str]:
    """pytest's `test_x[param-ids]` keeps its bracket untouched: ids there are parameters."""
    bracket = name.find("[")
    return (name, "") if bracket < 0 else (name[:bracket], name[bracket:])


def _split_qualified(name: str) -> tuple[str, str]:
    """`test/test_nn.py::TestX::test_y` or `test_nn.TestX.test_y` → (qualifier, method)."""
    if "::" in name:
        head, _, method = name.rpartition("::")
        return head, method
    head, _, method = name.rpartition(".")
    return head, method


def _split_class(qualifier: str) -> tuple[str, str]:
    """(module path, class): the class is the last part when it starts with a capital letter."""
    if "::" in qualifier:
        path, _, rest = qualifier.partition("::")
        return path, rest.rpartition("::")[2]
    head, _, last = qualifier.rpartition(".")
    return (head, last) if last[:1].isupper() else (qualifier, "")


def _module(path: str) -> str:
    """`test/test_nn.py`, `test.test_nn` or `test_nn` → `test_nn`."""
    path = path.strip().removeprefix("./")
    if path.endswith(".py"):
        path = path[:-3]
    parts = [p for p in re.split(r"[/.]", path) if p]
    if len(parts) > 1 and parts[0] == _TEST_ROOT:
        parts = parts[1:]
    return ".".join(parts)


def _module_from_file(file: str) -> str:
    file = (file or "").strip()
    return _module(file) if file.endswith(".py") else ""


def _strip_class_suffix(cls: str) -> str:
    bare = _CLASS_SUFFIX.sub("", cls)
    return cls if bare in _GENERIC_CLASS_NAMES else bare


def _strip_method_suffix(method: str) -> str:
    """Only the last device word is the instantiation suffix: `test_to_cuda_xpu_float32` ran
    the upstream test `test_to_cuda` on XPU."""
    matches = list(_METHOD_SUFFIX.finditer(method))
    if not matches:
        return method
    last = matches[-1]
    return method[: last.start()] + method[last.end() :]


class TestIdResolver:
    """Fills in a missing module from the other identities of one commit, when unambiguous."""

    __test__ = False

    def __init__(self, ids: Iterable[TestId]):
        self._modules: dict[str, set[str]] = {}
        for tid in ids:
            if tid.module:
                self._modules.setdefault(tid.key, set()).add(tid.module)

    def resolve(self, tid: TestId) -> TestId:
        if tid.module:
            return tid
        modules = self._modules.get(tid.key, ())
        return TestId(next(iter(modules)), tid.key) if len(modules) == 1 else tid


class TestTable(dict):
    """Tests keyed by TestId, with the lookup that tolerates a missing module (`find`)."""

    __test__ = False

    def find(self, tid: TestId):
        """The entry for the same test as `tid`, or None: the same identity, or — across
        commits, where no resolver saw both sides — the same class and method when one side
        lacks the module and that class and method are unique here."""
        if tid in self:
            return self[tid]
        same_key = self._by_key().get(tid.key, [])
        if len(same_key) != 1 or (tid.module and same_key[0].module):
            return None
        return self[same_key[0]]

    def has_key(self, key: str) -> bool:
        """Some test here has this class and method (in whatever module)."""
        return key in self._by_key()

    def _by_key(self) -> dict[str, list[TestId]]:
        if getattr(self, "_index_size", -1) != len(self):
            self._index: dict[str, list[TestId]] = {}
            for tid in self:
                self._index.setdefault(tid.key, []).append(tid)
            self._index_size = len(self)
        return self._index
