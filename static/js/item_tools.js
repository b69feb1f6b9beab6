// The held item's tools (templates/annotation/workspace/item_tools.html) and what follows an
// answer:
//   data-open-dialog="id"   a button (its key through workspace.js's data-keys) that opens
//                           that dialog; data-close-dialog closes the dialog it is in
//   dialog.item-tool        while one is open, workspace.js leaves every key to it: Enter
//                           sends its form (Ctrl+Enter from its text box), Esc closes it
//   [data-time-left-s]      the item's time limit: counts down; at zero the hidden
//                           form[data-time-up] asks for the next item (the server has already
//                           given this one back: it enforces the limit, this only asks)
// And after every swap that brings a new item: the page scrolls to the item's top.
(function () {
  "use strict";

  function openDialog(id) {
    const dialog = document.getElementById(id);
    if (dialog && !dialog.open) dialog.showModal();
  }

  document.addEventListener("click", (event) => {
    const opener = event.target.closest && event.target.closest("[data-open-dialog]");
    if (opener) {
      openDialog(opener.dataset.openDialog);
      return;
    }
    const closer = event.target.closest && event.target.closest("[data-close-dialog]");
    if (closer) closer.closest("dialog").close();
  });

  document.addEventListener("keydown", (event) => {
    const dialog = event.target.closest && event.target.closest("dialog.item-tool[open]");
    if (!dialog || event.key !== "Enter" || event.altKey || event.metaKey) return;
    const target = event.target;
    if (target.tagName === "BUTTON") return; // its own click
    if (target.tagName === "TEXTAREA" && !event.ctrlKey) return; // a new line
    const form = target.closest("form");
    if (form) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  // A flag sent: its status line is swapped in (the item and the answer being written stay);
  // the dialog closes and forgets what was typed.
  document.addEventListener("htmx:afterRequest", (event) => {
    const form = event.detail.elt;
    if (!form.matches || !form.matches("form[data-flag-form]")) return;
    if (event.detail.successful) {
      form.reset();
      form.closest("dialog").close();
    }
  });
  // A refused flag (400) still shows its reason in the status line.
  document.addEventListener("htmx:beforeSwap", (event) => {
    const form = event.detail.requestConfig && event.detail.requestConfig.elt;
    if (form && form.matches && form.matches("form[data-flag-form]") && event.detail.xhr.status === 400) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  // --- The item's time limit --------------------------------------------------------------
  let timer = null;

  function format(seconds) {
    const s = Math.max(0, seconds);
    return s >= 60 ? `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s` : `${s} s`;
  }

  function startTimer() {
    if (timer) clearInterval(timer);
    timer = null;
    const box = document.querySelector("#workspace [data-time-left-s]");
    if (!box) return;
    const endsAt = performance.now() + Number(box.dataset.timeLeftS) * 1000;
    const text = box.querySelector("[data-timer-text]");
    let asked = false;
    function tick() {
      const left = Math.ceil((endsAt - performance.now()) / 1000);
      text.textContent = format(left);
      box.classList.toggle("warn", left <= 30);
      // A second past zero, so that the server's clock has passed the limit too.
      if (left <= -1 && !asked) {
        asked = true;
        clearInterval(timer);
        const form = document.querySelector("#workspace form[data-time-up]");
        if (form) form.requestSubmit();
      }
    }
    tick();
    timer = setInterval(tick, 250);
  }

  // --- Each new item ----------------------------------------------------------------------
  let shownItem = null;

  function itemShown(scroll) {
    const ws = document.getElementById("workspace");
    if (!ws) return;
    const item = ws.dataset.item || "";
    if (scroll && item && item !== shownItem) {
      const top = ws.getBoundingClientRect().top + window.scrollY;
      if (window.scrollY > top) window.scrollTo({ top: Math.max(0, top - 8), behavior: "instant" });
    }
    shownItem = item;
    startTimer();
  }

  document.addEventListener("htmx:afterSwap", (event) => {
    if (event.detail.target && event.detail.target.id === "flag-status") return;
    itemShown(true);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", () => itemShown(false));
  } else {
    itemShown(false);
  }
})();
