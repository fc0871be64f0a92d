"""A crawl of a running HUD, as a new user clicks through it: every link from the grid, /crcr and
each backend page to depth 3, every HTML page in Chromium at 1600 and 390 px, every API page it
finds over HTTP. It reports problems, never raises on one:

* any 5xx answer, any console error or uncaught page error;
* any page that scrolls sideways at either width;
* any mark that disagrees with the API's answer for the same object: the commit page's
  upstream-broken banner with /api/v1/commits/<sha>/baseline, the PR page's gate box with
  /api/v1/prs/<n>/gate, a grid tooltip's "since which commit" with /api/v1/culprits (and its
  upstream-broken badge with the baseline), and every page's since-which-commit line (the backend
  and commit pages) with /api/v1/bisections: a verified culprit is the answer, else the range;
* a PR page whose gate box and verdict table disagree on whether an L4 backend blocks the merge
  (one rule, relay.results.blame, decides both: the same page must never say both).

The sandbox keeps running while it crawls, so the API is asked before and after each page: a mark
is wrong only when it matches neither answer."""

import re
from collections import Counter, deque
from dataclasses import dataclass, field
from html import unescape
from urllib.parse import parse_qsl, urljoin, urlsplit

import httpx

DEPTH = 3
PER_QUERY_KIND = 4
"""Pages that differ only in their query values (pagination, filters, a selected cell): a few of
each kind are enough; pages without a query (each commit, PR, backend, issue) are all visited."""
API_PER_KIND = 6
SKIPPED_PREFIXES = ("/admin", "/static", "/accounts", "/api/schema", "/api/docs", "/favicon")
SKIPPED_QUERY = ("log", "tip")
"""`?log=` redirects to the CI provider's log (outside); tooltips are checked on their own."""
WIDTHS = {"desktop": {"width": 1600, "height": 1000}, "phone": {"width": 390, "height": 844}}
TOOLTIPS = 40
LINK = re.compile(r'href="([^"#]*)')
CLIPPED_TABLES = """() => [...document.querySelectorAll(".table-wrap:not(.matrix-wrap)")]
  .filter((wrap) => wrap.scrollWidth > wrap.clientWidth + 1)
  .map((wrap) => "a table (" + (wrap.querySelector("th") || {textContent: "?"}).textContent.trim().slice(0, 40) + ", …)")"""
"""Summary tables fit a desktop: on a phone they may scroll inside their box, at 1600 px a column
cut off (the nightly tab's "Last result") is a layout bug. The grid and matrices are wide by design."""


@dataclass
class Crawl:
    base: str
    problems: list[str] = field(default_factory=list)
    visited: Counter = field(default_factory=Counter)
    """Kinds of page → how many were visited (for the closing report)."""
    html_pages: list[str] = field(default_factory=list)
    checked: Counter = field(default_factory=Counter)
    """Marks compared with the API, by kind."""


def crawl(base: str, browser, starts: list[str], screenshot_dir=None) -> Crawl:
    """Breadth first from `starts`; HTML pages in the browser, API pages over HTTP."""
    result = Crawl(base.rstrip("/"))
    client = httpx.Client(base_url=result.base, timeout=30, follow_redirects=False)
    seen, kinds = set(), Counter()
    queue = deque((path, 0) for path in starts)
    tabs = {name: _tab(browser, viewport) for name, viewport in WIDTHS.items()}
    try:
        while queue:
            path, depth = queue.popleft()
            if path in seen or not _worth_visiting(path, kinds):
                continue
            seen.add(path)
            kinds[_kind(path)] += 1
            for link in _visit(result, client, tabs, path):
                if depth < DEPTH and link not in seen:
                    queue.append((link, depth + 1))
        _check_tooltips(result, client)
    finally:
        for context, _, _ in tabs.values():
            context.close()
        client.close()
    result.visited = kinds
    return result


# --- what to visit ----------------------------------------------------------------------------------


def _kind(path: str) -> str:
    parts = urlsplit(path)
    shape = re.sub(r"[0-9a-f]{7,40}", "SHA", parts.path)
    shape = re.sub(r"/[0-9]+", "/N", shape)
    if shape.startswith("/crcr/") and shape not in ("/crcr/metrics",):
        shape = "/crcr/OWNER/REPO"
    keys = ",".join(sorted(k for k, _ in parse_qsl(parts.query, keep_blank_values=True)))
    return f"{shape}?{keys}" if keys else shape


def _worth_visiting(path: str, kinds: Counter) -> bool:
    kind = _kind(path)
    if path.startswith("/api/"):
        return kinds[kind] < API_PER_KIND
    return "?" not in kind or kinds[kind] < PER_QUERY_KIND


def _links(base: str, page_path: str, text: str) -> list[str]:
    found = []
    for href in LINK.findall(text):
        url = urljoin(base + page_path, unescape(href))
        parts = urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}" != base or parts.path.startswith(SKIPPED_PREFIXES):
            continue
        if any(k in SKIPPED_QUERY for k, _ in parse_qsl(parts.query)):
            continue
        found.append(parts.path + (f"?{parts.query}" if parts.query else ""))
    return found


def _api_links(base: str, data) -> list[str]:
    """URLs of this server inside a JSON answer (the API root, `next` cursors, `url` fields)."""
    text = str(data)
    return [u[len(base) :] for u in re.findall(re.escape(base) + r"/api/v1/[^'\"\s{}]*", text)]


# --- one page ---------------------------------------------------------------------------------------


def _tab(browser, viewport):
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return context, page, errors


def _visit(result: Crawl, client: httpx.Client, tabs: dict, path: str) -> list[str]:
    before = _marks_api(client, path)
    response = client.get(path, headers={"Accept": "text/html,application/json"})
    if response.status_code >= 500:
        result.problems.append(f"{path}: HTTP {response.status_code}")
        return []
    kind = response.headers.get("content-type", "")
    if response.status_code != 200:
        return []
    if "json" in kind:
        return _api_links(result.base, response.json())
    if "html" not in kind:
        return []
    result.html_pages.append(path)
    for width, (_, page, errors) in tabs.items():
        _in_browser(result, page, errors, path, width)
    _check_marks(result, client, path, response.text, before)
    _check_since(result, client, path, response.text)
    return _links(result.base, path, response.text)


def _in_browser(result: Crawl, page, errors: list, path: str, width: str) -> None:
    errors.clear()
    answer = page.goto(result.base + path, wait_until="load")
    if answer is not None and answer.status >= 500:
        result.problems.append(f"{path} ({width}): HTTP {answer.status} in the browser")
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    if overflow > 0:
        result.problems.append(f"{path} ({width}): scrolls sideways by {overflow} px")
    if width == "desktop":
        for table in page.evaluate(CLIPPED_TABLES):
            result.problems.append(f"{path} ({width}): {table} is cut off and scrolls inside the page")
    for error in errors:
        result.problems.append(f"{path} ({width}): console error: {error[:300]}")


# --- marks against the API -------------------------------------------------------------------------

COMMIT = re.compile(r"^/commit/([0-9a-f]{40})$")
PR = re.compile(r"^/pr/([0-9]+)$")


def _marks_api(client: httpx.Client, path: str):
    if match := COMMIT.match(path):
        return _json(client, f"/api/v1/commits/{match[1]}/baseline")
    if match := PR.match(path):
        return _json(client, f"/api/v1/prs/{match[1]}/gate")
    return None


def _json(client: httpx.Client, path: str):
    response = client.get(path, headers={"Accept": "application/json"})
    return response.json() if response.status_code == 200 else None


def _check_marks(result: Crawl, client: httpx.Client, path: str, html: str, before) -> None:
    if before is None:
        return
    after = _marks_api(client, path)
    if COMMIT.match(path):
        shown = 'data-upstream-broken="true"' in html
        if shown not in {before["upstream_broken"], (after or before)["upstream_broken"]}:
            result.problems.append(f"{path}: the banner says upstream broken={shown}, the baseline API does not")
        result.checked["commit banner vs baseline"] += 1
    elif PR.match(path):
        shown = _gate_shown(html)
        answers = [_gate_answer(a) for a in (before, after) if a]
        if shown is not None and shown not in answers:
            result.problems.append(
                f"{path}: the gate box shows {shown}, /gate answers {answers[-1] if answers else None}"
            )
        result.checked["PR gate box vs /gate"] += shown is not None
        for problem in gate_vs_verdict(html):
            result.problems.append(f"{path}: {problem}")
        result.checked["PR gate box vs verdict table"] += shown is not None


def gate_vs_verdict(html: str) -> list[str]:
    """Where the gate box and the verdict table of one PR page contradict each other: an L4
    backend the table says blocks the merge must be the gate's failure, and a backend the gate
    blocks on must not read "not this PR" in the table (the health probe, which has no row, aside)."""
    gate = {
        unescape(repo): state
        for repo, state in re.findall(r'<li data-repo="([^"]+)" data-gate-state="([a-z_]+)"', html)
    }
    rows = re.findall(
        r'<tr class="verdict-row" data-repo="([^"]+)" data-level="(L\d)" data-blocks="(true|false)"', html
    )
    problems = []
    for repo, level, blocks in rows:
        repo, blocking = unescape(repo), blocks == "true"
        if level == "L4" and blocking != (gate.get(repo) == "failure"):
            problems.append(
                f"the verdict table says {repo} {'blocks' if blocking else 'does not block'}, the gate box says {gate.get(repo)}"
            )
    return problems


def _gate_shown(html: str):
    section = re.search(r'<section class="gate[^"]*" id="gate"[^>]*data-gate-state="([a-z_]+)"', html)
    if section is None:
        return None
    backends = re.findall(r'<li data-repo="([^"]+)" data-gate-state="([a-z_]+)"', html)
    return section[1], tuple(sorted((unescape(repo), state) for repo, state in backends))


def _gate_answer(data: dict):
    return data["state"], tuple(sorted((b["repo"], b["state"]) for b in data["backends"]))


# --- grid tooltips: since which commit ---------------------------------------------------------------

FAILING_CELL = re.compile(r'<td class="c s-(?:failure|cancelled|timed_out|never_started)[^"]*"[^>]*data-p="([0-9]+)"')
ROW = re.compile(r'<tr data-sha="([0-9a-f]{40})"(.*?)</tr>', re.S)


def _check_tooltips(result: Crawl, client: httpx.Client) -> None:
    cells = []
    for page in ("/", "/?page=2"):
        html = client.get(page).text
        cells += [(sha, pid) for sha, row in ROW.findall(html) for pid in FAILING_CELL.findall(row)]
    for sha, pid in list(dict.fromkeys(cells))[:TOOLTIPS]:
        _check_tooltip(result, client, sha, pid)


def _check_tooltip(result: Crawl, client: httpx.Client, sha: str, pid: str) -> None:
    tip = client.get("/", params={"tip": f"{sha}.{pid}"})
    if tip.status_code >= 500:
        result.problems.append(f"/?tip={sha}.{pid}: HTTP {tip.status_code}")
        return
    backend = re.search(r'class="tip-head">.*?href="/crcr/([^"]+)"', tip.text, re.S)
    streaks = dict(re.findall(r'data-subject="([^"]*)" data-first-failing="([0-9a-f]{40})"', tip.text))
    if backend and streaks:
        answers = [_culprits(client, unescape(backend[1]), sha) for _ in range(2)]
        shown = {unescape(k): v for k, v in streaks.items()}
        if not any(_agrees(shown, answer) for answer in answers):
            result.problems.append(
                f"tooltip {sha[:10]}.{pid}: since which commit {shown} ≠ /api/v1/culprits {answers[-1]}"
            )
        result.checked["tooltip culprit vs /culprits"] += 1
    if "broken-badge" in tip.text.split('class="tip-jobs"')[0]:
        baseline = _json(client, f"/api/v1/commits/{sha}/baseline")
        if baseline is not None and not baseline["upstream_broken"]:
            result.problems.append(f"tooltip {sha[:10]}.{pid}: says upstream broken, the baseline API does not")
        result.checked["tooltip badge vs baseline"] += 1


def _culprits(client: httpx.Client, backend: str, sha: str) -> dict:
    data = _json(client, f"/api/v1/culprits?backend={backend}&sha={sha}") or {"streaks": []}
    return {s["subject"]: s["first_failing"] for s in data["streaks"]}


def _agrees(shown: dict, answer: dict) -> bool:
    """The tooltip shows the first streaks (a limit); each it shows must be the API's."""
    return all(answer.get(subject) == first for subject, first in shown.items())


# --- since which commit against /api/v1/bisections -----------------------------------------------------

STREAK = re.compile(r'<li class="streak" ([^>]*)>(.*?)</li>', re.S)
BISECTED = re.compile(r'class="bisected" data-bisection="([0-9]+)" data-state="([a-z_]+)"')
ATTRIBUTE = re.compile(r'([a-z-]+)="([^"]*)"')
RUNNING = ("searching", "verifying")


def _check_since(result: Crawl, client: httpx.Client, path: str, html: str) -> None:
    """Each since-which-commit line: a bisection's culprit is the answer exactly when the API says
    the bisection verified it; a line without one answers the range's first failing commit. A
    bisection shown running may have ended since (the API is asked after the page); an ended one
    never changes, so its state must be the API's."""
    for attributes, body in STREAK.findall(html):
        line = dict(ATTRIBUTE.findall(attributes))
        if "data-since" not in line:
            continue
        bisected = BISECTED.search(body)
        problem = _since_problem(client, line, bisected)
        if problem:
            result.problems.append(
                f"{path}: since which commit for {unescape(line.get('data-subject', '?'))}: {problem}"
            )
        result.checked["since line vs /bisections"] += 1


def _since_problem(client: httpx.Client, line: dict, bisected) -> str:
    since, answer = line["data-since"], line.get("data-since-answer")
    if bisected is None:
        if answer == "culprit" or since != line.get("data-first-failing"):
            return f"answers {since} ({answer}) with no bisection shown"
        return ""
    found = _json(client, f"/api/v1/bisections/{bisected[1]}")
    if found is None:
        return f"bisection {bisected[1]} is not in /api/v1/bisections"
    shown_state, state = bisected[2], found["state"]
    if shown_state != state and shown_state not in RUNNING:
        return f"bisection {bisected[1]} shown {shown_state}, /api/v1/bisections says {state}"
    culprit = found["result"]["culprit_sha"] if shown_state == state == "verified" else None
    if culprit and (answer, since) != ("culprit", culprit):
        return f"answers {since} ({answer}), the verified culprit is {culprit}"
    if not culprit and (answer == "culprit" or since != line.get("data-first-failing")):
        return f"answers {since} ({answer}), but bisection {bisected[1]} verified no culprit"
    return ""
