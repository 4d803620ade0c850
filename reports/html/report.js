// Draws report.html from the JSON in #dlprof-data. Every name in that data
// comes from the profiled program, so it only ever reaches the page through
// textContent or setAttribute, never as markup.
//
// State in the URL fragment, read at load and kept up to date:
//   #view=cpu&search=Burn&stage=compute&role=worker&pid=1234
// When the page is drawn without error, <html data-dlprof-ready="1">; on an
// error, data-dlprof-error holds its message (the end-to-end test reads both).
(function () {
  "use strict";

  var root = document.documentElement;
  var SVGNS = "http://www.w3.org/2000/svg";

  function fail(err) {
    var msg = String((err && err.stack) || err);
    root.setAttribute("data-dlprof-error", msg);
    var box = document.getElementById("fatal");
    if (box) {
      box.hidden = false;
      box.textContent = "The report could not be drawn: " + msg;
    }
  }
  window.addEventListener("error", function (e) { fail(e.error || e.message); });

  // ---------- small DOM helpers (text only) ----------
  function el(tag, attrs) {
    var e = document.createElement(tag);
    setAttrs(e, attrs);
    for (var i = 2; i < arguments.length; i++) append(e, arguments[i]);
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    setAttrs(e, attrs);
    for (var i = 2; i < arguments.length; i++) append(e, arguments[i]);
    return e;
  }
  function setAttrs(e, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k === "text") e.textContent = String(v);
      else if (k === "className") e.setAttribute("class", v);
      else e.setAttribute(k, String(v));
    });
  }
  function append(parent, child) {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(parent, c); }); return; }
    parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  function $(id) { return document.getElementById(id); }

  // ---------- number formatting ----------
  function pct(f, digits) {
    if (!isFinite(f)) return "–";
    return (100 * f).toFixed(digits === undefined ? 0 : digits) + "%";
  }
  function secs(s) {
    if (!isFinite(s)) return "–";
    var a = Math.abs(s);
    if (a === 0) return "0";
    if (a < 1e-3) return (s * 1e6).toFixed(0) + " µs";
    if (a < 1) return (s * 1e3).toFixed(a < 0.01 ? 2 : a < 0.1 ? 1 : 0) + " ms";
    if (a < 100) return s.toFixed(2) + " s";
    return s.toFixed(0) + " s";
  }
  function num(n) {
    if (!isFinite(n)) return "–";
    return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }
  function fixed(n, d) { return isFinite(n) ? n.toFixed(d) : "–"; }

  var PALETTE = ["#3f7fd9", "#e8833a", "#2e9d5b", "#c4458f", "#8a63d2", "#b39b1d",
                 "#1aa3b3", "#d1495b", "#6b7a8f", "#7cb518"];

  // ---------- data ----------
  var data = JSON.parse($("dlprof-data").textContent);
  var procs = data.processes || [];
  function procLabel(i) {
    var p = procs[i];
    if (!p) return "process " + i;
    var who = p.role === "worker" ? (p.worker >= 0 ? "worker " + p.worker : "worker") : p.role;
    return who + " (pid " + p.pid + (p.host ? " @" + p.host : "") + ")";
  }
  function mainProcess() {
    for (var i = 0; i < procs.length; i++) if (procs[i].role === "main") return procs[i];
    return procs[0];
  }

  // ---------- header ----------
  function renderHeader() {
    var m = mainProcess();
    var parts = [];
    if (m && m.command) parts.push(m.command);
    parts.push(secs(data.duration_s || 0) + " profiled");
    // Workers at a time, as the advice counts them: a DataLoader without
    // persistent_workers starts new worker processes every epoch.
    var wk = data.workers || {};
    var workerProcs = procs.filter(function (p) { return p.role === "worker"; }).length;
    var workers = typeof wk.concurrent === "number" ? wk.concurrent : workerProcs;
    var over = workerProcs > workers ? ", " + workerProcs + " worker processes over the run" : "";
    parts.push(procs.length + " process" + (procs.length === 1 ? "" : "es") +
               (workers ? " (" + workers + " worker" + (workers === 1 ? "" : "s") + over + ")" : ""));
    if (m && m.hz) parts.push(m.hz + " Hz" + (m.mode ? ", " + m.mode + " mode" : ""));
    $("subtitle").textContent = parts.join(" · ");
    if (m && m.command) document.title = "dlprof: " + m.command;
  }

  // ---------- verdict ----------
  function renderVerdict() {
    var v = data.verdict || {};
    var s = data.steps || {};
    var sev = v.basis === "none" ? "unknown" : (v.severity || "none");
    var card = $("verdict");
    card.classList.add("sev-" + sev);
    var body = clear($("verdict-body"));

    var headline;
    if (v.basis === "none") {
      headline = "Cannot tell whether training waits for data";
    } else if (v.input_bound) {
      headline = "Training is input-bound: it waits for data " + pct(v.data_wait_fraction) +
                 (v.basis === "buffers" ? " of the time" : " of its step time");
    } else {
      headline = "Training is not input-bound: it waits for data only " +
                 pct(v.data_wait_fraction) +
                 (v.basis === "buffers" ? " of the time" : " of its step time");
    }
    body.appendChild(el("p", { className: "headline", id: "verdict-headline" }, headline,
                        el("span", { className: "badge sev-" + sev, id: "verdict-severity",
                                     text: sev === "unknown" ? "no markers" : sev })));
    if (v.bottleneck_stage) {
      var kind = v.bottleneck_kind === "io" ? "I/O-bound (off-CPU, waiting)"
                 : v.cpu_saturated ? "compute-bound, starved of cores (CPU saturated)"
                                   : "compute-bound (on-CPU)";
      var where = v.bottleneck_role === "worker" ? "in the worker processes"
                                                 : "in the training process";
      body.appendChild(el("p", { className: "bottleneck", id: "verdict-bottleneck" },
                          "Bottleneck: stage ", el("strong", { text: v.bottleneck_stage }),
                          ", " + kind + ", " + where + "."));
    } else if (v.input_bound && v.loop_receive_fraction >= 0.5) {
      body.appendChild(el("p", { className: "bottleneck", id: "verdict-bottleneck" },
                          "Bottleneck: ", el("strong", { text: "the training loop's own receive work" }),
                          ", compute-bound, in the training process (" +
                          pct(v.loop_receive_fraction) + " of its waits on its own CPU)."));
    } else if (v.input_bound && v.bottleneck_role === "worker") {
      var first = (v.bottleneck_functions || [])[0];
      body.appendChild(el("p", { className: "bottleneck", id: "verdict-bottleneck" },
                          "Bottleneck: ", el("strong", { text: "the workers' own work" }),
                          " (no stage marked), compute-bound, in the worker processes" +
                          (first ? ": " + first.name + " first." : ".")));
    }

    var stats = el("ul", { className: "stats" });
    function stat(value, key) {
      stats.appendChild(el("li", { className: "stat" }, el("span", { className: "v", text: value }),
                           el("span", { className: "k", text: key })));
    }
    if (v.basis !== "none") {
      stat(pct(v.data_wait_fraction), v.basis === "buffers" ? "of the time the consumer's buffer was empty"
                                                             : "of step time waiting for data");
    }
    if (s.count > 0) {
      stat(secs(s.median_s), "median step (" + num(s.count) + " steps)");
      stat(secs(s.data_wait_median_s), "median data wait per step");
      stat(secs(s.p90_s), "p90 step");
    }
    var st = (data.stages || []).filter(function (x) { return x.name === v.bottleneck_stage; })[0];
    if (st) stat(pct(st.offcpu_fraction), "of '" + st.name + "' off-CPU");
    if (st && st.cpu_wait_fraction > 0.005) stat(pct(st.cpu_wait_fraction), "of '" + st.name + "' waiting for a core");
    var c = v.contention;
    if (v.cpu_saturated && c) {
      stat(fixed(c.runnable_threads, 1) + " / " + c.cores, "runnable threads / cores (CPU saturated " +
           pct(c.saturated_fraction) + " of the time)");
    }
    if (v.slowest_worker >= 0 && v.worker_imbalance > 0) {
      stat(fixed(v.worker_imbalance, 2) + "×", "worker imbalance (slowest: worker " +
           v.slowest_worker + ")");
    }
    if (stats.children.length) body.appendChild(stats);

    var cols = el("div", { className: "cols" });
    var ev = el("div", null, el("h3", { text: "Evidence" }));
    var evList = el("ul", { id: "verdict-evidence" });
    (v.evidence || []).forEach(function (t) { evList.appendChild(el("li", { text: t })); });
    if (!(v.evidence || []).length) evList.appendChild(el("li", { text: "None recorded." }));
    ev.appendChild(evList);
    var ad = el("div", null, el("h3", { text: "What would help" }));
    var adList = el("ol", { id: "verdict-advice" });
    (v.advice || []).forEach(function (t) { adList.appendChild(el("li", { text: t })); });
    if (!(v.advice || []).length) adList.appendChild(el("li", { text: "No advice: see the evidence." }));
    ad.appendChild(adList);
    cols.appendChild(ev);
    cols.appendChild(ad);
    body.appendChild(cols);
    var basis = { steps: "Judged from the step and data-wait markers of the training loop.",
                  buffers: "No step markers: judged from the occupancy of the training loop's buffer.",
                  none: "No step markers and no buffers were recorded." }[v.basis];
    if (basis) body.appendChild(el("p", { className: "muted", text: basis }));
  }

  // ---------- axis helpers ----------
  function niceTicks(max, count) {
    if (!(max > 0)) return [0];
    var raw = max / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; })
                                 .filter(function (x) { return x >= raw; })[0] || raw;
    var ticks = [];
    // Multiples, not sums, of the step: 10 × 0.1 is 1, not 0.9999999.
    for (var i = 0; i * step <= max * 1.0001; i++) ticks.push(+(i * step).toPrecision(12));
    if (ticks[ticks.length - 1] < max) ticks.push(+(ticks.length * step).toPrecision(12));
    return ticks;
  }
  function chartWidth(container) {
    return Math.max(280, Math.floor(container.clientWidth || container.getBoundingClientRect().width || 800));
  }

  // ---------- steps ----------
  function renderSteps() {
    var s = data.steps || {};
    var box = clear($("steps-chart"));
    var steps = s.step_s || [], waits = s.wait_s || [];
    if (!steps.length) {
      $("steps-summary").textContent = "";
      box.appendChild(el("p", { className: "empty-note",
        text: "No steps recorded: mark the training loop with dlprof_step_begin/end and its " +
              "waits for data with dlprof_wait_begin/end (or dlprof::StepScope / WaitScope)." }));
      return;
    }
    var sum = num(s.count) + " steps";
    if (s.warmup_dropped) sum += " (" + s.warmup_dropped + " warm-up dropped)";
    sum += ": median " + secs(s.median_s) + ", p90 " + secs(s.p90_s) + ", p99 " + secs(s.p99_s) +
           ". Waiting for data: median " + secs(s.data_wait_median_s) + ", p90 " +
           secs(s.data_wait_p90_s) + ", " + pct(s.data_wait_fraction) + " of step time.";
    if (s.baseline_count > 0) {
      sum += " Unprofiled baseline: median " + secs(s.baseline_median_s) + " over " +
             s.baseline_count + " steps.";
    }
    if (s.steps_per_bar > 1) sum += " Each bar is the mean of " + s.steps_per_bar + " steps.";
    $("steps-summary").textContent = sum;

    var W = chartWidth(box), H = 220, L = 64, R = 10, T = 10, B = 30;
    var max = 0;
    steps.forEach(function (x) { if (x > max) max = x; });
    var ticks = niceTicks(max, 4), top = ticks[ticks.length - 1] || 1;
    var y = function (v) { return T + (H - T - B) * (1 - v / top); };
    var bw = (W - L - R) / steps.length;
    var g = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img",
                         "aria-label": "Step time per step, split into data wait and compute" });
    var axis = svg("g", { className: "axis" });
    ticks.forEach(function (t) {
      axis.appendChild(svg("line", { x1: L, x2: W - R, y1: y(t), y2: y(t) }));
      axis.appendChild(svg("text", { x: L - 6, y: y(t) + 4, "text-anchor": "end", text: secs(t) }));
    });
    var every = Math.max(1, Math.ceil(steps.length / Math.max(1, Math.floor((W - L - R) / 50))));
    for (var i = 0; i < steps.length; i += every) {
      axis.appendChild(svg("text", { x: L + bw * (i + 0.5), y: H - B + 16, "text-anchor": "middle",
                                     text: String(i * (s.steps_per_bar || 1) + 1) }));
    }
    axis.appendChild(svg("text", { x: W - R, y: H - 2, "text-anchor": "end", text: "step" }));
    g.appendChild(axis);
    var bars = svg("g", { id: "steps-bars" });
    var gap = bw > 4 ? 1 : 0;
    steps.forEach(function (st, i) {
      var w = Math.min(waits[i] || 0, st), c = st - w;
      var x = L + bw * i + gap / 2, width = Math.max(0.5, bw - gap);
      var bar = svg("g", { className: "step-bar" });
      bar.appendChild(svg("title", { text: "step " + (i * (s.steps_per_bar || 1) + 1) + ": " +
        secs(st) + " = wait " + secs(w) + " (" + pct(st > 0 ? w / st : 0) + ") + compute " + secs(c) }));
      bar.appendChild(svg("rect", { x: x, width: width, y: y(w), height: Math.max(0, y(0) - y(w)),
                                    className: "wait-rect" }));
      bar.appendChild(svg("rect", { x: x, width: width, y: y(st), height: Math.max(0, y(w) - y(st)),
                                    className: "compute-rect" }));
      bars.appendChild(bar);
    });
    g.appendChild(bars);
    box.appendChild(g);
    box.appendChild(el("ul", { className: "legend" },
      el("li", null, el("span", { className: "swatch", style: "background:var(--wait)" }), "waiting for data"),
      el("li", null, el("span", { className: "swatch", style: "background:var(--compute)" }), "compute (rest of the step)")));
  }

  // ---------- buffers ----------
  function renderBuffers() {
    var bufs = data.buffers || [];
    var box = clear($("buffers-chart"));
    var tbox = clear($("buffers-table"));
    if (!bufs.length) {
      box.appendChild(el("p", { className: "empty-note",
        text: "No buffers recorded: dlprof_buffer_create / dlprof::Buffer report a queue's size." }));
      return;
    }
    // Small multiples: one row per buffer on a shared time axis, each filled
    // to its share of capacity, so that empty and full stretches stand out.
    var MAX_ROWS = 24;
    var shown = bufs.slice(0, MAX_ROWS);
    var W = chartWidth(box), L = 10, R = 10, LABEL = 16, ROW = 40, GAP = 8, B = 24;
    var H = shown.length * (LABEL + ROW + GAP) + B;
    var tmax = data.duration_s || 0;
    shown.forEach(function (b) {
      var p = b.points || [];
      if (p.length) tmax = Math.max(tmax, p[p.length - 2]);
    });
    if (!(tmax > 0)) tmax = 1;
    var x = function (t) { return L + (W - L - R) * Math.max(0, t) / tmax; };
    var g = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img",
                         "aria-label": "Buffer occupancy over time, as a share of capacity" });
    var axis = svg("g", { className: "axis" });
    niceTicks(tmax, Math.max(2, Math.floor((W - L - R) / 90))).forEach(function (t) {
      if (t > tmax * 1.0001) return;
      axis.appendChild(svg("line", { x1: x(t), x2: x(t), y1: 0, y2: H - B }));
      var anchor = t === 0 ? "start" : x(t) > W - R - 30 ? "end" : "middle";
      axis.appendChild(svg("text", { x: x(t), y: H - B + 16, "text-anchor": anchor, text: secs(t) }));
    });
    g.appendChild(axis);
    shown.forEach(function (b, i) {
      var color = PALETTE[i % PALETTE.length];
      var p = b.points || [];
      var cap = b.capacity;
      if (!(cap > 0)) { cap = 0; for (var k = 1; k < p.length; k += 2) cap = Math.max(cap, p[k]); cap = cap || 1; }
      var top = i * (LABEL + ROW + GAP) + LABEL, bottom = top + ROW;
      var y = function (v) { return bottom - ROW * Math.min(1, v / cap); };
      var row = svg("g", { className: "buffer-row", "data-name": b.name });
      // As much of the label as fits the row (the table below has it all).
      var parts = [b.name, procLabel(b.process), "capacity " + b.capacity,
                   "mean " + pct(b.mean_occupancy || 0) + ", empty " + pct(b.empty_fraction || 0) +
                   ", full " + pct(b.full_fraction || 0)];
      var label = parts[0], fits = Math.floor((W - L - R) / 6.8);
      for (var q = 1; q < parts.length && label.length + 3 + parts[q].length <= fits; q++) {
        label += " · " + parts[q];
      }
      if (label.length > fits) label = label.slice(0, Math.max(1, fits - 1)) + "…";
      row.appendChild(svg("text", { x: L, y: top - 4, className: "row-label", text: label }));
      row.appendChild(svg("rect", { x: L, y: top, width: W - L - R, height: ROW, className: "row-bg" }));
      var d = "", px0 = null;
      for (var j = 0; j < p.length; j += 2) {
        var px = x(p[j]).toFixed(1), py = y(p[j + 1]).toFixed(1);
        // Sizes hold until the next snapshot: steps, not slopes.
        if (j === 0) { d = "M" + px + " " + bottom + "V" + py; px0 = px; }
        else d += "H" + px + "V" + py;
      }
      if (px0 !== null) {
        d += "H" + x(tmax).toFixed(1);
        row.appendChild(svg("path", { d: d + "V" + bottom + "Z", fill: color, "fill-opacity": 0.3, stroke: "none" }));
        row.appendChild(svg("path", { d: d, fill: "none", stroke: color, "stroke-width": 1.4, className: "buffer-line" },
                            svg("title", { text: b.name + " · " + procLabel(b.process) + " (capacity " + b.capacity + ")" })));
      }
      g.appendChild(row);
    });
    box.appendChild(g);
    if (bufs.length > shown.length) {
      box.appendChild(el("p", { className: "muted", text: (bufs.length - shown.length) + " more buffers in the table below." }));
    }
    tbox.appendChild(table([
      { h: "Buffer", cls: "name", v: function (b) { return b.name; } },
      { h: "Process", v: function (b) { return procLabel(b.process); } },
      { h: "Capacity", num: true, v: function (b) { return b.capacity; }, f: num },
      { h: "Mean occupancy", num: true, v: function (b) { return b.mean_occupancy; }, f: pct },
      { h: "Empty", num: true, v: function (b) { return b.empty_fraction; }, f: pct },
      { h: "Full", num: true, v: function (b) { return b.full_fraction; }, f: pct },
      { h: "Snapshots", num: true, v: function (b) { return b.snapshots; }, f: num }
    ], bufs, "buffers"));
  }

  // ---------- tables ----------
  // cols: {h: header, v: row -> sort value, f: value -> text, num, cls, cell: row -> node, bar: row -> 0..1}
  function table(cols, rows, id, opts) {
    opts = opts || {};
    var t = el("table", { id: id + "-tbl" });
    var thead = el("thead"), hr = el("tr");
    var tbody = el("tbody");
    var sortCol = -1, asc = false;
    cols.forEach(function (c, i) {
      var th = el("th", { className: c.num ? "num" : null, scope: "col", text: c.h, title: c.title });
      th.addEventListener("click", function () {
        asc = sortCol === i ? !asc : !c.num;
        sortCol = i;
        Array.prototype.forEach.call(hr.children, function (x) { x.classList.remove("sorted", "asc"); });
        th.classList.add("sorted");
        if (asc) th.classList.add("asc");
        fill();
      });
      hr.appendChild(th);
    });
    thead.appendChild(hr);
    function fill() {
      clear(tbody);
      var sorted = rows.slice();
      if (sortCol >= 0) {
        var c = cols[sortCol];
        sorted.sort(function (a, b) {
          var x = c.v(a), y = c.v(b);
          var r = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
          return asc ? r : -r;
        });
      }
      sorted.forEach(function (r) {
        var tr = el("tr", { className: opts.hot && opts.hot(r) ? "hot" : null });
        cols.forEach(function (c) {
          var td = el("td", { className: [c.num ? "num" : "", c.cls || "", c.bar ? "bar-cell" : ""].join(" ").trim() || null });
          if (c.bar) {
            var b = el("span", { className: "bar" });
            b.style.width = (100 * Math.max(0, Math.min(1, c.bar(r)))).toFixed(1) + "%";
            td.appendChild(b);
          }
          if (c.cell) append(td, c.cell(r));
          else td.appendChild(document.createTextNode((c.f || String)(c.v(r))));
          tr.appendChild(td);
        });
        tbody.appendChild(tr);
      });
    }
    fill();
    t.appendChild(thead);
    t.appendChild(tbody);
    return t;
  }

  function pidsLabel(pids) {
    pids = pids || [];
    if (pids.length <= 4) return pids.join(", ");
    return pids.slice(0, 3).join(", ") + " +" + (pids.length - 3) + " more";
  }

  function renderStages() {
    var box = clear($("stages-table"));
    var stages = data.stages || [];
    if (!stages.length) {
      box.appendChild(el("p", { className: "empty-note",
        text: "No stages recorded: mark pipeline stages with dlprof_stage_enter/exit or DLPROF_STAGE(\"name\")." }));
      return;
    }
    var maxWall = 0;
    stages.forEach(function (s) { maxWall = Math.max(maxWall, s.self_wall_s > 0 ? s.self_wall_s : s.self_cpu_s); });
    var bottleneck = (data.verdict || {}).bottleneck_stage;
    var hasWall = stages.some(function (s) { return s.self_wall_s > 0 || s.total_wall_s > 0; });
    var dash = function () { return "–"; };
    box.appendChild(table([
      { h: "Stage", cls: "name", v: function (s) { return s.name; },
        cell: function (s) {
          var b = el("button", { type: "button", className: "linklike stage-link", text: s.name,
                                 title: "Show this stage in the flame graph" });
          // A stage blocked most of its time shows where it blocked: the
          // wall view's off-CPU stacks (its CPU samples are few or none).
          b.addEventListener("click", function () {
            flame.setStage(s.name, true, s.offcpu_fraction >= 0.5 ? "wall" : "");
          });
          return b;
        } },
      { h: "Role", v: function (s) { return s.role || ""; } },
      { h: "Kind", v: function (s) { return s.data_stage ? "data" : "model"; },
        title: "data: feeds the training loop; model: the training loop's own work" },
      { h: "Processes", v: function (s) { return (s.pids || []).length; },
        f: null, cell: function (s) { return pidsLabel(s.pids); } },
      // CPU-only inputs (gperftools, pprof) have no wall clock: "–", not 0.
      { h: "Self wall", num: true, v: function (s) { return s.self_wall_s; }, f: hasWall ? secs : dash,
        bar: function (s) { return maxWall > 0 ? (s.self_wall_s > 0 ? s.self_wall_s : s.self_cpu_s) / maxWall : 0; } },
      { h: "Self CPU", num: true, v: function (s) { return s.self_cpu_s; }, f: secs },
      { h: "Total wall", num: true, v: function (s) { return s.total_wall_s; }, f: hasWall ? secs : dash },
      { h: "Total CPU", num: true, v: function (s) { return s.total_cpu_s; }, f: secs },
      // Three states: running, runnable but waiting for a core, blocked.
      { h: "On-CPU", num: true, v: function (s) { return Math.max(0, 1 - s.offcpu_fraction - (s.cpu_wait_fraction || 0)); },
        f: hasWall ? pct : dash, title: "running" },
      { h: "Waiting for a core", num: true, v: function (s) { return s.cpu_wait_fraction || 0; },
        f: hasWall ? pct : dash, title: "runnable, but every core it may use was busy" },
      { h: "Off-CPU", num: true, v: function (s) { return s.offcpu_fraction; }, f: hasWall ? pct : dash,
        title: "blocked: I/O, sleep, a lock" },
      { h: "Mostly blocked in", v: function (s) { return s.top_blocking_call || ""; },
        f: function (c) { return c ? c + "()" : ""; } },
      { h: "Self samples", num: true, v: function (s) { return s.self_samples; }, f: num }
    ], stages, "stages", { hot: function (s) { return s.name === bottleneck; } }));
  }

  function renderProcesses() {
    var box = clear($("processes-table"));
    if (!procs.length) { box.appendChild(el("p", { className: "empty-note", text: "No processes." })); return; }
    var rows = procs.map(function (p, i) { var r = Object.assign({}, p); r.index = i; return r; });
    box.appendChild(table([
      { h: "Process", v: function (p) { return procLabel(p.index); } },
      // Why the report gives it that role (the runtime only knows which
      // process came first): "records the training loop's steps", ...
      { h: "Role from", v: function (p) { return p.role_basis || ""; },
        title: "what the process did that decides its role: main runs the training loop, " +
               "worker is a data worker, other is neither (a launcher, a helper)" },
      { h: "Parent", num: true, v: function (p) { return p.ppid; }, f: String },
      { h: "Command", cls: "name", v: function (p) { return p.command || ""; } },
      { h: "Samples", num: true, v: function (p) { return p.samples || 0; }, f: num },
      { h: "Dropped", num: true, v: function (p) { return p.dropped || 0; }, f: num },
      { h: "CPU", num: true, v: function (p) { return p.cpu_s || 0; }, f: secs },
      { h: "Wall", num: true, v: function (p) { return p.wall_s || 0; }, f: secs },
      { h: "Busy", num: true, v: function (p) { return p.busy_fraction || 0; }, f: pct,
        bar: function (p) { return p.busy_fraction || 0; } },
      { h: "Ended", v: function (p) { return p.end || ""; } },
      { h: "Sampling", v: function (p) {
          return (p.hz ? p.hz + " Hz " : "") + [p.mode, p.timer, p.unwinder].filter(Boolean).join(" / ");
        } },
      // A thread in the process, or a process of its own beside it
      // (DLPROF_COLLECTOR=process); "thread: why" when the process was refused.
      { h: "Collector", v: function (p) { return p.collector || ""; } },
      { h: "Python frames", v: function (p) { return p.python_frames || ""; } }
    ], rows, "processes"));
  }

  // ---------- flame graph ----------
  var flame = (function () {
    var views = data.flame || [];
    var view = null, tree = null;
    var state = { view: "", search: "", stage: "", role: "", pid: "" };
    var zoom = 0;
    var ROW = 18;

    function build(v) {
      var n = v.parent.length;
      var t = { n: n, parent: v.parent, name: [], kind: v.kind, self: v.self,
                children: [], depth: new Int32Array(n), value: new Float64Array(n),
                lower: [], stagePass: new Uint8Array(n) };
      for (var i = 0; i < n; i++) {
        t.name.push(v.names[v.name[i]]);
        t.lower.push(String(t.name[i]).toLowerCase());
        t.children.push([]);
        if (i > 0) {
          t.children[v.parent[i]].push(i);
          t.depth[i] = t.depth[v.parent[i]] + 1;
        }
      }
      return t;
    }

    function stageNames() {
      var seen = {}, out = [];
      (data.stages || []).forEach(function (s) { if (!seen[s.name]) { seen[s.name] = 1; out.push(s.name); } });
      views.forEach(function (v) {
        for (var i = 0; i < v.kind.length; i++) {
          var nm = v.names[v.name[i]];
          if (v.kind[i] === 0 && !seen[nm]) { seen[nm] = 1; out.push(nm); }
        }
      });
      return out;
    }

    function procPasses(pi) {
      var p = procs[pi];
      if (!p) return !state.role && !state.pid;
      if (state.role && p.role !== state.role) return false;
      if (state.pid && String(p.pid) !== state.pid) return false;
      return true;
    }

    // Values under the filters: a sample counts when its process passes and
    // its stage path (the stage frames above it) holds the chosen stage.
    function compute() {
      var t = tree, i;
      var okProc = procs.map(function (_, k) { return procPasses(k); });
      for (i = 0; i < t.n; i++) {
        var pass = !state.stage ||
                   (i > 0 && t.stagePass[t.parent[i]]) ||
                   (t.kind[i] === 0 && t.name[i] === state.stage);
        t.stagePass[i] = pass ? 1 : 0;
        var v = 0;
        if (pass) {
          var s = t.self[i];
          for (var k = 0; k < s.length; k += 2) {
            if (s[k] < okProc.length ? okProc[s[k]] : procPasses(s[k])) v += s[k + 1];
          }
        }
        t.value[i] = v;
      }
      for (i = t.n - 1; i > 0; i--) t.value[t.parent[i]] += t.value[i];
    }

    function fmtValue(v) {
      if (view.unit === "us") return secs(v / 1e6);
      return num(v) + " sample" + (v === 1 ? "" : "s");
    }

    function color(i) {
      var k = tree.kind[i];
      if (k === 0) return "#8fb4ea";           // stage
      if (k === 2) return "#c9ccd1";           // unsymbolized
      if (k === 3) return i === 0 ? "#d9dde3" : "#b8a6e0";  // made up by dlprof
      var py = k === 4;  // Python frames: greens, native ones warm
      var h = 0, s = tree.name[i];
      for (var j = 0; j < s.length && j < 40; j++) h = (h * 31 + s.charCodeAt(j)) >>> 0;
      if (py) return "hsl(" + (95 + h % 50) + "," + (40 + h % 20) + "%," + (58 + (h >> 8) % 14) + "%)";
      return "hsl(" + (10 + h % 45) + "," + (70 + h % 20) + "%," + (58 + (h >> 8) % 14) + "%)";
    }

    function isAncestor(a, b) {  // a is b or above it
      while (b > 0 && b !== a) b = tree.parent[b];
      return b === a;
    }

    function draw() {
      var box = clear($("fg-chart"));
      $("fg-detail").textContent = "";
      if (!tree || tree.n <= 1 || tree.value[0] <= 0) {
        box.appendChild(el("p", { className: "empty-note", style: "padding:8px",
          text: tree && tree.n > 1 ? "No samples match these filters." : "No samples with stacks were recorded." }));
        root.setAttribute("data-flame-nodes", "0");
        status(0, 0);
        return;
      }
      if (zoom >= tree.n || tree.value[zoom] <= 0) zoom = 0;
      var W = chartWidth(box);
      var q = state.search.toLowerCase();
      var rects = [];
      // The zoomed node's callers, full width above it.
      var chain = [];
      for (var a = zoom; ; a = tree.parent[a]) { chain.unshift(a); if (a === 0) break; }
      chain.forEach(function (c, d) { rects.push({ i: c, x: 0, w: W, d: d, anc: c !== zoom }); });
      var scale = W / tree.value[zoom];
      var base = chain.length - 1;
      var minW = 0.35;
      (function layout(i, x, d) {
        var kids = tree.children[i].filter(function (c) { return tree.value[c] * scale >= minW; });
        kids.sort(function (p, r) { return tree.value[r] - tree.value[p] || (tree.name[p] < tree.name[r] ? -1 : 1); });
        kids.forEach(function (c) {
          var w = tree.value[c] * scale;
          rects.push({ i: c, x: x, w: w, d: d + 1, anc: false });
          layout(c, x, d + 1);
          x += w;
        });
      })(zoom, 0, base);
      var maxD = 0;
      rects.forEach(function (r) { if (r.d > maxD) maxD = r.d; });
      var H = (maxD + 1) * ROW + 2;
      var g = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, id: "fg-svg",
                           role: "img", "aria-label": "Flame graph" });
      var matches = 0;
      var matched = new Uint8Array(tree.n);
      rects.forEach(function (r) {
        var i = r.i;
        var isMatch = q && tree.lower[i].indexOf(q) >= 0;
        if (isMatch) { matched[i] = 1; matches++; }
        var cls = "fg-node" + (isMatch ? " match" : (q ? " dim" : "")) + (r.anc ? " ancestor" : "");
        var node = svg("g", { className: cls, "data-name": tree.name[i], "data-kind": ["stage", "function", "unsymbolized", "dlprof", "python"][tree.kind[i]], "data-i": i });
        var label = tree.kind[i] === 0 ? "stage: " + tree.name[i] : tree.name[i];
        node.appendChild(svg("title", { text: label + "\n" + fmtValue(tree.value[i]) + ", " +
                                               pct(tree.value[i] / tree.value[0], 1) + " of all" }));
        node.appendChild(svg("rect", { x: r.x.toFixed(2), y: r.d * ROW, width: Math.max(0.3, r.w - 0.5).toFixed(2),
                                       height: ROW - 1, fill: color(i), rx: 2 }));
        if (r.w > 28) {
          var chars = Math.floor((r.w - 6) / 6.7);
          var text = label.length > chars ? label.slice(0, Math.max(1, chars - 1)) + "…" : label;
          node.appendChild(svg("text", { x: (r.x + 3).toFixed(2), y: r.d * ROW + 12.5, text: text }));
        }
        g.appendChild(node);
      });
      g.addEventListener("click", function (e) {
        var n = e.target.closest ? e.target.closest(".fg-node") : null;
        if (!n) return;
        zoom = Number(n.getAttribute("data-i"));
        draw();
      });
      g.addEventListener("mouseover", function (e) {
        var n = e.target.closest ? e.target.closest(".fg-node") : null;
        if (!n) return;
        var i = Number(n.getAttribute("data-i"));
        $("fg-detail").textContent = (tree.kind[i] === 0 ? "stage: " : "") + tree.name[i] + " — " +
          fmtValue(tree.value[i]) + ", " + pct(tree.value[i] / tree.value[0], 1) + " of all, " +
          pct(tree.value[i] / tree.value[zoom], 1) + " of view";
      });
      box.appendChild(g);
      // The share of samples under a match, each sample counted once.
      var under = 0;
      if (q) {
        for (var i = 1; i < tree.n; i++) {
          if (tree.lower[i].indexOf(q) < 0) continue;
          var p = tree.parent[i], covered = false;
          while (p > 0) { if (tree.lower[p].indexOf(q) >= 0) { covered = true; break; } p = tree.parent[p]; }
          if (!covered && tree.value[i] > 0) under += tree.value[i];
        }
      }
      root.setAttribute("data-flame-nodes", String(rects.length));
      root.setAttribute("data-search-matches", String(matches));
      status(matches, under);
    }

    function status(matches, under) {
      var parts = [];
      if (tree && tree.value[0] > 0) {
        parts.push(fmtValue(tree.value[0]) + (filtered() ? " match the filters" : " in all"));
      }
      if (state.search) parts.push("'" + state.search + "' matches " + pct(tree && tree.value[0] ? under / tree.value[0] : 0, 1) + " of them");
      if (view && view.truncated) {
        parts.push("the graph keeps the heaviest " + num(view.parent.length) + " of " +
                   num(view.nodes_before_cut) + " frames; smaller ones are merged into their callers");
      }
      $("fg-status").textContent = parts.join("; ") + (parts.length ? "." : "");
    }

    function filtered() { return !!(state.stage || state.role || state.pid); }

    function writeHash() {
      var params = [];
      ["view", "search", "stage", "role", "pid"].forEach(function (k) {
        if (state[k] && !(k === "view" && views.length && state.view === views[0].id)) {
          params.push(k + "=" + encodeURIComponent(state[k]));
        }
      });
      // A plain anchor ("#flame") is left alone so that the browser scrolls to it.
      if (!params.length && location.hash.indexOf("=") < 0) return;
      try { history.replaceState(null, "", params.length ? "#" + params.join("&") : location.pathname + location.search); }
      catch (e) { /* some file:// contexts refuse; the state still applies */ }
    }

    function setView(id) {
      view = views.filter(function (v) { return v.id === id; })[0] || views[0] || null;
      state.view = view ? view.id : "";
      tree = view ? build(view) : null;
      zoom = 0;
    }

    function option(sel, value, text) {
      sel.appendChild(el("option", { value: value, text: text }));
    }

    function refresh(keepZoom) {
      if (!keepZoom) zoom = 0;
      if (tree) compute();
      draw();
      writeHash();
    }

    function init() {
      var params = {};
      location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
        if (!kv) return;
        var at = kv.indexOf("=");
        var k = at < 0 ? kv : kv.slice(0, at), v = at < 0 ? "" : kv.slice(at + 1);
        try { params[decodeURIComponent(k)] = decodeURIComponent(v.replace(/\+/g, " ")); } catch (e) { /* ignore */ }
      });
      var viewSel = $("fg-view"), stageSel = $("fg-stage"), roleSel = $("fg-role"), procSel = $("fg-process");
      views.forEach(function (v) { option(viewSel, v.id, v.title); });
      viewSel.disabled = views.length < 2;
      option(stageSel, "", "all stages");
      stageNames().forEach(function (s) { option(stageSel, s, s === "" ? "(none)" : s); });
      option(roleSel, "", "all roles");
      var roles = {};
      procs.forEach(function (p) { roles[p.role] = 1; });
      Object.keys(roles).sort().forEach(function (r) { option(roleSel, r, r); });
      option(procSel, "", "all processes");
      procs.forEach(function (p, i) { option(procSel, String(p.pid), procLabel(i)); });

      setView(params.view || "");
      state.search = params.search || "";
      state.stage = params.stage || "";
      state.role = params.role || "";
      state.pid = params.pid || "";
      // A value the page has no option for still filters (and matches nothing).
      [[stageSel, state.stage], [roleSel, state.role], [procSel, state.pid]].forEach(function (x) {
        if (x[1] && !Array.prototype.some.call(x[0].options, function (o) { return o.value === x[1]; })) {
          option(x[0], x[1], x[1]);
        }
        x[0].value = x[1];
      });
      viewSel.value = state.view;
      $("fg-search").value = state.search;

      viewSel.addEventListener("change", function () { setView(viewSel.value); refresh(); });
      var pending = 0;
      $("fg-search").addEventListener("input", function () {
        clearTimeout(pending);
        pending = setTimeout(function () { state.search = $("fg-search").value.trim(); refresh(true); }, 120);
      });
      stageSel.addEventListener("change", function () { state.stage = stageSel.value; refresh(); });
      roleSel.addEventListener("change", function () { state.role = roleSel.value; refresh(); });
      procSel.addEventListener("change", function () { state.pid = procSel.value; refresh(); });
      $("fg-reset").addEventListener("click", function () { zoom = 0; draw(); });
      refresh();
    }

    return {
      init: init,
      redraw: function () { draw(); },
      setStage: function (name, scroll, viewId) {
        if (viewId && views.some(function (v) { return v.id === viewId; })) {
          setView(viewId);
          $("fg-view").value = state.view;
        }
        state.stage = name;
        var sel = $("fg-stage");
        if (!Array.prototype.some.call(sel.options, function (o) { return o.value === name; })) option(sel, name, name);
        sel.value = name;
        refresh();
        if (scroll) $("flame").scrollIntoView({ behavior: "smooth", block: "start" });
      }
    };
  })();

  // ---------- timeline (reports/html/timeline.js) ----------
  function renderTimeline() {
    var box = clear($("tl-box"));
    if (window.dlprofTimeline) window.dlprofTimeline.init(data.timeline || null, procs, box);
  }

  // ---------- cost and warnings ----------
  function renderCost() {
    var c = data.cost || {}, s = data.steps || {};
    var body = clear($("cost-body"));
    var dl = el("dl", { className: "kv" });
    function kv(k, v) { dl.appendChild(el("dt", { text: k })); dl.appendChild(el("dd", { text: v })); }
    kv("Samples", num(c.samples || 0));
    var total = (c.samples || 0) + (c.dropped || 0);
    kv("Dropped", num(c.dropped || 0) + (total > 0 ? " (" + pct((c.dropped || 0) / total, 2) + " of all samples)" : "") +
       ((c.dropped || 0) > 0 ? ": the runtime could not store them without blocking, so it counted them instead" : ""));
    kv("Time in dlprof's signal handler", secs(c.handler_s || 0) + " (" + pct(c.handler_fraction || 0, 2) +
       " of the profiled CPU time)");
    if (c.distortion_measured) {
      kv("Distortion", (c.distortion >= 0 ? "+" : "") + pct(c.distortion, 1) +
         " median step time: " + secs(s.median_s) + " profiled vs " + secs(s.baseline_median_s) +
         " unprofiled over " + s.baseline_count + " baseline steps");
    } else {
      kv("Distortion", "not measured: set DLPROF_BASELINE_STEPS=N to time N steps without " +
         "sampling first and compare");
    }
    body.appendChild(dl);
  }

  function renderWarnings() {
    var body = clear($("warnings-body"));
    var w = data.warnings || [];
    if (!w.length) { body.appendChild(el("p", { className: "muted", text: "None: every profile was read whole." })); return; }
    var ul = el("ul", { className: "warnings", id: "warnings-list" });
    w.forEach(function (t) { ul.appendChild(el("li", { text: t })); });
    body.appendChild(ul);
  }

  function main() {
    renderHeader();
    renderVerdict();
    renderSteps();
    renderBuffers();
    renderTimeline();
    renderStages();
    renderProcesses();
    flame.init();
    renderCost();
    renderWarnings();
    var lastW = window.innerWidth, timer = 0;
    window.addEventListener("resize", function () {
      if (window.innerWidth === lastW) return;
      lastW = window.innerWidth;
      clearTimeout(timer);
      timer = setTimeout(function () {
        renderSteps();
        renderBuffers();
        if (window.dlprofTimeline) window.dlprofTimeline.resize();
        flame.redraw();
      }, 150);
    });
  }

  try {
    main();
    if (!root.hasAttribute("data-dlprof-error")) root.setAttribute("data-dlprof-ready", "1");
  } catch (err) {
    fail(err);
    throw err;
  }
})();
