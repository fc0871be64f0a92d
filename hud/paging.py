"""How many tests one list of a page renders: a commit with 1,000 failed tests of 1,000-character
names was a 7.7 MB commit page. Each list shows TESTS_PER_PAGE at a time; `?tests=N` (in the URL,
so a link or a refresh keeps it) turns every list of the page to its N-th slice."""

from urllib.parse import urlencode

from relay.inputs.params import int_param

TESTS_PER_PAGE = 50
PARAM = "tests"


def tests_page(query) -> int:
    """The page `?tests=` asks for: 1 unless it is ASCII digits within 1–10,000."""
    return int_param(query.get("tests"), default=1, low=1, high=10_000)


def page_of(items, page: int) -> list:
    start = (page - 1) * TESTS_PER_PAGE
    return list(items)[start : start + TESTS_PER_PAGE]


def pager(query, total: int, page: int) -> dict | None:
    """What a list's pager shows: its slice's bounds and the links to the slices around it (every
    other parameter of the query kept); None when the list fits one page."""
    if total <= TESTS_PER_PAGE and page == 1:
        return None
    first, last = (page - 1) * TESTS_PER_PAGE + 1, min(page * TESTS_PER_PAGE, total)
    return {
        "first": first,
        "last": last,
        "total": total,
        "previous": _url(query, page - 1) if page > 1 else "",
        "next": _url(query, page + 1) if last < total else "",
        "size": TESTS_PER_PAGE,
    }


def _url(query, page: int) -> str:
    kept = [(k, v) for k, values in query.lists() if k != PARAM for v in values]
    return "?" + urlencode([*kept, (PARAM, page)] if page > 1 else kept)
