/* A trend page (uses window.SITEGEN from core.js): draws its charts from the page's data. */
(function (S) {
  "use strict";
  S.ready(function () {
    S.pageData();
    S.drawCharts();
  });
})(window.SITEGEN);
