// Charts of the stats buckets (uPlot, vendored in static/vendor/uplot/): every element with
// data-chart-src draws a counters chart and a backlog chart for the range its buttons pick.
(function () {
  "use strict";
  var COUNTERS = [
    ["produced", "#2563eb"], ["delivered", "#7c3aed"], ["acked", "#16a34a"],
    ["failed", "#dc2626"], ["retried", "#d97706"], ["expired", "#6b7280"],
  ];
  var BACKLOG = [["backlog", "#0891b2", "y"], ["oldest_age_seconds", "#be185d", "age"]];

  function width(box) { return Math.max(320, box.clientWidth - 8); }

  // Labels in the page's language: _chart.html renders them as data-t-* attributes of the
  // chart's root (English when absent); "{n}", "{per}" and "{status}" are filled in here.
  function text(root, key, fallback) {
    var value = root.getAttribute("data-t-" + key);
    return value === null ? fallback : value;
  }

  function counters(root, box, data) {
    var series = [{ label: text(root, "time", "Time") }].concat(COUNTERS.map(function (c) {
      return { label: text(root, c[0], c[0]), stroke: c[1], width: 1.5, value: function (u, v) { return v == null ? "—" : v; } };
    }));
    var rows = [data.t].concat(COUNTERS.map(function (c) { return data[c[0]]; }));
    var per = data.bucket_seconds >= 3600 ?
      text(root, "per-hours", "per {n} h").replace("{n}", String(data.bucket_seconds / 3600)) :
      text(root, "per-minutes", "per {n} min").replace("{n}", String(data.bucket_seconds / 60));
    return new uPlot({
      title: text(root, "counters-title", "Messages {per}").replace("{per}", per), width: width(box), height: 220, series: series,
      axes: [{}, { label: text(root, "counters-axis", "messages {per}").replace("{per}", per) }],
    }, rows, box);
  }

  function backlog(root, box, data) {
    var series = [{ label: text(root, "time", "Time") }].concat(BACKLOG.map(function (c) {
      return { label: text(root, c[0], c[0]), stroke: c[1], width: 1.5, scale: c[2], spanGaps: true };
    }));
    var rows = [data.t].concat(BACKLOG.map(function (c) { return data[c[0]]; }));
    return new uPlot({
      title: text(root, "backlog-title", "Backlog and oldest waiting age"), width: width(box), height: 180, series: series,
      scales: { y: {}, age: {} },
      axes: [{}, { scale: "y", label: text(root, "messages", "messages") },
        { scale: "age", side: 1, label: text(root, "seconds", "seconds"), grid: { show: false } }],
    }, rows, box);
  }

  function draw(root, range) {
    var url = root.getAttribute("data-chart-src") + (root.getAttribute("data-chart-src").indexOf("?") < 0 ? "?" : "&") +
      "range=" + encodeURIComponent(range);
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (data) {
        var plots = root.querySelector(".chart-plots");
        plots.textContent = "";
        var a = document.createElement("div"), b = document.createElement("div");
        a.className = "chart-counters"; b.className = "chart-backlog";
        plots.appendChild(a); plots.appendChild(b);
        counters(root, a, data); backlog(root, b, data);
        root.setAttribute("data-chart-drawn", range);
        root.setAttribute("data-chart-points", String(data.t.length));
        root.setAttribute("data-chart-produced", String(data.produced.reduce(function (s, v) { return s + v; }, 0)));
      })
      .catch(function (status) {
        root.querySelector(".chart-plots").textContent =
          text(root, "unavailable", "Chart data unavailable ({status}).").replace("{status}", String(status));
      });
  }

  function setup(root) {
    if (root.getAttribute("data-chart-ready")) { return; }
    root.setAttribute("data-chart-ready", "1");
    var current = root.getAttribute("data-chart-range") || "1h";
    root.querySelectorAll("button[data-range]").forEach(function (button) {
      button.addEventListener("click", function () {
        current = button.getAttribute("data-range");
        root.querySelectorAll("button[data-range]").forEach(function (b) {
          b.setAttribute("aria-pressed", b === button ? "true" : "false");
        });
        draw(root, current);
      });
    });
    draw(root, current);
    // Redrawn when the live dashboard says new numbers arrived.
    document.body.addEventListener("mq:stats", function () { draw(root, current); });
  }

  function all() { document.querySelectorAll("[data-chart-src]").forEach(setup); }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", all); } else { all(); }
  document.body && document.body.addEventListener("htmx:afterSwap", all);
})();
