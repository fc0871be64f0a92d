/* Grid, commit and PR pages: a cell's details on hover, pinned on click; double-click opens the
   job's log; highlighted columns and rows; keyboard moves; refresh state; the commit page's
   per-backend sections. The server renders everything; this only fetches a cell's tooltip
   fragment (server-escaped HTML) and keeps the view's state in the URL (?cell=<sha>.<backend id>,
   hl_col=, hl_row=, open=). No page data is embedded in script: cells carry it in data-*. */
(function () {
  "use strict";

  var pinnedKey = null;
  var requestSeq = 0;
  var hoverTimer = null;
  var hideTimer = null;
  var tipCache = {};
  var HOVER_DELAY_MS = 300;

  function grid() { return document.getElementById("hud-grid"); }
  function tipBox() { return document.getElementById("hud-tip"); }
  function cells(row) { return Array.prototype.slice.call(row.querySelectorAll("td.c")); }
  function rows() { var g = grid(); return g ? Array.prototype.slice.call(g.tBodies[0].rows).filter(function (r) { return r.dataset.sha; }) : []; }

  function cellKey(td) { return td.closest("tr").dataset.sha + "." + td.dataset.p; }

  function findCell(key) {
    var parts = (key || "").split(".");
    var row = rows().filter(function (r) { return r.dataset.sha === parts[0]; })[0];
    if (!row) { return null; }
    return cells(row).filter(function (td) { return td.dataset.p === parts[1] && !td.classList.contains("j"); })[0] || null;
  }

  function setUrlParam(name, value) {
    var url = new URL(window.location.href);
    if (value) { url.searchParams.set(name, value); } else { url.searchParams.delete(name); }
    window.history.replaceState(null, "", url.toString());
  }

  function setUrlCell(key) { setUrlParam("cell", key); }

  function urlList(name) {
    var value = new URL(window.location.href).searchParams.get(name);
    return value ? value.split(",").filter(Boolean) : [];
  }

  function focusCell(td) {
    var g = grid();
    if (!g || !td) { return; }
    g.querySelectorAll('td.c[tabindex="0"]').forEach(function (c) { c.setAttribute("tabindex", "-1"); });
    td.setAttribute("tabindex", "0");
    td.focus({ preventScroll: false });
  }

  function position(box, td) {
    var rect = td.getBoundingClientRect();
    var left = rect.right + window.scrollX + 8;
    if (left + box.offsetWidth > window.scrollX + document.documentElement.clientWidth - 8) {
      left = Math.max(window.scrollX + 8, rect.left + window.scrollX - box.offsetWidth - 8);
    }
    box.style.left = left + "px";
    box.style.top = (rect.top + window.scrollY) + "px";
  }

  function showTip(td, pinned) {
    var box = tipBox();
    var g = grid();
    if (!box || !g) { return; }
    var seq = ++requestSeq;
    var key = cellKey(td);
    var mode = "hud-tip " + (pinned ? "pinned" : "hover");
    box.hidden = false;
    box.dataset.key = key;
    if (tipCache[key]) {
      box.className = mode;
      box.innerHTML = tipCache[key];
      position(box, td);
      return;
    }
    box.className = mode + " loading";
    box.textContent = "Loading details…";
    position(box, td);
    fetch(g.dataset.tipUrl + "?tip=" + encodeURIComponent(key), { headers: { Accept: "text/html" } })
      .then(function (response) {
        return response.text().then(function (html) { return { ok: response.ok, status: response.status, html: html }; });
      })
      .then(function (result) {
        if (seq !== requestSeq) { return; }
        if (result.ok && result.html) { tipCache[key] = result.html; }
        box.className = mode + (result.ok ? "" : " failed");
        if (result.html) { box.innerHTML = result.html; } else { box.textContent = "Could not load details (HTTP " + result.status + ")."; }
        position(box, td);
      })
      .catch(function (error) {
        if (seq !== requestSeq) { return; }
        box.className = mode + " failed";
        box.textContent = "Could not load details: " + error.message + ". The grid itself is unaffected.";
      });
  }

  function hideHoverTip() {
    var box = tipBox();
    if (pinnedKey || !box || box.hidden) { return; }
    requestSeq++;
    box.hidden = true;
    box.textContent = "";
  }

  function onOver(event) {
    var box = tipBox();
    if (box && box.contains(event.target)) { window.clearTimeout(hideTimer); return; }
    var td = event.target.closest && event.target.closest("td.c");
    if (!td || !grid() || !grid().contains(td)) { return; }
    if (td.title) { td.dataset.title = td.title; td.removeAttribute("title"); }  // the real tooltip replaces the browser's
    window.clearTimeout(hideTimer);
    window.clearTimeout(hoverTimer);
    if (pinnedKey) { return; }
    hoverTimer = window.setTimeout(function () { showTip(td, false); }, HOVER_DELAY_MS);
  }

  function onOut(event) {
    var box = tipBox();
    var to = event.relatedTarget;
    if (to && box && (box.contains(to) || (to.closest && to.closest("td.c") === event.target.closest("td.c")))) { return; }
    window.clearTimeout(hoverTimer);
    if (!pinnedKey) { hideTimer = window.setTimeout(hideHoverTip, 200); }
  }

  function pin(td) {
    unmarkPinned();
    td.classList.add("pinned");
    pinnedKey = cellKey(td);
    focusCell(td);
    showTip(td, true);
    setUrlCell(pinnedKey);
  }

  function unmarkPinned() {
    var g = grid();
    if (g) { g.querySelectorAll("td.c.pinned").forEach(function (c) { c.classList.remove("pinned"); }); }
  }

  function clearPin() {
    requestSeq++;
    window.clearTimeout(hoverTimer);
    unmarkPinned();
    pinnedKey = null;
    var box = tipBox();
    if (box) { box.hidden = true; box.textContent = ""; }
    setUrlCell(null);
  }

  function neighbour(td, key) {
    var row = td.closest("tr");
    var rowCells = cells(row);
    var index = rowCells.indexOf(td);
    if (key === "ArrowLeft") { return rowCells[index - 1]; }
    if (key === "ArrowRight") { return rowCells[index + 1]; }
    var all = rows();
    var next = all[all.indexOf(row) + (key === "ArrowUp" ? -1 : 1)];
    return next ? cells(next)[index] : null;
  }

  function onKey(event) {
    if (event.key === "Escape") { clearPin(); return; }
    var td = event.target.closest && event.target.closest("td.c");
    if (!td || !grid() || !grid().contains(td)) { return; }
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); pin(td); return; }
    if (!event.ctrlKey && !event.metaKey && !event.altKey && (event.key === "r" || event.key === "c")) {
      if (event.key === "r") { toggleRow(td.closest("tr")); } else { toggleColumn(headerOf(td)); }
      return;
    }
    if (["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown"].indexOf(event.key) < 0) { return; }
    event.preventDefault();
    var next = neighbour(td, event.key);
    if (!next) { return; }
    if (pinnedKey) { pin(next); } else { focusCell(next); }
  }

  function onClick(event) {
    var box = tipBox();
    if (event.target.closest(".tip-close")) { clearPin(); return; }
    if (box && box.contains(event.target)) { return; }
    if (event.target.closest(".skip-link") && skipToGrid(event)) { return; }
    var g = grid();
    var th = event.target.closest("th.col");
    if (th && g && g.contains(th) && !event.target.closest("a")) { toggleColumn(th); return; }
    var fixed = event.target.closest("td.fixed");
    if (fixed && g && g.contains(fixed) && !event.target.closest("a")) { toggleRow(fixed.closest("tr")); return; }
    var td = event.target.closest("td.c");
    if (td && g && g.contains(td)) { pin(td); return; }
    if (pinnedKey) { clearPin(); }
  }

  // --- double-click: the job's log ---------------------------------------------------------------

  function headerOf(td) {
    var g = grid();
    var index = cells(td.closest("tr")).indexOf(td);
    return g ? g.querySelectorAll("thead th.col")[index] : null;
  }

  function onDoubleClick(event) {
    var td = event.target.closest && event.target.closest("td.c");
    var g = grid();
    if (!td || !g || !g.contains(td)) { return; }
    var th = headerOf(td);
    var job = td.classList.contains("j") && th ? th.dataset.job : "";
    var url = g.dataset.tipUrl + "?log=" + encodeURIComponent(cellKey(td)) + (job ? "&job=" + encodeURIComponent(job) : "");
    window.open(url, "_blank", "noopener");
  }

  // --- highlighted columns and rows (hl_col=<column key>,… and hl_row=<sha prefix>,… in the URL) --

  function columnKey(th) {
    var all = Array.prototype.slice.call(grid().querySelectorAll("thead th.col"));
    return th.dataset.key || "i" + all.indexOf(th);
  }

  function toggleIn(name, value) {
    var list = urlList(name);
    var at = list.indexOf(value);
    if (at < 0) { list.push(value); } else { list.splice(at, 1); }
    setUrlParam(name, list.join(","));
    applyHighlights();
  }

  function toggleColumn(th) { if (th) { toggleIn("hl_col", columnKey(th)); } }

  function toggleRow(tr) { if (tr && tr.dataset.sha) { toggleIn("hl_row", tr.dataset.sha.slice(0, 12)); } }

  function applyHighlights() {
    var g = grid();
    if (!g) { return; }
    var cols = urlList("hl_col");
    var rowKeys = urlList("hl_row");
    var headers = Array.prototype.slice.call(g.querySelectorAll("thead th.col"));
    var marked = headers.map(function (th) { return cols.indexOf(columnKey(th)) >= 0; });
    headers.forEach(function (th, i) {
      th.classList.toggle("col-hl", marked[i]);
      var button = th.querySelector(".col-name");
      if (button) { button.setAttribute("aria-pressed", marked[i] ? "true" : "false"); }
    });
    rows().forEach(function (tr) {
      tr.classList.toggle("row-hl", rowKeys.indexOf(tr.dataset.sha.slice(0, 12)) >= 0);
      cells(tr).forEach(function (td, i) { td.classList.toggle("col-hl", !!marked[i]); });
    });
  }

  // --- the skip link lands on the grid's current cell ---------------------------------------------

  function skipToGrid(event) {
    var g = grid();
    var cell = g && (g.querySelector('td.c[tabindex="0"]') || g.querySelector("td.c"));
    if (!cell) { return false; }
    event.preventDefault();
    focusCell(cell);
    return true;
  }

  function labelSkipLink() {
    var link = document.querySelector(".skip-link");
    if (link && grid()) { link.setAttribute("href", "#hud-grid"); link.textContent = "Skip to the grid"; }
  }

  // --- the commit page: per-backend sections, collapsed unless listed in ?open= ---------------------

  function syncOpenBoxes() {
    var boxes = Array.prototype.slice.call(document.querySelectorAll("details.backend-box"));
    if (!boxes.length) { return; }
    var open = boxes.filter(function (box) { return box.open; }).map(function (box) { return box.dataset.backend; });
    setUrlParam("open", open.length === boxes.length ? "all" : open.join(","));
  }

  function openTargetBox() {
    var id = window.location.hash.replace(/^#/, "");
    var box = id ? document.getElementById(id) : null;
    if (box && box.matches("details.backend-box") && !box.open) { box.open = true; syncOpenBoxes(); }
  }

  function restore() {
    tipCache = {};
    openTargetBox();
    var g = grid();
    if (!g) { return; }
    labelSkipLink();
    applyHighlights();
    var first = g.querySelector("td.c");
    if (first && !g.querySelector('td.c[tabindex="0"]')) { first.setAttribute("tabindex", "0"); }
    var key = pinnedKey || new URL(window.location.href).searchParams.get("cell");
    var td = key ? findCell(key) : null;
    if (!td) { return; }
    if (pinnedKey) { td.classList.add("pinned"); position(tipBox(), td); } else { pin(td); }
  }

  function refreshState(text, failed) {
    var el = document.getElementById("refresh-state");
    if (!el) { return; }
    var note = el.querySelector(".refresh-note") || el.appendChild(document.createElement("span"));
    note.className = "refresh-note" + (failed ? " failed" : "");
    note.textContent = text;
  }

  function stamp() { return new Date().toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }); }

  document.addEventListener("DOMContentLoaded", restore);
  document.addEventListener("keydown", onKey);
  document.addEventListener("click", onClick);
  document.addEventListener("dblclick", onDoubleClick);
  document.addEventListener("mouseover", onOver);
  document.addEventListener("mouseout", onOut);
  window.addEventListener("hashchange", openTargetBox);
  document.addEventListener("toggle", function (event) {
    if (event.target.matches && event.target.matches("details.backend-box")) { syncOpenBoxes(); }
  }, true);
  // The commit page refreshes from the URL as it is now (with ?open=), not as it was first served.
  document.addEventListener("htmx:configRequest", function (event) {
    if (event.detail.elt && event.detail.elt.id === "commit-region") { event.detail.path = window.location.pathname + window.location.search; }
  });
  document.addEventListener("htmx:afterSwap", function () { restore(); refreshState("Updated " + stamp(), false); });
  document.addEventListener("htmx:responseError", function (event) {
    refreshState("Refresh failed (HTTP " + event.detail.xhr.status + ") at " + stamp() + "; showing the data loaded before.", true);
  });
  document.addEventListener("htmx:sendError", function () {
    refreshState("Refresh failed (server unreachable) at " + stamp() + "; showing the data loaded before.", true);
  });
})();
