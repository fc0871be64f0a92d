/* Grid, commit and PR pages: pin a cell's details, keyboard moves, refresh state.
   The server renders everything; this only fetches a cell's tooltip fragment (server-escaped
   HTML) and keeps the pinned cell in the URL (?cell=<sha>.<backend id>). No page data is
   embedded in script: cells carry it in data-* attributes. */
(function () {
  "use strict";

  var pinnedKey = null;
  var requestSeq = 0;

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

  function setUrlCell(key) {
    var url = new URL(window.location.href);
    if (key) { url.searchParams.set("cell", key); } else { url.searchParams.delete("cell"); }
    window.history.replaceState(null, "", url.toString());
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

  function showTip(td) {
    var box = tipBox();
    var g = grid();
    if (!box || !g) { return; }
    var seq = ++requestSeq;
    box.hidden = false;
    box.className = "hud-tip pinned loading";
    box.textContent = "Loading details…";
    position(box, td);
    fetch(g.dataset.tipUrl + "?tip=" + encodeURIComponent(cellKey(td)), { headers: { Accept: "text/html" } })
      .then(function (response) {
        return response.text().then(function (html) { return { ok: response.ok, status: response.status, html: html }; });
      })
      .then(function (result) {
        if (seq !== requestSeq) { return; }
        box.className = "hud-tip pinned" + (result.ok ? "" : " failed");
        if (result.html) { box.innerHTML = result.html; } else { box.textContent = "Could not load details (HTTP " + result.status + ")."; }
        position(box, td);
      })
      .catch(function (error) {
        if (seq !== requestSeq) { return; }
        box.className = "hud-tip pinned failed";
        box.textContent = "Could not load details: " + error.message + ". The grid itself is unaffected.";
      });
  }

  function pin(td) {
    unmarkPinned();
    td.classList.add("pinned");
    pinnedKey = cellKey(td);
    focusCell(td);
    showTip(td);
    setUrlCell(pinnedKey);
  }

  function unmarkPinned() {
    var g = grid();
    if (g) { g.querySelectorAll("td.c.pinned").forEach(function (c) { c.classList.remove("pinned"); }); }
  }

  function clearPin() {
    requestSeq++;
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
    var td = event.target.closest("td.c");
    if (td && grid() && grid().contains(td)) { pin(td); return; }
    if (pinnedKey) { clearPin(); }
  }

  function restore() {
    var g = grid();
    if (!g) { return; }
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
  document.addEventListener("htmx:afterSwap", function () { restore(); refreshState("Updated " + stamp(), false); });
  document.addEventListener("htmx:responseError", function (event) {
    refreshState("Refresh failed (HTTP " + event.detail.xhr.status + ") at " + stamp() + "; showing the data loaded before.", true);
  });
  document.addEventListener("htmx:sendError", function () {
    refreshState("Refresh failed (server unreachable) at " + stamp() + "; showing the data loaded before.", true);
  });
})();
