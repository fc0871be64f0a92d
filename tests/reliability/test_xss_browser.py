"""XSS, checked where it matters: in Debian's Chromium. Every field that reaches a page is filled
with markup and script (job and workflow names, failed tests, environment values, delivery
labels, senders, refs and errors, PR and commit titles and authors, display names, artifact and
log URLs, admin-visible names), every HTML page is loaded (and its hover targets poked), and no
dialog may fire, no injected element may exist, no script-bearing URL may become a link.

Skipped without /usr/bin/chromium unless CRCR_REQUIRE_BROWSER=1 (then failed)."""

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MARK = "window.__xss=(window.__xss||0)+1"
HOSTILE = [
    f"<script>{MARK};alert('script')</script>",
    f'"><img src=x data-xss=1 onerror="{MARK};alert(\'img\')">',
    f"'><svg data-xss=1 onload={MARK};alert('svg')>",
    f'</title></textarea></pre></script><iframe data-xss=1 srcdoc="<script>parent.{MARK}</script>"></iframe>',
    f"<a data-xss=1 href=javascript:{MARK}>link</a><b data-xss=1 onmouseover={MARK}>hover</b>",
    f"`;{MARK};alert('tpl');//${{{MARK}}}",
]
URLS = [
    f"javascript:{MARK};alert('url')",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(2)",
    "data:text/html,<script>alert(3)</script>",
    "vbscript:msgbox(4)",
]
SHA = "d" * 40
PR_HEAD = "e" * 40
PR = 4242
ADMIN_PASSWORD = "xss-admin-Pa55word-long-enough"


def hostile(i: int) -> str:
    return HOSTILE[i % len(HOSTILE)]


def create(model, **fields):
    """model.objects.create with every text value cut to its column's length (PostgreSQL enforces it)."""
    for name, value in fields.items():
        limit = getattr(model._meta.get_field(name), "max_length", None) if isinstance(value, str) else None
        if limit:
            fields[name] = value[:limit]
    return model.objects.create(**fields)


@pytest.fixture
def chromium(browser):
    """The session's shared Chromium (tests/conftest.py)."""
    return browser


@pytest.fixture
def hostile_store(transactional_db, monkeypatch):
    """Every text field that a page shows, hostile; URLs with script schemes."""
    from django.contrib.auth import get_user_model

    from api.models import ApiToken
    from relay.models import (
        Delivery,
        Dispatch,
        DispatchAttempt,
        FailedTest,
        JobRun,
        LevelChange,
        Project,
        UpstreamCommit,
    )

    try:
        from relay.tallies import buckets

        monkeypatch.setattr(buckets, "COMPUTE_BUDGET_SECONDS", 60, raising=False)
    except ImportError:
        pass
    now = timezone.now()
    reference = create(
        Project,
        full_name="pytorch/openreg-ci",
        level="L2",
        is_reference=True,
        hardware_kind="reference",
        display_name=hostile(0),
        github_repo_id=8001,
    )
    backend = create(
        Project,
        full_name="xss-org/torch-backend",
        level="L4",
        device="xpu",
        hardware_kind="gpu",
        display_name=hostile(1),
        github_repo_id=8002,
        oncalls=[hostile(2)],
    )
    l3 = create(
        Project,
        full_name="xss-org/l3-backend",
        level="L3",
        device="npu",
        hardware_kind="npu",
        display_name=hostile(3),
        github_repo_id=8003,
    )
    create(LevelChange, project=backend, from_level="L3", to_level="L4", changed_by=hostile(4), reason=hostile(5))
    create(
        UpstreamCommit,
        sha=SHA,
        title=hostile(0) + " (#1)",
        author=hostile(1),
        branch="main",
        is_trunk=True,
        landed_at=now - timedelta(hours=1),
    )
    create(
        UpstreamCommit,
        sha=PR_HEAD,
        title=hostile(2),
        author=hostile(3),
        branch=hostile(4),
        pr_number=PR,
        landed_at=now - timedelta(minutes=30),
    )
    delivery = create(
        Delivery,
        guid="xss-delivery",
        event="pull_request",
        action="labeled",
        outcome="relayed",
        reason=hostile(5)[:200],
        repo_full_name="pytorch/pytorch",
        pr_number=PR,
        head_sha=PR_HEAD,
        ref=hostile(0)[:255],
        label=hostile(1)[:100],
        sender=hostile(2)[:100],
        payload={
            "action": "labeled",
            "number": PR,
            "pull_request": {
                "number": PR,
                "title": hostile(3),
                "head": {"sha": PR_HEAD, "ref": hostile(4)},
                "labels": [{"name": hostile(5)}],
                "user": {"login": hostile(0)},
            },
        },
    )
    push = create(
        Delivery,
        guid=hostile(1)[:100],
        event="push",
        outcome="relayed",
        head_sha=SHA,
        ref="refs/heads/main",
        sender=hostile(3)[:100],
        payload={"after": SHA, "head_commit": {"message": hostile(4)}},
    )
    for i, project in enumerate((reference, backend, l3)):
        for d, sha in ((delivery, PR_HEAD), (push, SHA)):
            dispatch = create(
                Dispatch,
                delivery=d,
                project=project,
                state="retrying" if i == 1 else "sent",
                event_type=d.event,
                head_sha=sha,
                pr_number=d.pr_number,
                last_error=hostile(i + 2),
                attempts=1,
                sent_at=now,
            )
            create(
                DispatchAttempt,
                dispatch=dispatch,
                number=1,
                outcome="transient",
                error=hostile(i),
                status_code=502,
                retry_at=now,
            )
            for j, conclusion in enumerate(("failure", "success")):
                job = create(
                    JobRun,
                    project=project,
                    dispatch=dispatch,
                    delivery_key=d.guid,
                    event_type=d.event,
                    run_id=f"{i}{j}{d.pk}",
                    run_attempt=1,
                    workflow_name=hostile(i + j),
                    job_name=hostile(i + j + 1),
                    status="completed",
                    conclusion=conclusion,
                    head_sha=sha,
                    pr_number=d.pr_number,
                    workflow_url=URLS[(i + j) % len(URLS)],
                    artifact_url=URLS[(i + j + 1) % len(URLS)],
                    check_run_id=str(100 + i),
                    tests_total=10,
                    tests_passed=9 if conclusion == "failure" else 10,
                    tests_failed=1 if conclusion == "failure" else 0,
                    environment={"device": hostile(i), "driver": hostile(i + 1), hostile(j)[:60]: "v"},
                    created_at=now - timedelta(minutes=20),
                    in_progress_at=now - timedelta(minutes=20),
                    completed_at=now - timedelta(minutes=5),
                    queue_seconds=30,
                    execution_seconds=900,
                    body={"workflow": {"name": hostile(i)}},
                )
                if conclusion == "failure":
                    create(
                        FailedTest,
                        job_run=job,
                        name=hostile(i),
                        classname=hostile(i + 1),
                        file=hostile(i + 2),
                        message=hostile(i + 3),
                        stacktrace=hostile(i + 4),
                        hw_classification=hostile(i + 5)[:32],
                    )
    _upstream_writes(now)
    admin = get_user_model().objects.create_superuser("xss-admin", "xss@example.org", ADMIN_PASSWORD)
    ApiToken.issue(admin, hostile(2)[:100], ["read"])
    return {"backend": backend, "delivery": delivery, "push": push}


def _upstream_writes(now):
    """Rows for the upstream-writes panel of /relay/deliveries, when that model is present."""
    try:
        from relay.models import UpstreamCheckRun, UpstreamWrite, UpstreamWriteAttempt
    except ImportError:
        return
    run = create(
        UpstreamCheckRun,
        kind="job",
        pr_number=PR,
        head_sha=PR_HEAD,
        name=f"crcr/xss-org/torch-backend/{hostile(0)}"[:200],
    )
    write = create(
        UpstreamWrite,
        kind="check_run_create",
        target_key=f"check:{run.pk}",
        target_label=hostile(1),
        check_run=run,
        state="retrying",
        last_error=hostile(2),
        note=hostile(3)[:300],
        next_attempt_at=now,
    )
    create(
        UpstreamWriteAttempt,
        write=write,
        number=1,
        outcome="transient",
        error=hostile(4),
        path=hostile(5),
        status_code=502,
    )


def pages(store) -> list[str]:
    backend = store["backend"]
    return [
        "/",
        f"/?expand={backend.full_name}",
        "/?heads=pr",
        f"/?tip={SHA}.{backend.pk}",
        f"/?tip={PR_HEAD[:12]}.{backend.pk}",
        f"/?name={HOSTILE[0]}",
        f"/commit/{SHA}",
        f"/commit/{PR_HEAD}",
        f"/pr/{PR}",
        "/crcr",
        "/crcr?range=30d&event=pr",
        f"/crcr/{backend.full_name}",
        "/crcr/pytorch/openreg-ci",
        "/crcr/metrics",
    ]


STAFF_PAGES = ["/relay/deliveries", "/relay/deliveries?view=writes", f"/relay/deliveries?event={HOSTILE[1]}"]
"""Operator pages: visited signed in, as only staff may see them."""


ADMIN_PAGES = [
    "/admin/",
    "/admin/relay/project/",
    "/admin/relay/project/{backend}/change/",
    "/admin/relay/levelchange/",
    "/admin/relay/delivery/",
    "/admin/relay/delivery/{delivery}/change/",
    "/admin/relay/dispatchattempt/",
    "/admin/api/apitoken/",
]

INSPECT = """() => {
  const bad = [];
  document.querySelectorAll('[data-xss]').forEach(el => bad.push('injected element <' + el.tagName.toLowerCase() + '>'));
  // Data blocks (json_script: type=application/json) may carry the text; executable scripts may not.
  document.querySelectorAll('script').forEach(el => {
    const type = (el.getAttribute('type') || 'text/javascript').toLowerCase();
    if (!type.includes('json') && el.textContent.includes('__xss')) bad.push('injected <script>');
  });
  document.querySelectorAll('iframe[srcdoc]').forEach(() => bad.push('injected iframe srcdoc'));
  const schemes = ['javascript:', 'data:', 'vbscript:'];
  document.querySelectorAll('a[href], area[href], iframe[src], img[src], form[action], [formaction], object[data], embed[src]').forEach(el => {
    for (const attr of ['href', 'src', 'action', 'formaction', 'data']) {
      const raw = el.getAttribute(attr);
      if (raw === null) continue;
      let scheme = '';
      try { scheme = new URL(raw, document.baseURI).protocol; } catch (e) { scheme = raw.trim().toLowerCase().split(':')[0] + ':'; }
      if (schemes.includes(scheme)) bad.push(`${el.tagName.toLowerCase()}[${attr}] = ${raw.slice(0, 60)}`);
    }
  });
  if (window.__xss) bad.push('script ran ' + window.__xss + ' time(s)');
  return bad;
}"""
POKE = """() => {
  const targets = document.querySelectorAll('td, th, a, button, summary, [title], [data-tip], [data-tooltip], [tabindex], .cell, li');
  let n = 0;
  for (const el of targets) {
    if (n++ > 400) break;
    for (const type of ['mouseover', 'mouseenter', 'focus', 'focusin']) el.dispatchEvent(new Event(type, {bubbles: true}));
  }
  document.querySelectorAll('details').forEach(d => d.open = true);
  return n;
}"""


def visit(page, url: str, dialogs: list) -> dict:
    response = page.goto(url, wait_until="load")
    try:
        page.wait_for_load_state("networkidle", timeout=5_000)
    except Exception:  # noqa: BLE001 - pages that poll never go idle; what loaded is enough
        pass
    page.evaluate(POKE)
    page.wait_for_timeout(150)
    shown = page.evaluate(
        '() => document.body.innerText.includes("<script>window.__xss") || document.body.innerText.includes("data-xss=1")'
    )
    return {
        "url": url,
        "status": response.status if response else None,
        "problems": page.evaluate(INSPECT),
        "shown_as_text": shown,
    }


def test_hostile_data_never_runs_in_any_page(live_server, chromium, hostile_store):
    context = chromium.new_context(viewport={"width": 1440, "height": 1000})
    context.set_default_timeout(15_000)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    results = [visit(page, live_server.url + path, dialogs) for path in pages(hostile_store)]

    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "xss-admin")
    page.fill("#id_password", ADMIN_PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    ids = {"backend": hostile_store["backend"].pk, "delivery": hostile_store["delivery"].pk}
    results += [visit(page, live_server.url + path.format(**ids), dialogs) for path in ADMIN_PAGES]
    results += [visit(page, live_server.url + path, dialogs) for path in STAFF_PAGES]
    context.close()

    injected = [(r["url"], r["problems"]) for r in results if r["problems"]]
    assert not dialogs, f"a dialog fired: {dialogs[:5]}"
    assert not injected, f"hostile data became markup or script: {injected[:6]}"
    assert not [r for r in results if r["status"] != 200], (
        f"pages that did not load: {[(r['url'], r['status']) for r in results if r['status'] != 200]}"
    )
    # The data did reach the pages (as text): otherwise the checks above prove nothing.
    assert sum(r["shown_as_text"] for r in results) >= 8, [(r["url"], r["shown_as_text"]) for r in results]


def test_the_detector_sees_injected_script(chromium):
    """Control: the same checks, on a page that does inject the hostile strings, catch them."""
    context = chromium.new_context()
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.set_content("<div>" + "".join(HOSTILE) + f"<a href='{URLS[0]}'>u</a></div>")
    page.wait_for_timeout(300)
    problems = page.evaluate(INSPECT)
    context.close()
    assert (
        dialogs
        and any("injected element" in p for p in problems)
        and any("a[href]" in p for p in problems)
        and any("script ran" in p for p in problems)
    )
