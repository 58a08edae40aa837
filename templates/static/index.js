/* The index page (uses window.SITEGEN from core.js): searches, sorts, groups and pages every run.
   The first page is in the HTML and index-data.js is a small head (columns, the group tree, the
   shard list); the rows load in shards (index/<digest>.js, classic scripts that call
   SITEGEN_INDEX_SHARD) only when a view needs them: a page, a group, a search or a sort. */
(function (S) {
  "use strict";
  var forEach = S.forEach, msg = S.msg, el = S.el, compare = S.compare;

  function fmtNum(v) {
    if (v === null || v === undefined) return "";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
    return String(Number(v.toPrecision(6)));
  }

  /* ---------- the shards ---------- */

  // rows of shard k, loaded once; onLoad() after each shard arrives
  function shardStore(data, onLoad, onError) {
    var shards = data.shards, offsets = [], byName = {}, rows = [], asked = {}, n = 0;
    shards.forEach(function (s, k) { offsets.push(n); n += s[1]; byName[s[0]] = k; rows.push(null); });
    function unpack(p, r, at) {
      var parts = r[1].slice(), hp = {};
      while (parts.length < data.depth) parts.push("");
      Object.keys(r[10]).forEach(function (k) { hp[p.hkeys[Number(k)]] = r[10][k]; });
      return {
        i: at, slug: r[0], parts: parts, name: r[2], start: r[3], startText: r[4], dur: r[5], durText: r[6],
        last: r[7], m: r[8], tags: r[9].map(function (t) { return p.tags[t]; }), hp: hp, best: r[11] || "", text: null
      };
    }
    window.SITEGEN_INDEX_SHARD = function (name, p) {
      var k = byName[name];
      if (k === undefined || rows[k]) return;
      rows[k] = p.rows.map(function (r, j) { return unpack(p, r, offsets[k] + j); });
      onLoad();
    };
    return {
      rows: rows,
      count: shards.length,
      // true when every shard of ks is here; else asks for the missing ones
      load: function (ks) {
        var missing = 0;
        ks.forEach(function (k) {
          if (rows[k]) return;
          missing++;
          if (asked[k]) return;
          asked[k] = true;
          var s = document.createElement("script");
          s.src = "index/" + shards[k][0] + ".js";
          s.onload = function () { s.remove(); };
          s.onerror = function () { asked[k] = false; s.remove(); onError(); };
          document.head.appendChild(s);
        });
        return missing === 0;
      },
      loaded: function (ks) { return ks.filter(function (k) { return rows[k]; }).length; },
      // the shards holding rows [lo, hi) of the default order
      between: function (lo, hi) {
        var out = [];
        for (var k = 0; k < shards.length; k++) if (offsets[k] < hi && offsets[k] + shards[k][1] > lo) out.push(k);
        return out;
      },
      all: function () { return shards.map(function (_, k) { return k; }); }
    };
  }

  function initIndex(data) {
    var table = document.getElementById("runs"), body = table.tBodies[0];
    var input = document.getElementById("run-filter"), counter = document.getElementById("run-count");
    var groupBy = document.getElementById("group-by");
    var pager = document.getElementById("pager"), info = document.getElementById("page-info");
    var depth = data.depth, nm = data.metrics.length;
    var state = { col: null, asc: true, page: 0, group: -1, words: [], only: "" };
    var fresh = {}, live = {}, ticked = {}, waiting = false;
    if (data.fresh !== "all") (data.fresh || []).forEach(function (s) { fresh[s] = true; });
    (data.running || []).forEach(function (s) { live[s] = true; });
    var store = shardStore(data, function () { if (waiting) render(); }, function () {
      counter.textContent = msg("load_failed");
    });

    // a column gathers the spellings of one hyperparameter (sitegen.pages.hpnames): the first logged
    function hpValue(r, names) {
      for (var k = 0; k < names.length; k++) { var v = r.hp[names[k]]; if (v !== undefined) return v; }
      return null;
    }
    function value(r, col) {
      var kind = col.charAt(0), n = Number(col.slice(1));
      if (col === "run") return String(r.name).toLowerCase();
      if (col === "start") return r.start;
      if (col === "dur") return r.dur;
      if (col === "last") return r.last;
      if (kind === "g") return String(r.parts[n]).toLowerCase();
      if (kind === "m") return r.m[n];
      if (kind === "h") { var v = hpValue(r, data.hcols[n]); return typeof v === "string" ? v.toLowerCase() : v; }
      return null;
    }
    function searchText(r) {
      var parts = r.parts.slice();
      parts.push(r.name, r.slug);
      parts.push.apply(parts, r.tags);
      Object.keys(r.hp).forEach(function (k) { parts.push(k + "=" + r.hp[k]); });
      return parts.join(" ").toLowerCase();
    }
    function plain() { return !state.words.length && !state.col && state.group < 0 && !state.only; }
    // the shards the current view needs: one page of the default order, else the group's or all
    function needed() {
      var per = data.pageRows;
      if (plain()) {
        state.page = Math.min(state.page, Math.max(0, Math.ceil(data.total / per) - 1));
        return store.between(state.page * per, (state.page + 1) * per);
      }
      return state.only ? data.tree[state.only][1] : store.all();
    }
    function rowsOf(ks) {
      var out = [];
      ks.forEach(function (k) { out.push.apply(out, store.rows[k]); });
      return out;
    }
    function selected(ks) {
      var list = rowsOf(ks);
      if (plain()) return list;
      if (state.only) {
        var n = state.only.split("/").length;
        list = list.filter(function (r) { return r.parts.slice(0, n).join("/") === state.only; });
      }
      if (state.words.length) {
        list = list.filter(function (r) {
          if (r.text === null) r.text = searchText(r);
          for (var w = 0; w < state.words.length; w++) if (r.text.indexOf(state.words[w]) === -1) return false;
          return true;
        });
      }
      if (state.col) {
        var col = state.col, asc = state.asc;
        list.sort(function (a, b) {
          var va = value(a, col), vb = value(b, col);
          var c = compare(va, vb);
          if (va === null || vb === null) return c || a.i - b.i;
          return (asc ? c : -c) || a.i - b.i;
        });
      }
      if (state.group >= 0) {
        var g = state.group, pos = new Map();
        list.forEach(function (r, p) { r.key = r.parts.slice(0, g + 1).join("/"); pos.set(r, p); });
        list.sort(function (a, b) { return a.key < b.key ? -1 : a.key > b.key ? 1 : pos.get(a) - pos.get(b); });
      }
      return list;
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
    function row(r) {
      var tr = el("tr");
      tickCell(tr, r.slug);
      for (var g = 0; g < depth; g++) {
        var key = r.parts.slice(0, g + 1).join("/");
        cell(tr, r.parts[g], "", r.parts[g] && data.groups[key] ? data.groups[key] : null);
      }
      var name = cell(tr, r.name, "", "runs/" + r.slug + "/index.html");
      if (data.fresh === "all" || fresh[r.slug]) {  /* the badge is drawn by CSS from data-badge: the cell's text stays the run's name */
        name.className = "fresh";
        name.setAttribute("data-badge", msg("new"));
        name.title = msg("new_title");
      }
      if (live[r.slug]) {
        var link = name.querySelector("a");
        link.className = "running";
        link.setAttribute("data-badge", msg("running"));
        link.title = msg("running_title");
      }
      cell(tr, r.startText);
      cell(tr, r.durText);
      cell(tr, r.last === null ? "" : String(r.last));
      for (var m = 0; m < nm; m++) {
        var best = r.best.charAt(m);  // "p": best of its project, "m": of its model
        if (best !== "p" && best !== "m") best = "";
        var td = cell(tr, fmtNum(r.m[m]) + (best ? (best === "p" ? " ★" : " ☆") : ""), best ? "num best best-" + best : "num");
        if (best) td.title = msg(best === "p" ? "best_project" : "best_model");
      }
      data.hcols.forEach(function (names) { cell(tr, fmtNum(hpValue(r, names))); });
      return tr;
    }
    function render() {
      var ks = needed();
      if (!store.load(ks)) {
        waiting = true;
        table.setAttribute("aria-busy", "true");
        counter.textContent = msg("loading", { done: store.loaded(ks), total: ks.length });
        return;
      }
      waiting = false;
      table.removeAttribute("aria-busy");
      var list = selected(ks), count = plain() ? data.total : list.length, per = data.pageRows;
      var pages = Math.max(1, Math.ceil(count / per));
      if (state.page >= pages) state.page = pages - 1;
      var lo = state.page * per, hi = lo + per;
      var shown = plain() ? list.filter(function (r) { return r.i >= lo && r.i < hi; }) : list.slice(lo, hi);
      var frag = document.createDocumentFragment(), lastGroup = null, sizes = {};
      var cols = table.tHead.rows[0].cells.length;
      if (state.group >= 0) list.forEach(function (r) { sizes[r.key] = (sizes[r.key] || 0) + 1; });
      shown.forEach(function (r) {
        if (state.group >= 0 && r.key !== lastGroup) {
          lastGroup = r.key;
          var tr = el("tr", "group-row"), td = tr.appendChild(el("td"));
          td.colSpan = cols;
          td.appendChild(el("strong", "", r.key));
          td.appendChild(el("span", "muted", " · " + msg("group_runs", { n: sizes[r.key] }) + " · "));
          if (data.groups[r.key]) { var a = td.appendChild(el("a", "", msg("compare"))); a.href = data.groups[r.key]; }
          frag.appendChild(tr);
        }
        frag.appendChild(row(r));
      });
      body.textContent = "";
      body.appendChild(frag);
      counter.textContent = count ? msg("shown", { shown: count, total: data.total }) : msg("no_match");
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
    // the search needs every row of the view: start loading them as soon as the box has focus
    input.addEventListener("focus", function () { store.load(state.only ? data.tree[state.only][1] : store.all()); });
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      state.words = q ? q.split(/\s+/) : [];
      state.page = 0;
      render();
    });
    if (groupBy) groupBy.addEventListener("change", function () { state.group = Number(groupBy.value); state.page = 0; render(); });
    document.getElementById("page-prev").addEventListener("click", function () { if (state.page > 0) { state.page--; render(); } });
    document.getElementById("page-next").addEventListener("click", function () { state.page++; render(); });
    var only = groupFilter(data, function (key) {
      state.only = key;
      state.page = 0;
      render();
    });
    prefetchOnScroll(store, state, data, plain);
    var q0 = input.value.trim().toLowerCase();
    if (q0) state.words = q0.split(/\s+/);
    state.only = only;
    if (q0 || only) render();
    else {
      pager.hidden = data.total <= data.pageRows;
      info.textContent = msg("page", { page: 1, pages: Math.max(1, Math.ceil(data.total / data.pageRows)) });
    }
    initTicks(data, body, ticked);
    table.setAttribute("data-ready", "1");
  }

  /* ---------- a group's runs only (#group=project/model): only its shards are loaded ---------- */

  function groupFilter(data, apply) {
    var controls = document.querySelector(".controls"), keys = Object.keys(data.tree);
    if (!controls || !keys.length) return "";
    var label = el("label", "", msg("group_filter") + " "), select = el("select");
    select.id = "group-filter";
    select.appendChild(el("option", "", msg("group_all", { n: data.total }))).value = "";
    keys.forEach(function (key) {
      var parts = key.split("/"), o = el("option", "", "\u00a0\u00a0".repeat(parts.length - 1) + parts[parts.length - 1] + " (" + data.tree[key][0] + ")");
      o.value = key;
      select.appendChild(o);
    });
    label.appendChild(select);
    controls.insertBefore(label, controls.children[1] || null);
    function fromHash() {
      var m = /(?:^#|&)group=([^&]*)/.exec(location.hash);
      var key = m ? decodeURIComponent(m[1]) : "";
      return data.tree[key] ? key : "";
    }
    select.addEventListener("change", function () {
      var key = select.value;
      history.replaceState(null, "", key ? "#group=" + encodeURIComponent(key) : location.pathname + location.search);
      apply(key);
    });
    window.addEventListener("hashchange", function () { select.value = fromHash(); apply(select.value); });
    select.value = fromHash();
    return select.value;
  }

  // the next page's shards are asked for when the end of the table scrolls into view
  function prefetchOnScroll(store, state, data, plain) {
    var wrap = document.querySelector(".table-wrap"), end = wrap && wrap.nextElementSibling;
    if (!end || !window.IntersectionObserver) return;
    new IntersectionObserver(function (seen) {
      if (seen.some(function (e) { return e.isIntersecting; }) && plain()) {
        var per = data.pageRows;
        store.load(store.between((state.page + 1) * per, (state.page + 2) * per));
      }
    }).observe(end);
  }

  /* ---------- ticked runs, opened as an ad-hoc comparison ---------- */

  // the comparison page of the smallest group holding every ticked run, the runs in its hash
  // (#runs=slug,slug, core.js's hash format: charts.js ticks them there); works over file://,
  // nothing is fetched
  function adhocHref(data, ticked, slugs) {
    var common = null;
    slugs.forEach(function (s) {
      var parts = ticked[s];
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

  // a ticked run's groups, as its row shows them (the row may come from the HTML or a shard)
  function groupsOf(box, depth) {
    var cells = box.closest("tr").cells, out = [];
    for (var g = 1; g <= depth && g < cells.length; g++) if (cells[g].textContent) out.push(cells[g].textContent);
    return out;
  }

  function initTicks(data, body, ticked) {
    var link = document.getElementById("compare-ticked");
    if (!link) return;
    function update() {
      var slugs = Object.keys(ticked).filter(function (s) { return ticked[s]; }).sort();
      link.hidden = slugs.length < 1;
      link.textContent = msg("compare_ticked", { n: slugs.length });
      if (slugs.length) link.href = adhocHref(data, ticked, slugs);
    }
    body.addEventListener("change", function (ev) {
      var box = ev.target;
      if (!box.classList || !box.classList.contains("run-tick")) return;
      ticked[box.value] = box.checked ? groupsOf(box, data.depth) : null;
      update();
    });
    forEach(body.querySelectorAll("input.run-tick"), function (box) { if (box.checked) ticked[box.value] = groupsOf(box, data.depth); });
    update();
  }

  S.ready(function () {
    if (window.SITEGEN_INDEX && document.getElementById("runs")) initIndex(window.SITEGEN_INDEX);
  });
})(window.SITEGEN);
