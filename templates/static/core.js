/* sitegen's shared page core: message lookup, DOM helpers, the number decoder and chart
   embedding, as one global, window.SITEGEN, for the script of each page kind (index.js, run.js,
   compare.js). Classic scripts (no modules, no fetch) so pages work over file:// and under a CSP
   of script-src 'self'. Every string from a log goes into the page through textContent. */
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

  // sort order of table cells: null (empty) last, numbers before text
  function compare(a, b) {
    if (a === null || a === undefined) return b === null || b === undefined ? 0 : 1;
    if (b === null || b === undefined) return -1;
    if (typeof a === typeof b) return a < b ? -1 : a > b ? 1 : 0;
    return typeof a === "number" ? -1 : 1;
  }

  /* ---------- charts: the page's data block, drawn with vega-embed when in view ---------- */

  var EMBED_OPTIONS = {
    ast: true, actions: false, defaultStyle: false, renderer: "svg",
    tooltip: { disableDefaultStyle: true }
  };

  // the charts' colours from the page's theme (site.css variables), so a chart drawn in dark
  // mode is dark whatever the renderer; site.css also restyles drawn SVG charts when the theme
  // is switched
  function themeConfig() {
    var css = window.getComputedStyle(document.documentElement);
    var fg = css.getPropertyValue("--fg").trim(), muted = css.getPropertyValue("--muted").trim(),
      grid = css.getPropertyValue("--grid").trim();
    if (!fg || !muted || !grid) return {};
    return {
      background: "transparent",
      axis: { labelColor: muted, titleColor: fg, gridColor: grid, domainColor: muted, tickColor: muted },
      legend: { labelColor: muted, titleColor: fg },
      title: { color: fg },
      view: { stroke: grid }
    };
  }

  function embed(el, spec) {
    var options = {};
    Object.keys(EMBED_OPTIONS).forEach(function (k) { options[k] = EMBED_OPTIONS[k]; });
    options.config = themeConfig();
    return window.vegaEmbed(el, spec, options).then(function (res) {
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
    fitWidth(el, spec, chart.kind);
    embed(el, spec);
  }

  // a chart as wide as its card (the grid gives two or three columns as space allows, one on
  // a phone): the plot is the card less the axes and, for histograms, the legend
  var AXES = { scalar: 70, histogram: 140 };
  // (measured on the card, not the chart: a drawn chart shrinks to its drawing, and a chart
  // drawn again, as charts.js does, would shrink each time)
  function fitWidth(el, spec, kind) {
    var card = el.closest("figure") || el, css = window.getComputedStyle(card);
    var width = card.clientWidth - (parseFloat(css.paddingLeft) || 0) - (parseFloat(css.paddingRight) || 0);
    if (!(kind in AXES) || !(width > 0) || typeof spec.width !== "number") return;
    spec.width = Math.max(160, Math.floor(width - AXES[kind]));
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
    // (line charts, class "overlay", are charts.js's)
    whenVisible(Array.prototype.slice.call(document.querySelectorAll(".chart[data-chart]:not(.overlay)")), drawChart);
  }

  // the page's data, in the page itself (<script type="application/json" id="sitegen-page">)
  function pageData() {
    var block = document.getElementById("sitegen-page");
    if (block && !window.SITEGEN_PAGE) window.SITEGEN_PAGE = JSON.parse(block.textContent);
    return window.SITEGEN_PAGE;
  }

  // The address's hash as key=value pairs: the one reader and writer of it, for the view of
  // the line charts (charts.js) and the runs ticked in the index (#runs=slug,slug). A hash
  // without "=" is a plain anchor (#notes): null.
  function hashParams(hash) {
    var h = (hash === undefined ? window.location.hash : hash).replace(/^#/, "");
    return h === "" || h.indexOf("=") !== -1 ? new URLSearchParams(h) : null;
  }

  // [[key, value], ...] -> "key=value&..."; commas stay readable (a slug has none)
  function hashText(pairs) {
    return pairs.map(function (p) {
      return encodeURIComponent(p[0]) + "=" + encodeURIComponent(p[1]).replace(/%2C/g, ",");
    }).join("&");
  }

  // runs a page script's init once the document is parsed
  function ready(init) {
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
    else init();
  }

  window.SITEGEN = {
    forEach: forEach, msg: msg, el: el, expand: expand, clone: clone, compare: compare,
    embed: embed, themeConfig: themeConfig, fitWidth: fitWidth, whenVisible: whenVisible, drawCharts: drawCharts,
    pageData: pageData, ready: ready, hashParams: hashParams, hashText: hashText
  };
})();
