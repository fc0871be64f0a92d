/* Site-wide, tiny: a <details data-remember="key"> (the HUD legend) keeps the reader's choice in
   localStorage. The first time it is seen it opens on a wide screen; from then on it starts
   collapsed unless the reader left it open. htmx refreshes re-render it, so it is re-applied
   after every swap (keeping whatever it was on this page view). */
(function () {
  "use strict";

  var PREFIX = "crcr:details:";
  var thisView = {};

  function read(key) {
    try { return window.localStorage.getItem(PREFIX + key); } catch (error) { return null; }
  }

  function write(key, value) {
    try { window.localStorage.setItem(PREFIX + key, value); } catch (error) { /* storage off: nothing to remember */ }
  }

  function initialState(key) {
    if (thisView[key] !== undefined) { return thisView[key]; }
    var saved = read(key);
    if (saved === null) {
      write(key, "seen");
      return window.matchMedia("(min-width: 700px)").matches;
    }
    return saved === "open";
  }

  function remember(details) {
    if (details.dataset.remembered) { return; }
    details.dataset.remembered = "1";
    var key = details.dataset.remember;
    details.open = thisView[key] = initialState(key);
    var summary = details.querySelector("summary");
    if (!summary) { return; }
    summary.addEventListener("click", function () {
      window.setTimeout(function () {
        thisView[key] = details.open;
        write(key, details.open ? "open" : "closed");
      }, 0);
    });
  }

  function applyAll() { document.querySelectorAll("details[data-remember]").forEach(remember); }

  document.addEventListener("DOMContentLoaded", applyAll);
  document.addEventListener("htmx:afterSwap", applyAll);
})();
