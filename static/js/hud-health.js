/* The relay-health cards' details dialog on /crcr. A card's "Details" link is a plain link to the
   details page (no JavaScript: it still works); with JavaScript htmx fetches the fragment into
   this <dialog>, which opens at once with a loading state, and says so when the fetch fails. */
(function () {
  "use strict";

  function dialog() { return document.getElementById("health-dialog"); }

  function body() { return document.getElementById("health-dialog-body"); }

  function say(html) { var target = body(); if (target) { target.innerHTML = html; } }

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("[data-health-dialog]");
    var box = dialog();
    if (!link || !box || typeof box.showModal !== "function" || !window.htmx) { return; }
    say('<h2 id="health-dialog-title">Loading…</h2><div class="loading-state" role="status">' +
        '<span class="spinner" aria-hidden="true"></span> Loading the details…</div>');
    if (!box.open) { box.showModal(); }
  });

  function failed(event) {
    if (!event.detail || !event.detail.target || event.detail.target.id !== "health-dialog-body") { return; }
    say('<h2 id="health-dialog-title">Relay health details</h2><div class="error-state" role="alert">' +
        "<strong>Could not load the details.</strong> The server did not answer; close this and try again, " +
        'or open <a href="' + (event.detail.pathInfo && event.detail.pathInfo.requestPath || "/crcr") +
        '">the details page</a>.</div>');
  }

  document.addEventListener("htmx:sendError", failed);
  document.addEventListener("htmx:responseError", failed);
})();
