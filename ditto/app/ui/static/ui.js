// ditto ui: keyboard help only; every page works without it.
// "/" focuses the search box; "j" / "k" move between results; "Escape" leaves a field.
(function () {
  "use strict";
  function typing(target) {
    return target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA" ||
      target.tagName === "SELECT" || target.isContentEditable);
  }
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    if (event.key === "Escape" && typing(event.target)) { event.target.blur(); return; }
    if (typing(event.target)) { return; }
    if (event.key === "/") {
      var box = document.querySelector("[data-focus-key='/']");
      if (box) { event.preventDefault(); box.focus(); box.select(); }
      return;
    }
    if (event.key === "j" || event.key === "k") {
      var links = Array.prototype.slice.call(document.querySelectorAll("[data-nav-list] a.title"));
      if (!links.length) { return; }
      var at = links.indexOf(document.activeElement);
      var next = event.key === "j" ? Math.min(at + 1, links.length - 1) : Math.max(at - 1, 0);
      event.preventDefault();
      links[next].focus();
    }
  });
  var done = document.getElementById("done");
  if (done) { done.setAttribute("tabindex", "-1"); }
})();
