/* MQ Center console behaviour. No inline scripts anywhere: the CSP allows only files
   from this server. */
(function () {
  "use strict";

  /* Live regions: <div data-live-ws="/ws/console/..."> is replaced by the HTML fragments
     the server pushes over a WebSocket; reconnects after a drop. */
  function connectLive(el) {
    if (el.dataset.liveBound) { return; }
    el.dataset.liveBound = "1";
    var proto = window.location.protocol === "https:" ? "wss://" : "ws://";
    var url = proto + window.location.host + el.dataset.liveWs;
    var status = document.querySelector("[data-live-status]");
    function open() {
      var ws = new WebSocket(url);
      ws.onopen = function () { if (status) { status.classList.add("live-on"); status.title = "live"; } };
      ws.onmessage = function (event) {
        el.innerHTML = event.data;
        if (window.htmx) { window.htmx.process(el); }
        el.dispatchEvent(new CustomEvent("live:update", { bubbles: true }));
      };
      ws.onclose = function () {
        if (status) { status.classList.remove("live-on"); status.title = "reconnecting"; }
        if (document.body.contains(el)) { setTimeout(open, 3000); }
      };
    }
    open();
  }

  function bindAll(root) {
    root.querySelectorAll("[data-live-ws]").forEach(connectLive);
  }

  document.addEventListener("DOMContentLoaded", function () { bindAll(document); });
  document.addEventListener("htmx:load", function (event) { bindAll(event.target); });

  /* Menu button: on narrow screens the stylesheet hides the header's links until it is
     pressed. The class "js-nav" marks that this script runs, so without JavaScript the
     links simply stay shown. */
  function bindMenu() {
    var header = document.querySelector("header.top");
    var toggle = header && header.querySelector(".nav-toggle");
    if (!toggle) { return; }
    header.classList.add("js-nav");
    function setOpen(open) {
      header.classList.toggle("nav-open", open);
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
    }
    toggle.addEventListener("click", function () { setOpen(!header.classList.contains("nav-open")); });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && header.classList.contains("nav-open")) { setOpen(false); toggle.focus(); }
    });
  }

  document.addEventListener("DOMContentLoaded", bindMenu);

  /* "Select all on this page" for bulk actions. */
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("[data-select-all]")) { return; }
    var form = box.closest("form");
    form.querySelectorAll("input[name=ids]").forEach(function (item) { item.checked = box.checked; });
  });

  /* Confirmation for plain (non-HTMX) forms that carry data-confirm. */
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var submitter = event.submitter;
    var message = (submitter && submitter.dataset.confirm) || form.dataset.confirm;
    if (message && !form.hasAttribute("hx-post") && !window.confirm(message)) {
      event.preventDefault();
    }
  }, true);
})();
