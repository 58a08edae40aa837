/* Comparison pages (uses window.SITEGEN from core.js): the overlay charts with their controls
   (smoothing, axes, tag and run filters), the sortable, filterable hyperparameter table, the
   config diff, and the hyperparameter charts. */
(function (S) {
  "use strict";
  var forEach = S.forEach, msg = S.msg, el = S.el, expand = S.expand, clone = S.clone, compare = S.compare,
    embed = S.embed, whenVisible = S.whenVisible;

  /* ---------- sortable, filterable server-rendered tables ---------- */

  function cellValue(row, col, type) {
    var cell = row.cells[col];
    var v = cell ? (cell.getAttribute("data-v") || "") : "";
    if (type === "text") return v.toLowerCase();
    if (v === "") return null;
    var x = Number(v);
    return isNaN(x) ? v.toLowerCase() : x;
  }

  function makeSortable(table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    forEach(heads, function (th, col) {
      var button = th.querySelector("button");
      if (!button) return;
      button.addEventListener("click", function () {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        forEach(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var type = th.getAttribute("data-type") || "auto";
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) {
          var a = cellValue(r1, col, type), b = cellValue(r2, col, type);
          var c = compare(a, b);
          if (a === null || b === null) return c;
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }

  function makeFilter(input, table, counter) {
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
    function apply() {
      var q = input.value.trim().toLowerCase();
      var words = q ? q.split(/\s+/) : [];
      var shown = 0;
      rows.forEach(function (r, i) {
        var ok = words.every(function (w) { return texts[i].indexOf(w) !== -1; });
        r.hidden = !ok;
        if (ok) shown++;
      });
      if (counter) counter.textContent = msg("shown", { shown: shown, total: rows.length });
    }
    input.addEventListener("input", apply);
    apply();
  }

  /* ---------- the overlay charts and their controls ---------- */

  // TensorBoard's smoothing: an exponential moving average, debiased so early points are not
  // pulled towards zero. Non-finite points (null) are skipped and stay gaps.
  function ema(ys, weight) {
    var out = new Array(ys.length), last = 0, debias = 0;
    for (var i = 0; i < ys.length; i++) {
      var y = ys[i];
      if (y === null || !isFinite(y)) { out[i] = null; continue; }
      if (weight <= 0) { out[i] = y; continue; }
      last = last * weight + (1 - weight) * y;
      debias = debias * weight + (1 - weight);
      out[i] = last / debias;
    }
    return out;
  }

  function initCompare(page) {
    var specs = window.SITEGEN_SPECS;
    // each tag comes in parts (a few runs each: sitegen.compare._assemble), each part its
    // lines and their points as one column per field; every line takes its n of them, and its
    // run index counts from the part's first run (base)
    // the parts are in the page's piece scripts (window.SITEGEN_PIECES): "from" says which
    // piece and where in it; a piece that failed to load leaves its runs' lines out
    var pieces = window.SITEGEN_PIECES || {};
    page.tags.forEach(function (tg) {
      tg.lines = [];
      tg.parts = (tg.from || []).map(function (f) {
        var pc = pieces[page.pieces[f[0]]];
        return pc && pc[f[1]] && pc[f[1]][0] === tg.tag ? pc[f[1]][1] : null;
      });
      tg.parts.forEach(function (part, k) {
        if (!part) return;
        var x = expand(part[1]), t = expand(part[2]), y = expand(part[3]), at = 0;
        part[0].forEach(function (ln) {
          ln.r += tg.base[k];
          ln.x = x.slice(at, at + ln.n); ln.y = y.slice(at, at + ln.n); ln.t = t.slice(at, at + ln.n);
          at += ln.n;
          tg.lines.push(ln);
        });
      });
    });
    // the runs shown: as their boxes are ticked (by the server, by an ad-hoc comparison's hash,
    // or restored by the browser on Back)
    var state = { weight: 0.6, x: "step", y: "linear", runOn: page.runs.map(function (_, i) {
      var box = document.querySelector('.run-toggle[data-r="' + i + '"]');
      return box ? box.checked : i >= page.runs.length - page.on;
    }) };
    var names = [];
    var seen = {};
    page.tags.forEach(function (tg) {
      tg.lines.forEach(function (ln) { if (!seen[ln.s]) { seen[ln.s] = 1; names.push(ln.s); } });
    });
    var charts = Array.prototype.slice.call(document.querySelectorAll(".chart.overlay[data-tag-index]"));

    function rowsFor(i) {
      var rows = [], log = state.y === "log";
      page.tags[i].lines.forEach(function (ln) {
        if (!state.runOn[ln.r]) return;
        var sm = ema(ln.y, state.weight), w0 = page.runs[ln.r].w0;
        for (var j = 0; j < ln.x.length; j++) {
          var raw = ln.y[j], y = sm[j];
          if (raw === null) continue;
          if (log && (raw <= 0 || y <= 0)) continue;
          var x = state.x === "step" ? ln.x[j] : state.x === "relative" ? ln.t[j] / 3600 : (w0 + ln.t[j]) * 1000;
          rows.push({ s: ln.s, x: x, y: y, raw: raw });
        }
      });
      return rows;
    }

    function specFor() {
      var spec = clone(specs.overlay);
      spec.data = { name: "rows" };
      spec.layer.forEach(function (layer) {
        var enc = layer.encoding;
        enc.color.scale = { domain: names };
        enc.x.type = state.x === "wall" ? "temporal" : "quantitative";
        enc.x.title = msg("x_" + state.x);
        if (state.x !== "step") delete enc.x.axis;
        enc.y.scale = { zero: false, type: state.y === "log" ? "log" : "linear" };
        if (state.weight <= 0 && layer.encoding.y.field === "raw") layer.mark.opacity = 0;
      });
      return spec;
    }

    function draw(el) {
      var i = Number(el.dataset.tagIndex);
      el.dataset.drawn = "1";
      if (el._view) { el._view.finalize(); el._view = null; }
      var spec = specFor();
      // lines of a few points (e.g. final hparam metrics) would be invisible without points
      if (page.tags[i].lines.every(function (ln) { return ln.x.length <= 3; })) spec.layer[1].mark.point = true;
      spec.datasets = { rows: rowsFor(i) };
      return embed(el, spec);
    }

    function refreshData() {
      charts.forEach(function (el) {
        if (!el._view) return;
        el._view.data("rows", rowsFor(Number(el.dataset.tagIndex))).runAsync();
      });
    }

    function redraw() {
      charts.forEach(function (el) { if (el.dataset.drawn) draw(el); });
    }

    var pending = false;
    var slider = document.getElementById("smoothing"), out = document.getElementById("smoothing-value");
    slider.addEventListener("input", function () {
      var before = state.weight;
      state.weight = Number(slider.value);
      out.textContent = state.weight.toFixed(2);
      if ((before <= 0) !== (state.weight <= 0)) { redraw(); return; }
      if (pending) return;
      pending = true;
      window.requestAnimationFrame(function () { pending = false; refreshData(); });
    });
    document.getElementById("x-axis").addEventListener("change", function (e) { state.x = e.target.value; redraw(); });
    document.getElementById("y-scale").addEventListener("change", function (e) { state.y = e.target.value; redraw(); });

    var err = document.getElementById("filter-error");
    function regex(input) {
      var q = input.value.trim();
      if (!q) return null;
      try { return new RegExp(q, "i"); } catch (e) { err.hidden = false; return undefined; }
    }

    var tagInput = document.getElementById("tag-filter");
    var runInput = document.getElementById("run-regex");
    var toggles = Array.prototype.slice.call(document.querySelectorAll(".run-toggle"));
    function applyRuns() {
      var shown = 0;
      toggles.forEach(function (t) {
        var r = Number(t.dataset.r);
        state.runOn[r] = t.checked;
        if (t.checked) shown++;
      });
      document.getElementById("runs-shown").textContent = shown + " / " + toggles.length;
      refreshData();
    }
    function applyFilters() {
      err.hidden = true;
      var tre = regex(tagInput), rre = regex(runInput);
      var visible = 0;
      forEach(document.querySelectorAll("figure.card[data-tag]"), function (fig) {
        var ok = tre === undefined || tre === null || tre.test(fig.dataset.tag);
        fig.hidden = !ok;
        if (ok) visible++;
      });
      document.getElementById("no-tags").hidden = visible > 0;
      if (rre !== undefined) {
        toggles.forEach(function (t) { t.checked = rre === null || rre.test(page.runs[Number(t.dataset.r)].n); });
        applyRuns();
      }
    }
    tagInput.addEventListener("input", applyFilters);
    runInput.addEventListener("input", applyFilters);
    toggles.forEach(function (t) { t.addEventListener("change", applyRuns); });
    document.getElementById("runs-all").addEventListener("click", function () { toggles.forEach(function (t) { t.checked = true; }); applyRuns(); });
    document.getElementById("runs-none").addEventListener("click", function () { toggles.forEach(function (t) { t.checked = false; }); applyRuns(); });

    whenVisible(charts, draw);
    initDiff(page);
  }

  function initDiff(page) {
    var box = document.getElementById("config-diff");
    if (!box) return;
    var picks = Array.prototype.slice.call(document.querySelectorAll(".diff-pick"));
    function render() {
      box.textContent = "";
      var chosen = picks.filter(function (p) { return p.checked; }).map(function (p) { return Number(p.dataset.r); });
      chosen.sort(function (a, b) { return a - b; });
      if (chosen.length < 2) { box.appendChild(el("p", "muted", msg("diff_pick"))); return; }
      var keys = {};
      chosen.forEach(function (r) { Object.keys(page.configs[r]).forEach(function (k) { keys[k] = 1; }); });
      var differ = Object.keys(keys).sort().filter(function (k) {
        var first = page.configs[chosen[0]][k];
        return chosen.some(function (r) { return page.configs[r][k] !== first; });
      });
      if (!differ.length) { box.appendChild(el("p", "", msg("diff_same"))); return; }
      box.appendChild(el("p", "muted diff-count", msg("diff_count", { n: differ.length })));
      var wrap = el("div", "table-wrap"), table = el("table", "runs diff"), head = el("tr");
      head.appendChild(el("th", "", msg("diff_key")));
      chosen.forEach(function (r) { head.appendChild(el("th", "", page.labels[r])); });
      table.appendChild(el("thead")).appendChild(head);
      var body = table.appendChild(el("tbody"));
      differ.forEach(function (k) {
        var tr = el("tr");
        tr.setAttribute("data-key", k);
        tr.appendChild(el("th", "", k));
        chosen.forEach(function (r) {
          var v = page.configs[r][k];
          tr.appendChild(el("td", v === undefined ? "muted" : "", v === undefined ? msg("diff_missing") : v));
        });
        body.appendChild(tr);
      });
      wrap.appendChild(table);
      box.appendChild(wrap);
    }
    picks.forEach(function (p) { p.addEventListener("change", render); });
    render();
  }

  /* ---------- an ad-hoc comparison: the runs ticked in the index (#runs=slug,slug) ----------
     Ticks them before the charts are first drawn (initCompare reads the boxes). */

  function runsFromHash(page) {
    var m = /(?:^#|&)runs=([^&]*)/.exec(window.location.hash);
    if (!m) return;
    var wanted = {}, count = 0, found = 0;
    m[1].split(",").forEach(function (s) { if (s) { wanted[decodeURIComponent(s)] = true; count++; } });
    var toggles = Array.prototype.slice.call(document.querySelectorAll(".run-toggle"));
    if (!toggles.length || !count) return;
    toggles.forEach(function (t) {
      var h = page.runs[Number(t.dataset.r)].h, slug = h.split("/").slice(-2)[0];
      t.checked = !!wanted[slug];
      if (t.checked) found++;
    });
    var shown = document.getElementById("runs-shown");
    if (shown) shown.textContent = found + " / " + toggles.length;
    var picker = document.querySelector("details.run-picker"), note = el("p", "note adhoc-note", msg("adhoc", { n: found }));
    if (found < count) note.appendChild(el("span", "warn", " " + msg("not_on_page", { n: count - found })));
    var hint = document.getElementById("default-on-note");
    if (hint) hint.hidden = true;
    if (picker) { picker.open = true; picker.parentNode.insertBefore(note, picker); }
  }

  S.ready(function () {
    var page = S.pageData();
    forEach(document.querySelectorAll("table.sortable"), makeSortable);
    var hpFilter = document.getElementById("hp-filter"), hpTable = document.getElementById("hp-table");
    if (hpFilter && hpTable) makeFilter(hpFilter, hpTable, document.getElementById("hp-count"));
    if (page && page.kind === "compare" && window.vegaEmbed) { runsFromHash(page); initCompare(page); }
    S.drawCharts();
  });
})(window.SITEGEN);
