// Charts of the stats buckets (uPlot, vendored in static/vendor/uplot/): every element with
// data-chart-src draws a counters chart and a backlog chart for the range its buttons pick.
(function () {
  "use strict";
  var COUNTERS = [
    ["produced", "#2563eb"], ["delivered", "#7c3aed"], ["acked", "#16a34a"],
    ["failed", "#dc2626"], ["retried", "#d97706"], ["expired", "#6b7280"],
  ];
  var BACKLOG = [["backlog", "#0891b2", "y"], ["oldest_age_seconds", "#be185d", "age"]];

  function width(box) { return Math.max(300, box.clientWidth - 8); }

  // Counts start at 0: a backlog of 812 to 830 is not drawn as a cliff.
  function fromZero(u, min, max) { return [0, max > 0 ? max * 1.08 : 1]; }

  // Time ticks in 24-hour numbers, the same in every language (uPlot's defaults are
  // English: "4:05am 11/27/26"); the day is added where it changes.
  function pad(n) { return n < 10 ? "0" + n : String(n); }
  function timeTicks(u, splits) {
    var last = "";
    var labels = splits.map(function (ts) {
      var d = new Date(ts * 1000), day = pad(d.getMonth() + 1) + "-" + pad(d.getDate());
      var hm = pad(d.getHours()) + ":" + pad(d.getMinutes());
      var label = day === last ? hm : hm + "\n" + day;
      last = day;
      return label;
    });
    u.root.setAttribute("data-time-ticks", labels.join("|"));
    return labels;
  }

  // Each y axis as wide as its longest tick label plus its title, so the title never
  // overlaps the numbers (uPlot's default width fits about four digits).
  function fitAxis(u, values, axisIdx, cycleNum) {
    var axis = u.axes[axisIdx];
    if (cycleNum > 1) { return axis._size; }
    var longest = (values || []).reduce(function (a, v) { return String(v).length > a.length ? String(v) : a; }, "");
    u.ctx.font = axis.font[0];
    return Math.ceil(axis.ticks.size + axis.gap + u.ctx.measureText(longest).width / devicePixelRatio + axis.labelSize + 6);
  }
  function yAxis(extra) {
    var axis = { size: fitAxis, labelSize: 18, labelGap: 4 };
    Object.keys(extra).forEach(function (k) { axis[k] = extra[k]; });
    return axis;
  }
  var LEGEND_TIME = "{YYYY}-{MM}-{DD} {HH}:{mm}";

  // Labels in the page's language: _chart.html renders them as data-t-* attributes of the
  // chart's root (English when absent); "{n}", "{per}" and "{status}" are filled in here.
  function text(root, key, fallback) {
    var value = root.getAttribute("data-t-" + key);
    return value === null ? fallback : value;
  }

  function counters(root, box, data) {
    var series = [{ label: text(root, "time", "Time"), value: LEGEND_TIME }].concat(COUNTERS.map(function (c) {
      return { label: text(root, c[0], c[0]), stroke: c[1], width: 1.5, value: function (u, v) { return v == null ? "—" : v; } };
    }));
    var rows = [data.t].concat(COUNTERS.map(function (c) { return data[c[0]]; }));
    var per = data.bucket_seconds >= 3600 ?
      text(root, "per-hours", "per {n} h").replace("{n}", String(data.bucket_seconds / 3600)) :
      text(root, "per-minutes", "per {n} min").replace("{n}", String(data.bucket_seconds / 60));
    return new uPlot({
      title: text(root, "counters-title", "Messages {per}").replace("{per}", per), width: width(box), height: 220, series: series,
      scales: { y: { range: fromZero } },
      axes: [{ values: timeTicks, size: 44 }, yAxis({ label: text(root, "counters-axis", "messages {per}").replace("{per}", per) })],
    }, rows, box);
  }

  function backlog(root, box, data) {
    var series = [{ label: text(root, "time", "Time"), value: LEGEND_TIME }].concat(BACKLOG.map(function (c) {
      return { label: text(root, c[0], c[0]), stroke: c[1], width: 1.5, scale: c[2], spanGaps: true };
    }));
    var rows = [data.t].concat(BACKLOG.map(function (c) { return data[c[0]]; }));
    return new uPlot({
      title: text(root, "backlog-title", "Backlog and oldest waiting age"), width: width(box), height: 180, series: series,
      scales: { y: { range: fromZero }, age: { range: fromZero } },
      axes: [{ values: timeTicks, size: 44 }, yAxis({ scale: "y", label: text(root, "messages", "messages") }),
        yAxis({ scale: "age", side: 1, label: text(root, "seconds", "seconds"), grid: { show: false } })],
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
        var c = counters(root, a, data), k = backlog(root, b, data);
        // Where each count axis starts, once both are drawn (the page's tests read it).
        var drawn = function () {
          var mins = [c.scales.y.min, k.scales.y.min, k.scales.age.min];
          if (mins.every(function (m) { return m != null; })) { root.setAttribute("data-chart-ymin", mins.join(",")); }
        };
        c.hooks.draw = (c.hooks.draw || []).concat([drawn]);
        k.hooks.draw = (k.hooks.draw || []).concat([drawn]);
        drawn();
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
