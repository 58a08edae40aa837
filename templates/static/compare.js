/* Comparison pages (uses window.SITEGEN from core.js): the overlay charts' lines and run list
   handed to charts.js (which draws them with the toolbar and keeps the view in the hash), the
   note of an ad-hoc comparison, the sortable, filterable hyperparameter table, the config diff,
   and the hyperparameter charts. */
(function (S) {
  "use strict";
  var forEach = S.forEach, msg = S.msg, el = S.el, expand = S.expand, compare = S.compare;

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

  /* ---------- the overlay charts: drawn by charts.js (window.SITEGEN_CHARTS) ---------- */

  // a run's colour key: its slug (from its page's address)
  function slugsOf(runs) { return runs.map(function (r) { var m = /runs\/([^/]+)\//.exec(r.h); return m ? m[1] : r.n; }); }

  // each tag comes in parts (a few runs each: sitegen.compare._assemble), each part its
  // lines and their points as one column per field; every line takes its n of them, and its
  // run index counts from the part's first run (base)
  // the parts are in the page's piece scripts (window.SITEGEN_PIECES): "from" says which
  // piece and where in it; a piece that failed to load leaves its runs' lines out
  function decode(page, slugs) {
    var pieces = window.SITEGEN_PIECES || {};
    page.tags.forEach(function (tg) {
      tg.lines = [];
      tg.parts = (tg.from || []).map(function (f) {
        var pc = pieces[page.pieces[f[0]]];
        return pc && pc[f[1]] && pc[f[1]][0] === tg.tag ? pc[f[1]][1] : null;
      });
      tg.parts.forEach(function (part, k) {
        if (!part) return;
        var x = expand(part[1]), t = expand(part[2]), y = expand(part[3], true), at = 0;
        part[0].forEach(function (ln) {
          ln.r += tg.base[k];
          ln.x = x.slice(at, at + ln.n); ln.y = y.slice(at, at + ln.n); ln.t = t.slice(at, at + ln.n);
          ln.w0 = page.runs[ln.r].w0;
          var label = page.runs[ln.r].n;
          ln.key = ln.s.indexOf(label + " · ") === 0 ? slugs[ln.r] + ln.s.slice(label.length) : slugs[ln.r];
          at += ln.n;
          tg.lines.push(ln);
        });
      });
    });
  }

  function initCompare(page) {
    if (page.summary) { initSummary(page); return; }
    var slugs = slugsOf(page.runs);  // (and a sub-run's label)
    decode(page, slugs);
    var toggles = Array.prototype.slice.call(document.querySelectorAll(".run-toggle"));
    var items = toggles.map(function (t) { return t.closest("li"); });
    var C = window.SITEGEN_CHARTS;
    var charts = Array.prototype.slice.call(document.querySelectorAll(".chart.overlay[data-tag-index]")).map(function (el) {
      var tg = page.tags[Number(el.dataset.tagIndex)], fig = el.closest("figure");
      return { el: el, fig: fig, tag: tg.tag, lines: tg.lines, logBtn: C.logButton(fig) };
    });
    toggles.forEach(function (t, i) {
      var sw = C.paint(document.createElement("span"), C.colour(slugs[Number(t.dataset.r)]));
      sw.className = "swatch";
      t.parentNode.insertBefore(sw, t.nextSibling);
      items[i].addEventListener("mouseenter", function () { api.highlight(page.runs[Number(t.dataset.r)].n); });
      items[i].addEventListener("mouseleave", function () { api.highlight(null); });
    });
    var api = { highlight: function () {} }, ctl = null;
    var hp = hparamFilter(page, slugs, charts, toggles, function () { if (ctl) ctl.refresh(); }, function (n) { api.highlight(n); });
    ctl = C.init({
      charts: charts,
      runs: page.runs.map(function (r) { return r.n; }),
      slugs: slugs,
      defaultOn: page.runs.map(function (_, i) { return i >= page.runs.length - page.on; }),
      toggles: toggles,
      allButton: document.getElementById("runs-all"),
      noneButton: document.getElementById("runs-none"),
      onRuns: function (on) {
        document.getElementById("runs-shown").textContent = on.filter(function (x, r) { return x && hp.shows(r); }).length + " / " + toggles.length;
      },
      onTags: function (visible) { document.getElementById("no-tags").hidden = visible > 0; },
      onHighlight: hp.highlight,
      hashExtra: hp.hashText
    });
    api.highlight = ctl.hover;
    if (ctl.named && ctl.named.wanted) adhocNote(ctl.named);
  }

  /* ---------- a summarised page: per group a median line, a band and its best run ----------
     A group's runs come from its own script (named in summary.groups[].file), loaded when it is
     ticked; the expanded groups are in the hash (#groups=key,key). */

  function summaryLines(tg, groups) {
    var x = expand(tg.x), none = x.map(function () { return null; }), lines = [];
    tg.bands.forEach(function (b) {
      var g = groups[b[0]], bad = {};
      b[5].forEach(function (j) { bad[j] = true; });
      lines.push({ r: -1, s: g.n + " · " + msg("median"), key: g.k, dash: [1, 0], x: x, t: none, w0: 0,
        y: expand(b[1], true), lo: expand(b[2], true), hi: expand(b[3], true), bad: bad });
    });
    tg.best.forEach(function (b) {
      var g = groups[b[0]], bx = expand(b[1]);
      lines.push({ r: -1, s: "★ " + g.best, key: g.k, dash: [6, 3], x: bx, t: bx.map(function () { return null; }), w0: 0,
        y: expand(b[2], true) });
    });
    return lines;
  }

  function initSummary(page) {
    var groups = page.summary.groups, C = window.SITEGEN_CHARTS, byTag = {}, ctl = null;
    window.SITEGEN_PIECES = window.SITEGEN_PIECES || {};
    var charts = Array.prototype.slice.call(document.querySelectorAll(".chart.overlay[data-tag-index]")).map(function (el) {
      var tg = page.tags[Number(el.dataset.tagIndex)], fig = el.closest("figure"), lines = summaryLines(tg, groups);
      var c = { el: el, fig: fig, tag: tg.tag, lines: lines, all: lines, logBtn: C.logButton(fig) };
      byTag[tg.tag] = c;
      return c;
    });
    // the parallel coordinates' brushes keep the runs inside them (by slug; null: no brush); they
    // filter the drawn runs of ticked groups, not the medians, bands and best runs (all the runs)
    var kept = null;
    function filter() {
      charts.forEach(function (c) { c.lines = kept ? c.all.filter(function (ln) { return !ln.run || kept[ln.run]; }) : c.all; });
    }
    var toggles = Array.prototype.slice.call(document.querySelectorAll(".group-toggle"));
    toggles.forEach(function (t) {
      var sw = C.paint(document.createElement("span"), C.colour(groups[Number(t.dataset.r)].k));
      sw.className = "swatch";
      t.parentNode.insertBefore(sw, t.nextSibling);
    });
    var asked = {};
    function added(k) {  // the group's runs arrived: their lines join the charts, drawn while it is ticked
      var data = window.SITEGEN_PIECES[groups[k].file];
      if (!data) return;
      var slugs = slugsOf(data.runs);
      decode(data, slugs);
      data.tags.forEach(function (tg) {
        var c = byTag[tg.tag];
        if (c) tg.lines.forEach(function (ln) { ln.run = slugs[ln.r]; ln.r = k; c.all.push(ln); });
      });
      filter();
      toggles[k].closest("li").setAttribute("data-loaded", "1");
      if (ctl) ctl.refresh();
    }
    function load(k) {
      var g = groups[k];
      if (asked[k] || !g.file) return;
      asked[k] = true;
      var s = document.createElement("script");
      s.src = g.file;
      s.onload = function () { s.remove(); added(k); };
      s.onerror = function () {
        asked[k] = false;
        s.remove();
        toggles[k].closest("li").appendChild(el("span", "warn", " " + msg("group_failed", { name: g.n })));
      };
      document.head.appendChild(s);
    }
    var host = document.getElementById("pc-chart"), pc = host ? page.charts[Number(host.dataset.pc)] : null, hp = null;
    if (window.SITEGEN_HPARAMS && pc) {
      hp = window.SITEGEN_HPARAMS.attach({
        page: page, slugs: pc.s, names: pc.n,
        onHover: function (n) { if (ctl) ctl.hover(n); },
        onChange: function (m) {
          kept = null;
          if (m) { kept = {}; m.forEach(function (x, j) { if (x) kept[pc.s[j]] = true; }); }
          filter();
          if (ctl) ctl.refresh();
        }
      });
    }
    ctl = C.init({
      charts: charts,
      runs: groups.map(function (g) { return g.n; }),
      slugs: groups.map(function (g) { return g.k; }),
      defaultOn: groups.map(function () { return false; }),
      hashKey: "groups",
      toggles: toggles,
      allButton: document.getElementById("runs-all"),
      noneButton: document.getElementById("runs-none"),
      onRuns: function (on) {
        document.getElementById("runs-shown").textContent = on.filter(Boolean).length + " / " + toggles.length;
        on.forEach(function (x, k) { if (x) load(k); });
      },
      onTags: function (visible) { document.getElementById("no-tags").hidden = visible > 0; },
      onHighlight: function (n) { if (hp) hp.highlight(n); },
      hashExtra: function () { return hp ? hp.hashText() : ""; }
    });
  }

  /* ---------- the parallel coordinates' brushes (hparams.js) filter the runs shown ----------
     A run outside the brushes leaves the curves and the run list as if unticked; its tick stays,
     so clearing the brushes brings back exactly what was ticked. */

  function hparamFilter(page, slugs, charts, toggles, refresh, hover) {
    var mask = null, hp = null;
    charts.forEach(function (c) { c.all = c.lines; });
    function changed(m) {
      mask = m;
      charts.forEach(function (c) { c.lines = m ? c.all.filter(function (ln) { return ln.r < 0 || m[ln.r]; }) : c.all; });
      toggles.forEach(function (t) { t.closest("li").hidden = !!m && !m[Number(t.dataset.r)]; });
      var shown = document.getElementById("runs-shown");
      if (shown) shown.textContent = toggles.filter(function (t) { return t.checked && (!m || m[Number(t.dataset.r)]); }).length + " / " + toggles.length;
      refresh();
    }
    if (window.SITEGEN_HPARAMS) {
      hp = window.SITEGEN_HPARAMS.attach({ page: page, slugs: slugs, names: page.runs.map(function (r) { return r.n; }), onChange: changed, onHover: hover });
    }
    return {
      shows: function (r) { return !mask || !!mask[r]; },
      highlight: function (n) { if (hp) hp.highlight(n); },
      hashText: function () { return hp ? hp.hashText() : ""; }
    };
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

  /* ---------- an ad-hoc comparison: the runs the address names (#runs=slug,slug) ----------
     The index's "Compare ticked runs" link names them; charts.js reads the hash and ticks them. */

  function adhocNote(named) {
    var picker = document.querySelector("details.run-picker"), note = el("p", "note adhoc-note", msg("adhoc", { n: named.found }));
    if (named.found < named.wanted) note.appendChild(el("span", "warn", " " + msg("not_on_page", { n: named.wanted - named.found })));
    var hint = document.getElementById("default-on-note");
    if (hint) hint.hidden = true;
    if (picker) { picker.open = true; picker.parentNode.insertBefore(note, picker); }
  }

  /* The hyperparameter table (a row per run: hundreds on a big page) comes in a <template>:
     parsed with the page but not styled, laid out or painted until it is put in, when the
     browser is next idle after the first charts or when the table comes near the screen,
     whichever is first. Laid out with the page, it cost a 450-run page's first chart 0.2 s. */
  function laterTable(then) {
    var tpl = document.getElementById("hp-table-later"), io = null, done = false;
    if (!tpl) { then(); return; }
    function put() {
      if (done) return;
      done = true;
      if (io) io.disconnect();
      tpl.parentNode.replaceChild(document.importNode(tpl.content, true), tpl);
      then();
    }
    if ("IntersectionObserver" in window) {
      io = new IntersectionObserver(function (seen) {
        if (seen.some(function (e) { return e.isIntersecting; })) put();
      }, { rootMargin: "100% 0px" });
      io.observe(tpl.parentNode);
    }
    if (window.requestIdleCallback) window.requestIdleCallback(put, { timeout: 2000 });
    else setTimeout(put, 500);
  }

  S.ready(function () {
    var page = S.pageData();
    forEach(document.querySelectorAll("table.sortable"), makeSortable);
    if (page && page.kind === "compare" && window.vegaEmbed && window.SITEGEN_CHARTS) initCompare(page);
    S.drawCharts();
    laterTable(function () {
      var hpFilter = document.getElementById("hp-filter"), hpTable = document.getElementById("hp-table");
      if (hpTable) makeSortable(hpTable);
      if (hpFilter && hpTable) makeFilter(hpFilter, hpTable, document.getElementById("hp-count"));
      if (page) initDiff(page);
    });
  });
})(window.SITEGEN);
