/* Light or dark: the reader's choice, remembered in this browser (localStorage), else the
   system's (prefers-color-scheme, in site.css). Loaded in <head> so the page is painted in
   the right colours at once; the switch in the header is wired once the page is parsed. */
(function () {
  "use strict";
  var KEY = "sitegen.theme", root = document.documentElement;

  function stored() {
    try { var v = window.localStorage.getItem(KEY); return v === "dark" || v === "light" ? v : null; } catch (e) { return null; }
  }
  function system() { return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light"; }
  function current() { return stored() || system(); }

  var chosen = stored();
  if (chosen) root.setAttribute("data-theme", chosen);

  function wire() {
    var button = document.getElementById("theme-toggle");
    if (!button) return;
    var show = function () { button.setAttribute("aria-pressed", current() === "dark" ? "true" : "false"); };
    button.hidden = false;
    show();
    button.addEventListener("click", function () {
      var next = current() === "dark" ? "light" : "dark";
      try { window.localStorage.setItem(KEY, next); } catch (e) { /* private mode: this page only */ }
      root.setAttribute("data-theme", next);
      show();
    });
    if (window.matchMedia) {
      var mq = window.matchMedia("(prefers-color-scheme: dark)");
      if (mq.addEventListener) mq.addEventListener("change", show);
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
