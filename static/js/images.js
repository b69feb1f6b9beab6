// Turn images: a thumbnail (a button with data-image-zoom) opens the page's zoom dialog
// (components/image_zoom.html) on its image; in the dialog ← / → move through the page's
// images in order, and z or Esc close it. Keys pressed while it is open go nowhere else (the
// workspace's answer keys stay quiet).
(function () {
  "use strict";

  function thumbnails() {
    return Array.from(document.querySelectorAll("[data-image-zoom]"));
  }

  function show(dialog, button) {
    const source = button.querySelector("img");
    const all = thumbnails();
    const image = dialog.querySelector("img");
    image.src = source.getAttribute("src");
    image.alt = source.alt;
    dialog.querySelector("figcaption").textContent = source.alt;
    const count = dialog.querySelector("[data-image-count]");
    if (count) count.textContent = `Image ${all.indexOf(button) + 1} of ${all.length}.`;
    dialog.current = button;
    if (!dialog.open) dialog.showModal();
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("[data-image-zoom]");
    const dialog = document.getElementById("image-zoom");
    if (!button || !dialog) return;
    event.preventDefault();
    show(dialog, button);
  });

  document.addEventListener("keydown", function (event) {
    const dialog = document.getElementById("image-zoom");
    if (!dialog || !dialog.open) return;
    event.stopImmediatePropagation();
    if (event.key === "z" || event.key === "Z") {
      event.preventDefault();
      dialog.close();
    } else if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
      event.preventDefault();
      const all = thumbnails();
      const at = all.indexOf(dialog.current) + (event.key === "ArrowRight" ? 1 : -1);
      if (all.length) show(dialog, all[(at + all.length) % all.length]);
    }
  }, true);

  // Closed, focus goes back to the workspace (where Enter submits), not to the thumbnail
  // (where Enter would open it again); on other pages to the thumbnail.
  document.addEventListener("close", function (event) {
    if (event.target.id !== "image-zoom") return;
    const back = document.getElementById("workspace") || event.target.current;
    if (back) back.focus({ preventScroll: true });
  }, true);
})();
