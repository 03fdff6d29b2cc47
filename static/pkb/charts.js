// Draw every <canvas data-chart="ID"> from the JSON in <script id="ID" type="application/json">,
// on page load and after htmx swaps in new content (the live submission status).
(function () {
  "use strict";
  function draw(root) {
    if (typeof Chart === "undefined") return;
    root.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
      if (canvas.dataset.drawn) return;
      var source = document.getElementById(canvas.dataset.chart);
      if (!source) return;
      canvas.dataset.drawn = "1";
      var config = JSON.parse(source.textContent);
      if (window.matchMedia("(max-width: 600px)").matches) {
        // A phone: taller than wide-screen charts, with compact legend boxes.
        config.options = config.options || {};
        config.options.aspectRatio = 1.2;
        config.options.plugins = config.options.plugins || {};
        config.options.plugins.legend = { labels: { boxWidth: 12 } };
      }
      new Chart(canvas, config);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.detail.elt || document); });
})();
