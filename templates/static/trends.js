/* A trend page (uses window.SITEGEN from core.js): draws its charts from the page's data, and,
   when runs record commits, switches the x axis between run start time and commit (the choice
   is kept in the URL hash, #x=commit, so a link shares it). */
(function (S) {
  "use strict";

  function rows(cols) {
    var keys = Object.keys(cols), n = keys.length ? S.expand(cols[keys[0]]).length : 0, out = new Array(n);
    var full = keys.map(function (k) { return S.expand(cols[k]); });
    for (var i = 0; i < n; i++) {
      var row = {};
      for (var j = 0; j < keys.length; j++) row[keys[j]] = full[j][i];
      out[i] = row;
    }
    return out;
  }

  // a trend chart, time or commit: layers with no rows are left out (an empty layer makes Vega
  // warn of an infinite extent); a commit chart's x domain is the commits in the order of their
  // first run
  function draw(el) {
    if (el.dataset.drawn) return;
    el.dataset.drawn = "1";
    var chart = window.SITEGEN_PAGE.charts[Number(el.dataset.chart !== undefined ? el.dataset.chart : el.dataset.commitChart)];
    var spec = S.clone(window.SITEGEN_SPECS[chart.kind]), data = rows(chart.rows), kinds = {};
    data.forEach(function (r) { kinds[r.k] = true; });
    spec.data = { values: data };
    spec.layer = spec.layer.filter(function (layer) {
      var m = /datum\.k == '(\w+)'/.exec(JSON.stringify(layer.transform || []));
      return !m || kinds[m[1]];
    });
    if (chart.domain) {  // (at most ~24 commits labelled: measuring a thousand labels for overlap is slow)
      var every = Math.ceil(chart.domain.length / 24);
      var shown = chart.domain.filter(function (_, i) { return i % every === 0; });
      spec.layer.forEach(function (layer) {
        layer.encoding.x.scale.domain = chart.domain;
        if (every > 1 && layer.encoding.x.axis) layer.encoding.x.axis.values = shown;
      });
    }
    S.embed(el, spec);
  }

  function view() {
    return /(?:^#|&)x=commit(?:&|$)/.test(window.location.hash) ? "commit" : "time";
  }

  function show(which) {
    S.forEach(document.querySelectorAll(".by-time"), function (e) { e.hidden = which !== "time"; });
    S.forEach(document.querySelectorAll(".by-commit"), function (e) { e.hidden = which !== "commit"; });
    if (!window.SITEGEN_PAGE || !window.SITEGEN_SPECS || !window.vegaEmbed) return;
    var charts = document.querySelectorAll(which === "commit" ? ".chart[data-commit-chart]" : ".chart[data-chart]");
    S.whenVisible(Array.prototype.slice.call(charts), draw);
  }

  S.ready(function () {
    S.pageData();
    var pick = document.getElementById("trend-x");
    var which = pick ? view() : "time";
    if (pick) {
      pick.value = which;
      pick.addEventListener("change", function () {
        window.location.hash = pick.value === "commit" ? "x=commit" : "x=time";
        show(pick.value);
      });
      window.addEventListener("hashchange", function () {
        if (pick.value !== view()) { pick.value = view(); show(pick.value); }
      });
    }
    show(which);
  });
})(window.SITEGEN);
