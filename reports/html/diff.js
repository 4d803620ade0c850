// Draws diff.html from the JSON in #dlprof-data (diff.json's document).
// Every name in it comes from the profiled programs, so it only ever reaches
// the page through textContent, never as markup. When the page is drawn
// without error, <html data-dlprof-ready="1">; on an error,
// data-dlprof-error holds its message (the end-to-end test reads both).
(function () {
  "use strict";

  var root = document.documentElement;

  function fail(err) {
    var msg = String((err && err.stack) || err);
    root.setAttribute("data-dlprof-error", msg);
    var box = document.getElementById("fatal");
    if (box) {
      box.hidden = false;
      box.textContent = "The diff could not be drawn: " + msg;
    }
  }
  window.addEventListener("error", function (e) { fail(e.error || e.message); });

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function $(id) { return document.getElementById(id); }

  // ---------- numbers: "s" seconds, "ms" milliseconds, "share", "count" ----------
  function value(v, unit) {
    if (v === null || v === undefined) return "–";
    if (unit === "s") return v.toFixed(3) + " s";
    if (unit === "ms") return (1000 * v).toFixed(2) + " ms";
    if (unit === "share") return (100 * v).toFixed(1) + "%";
    return String(Math.round(v));
  }
  function signed(text, v) { return (v > 0 ? "+" : v < 0 ? "−" : "±") + text; }
  function delta(c, unit) {
    if (c.change === null || c.change === undefined) return "–";
    var a = Math.abs(c.change);
    if (unit === "s") return signed(a.toFixed(3) + " s", c.change);
    if (unit === "ms") return signed((1000 * a).toFixed(2) + " ms", c.change);
    if (unit === "share") return signed((100 * a).toFixed(1) + " pp", c.change);
    return signed(String(Math.round(a)), c.change);
  }
  function relative(c) {
    if (c.relative === null || c.relative === undefined) return "–";
    return signed((100 * Math.abs(c.relative)).toFixed(0) + "%", c.relative);
  }

  // One table; each row an array of cells {text, cls}.
  function table(headers, rows) {
    var t = el("table"), thead = el("thead"), tr = el("tr");
    headers.forEach(function (h) { tr.appendChild(el("th", h.num ? "num" : "", h.text)); });
    thead.appendChild(tr);
    t.appendChild(thead);
    var tbody = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (c) { row.appendChild(el("td", c.cls || "", c.text)); });
      tbody.appendChild(row);
    });
    t.appendChild(tbody);
    return t;
  }
  function num(text, extra) { return { text: text, cls: "num" + (extra ? " " + extra : "") }; }
  // A change is coloured only where its direction is a judgement: `lower`
  // says whether less is better for this number (undefined: neither).
  function changeCells(c, unit, lower) {
    var cls = "";
    if (lower !== undefined && c.change) cls = (c.change < 0) === lower ? "down" : "up";
    return [num(value(c.before, unit)), num(value(c.after, unit)), num(delta(c, unit), cls),
            num(relative(c), cls)];
  }
  var changeHeads = [{ text: "Before", num: true }, { text: "After", num: true },
                     { text: "Change", num: true }, { text: "Relative", num: true }];

  function verdictText(v) {
    var s;
    if (v.input_bound) {
      s = "input-bound (" + v.severity + ")";
      if (v.bottleneck_stage) {
        s += "; bottleneck '" + v.bottleneck_stage + "' (" + v.bottleneck_kind + ", " +
             v.bottleneck_role + ")";
      }
    } else if (v.basis === "none") {
      s = "unknown (no step markers and no buffers)";
    } else {
      s = "not input-bound";
    }
    if (v.cpu_saturated) s += "; CPU saturated";
    return s;
  }
  function sideText(side) {
    var s = side.input;
    if (side.run_ids.length === 1) s += " (run " + side.run_ids[0] + ")";
    if (side.run_ids.length > 1) s += " (" + side.run_ids.length + " runs merged)";
    return s;
  }

  function drawVerdict(d) {
    var body = $("verdict-body");
    [["Before", d.before], ["After", d.after]].forEach(function (p) {
      var line = el("p");
      line.appendChild(el("span", "side-label", p[0] + ":"));
      line.appendChild(el("span", "", verdictText(p[1].verdict)));
      line.setAttribute("id", "verdict-" + p[0].toLowerCase());
      body.appendChild(line);
      body.appendChild(el("p", "muted", sideText(p[1])));
    });
    body.appendChild(el("p", "muted", d.verdict_changed ? "The verdict changed." : "The verdict is the same."));
  }

  function drawSteps(d) {
    var s = d.steps;
    var rows = [
      ["Data-wait share", s.data_wait_fraction, "share", true],
      ["Step time, median", s.median_s, "ms", true],
      ["Step time, mean", s.mean_s, "ms", true],
      ["Data wait per step, median", s.data_wait_median_s, "ms", true],
      ["Steps analysed", s.count, "count"],
      ["Profile duration", s.duration_s, "s"]
    ].map(function (r) { return [{ text: r[0] }].concat(changeCells(r[1], r[2], r[3])); });
    $("steps-table").appendChild(table([{ text: "" }].concat(changeHeads), rows));
  }

  function role(before, after) {
    if (!before) return after;
    if (!after || after === before) return before;
    return before + " → " + after;
  }
  function share(c) { return value(c.before, "share") + " → " + value(c.after, "share"); }

  function drawStages(d) {
    if (!d.stages.length) {
      $("stages-table").appendChild(el("p", "empty-note", "No stages in either run."));
      return;
    }
    var heads = [{ text: "Stage" }, { text: "Role" }, { text: "Self wall before", num: true },
                 { text: "after", num: true }, { text: "change", num: true },
                 { text: "relative", num: true }, { text: "Self CPU change", num: true },
                 { text: "On-CPU", num: true }, { text: "Off-CPU", num: true },
                 { text: "CPU-wait", num: true }];
    var rows = d.stages.map(function (s) {
      var cells = [{ text: s.name + (s.data_stage ? "" : " (model)"), cls: "name" },
                   { text: role(s.role_before, s.role_after) }];
      var wall = changeCells(s.self_wall_s, "s");
      if (s.status !== "both") wall[3] = { text: s.status, cls: "num status" };
      return cells.concat(wall, [num(delta(s.self_cpu_s, "s")), num(share(s.on_cpu_fraction)),
                                 num(share(s.offcpu_fraction)), num(share(s.cpu_wait_fraction))]);
    });
    $("stages-table").appendChild(table(heads, rows));
  }

  function drawBuffers(d) {
    if (!d.buffers.length) {
      $("buffers-table").appendChild(el("p", "empty-note", "No buffers in either run."));
      return;
    }
    var heads = [{ text: "Buffer" }, { text: "Role" }, { text: "Processes", num: true },
                 { text: "Capacity", num: true }, { text: "Mean occupancy", num: true },
                 { text: "change", num: true }, { text: "Empty", num: true },
                 { text: "change", num: true }, { text: "Full", num: true },
                 { text: "change", num: true }];
    var rows = d.buffers.map(function (b) {
      var two = function (c) { return value(c.before, "count") + " → " + value(c.after, "count"); };
      return [{ text: b.name, cls: "name" }, { text: role(b.role_before, b.role_after) },
              num(two(b.processes)), num(two(b.capacity)),
              num(share(b.mean_occupancy)), num(delta(b.mean_occupancy, "share")),
              num(share(b.empty_fraction)), num(delta(b.empty_fraction, "share")),
              num(share(b.full_fraction)), num(delta(b.full_fraction, "share"))];
    });
    $("buffers-table").appendChild(table(heads, rows));
  }

  function drawWorkers(d) {
    var w = d.workers;
    var rows = [
      ["Workers at a time", w.concurrent, "count"],
      ["Worker processes", w.processes, "count"],
      ["Worker busy (CPU / wall)", w.busy_fraction, "share"]
    ].map(function (r) { return [{ text: r[0] }].concat(changeCells(r[1], r[2])); });
    $("workers-table").appendChild(table([{ text: "" }].concat(changeHeads), rows));
  }

  function drawWarnings(d) {
    if (!d.warnings.length) {
      $("warnings").hidden = true;
      return;
    }
    var ul = el("ul", "warnings");
    d.warnings.forEach(function (w) { ul.appendChild(el("li", "", w)); });
    $("warnings-body").appendChild(ul);
  }

  try {
    var d = JSON.parse($("dlprof-data").textContent);
    drawVerdict(d);
    drawSteps(d);
    drawStages(d);
    drawBuffers(d);
    drawWorkers(d);
    drawWarnings(d);
    if (!root.hasAttribute("data-dlprof-error")) root.setAttribute("data-dlprof-ready", "1");
  } catch (e) {
    fail(e);
  }
})();
