/* sitegen page script: draws charts from the page's data script, runs the comparison page's
   controls (smoothing, axes, filters, config diff), pages and searches the index, and makes
   tables sortable. A classic script (no modules, no fetch) so it works over file:// and under a
   CSP of script-src 'self'. Every string from a log goes into the page through textContent. */
(function () {
  "use strict";
  var forEach = function (list, fn) { Array.prototype.forEach.call(list, fn); };

  function msg(key, vals) {
    var m = (window.SITEGEN_MSG || {})[key];
    if (m === undefined) return key;
    return m.replace(/\{(\w+)\}/g, function (_, k) { return vals && k in vals ? String(vals[k]) : "{" + k + "}"; });
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function base64Bytes(text) {
    var bin = atob(text), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  // columns come as plain arrays or compact (sitegen.charts.numbers): run-length encoded
  // {rl: [[value, count], ...]} (labels, flags), integer progressions {ap: [first, [[delta,
  // count], ...]]} (steps), little-endian int32/float32/float64 in base64 {i4|f4|f8: ...}
  // or float64 split in high words (run lengths) and low-word differences {f8d: [...]},
  // whose non-finite values become null (drawn from the flags instead)
  function expand(col, keepNonFinite) {
    if (Array.isArray(col) || !col) return col;
    var out = [], i;
    if (col.rl) {
      col.rl.forEach(function (p) { for (i = 0; i < p[1]; i++) out.push(p[0]); });
      return out;
    }
    if (col.ap) {
      var x = col.ap[0];
      out.push(x);
      col.ap[1].forEach(function (p) { for (i = 0; i < p[1]; i++) { x += p[0]; out.push(x); } });
      return out;
    }
    var view;
    if (col.i4 !== undefined) {
      view = new DataView(base64Bytes(col.i4).buffer);
      out = new Array(view.byteLength / 4);
      for (i = 0; i < out.length; i++) out[i] = view.getInt32(i * 4, true);
      return out;
    }
    if (col.f8d) {  // float64: high words run-length encoded, low words as int32 differences
      var low = new DataView(base64Bytes(col.f8d[1]).buffer), word = new DataView(new ArrayBuffer(8));
      var acc = 0, k = 0;
      out = new Array(low.byteLength / 4);
      col.f8d[0].forEach(function (p) {
        word.setUint32(4, p[0], true);
        for (i = 0; i < p[1]; i++, k++) {
          acc = (acc + low.getInt32(k * 4, true)) >>> 0;
          word.setUint32(0, acc, true);
          var v = word.getFloat64(0, true);
          out[k] = keepNonFinite || isFinite(v) ? v : null;
        }
      });
      return out;
    }
    var wide = col.f8 !== undefined, raw = col.f8 !== undefined ? col.f8 : col.f4;
    if (raw === undefined) return col;
    view = new DataView(base64Bytes(raw).buffer);
    var size = wide ? 8 : 4;
    out = new Array(view.byteLength / size);
    for (i = 0; i < out.length; i++) {
      var v = wide ? view.getFloat64(i * 8, true) : view.getFloat32(i * 4, true);
      out[i] = keepNonFinite || isFinite(v) ? v : null;
    }
    return out;
  }
  window.sitegenExpand = expand;  // for the browser tests: the same decoder the charts use

  function toRows(cols) {
    cols = Object.keys(cols).reduce(function (o, k) { o[k] = expand(cols[k]); return o; }, {});
    var keys = Object.keys(cols);
    var n = keys.length ? cols[keys[0]].length : 0;
    var rows = new Array(n);
    for (var i = 0; i < n; i++) {
      var row = {};
      for (var j = 0; j < keys.length; j++) row[keys[j]] = cols[keys[j]][i];
      rows[i] = row;
    }
    return rows;
  }

  function clone(x) { return JSON.parse(JSON.stringify(x)); }

  var EMBED_OPTIONS = {
    ast: true, actions: false, defaultStyle: false, renderer: "svg",
    tooltip: { disableDefaultStyle: true }
  };

  function embed(el, spec) {
    return window.vegaEmbed(el, spec, EMBED_OPTIONS).then(function (res) {
      el.classList.add("drawn");
      el._view = res.view;
      return res.view;
    }).catch(function (err) {
      el.textContent = msg("chart_failed") + " " + err;
      console.error(err);
    });
  }

  function drawChart(el) {
    var page = window.SITEGEN_PAGE, specs = window.SITEGEN_SPECS;
    if (el.dataset.drawn) return;
    el.dataset.drawn = "1";
    var chart = page.charts[Number(el.dataset.chart)];
    var spec = clone(specs[chart.kind]);
    var rows = toRows(chart.rows);
    spec.data = { values: rows };
    if (chart.kind === "scalar") {
      // markers for non-finite values only where there are some (an empty layer warns)
      if (!rows.some(function (r) { return r.k !== ""; })) spec.layer.splice(1, 1);
      // short series get visible points, or a lone point would not show at all
      if (rows.length <= 60) spec.layer[0].mark.point = true;
    }
    if (chart.xt !== undefined) spec.encoding.x.title = chart.xt;
    if (chart.yt !== undefined) spec.encoding.y.title = chart.yt;
    embed(el, spec);
  }

  function whenVisible(els, draw) {
    if (els.length <= 24 || !("IntersectionObserver" in window)) {
      els.forEach(draw);
      return;
    }
    var io = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting) { io.unobserve(e.target); draw(e.target); }
      });
    }, { rootMargin: "400px" });
    els.forEach(function (el) { io.observe(el); });
  }

  function drawCharts() {
    if (!window.SITEGEN_PAGE || !window.SITEGEN_SPECS || !window.vegaEmbed) return;
    whenVisible(Array.prototype.slice.call(document.querySelectorAll(".chart[data-chart]")), drawChart);
  }

  /* ---------- sortable, filterable server-rendered tables ---------- */

  function cellValue(row, col, type) {
    var cell = row.cells[col];
    var v = cell ? (cell.getAttribute("data-v") || "") : "";
    if (type === "text") return v.toLowerCase();
    if (v === "") return null;
    var x = Number(v);
    return isNaN(x) ? v.toLowerCase() : x;
  }

  function compare(a, b) {
    if (a === null || a === undefined) return b === null || b === undefined ? 0 : 1;
    if (b === null || b === undefined) return -1;
    if (typeof a === typeof b) return a < b ? -1 : a > b ? 1 : 0;
    return typeof a === "number" ? -1 : 1;
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

  /* ---------- comparison page ---------- */

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
    var state = { weight: 0.6, x: "step", y: "linear", runOn: page.runs.map(function (_, i) { return i >= page.runs.length - page.on; }) };
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

  /* ---------- run page: image step sliders ---------- */

  function initImages(page) {
    forEach(document.querySelectorAll("figure.image-step[data-images]"), function (fig) {
      var items = page.images[Number(fig.dataset.images)];
      var input = fig.querySelector("input[type=range]"), img = fig.querySelector("img");
      var out = fig.querySelector("output"), pos = fig.querySelector(".pos");
      if (!items || !input) return;
      input.addEventListener("input", function () {
        var im = items[Number(input.value)];
        img.src = im.src;
        if (im.w) { img.width = im.w; img.height = im.h; }
        out.textContent = im.step;
        pos.textContent = (Number(input.value) + 1) + " / " + items.length;
      });
    });
  }

  /* ---------- index: search, sort, group and page every run from index-data.js ---------- */

  function fmtNum(v) {
    if (v === null || v === undefined) return "";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
    return String(Number(v.toPrecision(6)));
  }

  function initIndex(data) {
    var table = document.getElementById("runs"), body = table.tBodies[0];
    var input = document.getElementById("run-filter"), counter = document.getElementById("run-count");
    var groupBy = document.getElementById("group-by");
    var pager = document.getElementById("pager"), info = document.getElementById("page-info");
    var depth = data.depth, nm = data.metrics.length;
    var runs = data.runs;
    var state = { col: null, asc: true, page: 0, group: -1, words: [] };
    var texts = null;

    function hpValue(r, keyId) { var v = r[10][String(keyId)]; return v === undefined ? null : v; }
    function value(r, col) {
      var kind = col.charAt(0), n = Number(col.slice(1));
      if (col === "run") return String(r[2]).toLowerCase();
      if (col === "start") return r[3];
      if (col === "dur") return r[5];
      if (col === "last") return r[7];
      if (kind === "g") return String(r[1][n]).toLowerCase();
      if (kind === "m") return r[8][n];
      if (kind === "h") { var v = hpValue(r, data.hcols[n]); return typeof v === "string" ? v.toLowerCase() : v; }
      return null;
    }
    function searchText(r) {
      var parts = r[1].slice();
      parts.push(r[2], r[0]);
      r[9].forEach(function (t) { parts.push(data.tags[t]); });
      Object.keys(r[10]).forEach(function (k) { parts.push(data.hkeys[Number(k)] + "=" + r[10][k]); });
      return parts.join(" ").toLowerCase();
    }
    function selected() {
      var idx = [];
      if (state.words.length && !texts) texts = runs.map(searchText);
      for (var i = 0; i < runs.length; i++) {
        var ok = true;
        for (var w = 0; w < state.words.length && ok; w++) ok = texts[i].indexOf(state.words[w]) !== -1;
        if (ok) idx.push(i);
      }
      if (state.col) {
        var col = state.col, asc = state.asc;
        idx.sort(function (a, b) {
          var va = value(runs[a], col), vb = value(runs[b], col);
          var c = compare(va, vb);
          if (va === null || vb === null) return c || a - b;
          return (asc ? c : -c) || a - b;
        });
      }
      if (state.group >= 0) {
        var g = state.group;
        var key = function (i) { return runs[i][1].slice(0, g + 1).join("/"); };
        var pos = {};
        idx.forEach(function (i, p) { pos[i] = p; });
        idx.sort(function (a, b) { var ka = key(a), kb = key(b); return ka < kb ? -1 : ka > kb ? 1 : pos[a] - pos[b]; });
      }
      return idx;
    }
    function cell(tr, text, cls, href) {
      var td = tr.appendChild(el("td", cls || ""));
      if (href) { var a = td.appendChild(el("a", "", text)); a.href = href; } else td.textContent = text;
      return td;
    }
    function row(i) {
      var r = runs[i], tr = el("tr");
      for (var g = 0; g < depth; g++) {
        var key = r[1].slice(0, g + 1).join("/");
        cell(tr, r[1][g], "", r[1][g] && data.groups[key] ? data.groups[key] : null);
      }
      cell(tr, r[2], "", "runs/" + r[0] + "/index.html");
      cell(tr, r[4]);
      cell(tr, r[6]);
      cell(tr, r[7] === null ? "" : String(r[7]));
      for (var m = 0; m < nm; m++) {
        var best = data.best[m] === i;
        var td = cell(tr, fmtNum(r[8][m]) + (best ? " ★" : ""), best ? "num best" : "num");
        if (best) td.title = msg("best");
      }
      data.hcols.forEach(function (k) { var v = hpValue(r, k); cell(tr, fmtNum(v)); });
      return tr;
    }
    function render() {
      var idx = selected();
      var per = data.pageRows, pages = Math.max(1, Math.ceil(idx.length / per));
      if (state.page >= pages) state.page = pages - 1;
      var frag = document.createDocumentFragment(), lastGroup = null;
      var cols = table.tHead.rows[0].cells.length;
      idx.slice(state.page * per, (state.page + 1) * per).forEach(function (i) {
        if (state.group >= 0) {
          var key = runs[i][1].slice(0, state.group + 1).join("/");
          if (key !== lastGroup) {
            lastGroup = key;
            var tr = el("tr", "group-row"), td = tr.appendChild(el("td"));
            td.colSpan = cols;
            td.appendChild(el("strong", "", key));
            var count = idx.filter(function (j) { return runs[j][1].slice(0, state.group + 1).join("/") === key; }).length;
            td.appendChild(el("span", "muted", " · " + msg("group_runs", { n: count }) + " · "));
            if (data.groups[key]) { var a = td.appendChild(el("a", "", msg("compare"))); a.href = data.groups[key]; }
            frag.appendChild(tr);
          }
        }
        frag.appendChild(row(i));
      });
      body.textContent = "";
      body.appendChild(frag);
      counter.textContent = idx.length ? msg("shown", { shown: idx.length, total: runs.length }) : msg("no_match");
      pager.hidden = pages <= 1;
      info.textContent = msg("page", { page: state.page + 1, pages: pages });
    }
    var heads = table.tHead.rows[0].cells;
    forEach(heads, function (th) {
      var button = th.querySelector("button");
      button.addEventListener("click", function () {
        var col = th.dataset.col;
        state.asc = state.col === col ? !state.asc : true;
        state.col = col;
        state.page = 0;
        forEach(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", state.asc ? "ascending" : "descending");
        render();
      });
    });
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      state.words = q ? q.split(/\s+/) : [];
      state.page = 0;
      render();
    });
    if (groupBy) groupBy.addEventListener("change", function () { state.group = Number(groupBy.value); state.page = 0; render(); });
    document.getElementById("page-prev").addEventListener("click", function () { if (state.page > 0) { state.page--; render(); } });
    document.getElementById("page-next").addEventListener("click", function () { state.page++; render(); });
    if (input.value) { state.words = input.value.trim().toLowerCase().split(/\s+/); render(); }
    else {
      pager.hidden = runs.length <= data.pageRows;
      info.textContent = msg("page", { page: 1, pages: Math.max(1, Math.ceil(runs.length / data.pageRows)) });
    }
    table.setAttribute("data-ready", "1");
  }

  /* ---------- the scalars CSV, written here from scalars.js when asked ---------- */

  function csvText(v) { return '"' + String(v).replace(/"/g, '""') + '"'; }

  function csvNumber(v) {
    if (v === null || v === undefined) return "";
    if (v !== v) return "nan";
    if (v === Infinity) return "inf";
    if (v === -Infinity) return "-inf";
    if (v === 0 && 1 / v < 0) return "-0.0";
    return String(v);
  }

  function saveCsv(cols, name) {
    var series = expand(cols.series), tag = expand(cols.tag), step = expand(cols.step, true),
      wall = expand(cols.wall_time, true), value = expand(cols.value, true);
    var parts = ['"series","tag","step","wall_time","value"\n'];
    for (var i = 0; i < step.length; i++) {
      parts.push(csvText(series[i]) + "," + csvText(tag[i]) + "," + csvNumber(step[i]) + "," +
        csvNumber(wall[i]) + "," + csvNumber(value[i]) + "\n");
    }
    var url = URL.createObjectURL(new Blob(parts, { type: "text/csv" }));
    var a = el("a");
    a.href = url;
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
  }

  function initCsv(link) {
    link.hidden = false;
    link.addEventListener("click", function (ev) {
      ev.preventDefault();
      var done = function () { saveCsv(window.SITEGEN_SCALARS, link.getAttribute("data-file")); };
      if (window.SITEGEN_SCALARS) return done();
      var script = document.createElement("script");  // a classic script: works over file://
      script.src = link.getAttribute("href");
      script.onload = done;
      script.onerror = function () { link.parentNode.appendChild(el("span", "error", msg("csv_failed") + " " + script.src)); };
      document.head.appendChild(script);
    });
  }

  function init() {
    var block = document.getElementById("sitegen-page");  // the page's data, in the page itself
    if (block && !window.SITEGEN_PAGE) window.SITEGEN_PAGE = JSON.parse(block.textContent);
    forEach(document.querySelectorAll("a.csv-download"), initCsv);
    forEach(document.querySelectorAll("table.sortable"), makeSortable);
    var hpFilter = document.getElementById("hp-filter"), hpTable = document.getElementById("hp-table");
    if (hpFilter && hpTable) makeFilter(hpFilter, hpTable, document.getElementById("hp-count"));
    if (window.SITEGEN_INDEX && document.getElementById("runs")) initIndex(window.SITEGEN_INDEX);
    var page = window.SITEGEN_PAGE;
    if (page && page.kind === "compare" && window.vegaEmbed) initCompare(page);
    if (page && page.images) initImages(page);
    drawCharts();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
