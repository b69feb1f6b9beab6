// The sample viewer's keys: j goes to the next trigger of the filtered list, k to the previous
// (the page's rel="next" / rel="prev" links, which carry the filters). Ignored while typing in
// a field or with a modifier held, so the filters and the browser's own shortcuts keep working.
(function () {
  "use strict";
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    var target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(target.tagName))) return;
    var rel = { j: "next", k: "prev" }[event.key];
    if (!rel) return;
    var link = document.querySelector('a[rel="' + rel + '"]');
    if (link) {
      event.preventDefault();
      window.location.assign(link.href);
    }
  });
})();
