/* sitegen page script: draws charts from the page's data script and makes run tables sortable
   and filterable. A classic script (no modules, no fetch) so it works over file:// and under a
   CSP of script-src 'self'. */
(function () {
  "use strict";

  function toRows(cols) {
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

  var EMBED_OPTIONS = {
    ast: true, actions: false, defaultStyle: false, renderer: "svg",
    tooltip: { disableDefaultStyle: true }
  };

  function drawChart(el) {
    var page = window.SITEGEN_PAGE, specs = window.SITEGEN_SPECS;
    if (el.dataset.drawn) return;
    el.dataset.drawn = "1";
    var chart = page.charts[Number(el.dataset.chart)];
    var spec = JSON.parse(JSON.stringify(specs[chart.kind]));
    var rows = toRows(chart.rows);
    spec.data = { values: rows };
    if (chart.kind === "scalar") {
      // markers for non-finite values only where there are some (an empty layer warns)
      if (!rows.some(function (r) { return r.k !== ""; })) spec.layer.splice(1, 1);
      // short series get visible points, or a lone point would not show at all
      if (rows.length <= 60) spec.layer[0].mark.point = true;
    }
    window.vegaEmbed(el, spec, EMBED_OPTIONS).then(function (res) {
      el.classList.add("drawn");
      el._view = res.view;
    }).catch(function (err) {
      el.textContent = "This chart could not be drawn: " + err;
      console.error(err);
    });
  }

  function drawCharts() {
    if (!window.SITEGEN_PAGE || !window.SITEGEN_SPECS || !window.vegaEmbed) return;
    var els = Array.prototype.slice.call(document.querySelectorAll(".chart[data-chart]"));
    if (els.length <= 24 || !("IntersectionObserver" in window)) {
      els.forEach(drawChart);
      return;
    }
    var io = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting) { io.unobserve(e.target); drawChart(e.target); }
      });
    }, { rootMargin: "400px" });
    els.forEach(function (el) { io.observe(el); });
  }

  function cellValue(row, col, type) {
    var cell = row.cells[col];
    var v = cell ? (cell.getAttribute("data-v") || "") : "";
    if (type === "text") return v.toLowerCase();
    if (v === "") return null;
    var x = Number(v);
    return isNaN(x) ? v.toLowerCase() : x;
  }

  function compare(a, b) {
    if (a === null) return b === null ? 0 : 1;
    if (b === null) return -1;
    if (typeof a === typeof b) return a < b ? -1 : a > b ? 1 : 0;
    return typeof a === "number" ? -1 : 1;
  }

  function makeSortable(table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, col) {
      var button = th.querySelector("button");
      if (!button) return;
      button.addEventListener("click", function () {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var type = th.getAttribute("data-type") || "auto";
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) {
          var c = compare(cellValue(r1, col, type), cellValue(r2, col, type));
          if (cellValue(r1, col, type) === null || cellValue(r2, col, type) === null) return c;
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
      if (counter) counter.textContent = shown + " of " + rows.length + " shown";
    }
    input.addEventListener("input", apply);
    apply();
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), makeSortable);
    var filter = document.getElementById("run-filter"), runs = document.getElementById("runs");
    if (filter && runs) makeFilter(filter, runs, document.getElementById("run-count"));
    drawCharts();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
