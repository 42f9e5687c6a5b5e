// Report charts (uPlot, vendored in static/vendor/uplot/): every element with
// data-report-chart-src draws the charts of one done report from its JSON series
// (reports/chart_data.py). Heap: per topic, inflow and outflow per hour (bars) with the
// unfinished count at each hour's end (steps, right axis); the backlog of the largest groups
// with their alarm threshold. Trace: latency percentiles per group on a log scale.
(function () {
  "use strict";

  // The plot's own box: its whole canvas, right axis and title included, stays inside it.
  function width(box) { return Math.max(320, box.clientWidth - 8); }
  function utc(ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); }
  // 24-hour UTC times: the hour in the legend, the day on the axis where it changes.
  var hourLong = uPlot.fmtDate("{YYYY}-{MM}-{DD} {HH}:{mm}");
  var hourShort = uPlot.fmtDate("{HH}:{mm}");
  var dayHour = uPlot.fmtDate("{MM}-{DD} {HH}:{mm}");
  function hourTicks(u, splits) {
    var day = null;
    return splits.map(function (ts) {
      var d = utc(ts), key = d.getFullYear() + "-" + d.getMonth() + "-" + d.getDate();
      var label = key === day ? hourShort(d) : dayHour(d);
      day = key;
      return label;
    });
  }
  function count(u, v) { return v == null ? "—" : String(v); }

  function plot(root, className) {
    var box = document.createElement("div");
    box.className = className;
    root.querySelector(".chart-plots").appendChild(box);
    return box;
  }

  // An axis of categories (groups) at x = 0, 1, 2, ...: one tick per label.
  function categories(labels) {
    return {
      scale: { time: false, range: function () { return [-0.5, labels.length - 0.5]; } },
      axis: {
        label: "topic/group", size: 60,
        splits: function () { return labels.map(function (_, i) { return i; }); },
        values: function (u, splits) { return splits.map(function (i) { return labels[i] || ""; }); },
      },
      x: labels.map(function (_, i) { return i; }),
    };
  }

  function flow(root, item) {
    var box = plot(root, "report-flow");
    box.setAttribute("data-topic", item.topic);
    return new uPlot({
      title: item.topic + ": flow per hour, unfinished at each hour's end",
      width: width(box), height: 220, tzDate: utc,
      series: [
        { label: "hour (UTC)", value: function (u, ts) { return ts == null ? "—" : hourLong(utc(ts)); } },
        { label: "inflow", stroke: "#2563eb", fill: "rgba(37,99,235,.35)", value: count,
          paths: uPlot.paths.bars({ size: [0.4, 40], align: -1 }), points: { show: false } },
        { label: "outflow", stroke: "#16a34a", fill: "rgba(22,163,74,.35)", value: count,
          paths: uPlot.paths.bars({ size: [0.4, 40], align: 1 }), points: { show: false } },
        { label: "unfinished", stroke: "#6b7280", width: 1.5, dash: [5, 4], scale: "level", value: count,
          paths: uPlot.paths.stepped({ align: 1 }) },
      ],
      // Half an hour either side: the first and last hours' bars stay inside the plot.
      scales: { x: { time: true, range: function (u, min, max) { return [min - 1800, max + 1800]; } },
                y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } },
                level: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } },
      axes: [{ label: "hour (UTC)", values: hourTicks, incrs: [3600, 7200, 10800, 21600, 43200, 86400] },
             { label: "messages / hour" },
             { scale: "level", side: 1, label: "unfinished", size: 60, grid: { show: false } }],
    }, [item.t, item.inflow, item.outflow, item.unfinished], box);
  }

  function backlog(root, data) {
    var box = plot(root, "report-backlog");
    var cat = categories(data.labels);
    return new uPlot({
      title: data.labels.length ? "Backlog as of the window's end" : "No backlog",
      width: width(box), height: 240,
      series: [
        { label: "group", value: function (u, i) { return i == null ? "—" : data.labels[i]; } },
        { label: "backlog", stroke: "#c0504d", fill: "rgba(192,80,77,.5)", value: count,
          paths: uPlot.paths.bars({ size: [0.6, 60] }), points: { show: false } },
        { label: "alarm threshold", stroke: "#000", value: count, paths: function () { return null; },
          points: { show: true, size: 10, fill: "#000" } },
      ],
      scales: { x: cat.scale, y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } } },
      axes: [cat.axis, { label: "waiting (deliverable)" }],
    }, [cat.x, data.backlog, data.threshold], box);
  }

  function latency(root, data) {
    var box = plot(root, "report-latency");
    var cat = categories(data.labels);
    var dots = function (color) {
      return { stroke: color, paths: function () { return null; }, points: { show: true, size: 9, fill: color } };
    };
    var seconds = function (u, v) { return v == null ? "—" : v + " s"; };
    return new uPlot({
      title: "Latency percentiles, produce to success (nearest rank)",
      width: width(box), height: 260,
      series: [
        { label: "group", value: function (u, i) { return i == null ? "—" : data.labels[i]; } },
        Object.assign({ label: "p50", value: seconds }, dots("#2563eb")),
        Object.assign({ label: "p90", value: seconds }, dots("#d97706")),
        Object.assign({ label: "p99", value: seconds }, dots("#dc2626")),
      ],
      // A log scale: one slow group must not flatten the others.
      scales: { x: cat.scale, y: { distr: 3 } },
      axes: [cat.axis, { label: "seconds (log scale)" }],
    }, [cat.x, data.p50.map(positive), data.p90.map(positive), data.p99.map(positive)], box);
  }

  function positive(v) { return v == null ? null : Math.max(v, 0.001); }

  function draw(root) {
    if (root.getAttribute("data-report-chart-ready")) { return; }
    root.setAttribute("data-report-chart-ready", "1");
    fetch(root.getAttribute("data-report-chart-src"), { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (data) {
        root.querySelector(".chart-plots").textContent = "";
        if (data.kind === "heap") {
          data.topics.forEach(function (item) { flow(root, item); });
          backlog(root, data.backlog);
        } else if (data.labels.length) {
          latency(root, data);
        }
        root.setAttribute("data-report-chart-drawn", String(root.querySelectorAll(".uplot").length));
      })
      .catch(function (status) { root.querySelector(".chart-plots").textContent = "Chart data unavailable (" + status + ")."; });
  }

  function all() { document.querySelectorAll("[data-report-chart-src]").forEach(draw); }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", all); } else { all(); }
  document.body && document.body.addEventListener("htmx:afterSwap", all);
})();
