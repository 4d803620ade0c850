// The report's timeline: data.timeline (reports/timeline_json.h) drawn on a
// <canvas>, one lane per thread grouped by process, with stage spans, the
// training loop's steps and data waits, and each buffer's occupancy.
// Only what is visible is drawn, and spans narrower than a pixel merge into
// one mark per pixel, so a frame costs about (pixels x rows), not spans.
// Names reach the page through fillText and textContent only.
//
// window.dlprofTimeline.init(timeline, processes, container) is called by
// report.js; state() is a read-only view for tests.
window.dlprofTimeline = (function () {
  "use strict";

  var PALETTE = ["#3f7fd9", "#2e9d5b", "#c4458f", "#8a63d2", "#b39b1d",
                 "#1aa3b3", "#d1495b", "#6b7a8f", "#7cb518", "#a0522d"];
  var STEP = ["#7a8494", "#a3abb8"], WAIT = "#e8833a", BUFFER = "#1aa3b3", EMPTY = "#c62828";
  var ROW = 14, AXIS = 22, GROUP = 18, BUF = 28, PAD = 3, MIN_US = 2;

  var T = null, procs = [];
  var items = [];       // layout, top to bottom: groups, tracks, buffers
  var contentH = 0;
  var full = [0, 1], view = [0, 1];
  var scrollY = 0;
  var canvas = null, ctx = null, dpr = 1, W = 0, H = 0, labelW = 160;
  var colors = {};
  var selected = null, hovered = null;
  // drawn: spans drawn by themselves in the last frame; merged: spans drawn
  // as part of a mark, marks: such marks (about one per pixel and row).
  var stats = { threads: 0, tracks: 0, rows: 0, spans: 0, drawn: 0, merged: 0, marks: 0, draws: 0,
                lastMs: 0, maxMs: 0, initMs: 0 };
  var pending = false;
  var $ = function (id) { return document.getElementById(id); };

  // ---------- formatting ----------
  function fmtUs(us) {
    var a = Math.abs(us);
    if (a < 1000) return us.toFixed(0) + " µs";
    if (a < 1e6) return (us / 1e3).toFixed(a < 1e4 ? 2 : a < 1e5 ? 1 : 0) + " ms";
    return (us / 1e6).toFixed(a < 1e7 ? 3 : 2) + " s";
  }
  // An axis label: as few digits as the tick step needs.
  function fmtTick(us, step) {
    var unit = step >= 1e5 ? 1e6 : step >= 100 ? 1e3 : 1, name = unit === 1e6 ? " s" : unit === 1e3 ? " ms" : " µs";
    var digits = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step / unit) - 1e-9)));
    return (us / unit).toFixed(digits) + name;
  }
  function num(n) { return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ","); }

  // ---------- data ----------
  // A track's columns become one sorted, non-overlapping run of spans per
  // row: begin/end in µs from the origin, and the name (or step number).
  function decodeTrack(tr) {
    var n = tr.t.length, nrows = 0, i;
    for (i = 0; i < tr.rows.length; i++) nrows += tr.rows[i];
    nrows = Math.max(1, nrows);
    var count = new Int32Array(nrows);
    for (i = 0; i < n; i++) count[tr.r[i]]++;
    var rows = [];
    for (i = 0; i < nrows; i++) {
      rows.push({ b: new Float64Array(count[i]), e: new Float64Array(count[i]),
                  n: new Int32Array(count[i]), len: 0 });
    }
    var at = 0;
    for (i = 0; i < n; i++) {
      at += tr.t[i];
      var row = rows[tr.r[i]], k = row.len++;
      row.b[k] = at;
      row.e[k] = at + tr.d[i];
      row.n[k] = tr.n[i];
    }
    return rows;
  }

  function decodeBuffer(b) {
    var n = b.t.length, t = new Float64Array(n), v = new Float64Array(n), at = 0, max = 0;
    for (var i = 0; i < n; i++) {
      at += b.t[i];
      t[i] = at;
      v[i] = b.v[i];
      if (v[i] > max) max = v[i];
    }
    return { t: t, v: v, top: Math.max(b.capacity || 0, max, 1) };
  }

  function procName(p) { return p.name || p.label || "process"; }

  function layout() {
    items = [];
    var y = 0, threads = {}, tracks = 0, rows = 0, spans = 0;
    (T.processes || []).forEach(function (p, pi) {
      items.push({ kind: "group", y: y, h: GROUP, label: procName(p), proc: p, band: pi % 2 });
      y += GROUP;
      (p.tracks || []).forEach(function (tr) {
        var r = decodeTrack(tr);
        var h = r.length * ROW + 2 * PAD;
        var label = tr.name;
        items.push({ kind: "track", y: y, h: h, label: label, proc: p, track: tr, rows: r,
                     band: pi % 2 });
        y += h;
        threads[p.process + ":" + tr.tid] = 1;
        tracks++;
        rows += r.length;
        spans += tr.t.length;
      });
      (p.buffers || []).forEach(function (b) {
        items.push({ kind: "buffer", y: y, h: BUF, label: b.name, proc: p, buffer: b,
                     data: decodeBuffer(b), band: pi % 2 });
        y += BUF;
      });
    });
    contentH = y;
    stats.threads = Object.keys(threads).length;
    stats.tracks = tracks;
    stats.rows = rows;
    stats.spans = spans;
  }

  // ---------- geometry ----------
  function plotW() { return Math.max(10, W - labelW); }
  function xOf(t) { return labelW + (t - view[0]) * plotW() / (view[1] - view[0]); }
  function tOf(x) { return view[0] + (x - labelW) * (view[1] - view[0]) / plotW(); }
  function viewH() { return H - AXIS; }

  // First index in a[lo, hi) with a[i] >= v (a sorted).
  function lowerBound(a, v, lo, hi) {
    while (lo < hi) {
      var mid = (lo + hi) >>> 1;
      if (a[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  function upperBound(a, v, lo, hi) {
    while (lo < hi) {
      var mid = (lo + hi) >>> 1;
      if (a[mid] <= v) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  function spanColor(item, n) {
    if (item.track.loop) return n > 0 ? STEP[n % 2] : WAIT;
    return PALETTE[n % PALETTE.length];
  }
  function spanName(item, n) {
    if (item.track.loop) return n > 0 ? "step " + n : "data wait";
    return (T.names || [])[n];
  }

  // ---------- drawing ----------
  function readColors() {
    var cs = getComputedStyle(document.documentElement);
    function v(name, dflt) { return (cs.getPropertyValue(name) || "").trim() || dflt; }
    colors = { card: v("--card", "#fff"), text: v("--text", "#1d2430"), muted: v("--muted", "#5b6473"),
               line: v("--line", "#dde1e7"), grid: v("--grid", "#e8ebef"), band: v("--row-hover", "#f0f4fb") };
  }

  // Setting fillStyle parses the colour: skip it when it is the same.
  var lastFill = "";
  function fill(c) {
    if (c !== lastFill) { ctx.fillStyle = c; lastFill = c; }
  }

  function drawRow(item, row, y) {
    var b = row.b, e = row.e, n = row.n, len = row.len;
    lastFill = "";
    var t0 = view[0], t1 = view[1];
    var k = plotW() / (t1 - t0);
    // Ends are sorted too: spans of one row never overlap.
    var i = upperBound(e, t0, 0, len);
    var h = ROW - 1;
    while (i < len && b[i] < t1) {
      var x0 = labelW + (b[i] - t0) * k, x1 = labelW + (e[i] - t0) * k;
      if (x1 - x0 >= 1) {
        var xa = Math.max(x0, labelW - 1), xb = Math.min(x1, W + 1);
        fill(spanColor(item, n[i]));
        ctx.fillRect(xa, y, Math.max(1, xb - xa - (x1 - x0 > 3 ? 0.5 : 0)), h);
        if (xb - xa > 34) {
          var name = spanName(item, n[i]) || "", chars = Math.floor((xb - xa - 6) / 6.2);
          if (chars > 0) {
            fill("#fff");
            ctx.fillText(name.length > chars ? name.slice(0, Math.max(1, chars - 1)) + "…" : name,
                         xa + 3, y + h - 3);
          }
        }
        stats.drawn++;
        i++;
        continue;
      }
      // Spans narrower than a pixel: one mark for all that begin in this
      // pixel, in the first one's colour, as wide as the last one reaches.
      var px = Math.floor(x0);
      var j = lowerBound(b, t0 + (px + 1 - labelW) / k, i + 1, len);
      if (j - 1 > i && (e[j - 1] - b[j - 1]) * k >= 1) j--;  // a wide one is drawn by itself
      var xe = Math.max(labelW + (e[j - 1] - t0) * k, px + 1);
      fill(spanColor(item, n[i]));
      ctx.fillRect(Math.max(px, labelW), y, Math.min(xe, W) - Math.max(px, labelW), h);
      stats.marks++;
      stats.merged += j - i;
      i = j;
    }
  }

  function drawBuffer(item, y) {
    var d = item.data, t = d.t, v = d.v, len = t.length;
    lastFill = "";
    if (!len) return;
    var t0 = view[0], t1 = view[1], k = plotW() / (t1 - t0);
    var h = item.h - 6, base = y + item.h - 3;
    var i = Math.max(0, upperBound(t, t0, 0, len) - 1);
    for (; i < len && t[i] < t1; i++) {
      var xa = Math.max(labelW, labelW + (t[i] - t0) * k);
      var next = i + 1 < len ? t[i + 1] : t[i];
      var xb = Math.min(W, labelW + (next - t0) * k);
      var w = Math.max(1, xb - xa);
      if (v[i] <= 0) {
        fill(EMPTY);
        ctx.fillRect(xa, base - 2, w, 2);
      } else {
        var bh = Math.max(1, h * v[i] / d.top);
        fill(BUFFER);
        ctx.fillRect(xa, base - bh, w, bh);
      }
    }
    stats.drawn++;
  }

  function niceStep(raw) {
    var mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * mag >= raw) return steps[i] * mag;
    return 10 * mag;
  }

  function drawAxis() {
    ctx.fillStyle = colors.card;
    ctx.fillRect(0, 0, W, AXIS);
    var span = view[1] - view[0];
    var step = niceStep(span / Math.max(2, Math.floor(plotW() / 110)));
    ctx.fillStyle = colors.muted;
    ctx.strokeStyle = colors.grid;
    ctx.lineWidth = 1;
    for (var t = Math.ceil(view[0] / step) * step; t <= view[1]; t += step) {
      var x = Math.round(xOf(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, AXIS - 6);
      ctx.lineTo(x, H);
      ctx.stroke();
      ctx.fillText(fmtTick(t, step), x + 3, AXIS - 8);
    }
    ctx.strokeStyle = colors.line;
    ctx.beginPath();
    ctx.moveTo(0, AXIS - 0.5);
    ctx.lineTo(W, AXIS - 0.5);
    ctx.stroke();
  }

  function label(text, x, y, maxW, color, bold) {
    ctx.fillStyle = color;
    ctx.font = (bold ? "600 " : "") + "11px system-ui, sans-serif";
    var s = String(text);
    if (ctx.measureText(s).width > maxW) {
      var lo = 0, hi = s.length;
      while (lo < hi) {
        var mid = (lo + hi + 1) >> 1;
        if (ctx.measureText(s.slice(0, mid) + "…").width <= maxW) lo = mid; else hi = mid - 1;
      }
      s = s.slice(0, lo) + "…";
    }
    ctx.fillText(s, x, y);
  }

  function draw() {
    pending = false;
    if (!ctx) return 0;
    var start = performance.now();
    stats.drawn = 0;
    stats.merged = 0;
    stats.marks = 0;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.font = "11px system-ui, sans-serif";
    ctx.fillStyle = colors.card;
    ctx.fillRect(0, 0, W, H);
    drawAxis();
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, AXIS, W, H - AXIS);
    ctx.clip();
    var top = scrollY, bottom = scrollY + viewH();
    var i, it, y;
    for (i = 0; i < items.length; i++) {
      it = items[i];
      if (it.y + it.h < top || it.y > bottom) continue;
      y = AXIS + it.y - scrollY;
      if (it.band) {
        ctx.fillStyle = colors.band;
        ctx.fillRect(0, y, W, it.h);
      }
      if (it.kind === "track") {
        ctx.font = "10px system-ui, sans-serif";
        for (var r = 0; r < it.rows.length; r++) {
          var ry = y + PAD + r * ROW;
          if (ry + ROW < AXIS || ry > H) continue;
          drawRow(it, it.rows[r], ry);
        }
      } else if (it.kind === "buffer") {
        drawBuffer(it, y);
      }
      ctx.strokeStyle = colors.grid;
      ctx.beginPath();
      ctx.moveTo(0, y + it.h - 0.5);
      ctx.lineTo(W, y + it.h - 0.5);
      ctx.stroke();
    }
    if (selected) outline(selected);
    // Labels over a plain column, so spans that start before the view stop at it.
    ctx.fillStyle = colors.card;
    ctx.fillRect(0, AXIS, labelW - 1, H - AXIS);
    for (i = 0; i < items.length; i++) {
      it = items[i];
      if (it.y + it.h < top || it.y > bottom) continue;
      y = AXIS + it.y - scrollY;
      if (it.band) {
        ctx.fillStyle = colors.band;
        ctx.fillRect(0, y, labelW - 1, it.h);
      }
      if (it.kind === "group") label(it.label, 4, y + 13, W - 8, colors.text, true);
      else label(it.label, 12, y + Math.min(it.h - 4, 13), labelW - 18, colors.muted, false);
    }
    ctx.strokeStyle = colors.line;
    ctx.beginPath();
    ctx.moveTo(labelW - 0.5, AXIS);
    ctx.lineTo(labelW - 0.5, H);
    ctx.stroke();
    // Where the lanes shown sit among all of them.
    if (contentH > viewH()) {
      var bar = Math.max(16, viewH() * viewH() / contentH);
      ctx.fillStyle = colors.muted;
      ctx.globalAlpha = 0.5;
      ctx.fillRect(W - 4, AXIS + (viewH() - bar) * scrollY / (contentH - viewH()), 3, bar);
      ctx.globalAlpha = 1;
    }
    ctx.restore();
    var ms = performance.now() - start;
    stats.draws++;
    stats.lastMs = ms;
    stats.maxMs = Math.max(stats.maxMs, ms);
    return ms;
  }

  function outline(hit) {
    var it = hit.item;
    var y = AXIS + it.y - scrollY + PAD + hit.row * ROW;
    var x0 = Math.max(labelW, xOf(hit.b)), x1 = Math.min(W, xOf(hit.e));
    ctx.strokeStyle = colors.text;
    ctx.lineWidth = 2;
    ctx.strokeRect(x0 - 1, y - 1, Math.max(2, x1 - x0) + 2, ROW + 1);
    ctx.lineWidth = 1;
  }

  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(draw);
  }

  // ---------- view changes ----------
  function setView(t0, t1) {
    var span = Math.max(MIN_US, Math.min(t1 - t0, full[1] - full[0]));
    if (t0 < full[0]) t0 = full[0];
    if (t0 + span > full[1]) t0 = full[1] - span;
    view = [t0, t0 + span];
    status();
    redraw();
  }
  function zoomAt(factor, x) {
    var at = x === undefined ? (view[0] + view[1]) / 2 : tOf(x);
    setView(at - (at - view[0]) / factor, at + (view[1] - at) / factor);
  }
  function pan(dt) { setView(view[0] + dt, view[1] + dt); }
  function scrollBy(dy) {
    scrollY = Math.max(0, Math.min(Math.max(0, contentH - viewH()), scrollY + dy));
    redraw();
  }

  // ---------- hit testing and details ----------
  function hitAt(x, y) {
    var cy = y - AXIS + scrollY;
    if (y < AXIS || x < labelW) return null;
    for (var i = 0; i < items.length; i++) {
      var it = items[i];
      if (cy < it.y || cy >= it.y + it.h) continue;
      if (it.kind === "buffer") {
        var d = it.data, t = tOf(x), k = upperBound(d.t, t, 0, d.t.length) - 1;
        return k >= 0 ? { item: it, kind: "buffer", at: d.t[k], v: d.v[k] } : null;
      }
      if (it.kind !== "track") return null;
      var r = Math.floor((cy - it.y - PAD) / ROW);
      if (r < 0 || r >= it.rows.length) return null;
      var row = it.rows[r], tol = 3 * (view[1] - view[0]) / plotW(), tx = tOf(x);
      // The span under x, else the nearest within 3 px.
      var j = upperBound(row.e, tx - tol, 0, row.len), best = -1, bestD = Infinity;
      for (; j < row.len && row.b[j] <= tx + tol; j++) {
        var dist = tx < row.b[j] ? row.b[j] - tx : tx > row.e[j] ? tx - row.e[j] : 0;
        if (dist < bestD) { bestD = dist; best = j; }
        if (dist === 0) break;
      }
      if (best < 0) return null;
      return { item: it, kind: "span", row: r, b: row.b[best], e: row.e[best], n: row.n[best] };
    }
    return null;
  }

  function describe(hit) {
    if (!hit) return "";
    var it = hit.item;
    if (hit.kind === "buffer") {
      var cap = it.buffer.capacity ? " of " + it.buffer.capacity : "";
      return it.label + ": " + num(hit.v) + cap + " at " + fmtUs(hit.at) + " — " + procName(it.proc);
    }
    var what = it.track.loop ? spanName(it, hit.n) : "stage " + spanName(it, hit.n);
    var src = it.track.loop ? "" : it.track.source === "events" ? ", from enter/exit events"
                                                               : ", from samples";
    return what + " — " + procName(it.proc) + ", " + it.track.name + " — start " + fmtUs(hit.b) +
           ", duration " + fmtUs(hit.e - hit.b) + src;
  }

  function showDetail() {
    var d = $("tl-detail");
    if (d) d.textContent = describe(hovered || selected) || (selected ? "" : "Hover or click a span.");
  }

  function status() {
    var s = $("tl-status");
    if (!s) return;
    var parts = [num(stats.spans) + " spans in " + stats.threads + " thread" +
                 (stats.threads === 1 ? "" : "s") + " of " + (T.processes || []).length + " process" +
                 ((T.processes || []).length === 1 ? "" : "es"),
                 "showing " + fmtUs(view[0]) + " to " + fmtUs(view[1])];
    if (T.spans_total > T.spans) {
      parts.push("the timeline keeps the longest " + num(T.spans) + " of " + num(T.spans_total) +
                 " spans; the shorter ones are in trace.json");
    }
    if (T.short_spans_left_out > 0) {
      parts.push(num(T.short_spans_left_out) + " short spans derived from samples were left out " +
                 "of both (threads with more than 50,000)");
    }
    s.textContent = parts.join("; ") + ".";
  }

  // ---------- events ----------
  function size() {
    var box = canvas.parentNode;
    W = Math.max(200, Math.floor(box.clientWidth || 800));
    labelW = Math.round(Math.min(220, Math.max(90, W * 0.22)));
    H = Math.round(Math.min(AXIS + contentH + 1, Math.max(220, Math.min(620, 0.7 * (window.innerHeight || 800)))));
    dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(H * dpr);
    canvas.style.width = W + "px";
    canvas.style.height = H + "px";
    ctx = canvas.getContext("2d");
    scrollBy(0);
  }

  function local(e) {
    var r = canvas.getBoundingClientRect();
    return { x: e.clientX - r.left, y: e.clientY - r.top };
  }

  function listen() {
    canvas.addEventListener("wheel", function (e) {
      e.preventDefault();
      var p = local(e);
      if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
        pan((e.deltaX || e.deltaY) * (view[1] - view[0]) / plotW());
      } else {
        zoomAt(Math.pow(1.0015, -e.deltaY * (e.deltaMode === 1 ? 30 : 1)), Math.max(labelW, p.x));
      }
    }, { passive: false });
    var drag = null;
    canvas.addEventListener("pointerdown", function (e) {
      var p = local(e);
      drag = { x: p.x, y: p.y, moved: false, id: e.pointerId };
      canvas.focus({ preventScroll: true });
    });
    canvas.addEventListener("pointermove", function (e) {
      var p = local(e);
      if (drag && e.buttons) {
        var dx = p.x - drag.x, dy = p.y - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 2 || drag.moved) {
          if (!drag.moved) { try { canvas.setPointerCapture(drag.id); } catch (err) { /* gone */ } }
          drag.moved = true;
          pan(-dx * (view[1] - view[0]) / plotW());
          scrollBy(-dy);
          drag.x = p.x;
          drag.y = p.y;
        }
        return;
      }
      hovered = hitAt(p.x, p.y);
      canvas.style.cursor = hovered ? "pointer" : "grab";
      showDetail();
    });
    canvas.addEventListener("pointerup", function (e) {
      var p = local(e);
      if (drag && !drag.moved) {
        selected = hitAt(p.x, p.y);
        showDetail();
        redraw();
      }
      drag = null;
    });
    canvas.addEventListener("pointercancel", function () { drag = null; });
    canvas.addEventListener("pointerleave", function () { hovered = null; showDetail(); });
    canvas.addEventListener("keydown", function (e) {
      var w = view[1] - view[0], handled = true;
      switch (e.key) {
        case "ArrowLeft": case "a": case "A": pan(-0.15 * w); break;
        case "ArrowRight": case "d": case "D": pan(0.15 * w); break;
        case "ArrowUp": scrollBy(-3 * ROW); break;
        case "ArrowDown": scrollBy(3 * ROW); break;
        case "+": case "=": case "w": case "W": zoomAt(1.5); break;
        case "-": case "s": case "S": zoomAt(1 / 1.5); break;
        case "0": case "Home": setView(full[0], full[1]); break;
        default: handled = false;
      }
      if (handled) e.preventDefault();
    });
    var zin = $("tl-zoom-in"), zout = $("tl-zoom-out"), reset = $("tl-reset");
    if (zin) zin.addEventListener("click", function () { zoomAt(2); });
    if (zout) zout.addEventListener("click", function () { zoomAt(0.5); });
    if (reset) reset.addEventListener("click", function () { setView(full[0], full[1]); });
  }

  // Which colour is which: the stages (names as text), steps, waits, buffers.
  function legend(box) {
    var ul = document.createElement("ul");
    ul.className = "legend";
    ul.id = "tl-legend";
    function item(color, text) {
      var li = document.createElement("li"), sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.background = color;
      li.appendChild(sw);
      li.appendChild(document.createTextNode(text));
      ul.appendChild(li);
    }
    (T.names || []).forEach(function (nm, i) {
      if (i < 40) item(PALETTE[i % PALETTE.length], nm === "" ? "(no stage)" : nm);
    });
    var loop = false, buffers = false;
    (T.processes || []).forEach(function (p) {
      (p.tracks || []).forEach(function (tr) { loop = loop || tr.loop; });
      buffers = buffers || (p.buffers || []).length > 0;
    });
    if (loop) {
      item(STEP[0], "step");
      item(WAIT, "data wait");
    }
    if (buffers) {
      item(BUFFER, "buffer occupancy");
      item(EMPTY, "buffer empty");
    }
    box.parentNode.insertBefore(ul, box.nextSibling);
  }

  function init(timeline, processes, box) {
    var start = performance.now();
    T = timeline;
    procs = processes || [];
    if (!T || !(T.processes || []).length || !box) {
      if (box) {
        var p = document.createElement("p");
        p.className = "empty-note";
        p.textContent = "No threads were recorded.";
        box.appendChild(p);
      }
      return;
    }
    layout();
    full = [0, Math.max(T.end_us || 0, MIN_US)];
    view = full.slice();
    canvas = document.createElement("canvas");
    canvas.id = "tl-canvas";
    canvas.tabIndex = 0;
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", "Timeline of every thread: stage spans, steps, data waits " +
                        "and buffer occupancy. Wheel or +/- zooms, drag or arrow keys pan.");
    box.appendChild(canvas);
    readColors();
    size();
    listen();
    legend(box);
    status();
    showDetail();
    draw();
    stats.initMs = performance.now() - start;
  }

  return {
    init: init,
    resize: function () { if (canvas) { size(); draw(); } },
    // For tests and the curious: a copy of the state, and a synchronous draw.
    state: function () {
      return { threads: stats.threads, tracks: stats.tracks, rows: stats.rows, spans: stats.spans,
               drawn: stats.drawn, merged: stats.merged, marks: stats.marks, draws: stats.draws, lastMs: stats.lastMs,
               maxMs: stats.maxMs, initMs: stats.initMs, view: view.slice(), full: full.slice(),
               width: W, height: H, labelWidth: labelW, contentHeight: contentH,
               detail: describe(hovered || selected),
               // The lanes as drawn: y from the canvas top (negative above it).
               lanes: items.map(function (it) {
                 return { kind: it.kind, label: it.label, y: AXIS + it.y - scrollY, h: it.h,
                          spans: it.track ? it.track.t.length : 0 };
               }) };
    },
    drawNow: function () { return draw(); },
    zoom: function (factor) { zoomAt(factor); },
    pan: function (dt) { pan(dt); }
  };
})();
