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
is no class). PyTorch's `instantiate_test` names a method `{name}{parametrize}_{device}{dtypes}`
(`test_add` → `test_add_xpu_float32`; common_device_type, "device and dtype suffix placement"),
so the device word is the token right before the dtype tokens, and it is the only one removed;
dtypes and parameters stay (`test_op_xpu[add-xpu]` → `test_op[add-xpu]`). Which word that is:

* a class suffixed by a device *type* has that type's word (`TestFooCUDA.test_to_cuda_cuda` →
  `TestFoo.test_to_cuda`; ROCm runs as `cuda`). The device types are every one PyTorch knows:
  c10's `DeviceType` names lower-cased (`cpu`, `cuda`, `xpu`, `mps`, `meta`, `hpu`, `mtia`, `xla`,
  `lazy`, ...), read from torch itself into relay/policy/torch_device_types.py, never kept by hand; plus
  `OPENREG` (OpenReg's docs show the class as the backend's own name upper-cased) and the
  upper-cased registry `device_type` of the backend. The class counts as instantiated for that
  type only when the method carries the type's word (`TestCUDAPRIMITIVE.test_x` keeps its name);
* a class suffixed `PRIVATEUSE1` has whatever name the backend registered with
  `rename_privateuse1_backend` (`_openreg_`, `_npu_`, `_spyre_`, `_rbln_`, ...). It is, in this
  order: a known word where it last stands (the registry's `device_type`, editable in the admin;
  the word learned from the report, i.e. the token in the device's position in most of the
  class's methods, `report_ids`); a hinted word (the callback's `environment.device`, which may
  be a product name like `rocm` or `gpu`) only in the device's position, i.e. right before the
  dtype tokens; or, for the method alone, the token in that position (the tokens of torch's dtype names:
  `float32`, `int64`, `bool`, `float8_e4m3fn` is two);
* a method without a class loses a device word (a device type, a known or a hinted word) only
  in the device's position.

A word of the upstream test's own name is never removed: only the token in the device's position
is (`test_npu_format_cast_npu` on Ascend and `test_npu_format_cast_openreg` on OpenReg are both
`test_npu_format_cast`).

Names that merely contain a device word stay as they are: `test_cudagraph_trees` (no word
boundary), `TestMPSGraph` (not a suffix), `TestMPS` (nothing would be left), and a method of a
class that was not instantiated per device (`TestCuda.test_to_cuda`) keeps its name.

**CPU is a device type like any other**: a CPU-architecture backend (the RISC-V CI on upstream's
allowlist) runs `TestFooCPU.test_add_cpu_float32`, which is the upstream test
`TestFoo.test_add_float32` that the reference runs as `TestFooPRIVATEUSE1.test_add_openreg_float32`.
But an accelerator's job may run the CPU twins of its tests too: where one report holds the same
upstream test instantiated for several device types, the backend's own device keeps the upstream
identity and the twins keep their names as reported (`report_ids`: the backend's known or learned
word, then any accelerator type, then `cpu`, then `meta`). A failures-only report cannot show the
twin beside it: there a failing `TestFooCPU` test reads as the upstream test.

**Out-of-tree runners' wrappers**: a runner that drives upstream's modules through generated
wrapper modules reports the wrapper's name, and the wrapper is upstream's module. Spyre's runner
(the run_test.sh of torch-spyre's OOT test framework) writes `<stem>__oot_wrapper.py` beside upstream's
`<stem>.py` (and a `__oot_conftest_<stem>.py`, which holds no tests), so
`test_profiler__oot_wrapper.py::TestProfilerPRIVATEUSE1::test_x_spyre` is `test_profiler`'s test
(`WRAPPER_SUFFIXES`, removed from the module's last part only).

Where one side lacks the module, `TestIdResolver` fills it in from the other reports of the same
commit when class + method name exactly one module there; otherwise the identity stays without a
module and matches only another module-less one. Identities are computed when rows are read
(`FailedTest` keeps what the producer sent), so every stored row takes part."""

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from relay.inputs.text import escaped

from .torch_device_types import DEVICE_TYPES

REFERENCE_DEVICE = "openreg"
"""The name upstream's OpenReg reference registers for PrivateUse1."""
DEVICES = tuple(sorted({*DEVICE_TYPES, REFERENCE_DEVICE}, key=lambda d: (-len(d), d)))
"""Device words PyTorch itself knows (every c10 DeviceType, and OpenReg's registered name),
longest first so that a suffix is matched whole; another PrivateUse1 backend's own name is
learned or hinted."""
PRIVATEUSE1 = "PRIVATEUSE1"
NOT_A_DEVICE = {"bool"}
"""A dtype's name, never a device's."""
TWIN_RANK = {"cpu": 2, "meta": 3}
"""Of the same upstream test instantiated for several device types in one report, which is the
backend's own (lowest first): its known or learned word 0, any other device type 1, then these."""

_GENERIC_CLASS_NAMES = {"", "Test"}
_TEST_ROOT = "test"
"""PyTorch's tests live under `test/`; a report made from the checkout's root names it."""
WRAPPER_SUFFIXES = ("__oot_wrapper",)
"""What out-of-tree runners append to the stem of upstream's module they wrap (module doc)."""
_WORD = re.compile(r"[a-z][a-z0-9]{1,30}")
_DTYPE_TOKEN = re.compile(
    r"bool|c?half|b?float\d+|u?int\d+|complex\d+|q?u?int\d+(?:x\d+)?|bits\d+(?:x\d+)?|e\d+m\d+[a-z]*|x\d"
)
"""The `_`-separated tokens of torch's dtype names (`float8_e4m3fn`, `float4_e2m1fn_x2`, `quint4x2`)."""
_DEVICE_TOKEN = re.compile(r"[a-z][a-z0-9]{1,30}")


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


def device_words(*hints) -> tuple[str, ...]:
    """The usable hints among registry and environment values: single lower-case words that
    can be a device name (`npu`, `spyre`; not `cpu`, not "Intel Max 1550")."""
    words = []
    for hint in hints:
        word = (hint or "").strip().lower() if isinstance(hint, str) else ""
        if _WORD.fullmatch(word) and word not in NOT_A_DEVICE and word not in words:
            words.append(word)
    return tuple(words)


def test_id(
    name: str, classname: str = "", file: str = "", devices: Sequence[str] = (), hints: Sequence[str] = ()
) -> TestId:
    """The identity of one reported test (see the module doc). `devices`: words known to be
    the backend's device (its registry `device_type`, the word learned from its report);
    `hints`: words that may be (the callback's `environment.device`); both from device_words."""
    return _test_id((name or "").strip(), (classname or "").strip(), file or "", tuple(devices), tuple(hints))


test_id.__test__ = False  # a function named test_* that pytest must not collect


@lru_cache(maxsize=65536)
def _test_id(name: str, classname: str, file: str, devices: tuple[str, ...], hints: tuple[str, ...]) -> TestId:
    module, cls, method, params = _parts(name, classname, file)
    bare_cls, device_type = _class_device(cls, method, devices)
    if device_type or not cls:
        method = _strip_device(method, device_type, devices, hints)
    return TestId(module, ".".join(part for part in (bare_cls, method + params) if part))


def _parts(name: str, classname: str, file: str) -> tuple[str, str, str, str]:
    """(module, class, method, parameters) as reported, with control and invisible characters
    written as their escapes (relay.inputs.text.escaped): every identity is built here."""
    name, classname, file = escaped(name), escaped(classname), escaped(file)
    method, params = _split_params(name)
    qualifier, method = (classname, method) if classname else _split_qualified(method)
    path, cls = _split_class(qualifier)
    return _module(path) or _module_from_file(file), cls, method, params


def module_of(classname: str = "", file: str = "") -> str:
    """The module of the identity rule alone (see the module doc), for counts kept per module:
    a classname (`test.test_nn.TestNNDeviceTypeXPU`), a dotted module or a path
    (`test/distributed/test_c10d.py`, a node id's `test/test_nn.py::TestX`), else the `file`.
    "" when neither names one."""
    path, _ = _split_class((classname or "").strip())
    return _module(path) or _module_from_file(file)


def report_ids(tests: Iterable[dict], device_type: str = "", environment: dict | None = None) -> list[TestId]:
    """Identities of one job's reported tests (`name`, `classname`, `file` each): its backend's
    registry `device_type` and the callback's `environment.device` as device words, each
    PRIVATEUSE1 class's device word learned from the methods the report has of it, and the
    twins of another device type kept apart (the module doc)."""
    tests = list(tests)
    known = device_words(device_type)
    hints = device_words((environment if isinstance(environment, dict) else {}).get("device"))
    learned = _learned_words(tests)
    words = [_with(known, learned.get(_class_of(t))) for t in tests]
    ids = [
        test_id(t["name"], t.get("classname", ""), t.get("file", ""), w, hints)
        for t, w in zip(tests, words, strict=True)
    ]
    return ids if len(set(ids)) == len(ids) else _twins_apart(tests, ids, words)


def _twins_apart(tests: list[dict], ids: list[TestId], words: list[tuple[str, ...]]) -> list[TestId]:
    """Where several reported tests reach one identity from different device types, the
    backend's own keeps it and the others keep their names as reported."""
    ranks = [_twin_rank(t, w) for t, w in zip(tests, words, strict=True)]
    best: dict[TestId, int] = {}
    for tid, rank in zip(ids, ranks, strict=True):
        best[tid] = min(best.get(tid, rank), rank)
    return [tid if rank == best[tid] else _as_reported(test) for test, tid, rank in zip(tests, ids, ranks, strict=True)]


def _twin_rank(test: dict, words: tuple[str, ...]) -> int:
    _, cls, method, _ = _parts((test.get("name") or "").strip(), _class_of(test), test.get("file") or "")
    word = _class_device(cls, method, words)[1]
    return 0 if word == PRIVATEUSE1 or word in words else TWIN_RANK.get(word, 1)


def _as_reported(test: dict) -> TestId:
    module, cls, method, params = _parts((test.get("name") or "").strip(), _class_of(test), test.get("file") or "")
    return TestId(module, ".".join(part for part in (cls, method + params) if part))


def _with(known: tuple[str, ...], learned: str | None) -> tuple[str, ...]:
    return known + ((learned,) if learned and learned not in known else ())


def _class_of(test: dict) -> str:
    classname = (test.get("classname") or "").strip()
    return classname or _split_qualified(_split_params((test.get("name") or "").strip())[0])[0]


def _learned_words(tests: list[dict]) -> dict[str, str]:
    """Per class of one report instantiated for a PrivateUse1 backend — suffixed PRIVATEUSE1, or
    the backend's own name upper-cased (`TestFooSPYRE`, a name no device type has) — the token
    in the device's position of most of its methods (a majority, so one method of an odd shape
    cannot decide for the rest)."""
    candidates: dict[str, Counter] = {}
    for test in tests:
        qualifier = _class_of(test)
        cls = _split_class(qualifier)[1]
        method = _split_params((test.get("name") or "").strip())[0]
        word = _structural_device(method.rpartition("::")[2].rpartition(".")[2]) or ""
        if not cls.endswith(PRIVATEUSE1) and not (word and word not in DEVICES and _own_name_suffix(cls, word)):
            word = ""  # counts against the class's majority, if it has one
        candidates.setdefault(qualifier, Counter())[word] += 1
    learned = {}
    for qualifier, counts in candidates.items():
        word, count = counts.most_common(1)[0]
        if word and count * 2 > sum(counts.values()):
            learned[qualifier] = word
    return learned


def _own_name_suffix(cls: str, word: str) -> bool:
    bare = cls.removesuffix(word.upper())
    return bare != cls and bare not in _GENERIC_CLASS_NAMES


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
    """`test/test_nn.py`, `test.test_nn`, `test_nn` or a runner's `test_nn__oot_wrapper.py` → `test_nn`."""
    path = path.strip().removeprefix("./")
    if path.endswith(".py"):
        path = path[:-3]
    parts = [p for p in re.split(r"[/.]", path) if p]
    if len(parts) > 1 and parts[0] == _TEST_ROOT:
        parts = parts[1:]
    if parts:
        parts[-1] = _unwrapped(parts[-1])
    return ".".join(parts)


def _unwrapped(stem: str) -> str:
    """Upstream's module stem behind a runner's generated wrapper (`test_nn__oot_wrapper`)."""
    for suffix in WRAPPER_SUFFIXES:
        bare = stem.removesuffix(suffix)
        if bare != stem and bare:
            return bare
    return stem


def _module_from_file(file: str) -> str:
    file = (file or "").strip()
    return _module(file) if file.endswith(".py") else ""


def _class_device(cls: str, method: str, devices: tuple[str, ...]) -> tuple[str, str]:
    """(class without its instantiation suffix, the device word it implies: PRIVATEUSE1 for a
    backend's own name, "" when the class was not instantiated per device). A device type's
    suffix counts when the method carries the type's word, as every instantiated method does."""
    for suffix, word in [(PRIVATEUSE1, PRIVATEUSE1)] + [(d.upper(), d) for d in devices + DEVICES]:
        bare = cls.removesuffix(suffix)
        if bare != cls and bare not in _GENERIC_CLASS_NAMES and (word == PRIVATEUSE1 or _has_word(method, word)):
            return bare, word
    return cls, ""


def _has_word(method: str, word: str) -> bool:
    return f"_{word}_" in f"{method}_"


def _strip_device(method: str, device_type: str, devices: tuple[str, ...], hints: tuple[str, ...]) -> str:
    if device_type == PRIVATEUSE1:
        return _strip_privateuse1(method, devices, hints)
    if device_type:
        return _strip_last(method, (device_type,))
    return _strip_in_position(method, DEVICES + devices + hints)


def _strip_privateuse1(method: str, devices: tuple[str, ...], hints: tuple[str, ...]) -> str:
    """A known word wherever it last stands (after it come only dtypes, never the device
    again); a hinted one only in the device's position; else the token in that position."""
    for word in devices:
        stripped = _strip_last(method, (word,))
        if stripped != method:
            return stripped
    stripped = _strip_in_position(method, hints)
    if stripped != method:
        return stripped
    word = _structural_device(method)
    return _strip_in_position(method, (word,)) if word else method


def _strip_in_position(method: str, words: Iterable[str]) -> str:
    """Without the token right before the dtype tokens when it is one of `words`."""
    tokens = method.split("_")
    tail = _dtype_tail_start(tokens)
    if tail >= 3 and tokens[tail - 1] in words:
        return "_".join(tokens[: tail - 1] + tokens[tail:])
    return method


def _structural_device(method: str) -> str | None:
    """The token right before the dtype tokens, when it can be a device word and at least
    `test_x` is left without it."""
    tokens = method.split("_")
    tail = _dtype_tail_start(tokens)
    word = tokens[tail - 1] if tail >= 3 else ""
    return word if _DEVICE_TOKEN.fullmatch(word) and word not in NOT_A_DEVICE else None


def _dtype_tail_start(tokens: list[str]) -> int:
    end = len(tokens)
    while end > 1 and _DTYPE_TOKEN.fullmatch(tokens[end - 1]):
        end -= 1
    return end


def _strip_last(method: str, words: Iterable[str]) -> str:
    """Only the last device word is the instantiation suffix: `test_to_cuda_xpu_float32` ran
    the upstream test `test_to_cuda` on XPU."""
    words = [w for w in words if w]
    if not words:
        return method
    pattern = re.compile("_(?:" + "|".join(map(re.escape, words)) + ")(?=_|$)")
    matches = list(pattern.finditer(method))
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


@dataclass(frozen=True)
class IdParts:
    """An identity's parts, kept apart for the test store: the method without its dtype tokens,
    the dtypes (`float32`, `float8_e4m3fn`), pytest's bracketed parameters."""

    module: str
    test_class: str
    method: str
    dtypes: str
    params: str


def id_parts(tid: TestId) -> IdParts:
    name, params = _split_params(tid.key)
    cls, _, method = name.rpartition(".")
    tokens = method.split("_")
    tail = max(_dtype_tail_start(tokens), 2) if method.startswith("test_") else len(tokens)
    return IdParts(tid.module, cls, "_".join(tokens[:tail]), "_".join(tokens[tail:]), params)


def parse_test_id(text: str) -> TestId:
    """A test id as the pages and the baseline write it (`module.Class.method[params]`) read back
    into its module and key, as written: nothing is stripped (it is an identity already)."""
    module, cls, method, params = _parts((text or "").strip(), "", "")
    return TestId(module, ".".join(part for part in (cls, method + params) if part))
