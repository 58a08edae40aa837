/* The index page (uses window.SITEGEN from core.js): searches, sorts, groups and pages every run
   from index-data.js. */
(function (S) {
  "use strict";
  var forEach = S.forEach, msg = S.msg, el = S.el, compare = S.compare;

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
    var fresh = {}, live = {}, ticked = {};
    (data.fresh || []).forEach(function (i) { fresh[i] = true; });
    (data.running || []).forEach(function (i) { live[i] = true; });
    var texts = null;

    // a column gathers the spellings of one hyperparameter (sitegen.pages.hpnames): the first logged
    function hpValue(r, keyIds) {
      for (var k = 0; k < keyIds.length; k++) { var v = r[10][String(keyIds[k])]; if (v !== undefined) return v; }
      return null;
    }
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
    function tickCell(tr, slug) {
      var box = el("input", "run-tick");
      box.type = "checkbox";
      box.value = slug;
      box.checked = !!ticked[slug];
      box.setAttribute("aria-label", msg("tick"));
      tr.appendChild(el("td", "tick")).appendChild(box);
    }
    function row(i) {
      var r = runs[i], tr = el("tr");
      tickCell(tr, r[0]);
      for (var g = 0; g < depth; g++) {
        var key = r[1].slice(0, g + 1).join("/");
        cell(tr, r[1][g], "", r[1][g] && data.groups[key] ? data.groups[key] : null);
      }
      var name = cell(tr, r[2], "", "runs/" + r[0] + "/index.html");
      if (fresh[i]) {  /* the badge is drawn by CSS from data-badge: the cell's text stays the run's name */
        name.className = "fresh";
        name.setAttribute("data-badge", msg("new"));
        name.title = msg("new_title");
      }
      if (live[i]) {
        var link = name.querySelector("a");
        link.className = "running";
        link.setAttribute("data-badge", msg("running"));
        link.title = msg("running_title");
      }
      cell(tr, r[4]);
      cell(tr, r[6]);
      cell(tr, r[7] === null ? "" : String(r[7]));
      for (var m = 0; m < nm; m++) {
        var best = data.best[m][String(i)];  // "p": best of its project, "m": of its model
        var td = cell(tr, fmtNum(r[8][m]) + (best ? (best === "p" ? " ★" : " ☆") : ""), best ? "num best best-" + best : "num");
        if (best) td.title = msg(best === "p" ? "best_project" : "best_model");
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
      if (!button) return;
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
    initTicks(data, body, ticked);
    table.setAttribute("data-ready", "1");
  }

  /* ---------- ticked runs, opened as an ad-hoc comparison ---------- */

  // the comparison page of the smallest group holding every ticked run, the runs in its hash
  // (#runs=slug,slug, core.js's hash format: charts.js ticks them there); works over file://,
  // nothing is fetched
  function adhocHref(data, slugs) {
    var bySlug = {};
    data.runs.forEach(function (r) { bySlug[r[0]] = r; });
    var common = null;
    slugs.forEach(function (s) {
      var parts = bySlug[s][1].filter(function (p) { return p !== ""; });
      if (common === null) { common = parts; return; }
      var n = 0;
      while (n < common.length && n < parts.length && common[n] === parts[n]) n++;
      common = common.slice(0, n);
    });
    var href = data.all;
    for (var n = (common || []).length; n > 0; n--) {
      var key = common.slice(0, n).join("/");
      if (data.groups[key]) { href = data.groups[key]; break; }
    }
    return href + "#" + S.hashText([["runs", slugs.join(",")]]);
  }

  function initTicks(data, body, ticked) {
    var link = document.getElementById("compare-ticked");
    if (!link) return;
    function update() {
      var slugs = Object.keys(ticked).filter(function (s) { return ticked[s]; }).sort();
      link.hidden = slugs.length < 1;
      link.textContent = msg("compare_ticked", { n: slugs.length });
      if (slugs.length) link.href = adhocHref(data, slugs);
    }
    body.addEventListener("change", function (ev) {
      var box = ev.target;
      if (!box.classList || !box.classList.contains("run-tick")) return;
      ticked[box.value] = box.checked;
      update();
    });
    forEach(body.querySelectorAll("input.run-tick"), function (box) { if (box.checked) ticked[box.value] = true; });
    update();
  }

  S.ready(function () {
    if (window.SITEGEN_INDEX && document.getElementById("runs")) initIndex(window.SITEGEN_INDEX);
  });
})(window.SITEGEN);
