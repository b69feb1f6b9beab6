// Keyboard-driven annotation workspaces. Every shortcut is declared in the markup:
//   data-keys="1"           a key (or space-separated keys) that clicks / checks / focuses it
//   data-shift-keys="3"     Shift + that digit (confidence)
//   data-check-row          an audit checklist row; its options' data-check-keys answer it,
//                           the checklist's data-row-next / data-row-previous keys move rows
//   data-toggle-shortcuts   opens the "?" overlay
//   data-page-keys="m"      like data-keys, for a control outside #workspace that outlives its
//                           items (the "show raw" switch); looked for when no item control has
//                           the key
// Shortcuts pause while a text box has focus (Esc leaves it; Ctrl+Enter submits from it). Each
// item, and each form sent back with a problem, opens with focus outside every text box.
// The server decides everything that matters; this file only moves focus and clicks.
(function () {
  "use strict";

  const TEXT_TYPES = ["text", "search", "email", "url", "number", "password"];

  function isTyping(el) {
    if (!el || !el.tagName) return false;
    if (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return true;
    return el.tagName === "INPUT" && TEXT_TYPES.includes(el.type);
  }

  function workspace() {
    return document.getElementById("workspace");
  }

  function activate(el) {
    if (el.tagName === "TEXTAREA" || (el.tagName === "INPUT" && TEXT_TYPES.includes(el.type))) {
      el.focus();
      return;
    }
    const input = el.tagName === "LABEL" ? el.querySelector("input") : null;
    if (input && (input.type === "radio" || input.type === "checkbox")) {
      input.checked = true;
      input.dispatchEvent(new Event("change", { bubbles: true }));
      return;
    }
    el.click();
  }

  function toggleShortcuts() {
    const dialog = document.getElementById("shortcuts");
    if (!dialog) return;
    if (dialog.open) dialog.close();
    else dialog.showModal();
  }

  // --- Audit checklist rows -------------------------------------------------------------
  function rows(ws) {
    return Array.from(ws.querySelectorAll("[data-check-row]"));
  }

  function moveRow(ws, delta) {
    const all = rows(ws);
    if (!all.length) return false;
    let index = all.findIndex((row) => row.classList.contains("current"));
    all.forEach((row) => row.classList.remove("current"));
    index = Math.min(all.length - 1, Math.max(0, (index < 0 ? 0 : index) + delta));
    all[index].classList.add("current");
    all[index].scrollIntoView({ block: "nearest" });
    return true;
  }

  function answerRow(ws, key) {
    const current = ws.querySelector("[data-check-row].current");
    const label = current && current.querySelector(`[data-check-keys~="${key}"]`);
    if (!label) return false;
    activate(label);
    moveRow(ws, 1);
    return true;
  }

  function rowKeys(ws, way) {
    const table = ws.querySelector("[data-row-next]");
    return table ? (table.dataset[way] || "").split(" ") : [];
  }

  // --- Keys -------------------------------------------------------------------------------
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.metaKey || event.defaultPrevented) return;
    const target = event.target;
    const ws = workspace();
    if (isTyping(target)) {
      if (event.key === "Escape") {
        target.blur();
        if (ws) ws.focus({ preventScroll: true });
        event.preventDefault();
      } else if (event.key === "Enter" && event.ctrlKey) {
        const form = target.closest("form");
        if (form) {
          event.preventDefault();
          form.requestSubmit();
        }
      }
      return;
    }
    if (event.ctrlKey) return;
    if (event.key === "?") {
      event.preventDefault();
      toggleShortcuts();
      return;
    }
    const dialog = document.getElementById("shortcuts");
    if (!ws || (dialog && dialog.open)) return;
    if (target && target.tagName === "BUTTON" && event.key === "Enter") return; // native click
    if (event.shiftKey && /^Digit[1-5]$/.test(event.code)) {
      const el = ws.querySelector(`[data-shift-keys~="${event.code.slice(5)}"]`);
      if (el) {
        event.preventDefault();
        activate(el);
      }
      return;
    }
    const key = event.key === "Enter" ? "enter" : event.key.toLowerCase();
    if (rows(ws).length) {
      if (rowKeys(ws, "rowNext").includes(key) && moveRow(ws, 1)) return event.preventDefault();
      if (rowKeys(ws, "rowPrevious").includes(key) && moveRow(ws, -1)) {
        return event.preventDefault();
      }
      if (/^[a-z0-9]$/.test(key) && answerRow(ws, key)) return event.preventDefault();
    }
    if (!/^[a-z0-9]$|^enter$/.test(key)) return;
    const el =
      ws.querySelector(`[data-keys~="${key}"]`) || document.querySelector(`[data-page-keys~="${key}"]`);
    if (el && !el.disabled) {
      event.preventDefault();
      activate(el);
    }
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest("[data-toggle-shortcuts]")) toggleShortcuts();
  });

  // --- Each item: time on it, its draft (static/js/drafts.js), focus -----------------------
  let shownAt = performance.now();

  // A conversation box opens on its current message (the trigger turn's): its end at the
  // box's bottom, with what came just before above it; a message taller than the box, its start.
  function showCurrent(box) {
    const current = box.querySelector(".is-current");
    if (!current) {
      box.scrollTop = box.scrollHeight;
      return;
    }
    const top = current.offsetTop; // the box is positioned (app.css): its own coordinates
    const bottom = top + current.offsetHeight;
    box.scrollTop = current.offsetHeight > box.clientHeight ? top : bottom - box.clientHeight;
  }

  function itemShown() {
    const ws = workspace();
    shownAt = performance.now();
    if (!ws) return;
    ws.dataset.shown = "1";
    if (window.proactbenchDrafts) window.proactbenchDrafts.restoreOnly(ws); // static/js/drafts.js
    ws.querySelectorAll("[data-scroll-current]").forEach(showCurrent);
    // Every item, and every form sent back with a problem, starts with focus on the workspace
    // (htmx would put it back in the text box of the same id), so the keys the page and its
    // error messages name work at once; r goes to the box.
    ws.focus({ preventScroll: true });
    const problem = ws.querySelector(".errorlist");
    if (problem) problem.scrollIntoView({ block: "nearest" });
  }

  // Capture phase: runs before htmx's own submit handler collects the form's values.
  document.addEventListener(
    "submit",
    (event) => {
      const form = event.target;
      if (!form.matches || !form.matches("form[data-answer]")) return;
      const elapsed = form.querySelector('[name="elapsed_ms"]');
      if (elapsed) elapsed.value = String(Math.round(performance.now() - shownAt));
    },
    true,
  );
  // After every swap of #workspace (a new element, so it has no "shown" mark yet): on
  // afterSwap, in the same task as the swap, as no key can arrive in between; the settle comes
  // a timer later, when the annotator may already be typing in the new item.
  document.addEventListener("htmx:afterSwap", () => {
    const ws = workspace();
    if (ws && ws.dataset.shown !== "1") itemShown();
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", itemShown);
  else itemShown();
})();
