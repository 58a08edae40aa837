/* The parallel coordinates of a comparison page, drawn as plain SVG (fast with hundreds of runs,
   no Vega sub-flow per line): one axis per hyperparameter (text values on categorical axes), the
   chosen metric always the last axis, each axis with its values. Dragging along an axis brushes a
   range (a set of values on a text axis); the brushes of several axes combine, and the runs
   outside them leave the page's curves and run list (compare.js applies the mask). The metric and
   the brushes are in the address's hash (core.js's reader and writer): #pc=tag&brush=[...].
   A classic script (file://, CSP script-src 'self', no inline style): window.SITEGEN_HPARAMS. */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var HEIGHT = 330, TOP = 46, BOTTOM = 24, LEFT = 70, RIGHT = 70, HIT = 28, MAX_LABEL = 18, MAX_CATS = 16;

  function node(tag, attrs, parent, text) {
    var e = document.createElementNS(NS, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function short(text) { return text.length > MAX_LABEL ? text.slice(0, MAX_LABEL - 1) + "…" : text; }

  function fmt(v) {
    var a = Math.abs(v);
    return a !== 0 && (a >= 1e6 || a < 1e-3) ? Number(v.toPrecision(4)).toExponential() : String(Number(v.toPrecision(5)));
  }

  function round(v) { return Number(v.toPrecision(6)); }

  // an axis's scale: numbers from their range (one value: the middle), texts in sorted order
  function scaled(ax) {
    if (ax.cat) {
      var seen = {};
      ax.v.forEach(function (v) { if (v !== null) seen[v] = 1; });
      ax.cats = Object.keys(seen).sort(function (a, b) {
        var x = Number(a), y = Number(b);
        if (a !== "" && b !== "" && isFinite(x) && isFinite(y)) return x - y;
        return a < b ? -1 : a > b ? 1 : 0;
      });
      var at = {};
      ax.cats.forEach(function (c, i) { at[c] = ax.cats.length > 1 ? i / (ax.cats.length - 1) : 0.5; });
      ax.pos = function (v) { return v === null || !(v in at) ? null : at[v]; };
    } else {
      var nums = ax.v.filter(function (v) { return v !== null; });
      ax.lo = Math.min.apply(null, nums);
      ax.hi = Math.max.apply(null, nums);
      // positive numbers over two decades or more (learning rates, weight decays) on a log scale
      ax.log = ax.lo > 0 && ax.hi / ax.lo >= 100;
      var f = ax.log ? Math.log : function (v) { return v; }, a = f(ax.lo), b = f(ax.hi);
      ax.pos = function (v) { return v === null ? null : b > a ? (f(v) - a) / (b - a) : 0.5; };
      ax.at = function (p) { var v = a + p * (b - a); return ax.log ? Math.exp(v) : v; };
    }
    return ax;
  }

  function inside(ax, b, v) {
    if (v === null || v === undefined) return false;
    return ax.cat ? b.indexOf(v) !== -1 : v >= b[0] && v <= b[1];
  }

  /* o: {page, slugs (the overlay runs' slugs), names (their labels), onChange(mask), onHover(name)} */
  function attach(o) {
    var S = window.SITEGEN, C = window.SITEGEN_CHARTS, msg = S.msg;
    var host = document.getElementById("pc-chart");
    var data = host ? o.page.charts[Number(host.dataset.pc)] : null;
    if (!data || data.kind !== "parallel") return null;
    var $ = function (id) { return document.getElementById(id); };
    var select = $("pc-metric"), clearBtn = $("pc-clear"), count = $("pc-count");
    var at = {};
    o.slugs.forEach(function (s, i) { at[s] = i; });
    var rowRun = data.s.map(function (s) { return s in at ? at[s] : -1; });
    var hpAxes = data.axes.map(function (a) { return scaled({ id: "h:" + a.key, key: a.key, cat: a.cat, v: a.v }); });
    var metricAxes = {};
    data.metrics.forEach(function (m) { metricAxes[m.key] = scaled({ id: "m:" + m.key, key: m.key, cat: false, v: m.v, metric: true }); });
    var DEFAULT = data.metrics.length ? data.metrics[0].key : "";
    var state = { metric: DEFAULT, brush: {} }, axes = [], keep = [], lines = [], parts = {}, drag = null, title = null, typed = null;

    function axesNow() {
      var out = hpAxes.slice();
      if (state.metric && metricAxes[state.metric]) out.push(metricAxes[state.metric]);
      return out;
    }
    function byId(id) { return axesNow().filter(function (a) { return a.id === id; })[0]; }
    function active() { return Object.keys(state.brush).filter(function (id) { return byId(id); }); }

    /* state <-> hash (core.js's one format: pc=<metric>&brush=<JSON>&brush=...) */
    function pairs() {
      var p = [];
      if (state.metric !== DEFAULT) p.push(["pc", state.metric]);
      active().sort().forEach(function (id) {
        var b = state.brush[id];
        p.push(["brush", JSON.stringify(byId(id).cat ? [id, b] : [id, b[0], b[1]])]);
      });
      return p;
    }
    function read(params) {
      if (!params) return false;
      var s = { metric: DEFAULT, brush: {} };
      if (params.has("pc") && metricAxes[params.get("pc")]) s.metric = params.get("pc");
      state = s;
      params.getAll("brush").forEach(function (text) {
        var b;
        try { b = JSON.parse(text); } catch (e) { return; }
        if (!Array.isArray(b) || typeof b[0] !== "string") return;
        var ax = byId(b[0]);
        if (!ax) return;
        if (ax.cat && Array.isArray(b[1])) {
          var cats = b[1].filter(function (c) { return ax.cats.indexOf(c) !== -1; });
          if (cats.length) state.brush[ax.id] = cats;
        } else if (!ax.cat && isFinite(b[1]) && isFinite(b[2]) && b[1] <= b[2] && b[1] !== null && b[2] !== null) {
          state.brush[ax.id] = [Number(b[1]), Number(b[2])];
        }
      });
      return true;
    }
    function commit(again) {  // again: the same change continued (a key held): no new history entry
      var p = S.hashParams(), kept = [];
      if (p) p.forEach(function (v, k) { if (k !== "pc" && k !== "brush") kept.push([k, v]); });
      var h = S.hashText(kept.concat(pairs()));
      if (h === location.hash.replace(/^#/, "")) return;
      var url = location.pathname + location.search + (h ? "#" + h : "");
      try { if (again) history.replaceState(null, "", url); else history.pushState(null, "", url); } catch (e) { /* file:// in some browsers */ }
    }

    /* drawing */
    function geometry() {
      // (on a narrow screen the plot keeps 64 px per axis and scrolls sideways)
      var n = axes.length, width = Math.max(LEFT + RIGHT + Math.max(0, n - 1) * 64, host.clientWidth || 900);
      var step = n > 1 ? (width - LEFT - RIGHT) / (n - 1) : 0;
      return { width: width, step: step, x: function (i) { return LEFT + i * step; }, y: function (p) { return TOP + (1 - p) * (HEIGHT - TOP - BOTTOM); } };
    }

    function draw() {
      axes = axesNow();
      host.textContent = "";
      var g = geometry(), svg = node("svg", { width: g.width, height: HEIGHT, viewBox: "0 0 " + g.width + " " + HEIGHT, role: "img", "class": "pc-svg" }, host);
      title = node("title", {}, svg);
      var lineG = node("g", { "class": "pc-lines" }, svg);
      lines = data.s.map(function (slug, j) {
        var d = "", pen = false;
        axes.forEach(function (ax, i) {
          var p = ax.pos(ax.v[j]);
          if (p === null) { pen = false; return; }
          d += (pen ? "L" : "M") + g.x(i).toFixed(1) + " " + g.y(p).toFixed(1);
          pen = true;
        });
        var path = node("path", { d: d || "M0 0", stroke: C.colour(slug), fill: "none", "class": "pc-line", "data-s": slug }, lineG);
        node("title", {}, path, data.n[j]);
        path.addEventListener("pointerenter", function () { if (!drag && o.onHover) o.onHover(rowRun[j] >= 0 ? o.names[rowRun[j]] : null); });
        path.addEventListener("pointerleave", function () { if (o.onHover) o.onHover(null); });
        return path;
      });
      parts = {};
      axes.forEach(function (ax, i) {
        var x = g.x(i), a = node("g", { "class": "pc-axis" + (ax.metric ? " pc-metric-axis" : ""), "data-axis": ax.id }, svg);
        node("line", { x1: x, x2: x, y1: g.y(0), y2: g.y(1), "class": "pc-domain" }, a);
        var name = node("text", { x: x, y: i % 2 && g.step < 120 ? 30 : 14, "text-anchor": "middle", "class": "pc-name" }, a, short(ax.key));
        node("title", {}, name, ax.key);
        var ticks = ax.cat ? ax.cats.map(function (c) { return [ax.pos(c), c]; })
          : ax.hi > ax.lo ? [[0, fmt(ax.lo)], [0.5, fmt(ax.at(0.5))], [1, fmt(ax.hi)]] : [[0.5, fmt(ax.lo)]];
        var every = Math.max(1, Math.ceil(ticks.length / MAX_CATS));
        ticks.forEach(function (t, k) {
          if (k % every && k !== ticks.length - 1) return;
          node("line", { x1: x - 3, x2: x, y1: g.y(t[0]), y2: g.y(t[0]), "class": "pc-tick" }, a);
          node("text", { x: x - 5, y: g.y(t[0]) + 4, "text-anchor": "end", "class": "pc-tick-label" + (ax.cat ? " pc-cat" : "") }, a, short(String(t[1])));
        });
        var band = node("rect", { x: x - 8, width: 16, y: 0, height: 0, "class": "pc-brush", visibility: "hidden" }, a);
        var cursor = node("rect", { x: x - 10, width: 20, y: 0, height: 8, "class": "pc-cursor", visibility: "hidden" }, a);
        var hit = node("rect", { x: x - HIT / 2, width: HIT, y: g.y(1) - 6, height: g.y(0) - g.y(1) + 12, fill: "transparent", "class": "pc-hit", "data-axis": ax.id,
          tabindex: 0, role: "group", "aria-label": msg(ax.cat ? "pc_keys_text" : "pc_keys_number", { axis: ax.key }) }, a);
        parts[ax.id] = { band: band, cursor: cursor, x: x, g: g, ax: ax };
        hit.addEventListener("pointerdown", function (ev) {
          if (ev.button !== 0) return;
          ev.preventDefault();
          hit.setPointerCapture(ev.pointerId);
          drag = { ax: ax, p0: toP(ev), p1: toP(ev) };
        });
        hit.addEventListener("pointermove", function (ev) {
          if (!drag || drag.ax !== ax) return;
          drag.p1 = toP(ev);
          showBand(ax.id, Math.min(drag.p0, drag.p1), Math.max(drag.p0, drag.p1));
        });
        hit.addEventListener("pointerup", function () {
          if (!drag || drag.ax !== ax) return;
          var d = drag;
          drag = null;
          brushed(ax, Math.min(d.p0, d.p1), Math.max(d.p0, d.p1));
        });
        hit.addEventListener("pointercancel", function () { drag = null; apply(); });
        hit.addEventListener("dblclick", function () { delete state.brush[ax.id]; apply(); commit(); });
        hit.addEventListener("keydown", function (ev) { if (keyed(ax, ev)) ev.preventDefault(); });
        hit.addEventListener("focus", function () { typed = null; });
        hit.addEventListener("blur", function () { parts[ax.id].cursor.setAttribute("visibility", "hidden"); });
      });
      function toP(ev) {  // the pointer's place along the axes, 0 (bottom) to 1 (top)
        var r = svg.getBoundingClientRect(), k = r.height / HEIGHT;
        var y = (ev.clientY - r.top) / k;
        return Math.max(0, Math.min(1, 1 - (y - TOP) / (HEIGHT - TOP - BOTTOM)));
      }
      apply();
    }

    /* the keyboard, on a focused axis: on a number axis the arrows move the brush (a first press
       makes one of the middle fifth) by 5 % of the axis (1 % with Alt), Shift and the arrows widen
       and narrow it; on a text axis the arrows move a cursor over the values and Space or Enter
       takes the value in or out of the brush; Escape, Delete or Backspace clears the axis's brush.
       Presses in a row make one entry in the history (Back undoes them together). */
    function keyed(ax, ev) {
      var up = ev.key === "ArrowUp" || ev.key === "ArrowRight", down = ev.key === "ArrowDown" || ev.key === "ArrowLeft";
      if (ev.key === "Escape" || ev.key === "Delete" || ev.key === "Backspace") {
        if (!state.brush[ax.id]) return false;
        delete state.brush[ax.id];
        apply();
        commit();
        return true;
      }
      if (ax.cat) {
        if (!ax.cats.length) return false;
        var at = ax.cats.indexOf(ax.cursor);
        if (up || down) {
          at = at === -1 ? (up ? 0 : ax.cats.length - 1) : Math.max(0, Math.min(ax.cats.length - 1, at + (up ? 1 : -1)));
          ax.cursor = ax.cats[at];
          showCursor(ax);
          return true;
        }
        if ((ev.key === " " || ev.key === "Enter") && at !== -1) {
          toggled(ax, ax.cursor);
          apply();
          commit(typed === ax.id);
          typed = ax.id;
          return true;
        }
        return false;
      }
      if (!(up || down) || !(ax.hi > ax.lo)) return false;
      var b = state.brush[ax.id], p0 = b ? ax.pos(b[0]) : 0.4, p1 = b ? ax.pos(b[1]) : 0.6;
      var d = (up ? 1 : -1) * (ev.altKey ? 0.01 : 0.05);
      if (b && ev.shiftKey) { p0 = Math.max(0, p0 - d / 2); p1 = Math.min(1, p1 + d / 2); if (p1 - p0 < 0.02) return true; }
      else if (b) { d = Math.max(-p0, Math.min(1 - p1, d)); p0 += d; p1 += d; }
      state.brush[ax.id] = [round(ax.at(p0)), round(ax.at(p1))];
      apply();
      commit(typed === ax.id);
      typed = ax.id;
      return true;
    }

    function showCursor(ax) {
      var pt = parts[ax.id];
      if (!pt || ax.cursor === undefined) return;
      pt.cursor.setAttribute("y", String(pt.g.y(ax.pos(ax.cursor)) - 4));
      pt.cursor.setAttribute("visibility", "visible");
    }

    function showBand(id, p0, p1) {
      var pt = parts[id];
      if (!pt) return;
      var y0 = pt.g.y(p1), y1 = pt.g.y(p0);
      pt.band.setAttribute("y", String(y0 - 3));
      pt.band.setAttribute("height", String(Math.max(6, y1 - y0 + 6)));
      pt.band.setAttribute("visibility", "visible");
    }

    // a value of a text axis taken into its brush, or out of it (the last one out: no brush)
    function toggled(ax, value) {
      var had = state.brush[ax.id] || [];
      var cats = had.indexOf(value) === -1 ? had.concat([value]) : had.filter(function (c) { return c !== value; });
      if (cats.length) state.brush[ax.id] = cats; else delete state.brush[ax.id];
    }

    // a drag from p0 to p1 (a click: p0 = p1) on an axis becomes its brush
    function brushed(ax, p0, p1) {
      var small = (p1 - p0) * (HEIGHT - TOP - BOTTOM) < 4;
      if (ax.cat) {
        var cats = ax.cats.filter(function (c) { var p = ax.pos(c); return p >= p0 && p <= p1; });
        if (small || !cats.length) {  // a click: the nearest value, added to (or taken from) the brush
          var mid = (p0 + p1) / 2, best = ax.cats[0];
          ax.cats.forEach(function (c) { if (Math.abs(ax.pos(c) - mid) < Math.abs(ax.pos(best) - mid)) best = c; });
          toggled(ax, best);
        } else state.brush[ax.id] = cats;
      } else {
        if (small) { apply(); return; }  // a click on a number axis keeps its brush
        state.brush[ax.id] = ax.hi > ax.lo ? [round(ax.at(p0)), round(ax.at(p1))] : [ax.lo, ax.hi];
      }
      apply();
      commit();
    }

    // the brushes -> which runs are kept, the plot's dimmed lines, the page's mask
    function apply() {
      var ids = active(), n = 0;
      keep = data.s.map(function (_, j) {
        var ok = ids.every(function (id) { var ax = byId(id); return inside(ax, state.brush[id], ax.v[j]); });
        if (ok) n++;
        return ok;
      });
      lines.forEach(function (path, j) { path.setAttribute("class", "pc-line" + (keep[j] ? "" : " pc-out")); });
      Object.keys(parts).forEach(function (id) {
        var b = state.brush[id], ax = parts[id].ax;
        parts[id].band.parentNode.setAttribute("class", "pc-axis" + (b ? " pc-brushed" : "") + (ax.metric ? " pc-metric-axis" : ""));
        if (!b) { parts[id].band.setAttribute("visibility", "hidden"); return; }
        if (ax.cat) {
          var ps = b.map(function (c) { return ax.pos(c); });
          showBand(id, Math.min.apply(null, ps), Math.max.apply(null, ps));
        } else showBand(id, ax.pos(b[0]), ax.pos(b[1]));
      });
      clearBtn.disabled = !ids.length;
      count.textContent = ids.length ? msg("pc_count", { n: n, total: keep.length }) : msg("pc_none");
      if (title) title.textContent = count.textContent;  // (the plot's text alternative)
      if (select) select.value = state.metric;
      var mask = null;
      if (ids.length) {
        mask = o.slugs.map(function () { return false; });
        keep.forEach(function (k, j) { if (k && rowRun[j] >= 0) mask[rowRun[j]] = true; });
      }
      o.onChange(mask);
    }

    if (select) {
      select.addEventListener("change", function () {
        if (metricAxes[state.metric]) delete state.brush[metricAxes[state.metric].id];
        state.metric = select.value;
        draw();
        commit();
      });
    }
    clearBtn.addEventListener("click", function () { state.brush = {}; apply(); commit(); });
    window.addEventListener("popstate", function () { if (read(S.hashParams())) draw(); });
    read(S.hashParams());
    draw();
    // a window made wider or narrower draws the plot again to its new width
    var drawnFor = host.clientWidth, resized = null;
    window.addEventListener("resize", function () {
      clearTimeout(resized);
      resized = setTimeout(function () {
        if (host.clientWidth === drawnFor || drag) return;
        drawnFor = host.clientWidth;
        var focused = document.activeElement && document.activeElement.getAttribute && document.activeElement.getAttribute("data-axis");
        draw();
        var again = Array.prototype.filter.call(host.querySelectorAll(".pc-hit"), function (h) { return h.getAttribute("data-axis") === focused; })[0];
        if (again) again.focus();
      }, 150);
    });
    return {
      hashText: function () { return S.hashText(pairs()); },
      highlight: function (name) {
        lines.forEach(function (path, j) {
          var on = name && rowRun[j] >= 0 && o.names[rowRun[j]] === name;
          path.classList.toggle("pc-hl", !!on);
        });
      },
      state: function () {
        return { metric: state.metric, brush: S.clone(state.brush), axes: axes.map(function (a) { return a.id; }),
          keep: data.s.filter(function (_, j) { return keep[j]; }) };
      }
    };
  }

  window.SITEGEN_HPARAMS = { attach: attach };
})();
