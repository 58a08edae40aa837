/* Run pages (uses window.SITEGEN from core.js): the image step sliders, the scalars CSV written
   from scalars.js when asked, and the charts. */
(function (S) {
  "use strict";
  var forEach = S.forEach, msg = S.msg, el = S.el, expand = S.expand;

  /* ---------- image step sliders ---------- */

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

  /* The gates of the last build on this run (gates.js at the site's root: this page is reused
     unchanged by later builds, the gates' results are not). */
  function initGates(box) {
    var results = (window.SITEGEN_GATES || {})[box.getAttribute("data-run")];
    if (!results || !results.length) return;
    var list = box.querySelector("ul");
    results.forEach(function (r) {
      var li = list.appendChild(el("li", "gate-" + r[1]));
      li.appendChild(el("strong", "", msg("gate_" + r[1])));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("code", "", r[0]));
      li.appendChild(el("span", "muted", " " + r[2]));
    });
    box.hidden = false;
  }

  /* ---------- the line charts: drawn by charts.js, with the page's toolbar ---------- */

  function initLines(page) {
    var C = window.SITEGEN_CHARTS, els = document.querySelectorAll(".chart.overlay[data-chart]");
    if (!C || !els.length || !document.getElementById("chart-toolbar")) return;
    var charts = Array.prototype.map.call(els, function (e) {
      var chart = page.charts[Number(e.dataset.chart)], rows = chart.rows, fig = e.closest("figure");
      var x = expand(rows.x), y = expand(rows.y, true), t = expand(rows.t), s = expand(rows.s), lines = [];
      for (var i = 0; i < x.length; i++) {
        var ln = lines[lines.length - 1];
        if (!ln || ln.s !== s[i]) {
          ln = { s: s[i], key: chart.ks[lines.length], r: -1, x: [], y: [], t: [], w0: page.w0 };
          lines.push(ln);
        }
        ln.x.push(x[i]); ln.y.push(y[i]); ln.t.push(t[i]);
      }
      return { el: e, fig: fig, tag: fig.getAttribute("data-tag"), lines: lines, single: lines.length < 2, logBtn: C.logButton(fig) };
    });
    C.init({
      charts: charts,
      onTags: function () {
        forEach(document.querySelectorAll("section.group"), function (sec) {
          sec.hidden = !sec.querySelector("figure.card:not([hidden])");
        });
      }
    });
  }

  S.ready(function () {
    var page = S.pageData();
    var gates = document.getElementById("gates");
    if (gates) initGates(gates);
    forEach(document.querySelectorAll("a.csv-download"), initCsv);
    if (page && page.images) initImages(page);
    if (page && page.charts) initLines(page);
    S.drawCharts();
  });
})(window.SITEGEN);
