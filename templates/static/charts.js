/* The line charts of run and comparison pages: one colour per run on every page, a hover rule
   with every run's value at that step, drag-zoom shared by the page's charts, outlier-free y
   ranges, per-chart log scales, highlight across charts, and the whole view kept in the URL's
   hash (read and written by core.js's hashParams/hashText, the one hash format of the site).
   A classic script (file://, CSP script-src 'self'): window.SITEGEN_CHARTS. */
(function () {
  "use strict";

  /* ---------- colours: from a run's identity, the same on every page ---------- */

  // Okabe-Ito first (colour-blind safe; its yellow darkened to show on white), then 16 more
  var PALETTE = [
    "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#b59c00", "#333333",
    "#332288", "#117733", "#882255", "#44aa99", "#999933", "#aa4499", "#6699cc", "#661100",
    "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22", "#9467bd", "#2ca02c", "#ff7f0e"
  ];
  var DASHES = [[1, 0], [6, 3], [2, 2], [8, 3, 2, 3], [1, 3], [10, 4]];

  function hash(text) {  // FNV-1a, 32 bits, over UTF-16 code units
    var h = 0x811c9dc5;
    for (var i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h >>> 0;
  }

  function colour(key) { return PALETTE[hash(String(key)) % PALETTE.length]; }

  // a swatch (or any box) in a run's colour; data-c lets site.css lighten the palette's darkest
  // colours in dark mode, as it does for the lines drawn in them
  function paint(box, c) {
    box.style.backgroundColor = c;
    box.setAttribute("data-c", c);
    return box;
  }

  // colours of the visible lines; the second, third... line of one colour gets a dash
  function styles(keys) {
    var seen = {}, out = [];
    keys.forEach(function (k) {
      var c = colour(k), n = seen[c] || 0;
      seen[c] = n + 1;
      out.push({ colour: c, dash: DASHES[n % DASHES.length] });
    });
    return out;
  }

  // TensorBoard's smoothing: an exponential moving average, debiased so early points are not
  // pulled towards zero; non-finite points stay gaps
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

  function lowerBound(xs, v) {  // first index with xs[i] >= v (xs ascending)
    var lo = 0, hi = xs.length;
    while (lo < hi) { var m = (lo + hi) >> 1; if (xs[m] < v) lo = m + 1; else hi = m; }
    return lo;
  }

  function nearest(xs, v) {
    if (!xs.length) return -1;
    var i = lowerBound(xs, v);
    if (i >= xs.length) return xs.length - 1;
    if (i > 0 && v - xs[i - 1] <= xs[i] - v) return i - 1;
    return i;
  }

  function quantile(sorted, p) { return sorted[Math.min(sorted.length - 1, Math.max(0, Math.floor(p * (sorted.length - 1))))]; }

  function padded(lo, hi, log) {
    if (log) {
      if (!(lo > 0)) return [1, 10];
      if (hi <= lo) return [lo / 2, hi * 2];
      var f = Math.pow(hi / lo, 0.05);
      return [lo / f, hi * f];
    }
    if (hi <= lo) { var d = Math.abs(hi) || 1; return [lo - d * 0.1, hi + d * 0.1]; }
    var pad = (hi - lo) * 0.05;
    return [lo - pad, hi + pad];
  }

  function fmt(v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    var a = Math.abs(v);
    return a !== 0 && (a >= 1e6 || a < 1e-4) ? v.toExponential(4) : String(Number(v.toPrecision(6)));
  }

  /* ---------- the state of the view and the URL's hash ---------- */

  // (the ticked runs, "on", are the page's defaultOn unless the hash names them)
  var DEFAULT = { w: 0.6, x: "step", y: "linear", out: false, link: true, tags: "", match: "", zoom: null, log: [], hl: "" };

  function same(a, b) { return a.length === b.length && a.every(function (v, i) { return !!v === !!b[i]; }); }

  /* ---------- the charts of a page ---------- */

  function init(opts) {
    var S = window.SITEGEN, specs = window.SITEGEN_SPECS, msg = S.msg;
    var charts = opts.charts, nRuns = opts.runs ? opts.runs.length : 0, slugs = opts.slugs || [];
    var defaultOn = opts.defaultOn || [];
    var named = null;  // the runs the hash names at load: {wanted, found}
    var state = S.clone(DEFAULT);
    state.on = defaultOn.slice();
    var pinned = "";  // highlight chosen by a click; hovering shows another for a while
    var $ = function (id) { return document.getElementById(id); };
    var slider = $("smoothing"), out = $("smoothing-value"), xSel = $("x-axis"), ySel = $("y-scale"),
      outBox = $("outliers"), linkBox = $("zoom-link"), resetBtn = $("zoom-reset"),
      tagInput = $("tag-filter"), runInput = $("run-regex"), err = $("filter-error");
    var toggles = opts.toggles || [];
    var hashKey = opts.hashKey || "runs";  // the ticked runs' (or a summary's expanded groups') key in the hash

    /* state <-> hash */
    function readHash() {
      var p = S.hashParams();
      if (!p) return false;  // a plain anchor (#notes)
      var s = S.clone(DEFAULT);
      var w = Number(p.get("smoothing"));
      if (p.has("smoothing") && w >= 0 && w <= 0.99) s.w = w;
      if (["step", "relative", "wall"].indexOf(p.get("x")) !== -1) s.x = p.get("x");
      if (p.get("y") === "log") s.y = "log";
      s.out = p.get("outliers") === "1";
      s.link = p.get("link") !== "0";
      s.tags = p.get("tags") || "";
      s.match = p.get("match") || "";
      var z = (p.get("zoom") || "").split("~").map(Number);
      if (z.length === 2 && isFinite(z[0]) && isFinite(z[1]) && z[0] < z[1]) s.zoom = z;
      s.log = p.getAll("log");
      s.hl = p.get("hl") || "";
      state = s;
      named = null;
      if (nRuns && p.has(hashKey)) {  // ticked runs by slug: this page's or the index's ticks
        var wanted = {}, count = 0;
        p.get(hashKey).split(",").forEach(function (x) { if (x && !wanted[x]) { wanted[x] = true; count++; } });
        state.on = slugs.map(function (x) { return !!wanted[x]; });
        named = { wanted: count, found: state.on.filter(Boolean).length };
      } else {
        var re = state.match ? runRegex() : null;
        state.on = re ? byRegex(re) : defaultOn.slice();
      }
      pinned = state.hl;
      return true;
    }

    function hashText() {
      var p = [];
      if (state.w !== DEFAULT.w) p.push(["smoothing", state.w.toFixed(2)]);
      if (state.x !== DEFAULT.x) p.push(["x", state.x]);
      if (state.y !== DEFAULT.y) p.push(["y", state.y]);
      if (state.out) p.push(["outliers", "1"]);
      if (!state.link) p.push(["link", "0"]);
      if (state.tags) p.push(["tags", state.tags]);
      if (state.match) p.push(["match", state.match]);
      if (nRuns && !same(state.on, defaultOn)) p.push([hashKey, slugs.filter(function (_, i) { return state.on[i]; }).join(",")]);
      if (state.zoom) p.push(["zoom", state.zoom[0] + "~" + state.zoom[1]]);
      state.log.forEach(function (t) { p.push(["log", t]); });
      if (pinned) p.push(["hl", pinned]);
      return S.hashText(p);
    }

    var lastPush = { at: 0, what: "" };
    // one history entry per change; a burst of one control (typing, sliding) makes one entry
    function commit(what) {
      var h = hashText(), more = opts.hashExtra ? opts.hashExtra() : "";  // (the hparam brushes: hparams.js)
      if (more) h = h ? h + "&" + more : more;
      var url = location.pathname + location.search + (h ? "#" + h : "");
      if (h === location.hash.replace(/^#/, "")) return;
      var now = Date.now(), burst = what === lastPush.what && now - lastPush.at < 1500;
      try {
        if (burst) history.replaceState(null, "", url);
        else history.pushState(null, "", url);
      } catch (e) { return; }
      lastPush = { at: now, what: what };
    }

    function syncControls() {
      slider.value = String(state.w);
      out.textContent = state.w.toFixed(2);
      xSel.value = state.x;
      ySel.value = state.y;
      outBox.checked = state.out;
      linkBox.checked = state.link;
      tagInput.value = state.tags;
      if (runInput) runInput.value = state.match;
      toggles.forEach(function (t) { t.checked = !!state.on[Number(t.dataset.r)]; });
      charts.forEach(function (c) {
        if (c.logBtn) c.logBtn.setAttribute("aria-pressed", String(isLog(c)));
      });
      resetBtn.disabled = !state.zoom && !charts.some(function (c) { return c.zoom; });
      applyTags();
      if (opts.onRuns) opts.onRuns(state.on);
    }

    /* filters */
    function regex(text) {
      var q = text.trim();
      if (!q) return null;
      try { return new RegExp(q, "i"); } catch (e) { err.hidden = false; return undefined; }
    }
    function runRegex() { return regex(state.match); }
    function byRegex(re) { return (opts.runs || []).map(function (name) { return re === null || re.test(name); }); }

    function applyTags() {
      err.hidden = true;
      var re = regex(state.tags), visible = 0;
      charts.forEach(function (c) {
        var ok = re === undefined || re === null || re.test(c.tag);
        c.fig.hidden = !ok;
        if (ok) visible++;
      });
      if (opts.onTags) opts.onTags(visible);
    }

    /* what each chart draws */
    function isLog(c) { return state.y === "log" || state.log.indexOf(c.tag) !== -1; }
    function zoomOf(c) { return state.link ? state.zoom : c.zoom; }

    function xsOf(ln) {
      var key = "_x_" + state.x;
      if (!ln[key]) {
        ln[key] = state.x === "step" ? ln.x : ln.t.map(function (t) {
          if (t === null || !isFinite(t)) return null;
          return state.x === "relative" ? t / 3600 : (ln.w0 + t) * 1000;
        });
      }
      return ln[key];
    }

    function build(c) {
      var rows = [], series = [], log = isLog(c), zoom = zoomOf(c), few = true, bad = false, band = false;
      var xlo = Infinity, xhi = -Infinity, ys = [];
      c.lines.forEach(function (ln) {
        if (ln.r >= 0 && !state.on[ln.r]) return;
        var xs = xsOf(ln), sm = ema(ln.y, state.w), n = xs.length, lo = 0, hi = n - 1;
        // a summary's median line carries its group's band (lo, hi), smoothed alike; where no
        // run has a value there is no point (not a NaN: those are in ln.bad, marked, not drawn)
        var bLo = ln.lo ? ema(ln.lo, state.w) : null, bHi = ln.hi ? ema(ln.hi, state.w) : null;
        if (zoom) {
          lo = Math.max(0, lowerBound(xs, zoom[0]) - 1);
          hi = Math.min(n - 1, lowerBound(xs, zoom[1]));
        }
        var ser = { s: ln.s, key: ln.key, dash0: ln.dash, x: [], y: [], raw: [], lo: bLo ? [] : null, hi: [] };
        for (var j = lo; j <= hi; j++) {
          var x = xs[j], raw = ln.y[j], y = sm[j], k = "";
          if (x === null || x === undefined || !isFinite(x)) continue;
          if (bLo && (raw === null || !isFinite(raw))) continue;
          if (raw === null || !isFinite(raw)) {
            k = raw === null || raw !== raw ? "nan" : raw > 0 ? "+inf" : "-inf";
            raw = null; y = null; bad = true;
          } else if (ln.bad && ln.bad[j]) { k = "nan"; bad = true; }
          if (log) { if (raw !== null && raw <= 0) raw = null; if (y !== null && y <= 0) y = null; }
          var row = { s: ln.s, x: x, y: y, raw: raw, k: k };
          if (bLo) {
            var a = bLo[j], b = bHi[j];
            if (log) { if (a !== null && a <= 0) a = null; if (b !== null && b <= 0) b = null; }
            row.lo = a; row.hi = b; ser.lo.push(a); ser.hi.push(b); band = true;
            if (!zoom || (x >= zoom[0] && x <= zoom[1])) { if (a !== null) ys.push(a); if (b !== null) ys.push(b); }
          }
          rows.push(row);
          ser.x.push(x); ser.y.push(y); ser.raw.push(raw);
          if (x < xlo) xlo = x;
          if (x > xhi) xhi = x;
          if (y !== null && (!zoom || (x >= zoom[0] && x <= zoom[1]))) ys.push(y);
        }
        if (ser.x.length > 60) few = false;
        series.push(ser);
      });
      var xd = zoom ? zoom.slice() : xlo <= xhi ? (xlo < xhi ? [xlo, xhi] : [xlo - 1, xhi + 1]) : [0, 1];
      ys.sort(function (a, b) { return a - b; });
      var yd = ys.length ? (state.out && ys.length > 10 ? padded(quantile(ys, 0.05), quantile(ys, 0.95), log) : padded(ys[0], ys[ys.length - 1], log)) : (log ? [1, 10] : [0, 1]);
      var st = styles(series.map(function (s) { return s.key; }));
      series.forEach(function (s, i) { s.colour = st[i].colour; s.dash = s.dash0 || st[i].dash; });
      var key = JSON.stringify([state.x, log, series.map(function (s) { return [s.s, s.colour, s.dash]; }), bad, few, band, c.lines.length]);
      return { rows: rows, series: series, xd: xd, yd: yd, key: key, bad: bad, few: few, band: band };
    }

    function specFor(c, d) {
      var spec = S.clone(specs.overlay);
      S.fitWidth(c.el, spec, "scalar");
      spec.data = { name: "rows" };
      spec.datasets = { rows: d.rows };
      var names = d.series.map(function (s) { return s.s; });
      var dashed = d.series.some(function (s) { return s.dash.length > 2 || s.dash[1] > 0; });
      if (!d.bad) spec.layer.splice(2, 1);  // (an empty layer warns)
      spec.layer.forEach(function (layer) {
        var enc = layer.encoding;
        enc.x.type = state.x === "wall" ? "temporal" : "quantitative";
        enc.x.title = msg("x_" + state.x);
        if (state.x !== "step") delete enc.x.axis;
        if (state.x === "wall") enc.x.scale.type = "utc";
        if (enc.y) enc.y.scale.type = isLog(c) ? "log" : "linear";
        if (enc.y && isLog(c)) delete enc.y.scale.zero;
        if (enc.color) {
          enc.color.scale = { domain: names, range: d.series.map(function (s) { return s.colour; }) };
          if (c.single || !names.length) enc.color.legend = null;  // (an empty legend has no size)
          if (dashed) {
            enc.strokeDash = { field: "s", type: "nominal", scale: { domain: names, range: d.series.map(function (s) { return s.dash; }) },
              legend: enc.color.legend === null ? null : S.clone(enc.color.legend) };
          }
        }
      });
      if (d.few) spec.layer[1].mark.point = true;  // a lone point would not show as a line
      if (d.band) {
        // a summary has no legend: the group list beside the charts has each group's colour,
        // and the tooltip names every line (an expanded group's runs would swamp a legend)
        spec.layer.forEach(function (layer) {
          ["color", "strokeDash"].forEach(function (ch) { if (layer.encoding[ch]) layer.encoding[ch].legend = null; });
        });
        spec.layer.unshift(bandLayer(spec.layer[0]));
      }
      (spec.params || []).forEach(function (p) {
        if (p.name === "xd") p.value = d.xd;
        if (p.name === "yd") p.value = d.yd;
        if (p.name === "hl") p.value = c.hl;
      });
      return spec;
    }

    // a summary's bands: the raw lines' layer (its colours, axes, highlight) as areas from lo to hi
    function bandLayer(raw) {
      var layer = S.clone(raw), enc = layer.encoding;
      layer.name = "band";
      layer.mark = { type: "area", clip: true, interpolate: "linear" };
      layer.transform = [{ filter: "isValid(datum.lo) && isValid(datum.hi)" }];
      enc.y.field = "lo";
      enc.y2 = { field: "hi" };
      delete enc.strokeDash;
      if (enc.opacity && enc.opacity.condition) { enc.opacity.condition.value = 0.2; enc.opacity.value = 0.04; }
      return layer;
    }

    function update(c) {
      if (!c.el.dataset.drawn) return;
      if (c.busy) { c.dirty = true; return; }
      var d = build(c);
      c.series = d.series;
      c.names = {};
      d.series.forEach(function (s) { c.names[s.s] = 1; });
      c.hl = c.names[state.hl] ? state.hl : "";
      var view = c.el._view;
      if (view && c.key === d.key) {
        view.data("rows", d.rows).signal("xd", d.xd).signal("yd", d.yd).signal("hl", c.hl).runAsync();
        return;
      }
      c.key = d.key;
      c.busy = true;
      c.el.setAttribute("aria-busy", "true");  // (for assistive tools and tests: being drawn again)
      if (view) view.finalize();
      c.el._view = null;
      var spec = specFor(c, d);
      inTurn(function () { return c.far ? null : S.embed(c.el, spec); }).then(function (v) {
        c.busy = false;
        c.el.removeAttribute("aria-busy");
        c.el.style.minHeight = "";
        if (v) v.addEventListener("click", function (ev, item) { legendClick(item); });
        if (c.far) drop(c);
        else if (c.dirty) { c.dirty = false; update(c); }
      });
    }

    // Views are made one at a time, each after the browser has painted the one before: Vega
    // parses, compiles and runs a view in one go, and six asked at once showed none until all were
    // up. A timer alone is no pause (it runs before the next paint); the next frame is one, and a
    // tab in the background, which has no frames, goes on after 100 ms
    var queue = Promise.resolve();
    function inTurn(make) {
      var got = queue.then(make);
      queue = got.then(painted, painted);
      return got;
    }
    function painted() {
      return new Promise(function (done) {
        var late = setTimeout(done, 100);
        requestAnimationFrame(function () { clearTimeout(late); setTimeout(done, 0); });
      });
    }

    function draw(el) {
      var c = charts[Number(el.dataset.k)];
      c.far = false;
      if (el.dataset.drawn) return;
      el.dataset.drawn = "1";
      update(c);
    }

    // A chart far from the screen gives its view up (drawn again when it comes near): a view
    // holds its whole scenegraph, and a long run page kept every chart it had shown
    function drop(c) {
      c.far = true;
      if (!c.el.dataset.drawn || c.busy) return;  // (a chart being drawn is dropped once it is)
      c.el.style.minHeight = c.el.getBoundingClientRect().height + "px";  // (the page keeps its length)
      if (c.el._view) c.el._view.finalize();
      c.el._view = null;
      c.key = null;
      c.dirty = false;
      delete c.el.dataset.drawn;
      c.el.classList.remove("drawn", "vega-embed");  // (an empty inline-block would sit on a text line: 5 px more)
      c.el.textContent = "";
    }

    // charts are drawn as they come near the screen; on a page of many, those that go far
    // from it again are dropped (two observers: near for drawing, a wider band for keeping)
    function watch() {
      var els = charts.map(function (c) { return c.el; });
      if (els.length <= 24 || !("IntersectionObserver" in window)) { els.forEach(draw); return; }
      var near = new IntersectionObserver(function (seen) {
        seen.forEach(function (e) { if (e.isIntersecting) draw(e.target); });
      }, { rootMargin: "300px 0px" });
      var kept = new IntersectionObserver(function (seen) {
        seen.forEach(function (e) { if (!e.isIntersecting) drop(charts[Number(e.target.dataset.k)]); });
      }, { rootMargin: "100% 0px" });
      els.forEach(function (el) { near.observe(el); kept.observe(el); });
    }

    function refresh() { charts.forEach(update); }

    /* highlight: hover, legend click, the run list */
    function setHl(name) {
      if (name === state.hl) return;
      state.hl = name;
      charts.forEach(function (c) {  // a run this chart does not draw dims none of its lines
        var own = c.names && c.names[name] ? name : "";
        if (c.el._view && !c.busy && c.hl !== own) { c.hl = own; c.el._view.signal("hl", own).runAsync(); }
      });
      if (opts.onHighlight) opts.onHighlight(name);
    }
    function legendClick(item) {
      if (!item || !item.mark || !/legend/.test(item.mark.role || "") || !item.datum || typeof item.datum.value !== "string") return;
      pinned = pinned === item.datum.value ? "" : item.datum.value;
      setHl(pinned);
      commit("hl");
    }

    /* hover: the rule and the all-runs tooltip */
    var tip = document.body.appendChild(S.el("div", "sg-tip"));
    tip.id = "sg-tip";
    tip.hidden = true;

    function locate(c, ev) {
      var v = c.el._view, svg = c.el.querySelector("svg");
      if (!v || !svg || c.busy) return null;
      var r = svg.getBoundingClientRect(), w = Number(svg.getAttribute("width")) || r.width, k = r.width / w;
      var o = v.origin(), pad = v.padding() || {};
      o = [o[0] + (pad.left || 0), o[1] + (pad.top || 0)];  // (the origin leaves out the padding)
      var px = (ev.clientX - r.left) / k - o[0], py = (ev.clientY - r.top) / k - o[1];
      if (px < 0 || py < 0 || px > v.width() || py > v.height()) return null;
      return { v: v, px: px, py: py, k: k, r: r, o: o };
    }

    function overlay(c, cls) {
      if (!c[cls] || !c[cls].isConnected) c[cls] = c.el.appendChild(S.el("div", cls));
      return c[cls];
    }

    function place(c, div, at, x0, x1) {
      var base = c.el.getBoundingClientRect();
      div.style.left = (at.r.left - base.left + (at.o[0] + x0) * at.k) + "px";
      div.style.width = Math.max(1, (x1 - x0) * at.k) + "px";
      div.style.top = (at.r.top - base.top + at.o[1] * at.k) + "px";
      div.style.height = (at.v.height() * at.k) + "px";
      div.hidden = false;
    }

    function xText(x) {
      if (state.x === "wall") return new Date(x).toISOString().replace("T", " ").slice(0, 19) + " UTC";
      if (state.x === "relative") return fmt(x) + " h";
      return String(x);
    }

    function hover(c, ev) {
      var at = locate(c, ev);
      if (!at || !c.series || !c.series.length) { unhover(c); return; }
      var xs = at.v.scale("x"), ysc = at.v.scale("y"), xv = +xs.invert(at.px), best = null, bestD = Infinity;
      c.series.forEach(function (s) {
        var j = nearest(s.x, xv);
        if (j >= 0 && Math.abs(s.x[j] - xv) < bestD) { bestD = Math.abs(s.x[j] - xv); best = s.x[j]; }
      });
      if (best === null) { unhover(c); return; }
      var items = [];
      c.series.forEach(function (s) {
        if (!s.x.length || best < s.x[0] || best > s.x[s.x.length - 1]) return;
        var j = nearest(s.x, best);
        var d = s.y[j] === null ? Infinity : Math.abs(ysc(s.y[j]) - at.py);
        items.push({ s: s, y: s.y[j], raw: s.raw[j], d: d, lo: s.lo ? s.lo[j] : null, hi: s.lo ? s.hi[j] : null });
      });
      var near = null;
      items.forEach(function (it) { if (it.d < Infinity && (!near || it.d < near.d)) near = it; });
      items.sort(function (a, b) {
        if (a === near) return -1;
        if (b === near) return 1;
        if (a.y === null) return b.y === null ? 0 : 1;
        if (b.y === null) return -1;
        return b.y - a.y;
      });
      place(c, overlay(c, "sg-rule"), at, xs(best), xs(best));
      showTip(ev, best, items, near);
      setHl(near ? near.s.s : pinned);
    }

    function showTip(ev, x, items, near) {
      tip.textContent = "";
      tip.appendChild(S.el("div", "sg-tip-x", msg("x_" + state.x) + " " + xText(x)));
      var table = tip.appendChild(S.el("table")), head = table.appendChild(S.el("tr"));
      ["", "", msg("smoothed"), msg("raw")].forEach(function (h) { head.appendChild(S.el("th", "", h)); });
      var MAX = 40;
      items.slice(0, MAX).forEach(function (it) {
        var tr = table.appendChild(S.el("tr", it === near ? "near" : ""));
        paint(tr.appendChild(S.el("td")).appendChild(S.el("span", "swatch")), it.s.colour);
        tr.appendChild(S.el("td", "name", it.s.s + (it.s.lo ? " (" + msg("band") + " " + fmt(it.lo) + " – " + fmt(it.hi) + ")" : "")));
        tr.appendChild(S.el("td", "num", fmt(it.y)));
        tr.appendChild(S.el("td", "num", it.raw === null ? msg("nonfinite") : fmt(it.raw)));
      });
      if (items.length > MAX) tip.appendChild(S.el("div", "muted", msg("more", { n: items.length - MAX })));
      tip.hidden = false;
      tip.setAttribute("data-x", String(x));
      tip.setAttribute("data-n", String(items.length));
      var w = tip.offsetWidth, h = tip.offsetHeight, left = ev.clientX + 16, top = ev.clientY + 12;
      if (left + w > window.innerWidth - 4) left = Math.max(4, ev.clientX - 16 - w);
      if (top + h > window.innerHeight - 4) top = Math.max(4, window.innerHeight - 4 - h);
      tip.style.left = left + "px";
      tip.style.top = top + "px";
    }

    function unhover(c) {
      if (c["sg-rule"]) c["sg-rule"].hidden = true;
      tip.hidden = true;
      setHl(pinned);
    }

    /* drag to zoom a step range; double-click resets */
    var drag = null;
    function setZoom(c, z) {
      if (state.link) state.zoom = z;
      else c.zoom = z;
      resetBtn.disabled = !state.zoom && !charts.some(function (x) { return x.zoom; });
      if (state.link) refresh(); else update(c);
      commit("zoom");
    }

    charts.forEach(function (c, i) {
      c.el.dataset.k = String(i);
      c.el.addEventListener("pointermove", function (ev) {
        if (drag && drag.c === c) {
          var at = locate(c, ev) || drag.at, px = Math.max(0, Math.min(at.v.width(), (ev.clientX - drag.at.r.left) / drag.at.k - drag.at.o[0]));
          place(c, overlay(c, "sg-band"), drag.at, Math.min(drag.px, px), Math.max(drag.px, px));
          drag.px1 = px;
        }
        hover(c, ev);
      });
      c.el.addEventListener("pointerleave", function () { if (!drag) unhover(c); });
      c.el.addEventListener("pointerdown", function (ev) {
        var at = ev.button === 0 && locate(c, ev);
        if (!at) return;
        ev.preventDefault();
        drag = { c: c, at: at, px: at.px, px1: at.px };
      });
      c.el.addEventListener("dblclick", function (ev) {
        if (!locate(c, ev)) return;
        c.zoom = null;
        setZoom(c, null);
      });
      if (c.logBtn) {
        c.logBtn.addEventListener("click", function () {
          var k = state.log.indexOf(c.tag);
          if (k === -1) state.log.push(c.tag); else state.log.splice(k, 1);
          c.logBtn.setAttribute("aria-pressed", String(isLog(c)));
          update(c);
          commit("log");
        });
      }
    });
    window.addEventListener("pointerup", function () {
      if (!drag) return;
      var d = drag, xs = d.at.v.scale("x");
      drag = null;
      if (d.c["sg-band"]) d.c["sg-band"].hidden = true;
      if (Math.abs(d.px1 - d.px) < 4) return;
      var a = +xs.invert(Math.min(d.px, d.px1)), b = +xs.invert(Math.max(d.px, d.px1));
      if (state.x === "step") { a = Math.floor(a); b = Math.ceil(b); }
      if (a < b) setZoom(d.c, [a, b]);
    });

    /* the toolbar */
    var pending = false;
    slider.addEventListener("input", function () {
      state.w = Number(slider.value);
      out.textContent = state.w.toFixed(2);
      commit("smoothing");
      if (pending) return;
      pending = true;
      window.requestAnimationFrame(function () { pending = false; refresh(); });
    });
    xSel.addEventListener("change", function () {
      state.x = xSel.value;
      state.zoom = null;
      charts.forEach(function (c) { c.zoom = null; });
      resetBtn.disabled = true;
      refresh();
      commit("x");
    });
    ySel.addEventListener("change", function () { state.y = ySel.value; syncControls(); refresh(); commit("y"); });
    outBox.addEventListener("change", function () { state.out = outBox.checked; refresh(); commit("outliers"); });
    linkBox.addEventListener("change", function () {
      state.link = linkBox.checked;
      if (state.link) charts.forEach(function (c) { c.zoom = null; });
      else state.zoom = null;
      resetBtn.disabled = !state.zoom;
      refresh();
      commit("link");
    });
    resetBtn.addEventListener("click", function () {
      charts.forEach(function (c) { c.zoom = null; });
      setZoom(charts[0], null);
    });
    tagInput.addEventListener("input", function () { state.tags = tagInput.value; applyTags(); commit("tags"); });
    function setRuns(flags, what) {
      state.on = flags;
      toggles.forEach(function (t) { t.checked = !!state.on[Number(t.dataset.r)]; });
      if (opts.onRuns) opts.onRuns(state.on);
      refresh();
      commit(what);
    }
    if (runInput) {
      runInput.addEventListener("input", function () {
        err.hidden = true;
        state.match = runInput.value;
        var re = runRegex();
        if (re !== undefined) setRuns(byRegex(re), "match");
        else commit("match");
      });
    }
    toggles.forEach(function (t) {
      t.addEventListener("change", function () {
        var flags = state.on.slice();
        flags[Number(t.dataset.r)] = t.checked;
        setRuns(flags, "tick");
      });
    });
    if (opts.allButton) opts.allButton.addEventListener("click", function () { setRuns(state.on.map(function () { return true; }), "all"); });
    if (opts.noneButton) opts.noneButton.addEventListener("click", function () { setRuns(state.on.map(function () { return false; }), "none"); });

    // Escape: no highlight, no zoom (the keyboard's way back to the whole view)
    document.addEventListener("keydown", function (ev) {
      if (ev.key !== "Escape" || /^(INPUT|SELECT|TEXTAREA)$/.test((ev.target || {}).tagName || "")) return;
      tip.hidden = true;
      pinned = "";
      setHl("");
      charts.forEach(function (c) { c.zoom = null; });
      if (state.zoom) setZoom(charts[0], null); else commit("hl");
    });

    window.addEventListener("popstate", function () {
      if (!readHash()) return;  // a plain anchor (#notes): the view stays
      charts.forEach(function (c) { c.zoom = null; });
      syncControls();
      refresh();
    });

    readHash();
    syncControls();
    watch();
    return {
      state: function () { return state; }, charts: charts, named: named, refresh: refresh,
      hover: function (n) { setHl(n === null ? pinned : n); }
    };
  }

  /* a log toggle in each chart's caption */
  function logButton(fig) {
    var cap = fig.querySelector("figcaption"), b = window.SITEGEN.el("button", "chart-log", window.SITEGEN.msg("log"));
    b.type = "button";
    b.title = window.SITEGEN.msg("log_title");
    b.setAttribute("aria-pressed", "false");
    if (cap) cap.appendChild(b);
    return b;
  }

  /* the index: a swatch of each run's colour beside its name */
  function swatches(root) {
    Array.prototype.forEach.call(root.querySelectorAll("a[href^='runs/']"), function (a) {
      if (a.previousElementSibling && a.previousElementSibling.classList.contains("swatch")) return;
      var slug = a.getAttribute("href").split("/")[1], sw = document.createElement("span");
      sw.className = "swatch";
      a.parentNode.insertBefore(paint(sw, colour(slug)), a);
    });
  }

  function initIndex() {
    var table = document.getElementById("runs");
    if (!table || !table.tBodies[0]) return;
    var body = table.tBodies[0];
    swatches(body);
    new MutationObserver(function () { swatches(body); }).observe(body, { childList: true });
  }

  window.SITEGEN_CHARTS = {
    palette: PALETTE, colour: colour, paint: paint, styles: styles, ema: ema, init: init, logButton: logButton
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", initIndex);
  else initIndex();
})();
