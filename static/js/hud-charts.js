// Draws the Plotly figures the server built (json_script blocks) with the vendored plotly.js,
// themed from the page's CSS variables so light and dark mode both read well. Redraws after
// htmx swaps in fresh figures and when the colour scheme changes.
(function () {
  "use strict";

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function theme() {
    var fg = cssVar("--fg"), muted = cssVar("--muted"), border = cssVar("--border");
    return {
      "font.color": fg,
      "title.font.color": fg,
      "legend.font.color": fg,
      "xaxis.gridcolor": border, "yaxis.gridcolor": border,
      "xaxis.linecolor": border, "yaxis.linecolor": border,
      "xaxis.zerolinecolor": border, "yaxis.zerolinecolor": border,
      "xaxis.tickfont.color": muted, "yaxis.tickfont.color": muted,
      "hoverlabel.bgcolor": cssVar("--panel"), "hoverlabel.font.color": fg, "hoverlabel.bordercolor": border,
    };
  }

  function showError(element, message) {
    element.innerHTML = "";
    var p = document.createElement("p");
    p.className = "chart-error";
    p.setAttribute("role", "alert");
    p.textContent = message;
    element.appendChild(p);
  }

  function draw(element) {
    var source = document.getElementById(element.dataset.figure);
    if (!source) return;
    if (typeof window.Plotly === "undefined") {
      showError(element, "The chart library did not load, so this chart cannot be drawn.");
      return;
    }
    try {
      var figure = JSON.parse(source.textContent);
      element.innerHTML = "";
      window.Plotly.newPlot(element, figure.data, figure.layout, { responsive: true, displaylogo: false })
        .then(function () { return window.Plotly.relayout(element, theme()); })
        .then(function () { element.dataset.drawn = "true"; });
    } catch (error) {
      showError(element, "This chart could not be drawn: " + error.message);
    }
  }

  function drawAll(root) {
    (root || document).querySelectorAll(".chart[data-figure]").forEach(draw);
  }

  function retheme() {
    document.querySelectorAll(".chart[data-drawn]").forEach(function (element) {
      window.Plotly.relayout(element, theme());
    });
  }

  document.addEventListener("DOMContentLoaded", function () { drawAll(document); });
  document.addEventListener("htmx:afterSettle", function (event) { drawAll(event.target); });
  if (window.matchMedia) {
    var scheme = window.matchMedia("(prefers-color-scheme: dark)");
    (scheme.addEventListener ? scheme.addEventListener.bind(scheme, "change") : scheme.addListener.bind(scheme))(retheme);
  }
})();
