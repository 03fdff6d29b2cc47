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
      new Chart(canvas, JSON.parse(source.textContent));
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.detail.elt || document); });
})();
