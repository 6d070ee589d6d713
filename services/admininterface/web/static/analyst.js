// Threat View admin: the analyst's pages. The world map's zoom, pan and
// tooltip; Latest Events, live from the event stream; the print button.
// Every page works without it: the map is a picture with titles and a table
// of the same numbers beside it, and the lists are server-rendered.
"use strict";
(function () {
  function maps() {
    document.querySelectorAll("[data-map]").forEach(function (box) {
      var svg = box.querySelector("svg");
      var tip = box.querySelector(".map-tip");
      if (!svg) { return; }
      var W = parseFloat(svg.getAttribute("data-w")), H = parseFloat(svg.getAttribute("data-h"));
      var view = { x: 0, y: 0, w: W, h: H };
      function apply() { svg.setAttribute("viewBox", view.x + " " + view.y + " " + view.w + " " + view.h); }
      function zoom(f, cx, cy) {
        var nw = Math.min(W, Math.max(W / 16, view.w / f)), nh = nw * H / W;
        if (cx === undefined) { cx = view.x + view.w / 2; cy = view.y + view.h / 2; }
        view.x = cx - (cx - view.x) * nw / view.w; view.y = cy - (cy - view.y) * nh / view.h;
        view.w = nw; view.h = nh; clamp(); apply();
      }
      function clamp() {
        view.x = Math.min(Math.max(view.x, 0), W - view.w); view.y = Math.min(Math.max(view.y, 0), H - view.h);
      }
      function pan(dx, dy) { view.x += dx * view.w; view.y += dy * view.h; clamp(); apply(); }
      box.querySelectorAll("[data-zoom]").forEach(function (b) {
        b.addEventListener("click", function () {
          var z = b.getAttribute("data-zoom");
          if (z === "in") { zoom(1.6); } else if (z === "out") { zoom(1 / 1.6); } else { view = { x: 0, y: 0, w: W, h: H }; apply(); }
        });
      });
      svg.addEventListener("keydown", function (e) {
        var k = { ArrowLeft: [-0.1, 0], ArrowRight: [0.1, 0], ArrowUp: [0, -0.1], ArrowDown: [0, 0.1] }[e.key];
        if (k && e.target === svg) { pan(k[0], k[1]); e.preventDefault(); }
        else if (e.key === "+" || e.key === "=") { zoom(1.6); e.preventDefault(); }
        else if (e.key === "-") { zoom(1 / 1.6); e.preventDefault(); }
        else if (e.key === "0") { view = { x: 0, y: 0, w: W, h: H }; apply(); e.preventDefault(); }
      });
      svg.addEventListener("wheel", function (e) {
        var r = svg.getBoundingClientRect();
        zoom(e.deltaY < 0 ? 1.25 : 0.8, view.x + (e.clientX - r.left) / r.width * view.w, view.y + (e.clientY - r.top) / r.height * view.h);
        e.preventDefault();
      }, { passive: false });
      var drag = null;
      svg.addEventListener("pointerdown", function (e) { drag = { x: e.clientX, y: e.clientY, moved: false }; });
      svg.addEventListener("pointermove", function (e) {
        if (!drag) { return; }
        var r = svg.getBoundingClientRect();
        var dx = (e.clientX - drag.x) / r.width, dy = (e.clientY - drag.y) / r.height;
        if (Math.abs(dx) + Math.abs(dy) > 0.005) { drag.moved = true; }
        drag.x = e.clientX; drag.y = e.clientY; pan(-dx, -dy);
      });
      svg.addEventListener("pointerup", function () { setTimeout(function () { drag = null; }, 0); });
      svg.addEventListener("click", function (e) { if (drag && drag.moved) { e.preventDefault(); } }, true);
      function show(el, x, y) {
        var a = el.closest ? el.closest("[data-tip]") : null;
        if (!a || !tip) { if (tip) { tip.hidden = true; } return; }
        tip.textContent = a.getAttribute("data-tip");
        var r = box.getBoundingClientRect();
        tip.style.left = (x - r.left + 12) + "px"; tip.style.top = (y - r.top + 12) + "px"; tip.hidden = false;
      }
      svg.addEventListener("mousemove", function (e) { show(e.target, e.clientX, e.clientY); });
      svg.addEventListener("mouseleave", function () { if (tip) { tip.hidden = true; } });
      svg.addEventListener("focusin", function (e) {
        var rr = e.target.getBoundingClientRect ? e.target.getBoundingClientRect() : null;
        if (rr) { show(e.target, rr.left + rr.width / 2, rr.top + rr.height / 2); }
      });
    });
  }

  function cell(tr, text, strong) {
    var td = document.createElement("td");
    if (strong && text) { var s = document.createElement("strong"); s.textContent = text; td.appendChild(s); }
    else { td.textContent = text || "—"; }
    tr.appendChild(td);
  }

  function link(p, href, text) {
    if (!href) { return; }
    var a = document.createElement("a"); a.href = href; a.textContent = text; p.appendChild(a); p.appendChild(document.createTextNode(" "));
  }

  function live() {
    var table = document.getElementById("latest");
    if (!table || !window.EventSource) { return; }
    var body = table.querySelector("tbody"), state = document.getElementById("live-state");
    var src = new EventSource(table.getAttribute("data-live"));
    src.onopen = function () { if (state) { state.textContent = "Live: new events appear at the top."; } };
    src.onerror = function () { if (state) { state.textContent = "Reconnecting to the live events…"; } };
    src.onmessage = function (m) {
      var e;
      try { e = JSON.parse(m.data); } catch (err) { return; }
      if (!e || !e.event_id || body.querySelector('tr[data-event="' + e.event_id + '"]')) { return; }
      var tr = document.createElement("tr");
      tr.setAttribute("data-event", e.event_id);
      var threats = (e.threats || []).map(function (t) { return t.type; }).join(", ");
      tr.className = "fresh" + (threats ? " threat" : "");
      var t = new Date(e.received_at || e.occurred_at);
      cell(tr, isNaN(t) ? "" : t.toISOString().replace("T", " ").slice(0, 19));
      cell(tr, e.app && e.app.id); cell(tr, e.type); cell(tr, threats, true);
      var d = e.device || {};
      cell(tr, (d.model || "") + (d.os ? " · " + d.os + " " + (d.os_version || "") : ""));
      cell(tr, e.country);
      var td = document.createElement("td"), det = document.createElement("details"), sum = document.createElement("summary");
      sum.textContent = "Open"; det.appendChild(sum);
      var q = e.app && e.app.id ? "?app_id=" + encodeURIComponent(e.app.id) : "";
      var p = document.createElement("p"); p.className = "links";
      if (d.id) { link(p, "/timelines/device/" + encodeURIComponent(d.id) + q, "Device timeline"); }
      if (e.session && e.session.id) { link(p, "/timelines/session/" + encodeURIComponent(e.session.id) + q, "Session timeline"); }
      if (e.user && e.user.pseudonym) { link(p, "/timelines/user/" + encodeURIComponent(e.user.pseudonym) + q, "User timeline"); }
      det.appendChild(p);
      var pre = document.createElement("pre"); pre.className = "code"; pre.textContent = JSON.stringify(e, null, 2); det.appendChild(pre);
      td.appendChild(det); tr.appendChild(td);
      body.insertBefore(tr, body.firstChild);
      while (body.rows.length > 100) { body.deleteRow(body.rows.length - 1); }
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    maps(); live();
    document.querySelectorAll("[data-print]").forEach(function (b) { b.addEventListener("click", function () { window.print(); }); });
  });
})();
