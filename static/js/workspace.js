// Keyboard-driven annotation workspaces. Every shortcut is declared in the markup:
//   data-keys="1"           a key (or space-separated keys) that clicks / checks / focuses it
//   data-shift-keys="3"     Shift + that digit (confidence)
//   data-check-row          a checklist row (an audit's, a HALO diagnosis's questions); its
//                           options' data-check-keys answer it (then the next row, unless the
//                           row has data-check-stay), the data-row-next / data-row-previous keys
//                           of its container move rows; hidden rows are skipped
//   data-focus-on-check="id" an option that, once checked by its key, puts focus in that box
//   data-show-if="a=x,y;b=z" shown only while field a's value is x or y and b's is z (a checkbox
//                           is "on" when ticked); hidden, the inputs inside are disabled, so
//                           they are neither sent nor required (the server drops them anyway)
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

  // --- Conditional questions ------------------------------------------------------------
  function valueOf(form, name) {
    const field = Array.from(form.querySelectorAll(`[name="${CSS.escape(name)}"]`)).find(
      (el) => !el.disabled && (el.type === "radio" || el.type === "checkbox" ? el.checked : true),
    );
    if (!field) return "";
    return field.type === "checkbox" ? "on" : field.value;
  }

  function applyConditions(ws) {
    const form = ws && ws.querySelector("form[data-answer]");
    if (!form) return;
    const conditional = Array.from(form.querySelectorAll("[data-show-if]"));
    if (!conditional.length) return;
    // Outer conditions first (document order), so an inner one reads enabled controls only.
    conditional.forEach((el) => {
      const shown = el.dataset.showIf.split(";").every((clause) => {
        const [name, values] = clause.split("=");
        return values.split(",").includes(valueOf(form, name));
      });
      el.hidden = !shown;
      el.querySelectorAll("input, textarea, select").forEach((input) => {
        input.disabled = Boolean(input.closest("[hidden]"));
      });
    });
    const current = form.querySelector("[data-check-row].current");
    if (current && current.closest("[hidden]")) moveRow(ws, -1);
  }

  // --- Checklist rows ---------------------------------------------------------------------
  function rows(ws) {
    return Array.from(ws.querySelectorAll("[data-check-row]"));
  }

  function visible(row) {
    return !row.closest("[hidden]");
  }

  function moveRow(ws, delta) {
    const all = rows(ws);
    if (!all.some(visible)) return false;
    const from = all.findIndex((row) => row.classList.contains("current"));
    let index = from < 0 ? 0 : from;
    // The nearest shown row that way; at either end, the last shown row (or back the other way
    // when the current row itself was just hidden).
    let next = -1;
    for (let i = index + delta; i >= 0 && i < all.length; i += delta) {
      if (visible(all[i])) {
        next = i;
        break;
      }
    }
    if (next < 0) next = visible(all[index]) ? index : all.findIndex(visible);
    all.forEach((row) => row.classList.remove("current"));
    all[next].classList.add("current");
    all[next].scrollIntoView({ block: "nearest" });
    return true;
  }

  function answerRow(ws, key) {
    const current = ws.querySelector("[data-check-row].current");
    const label = current && visible(current) && current.querySelector(`[data-check-keys~="${key}"]`);
    if (!label) return false;
    const input = label.querySelector("input");
    if (input && input.type === "checkbox") {
      input.checked = !input.checked;
      input.dispatchEvent(new Event("change", { bubbles: true }));
      const box = input.checked && document.getElementById(label.dataset.focusOnCheck || "");
      if (box) box.focus();
      return true;
    }
    activate(label);
    if (!current.hasAttribute("data-check-stay")) moveRow(ws, 1);
    return true;
  }

  function rowKeys(ws, way) {
    const table = ws.querySelector("[data-row-next]");
    return table ? (table.dataset[way] || "").split(" ") : [];
  }

  // --- Keys -------------------------------------------------------------------------------
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.metaKey || event.defaultPrevented) return;
    // An item tool's dialog (skip, flag: static/js/item_tools.js) takes every key while open.
    if (document.querySelector("dialog.item-tool[open]")) return;
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

  // Every change of an answer form re-applies its conditions (before a row moves on: the
  // change event of a key's answer is dispatched, and handled, inside activate()).
  document.addEventListener("change", function (event) {
    if (event.target.closest && event.target.closest("form[data-answer]")) {
      applyConditions(workspace());
    }
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
    applyConditions(ws); // after the draft: its choices decide what is shown
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
  // a timer later, when the annotator may already be typing in the new item. htmx itself takes
  // the new form in (its hx-post) only at that settle: a key or a click in between would send
  // the form natively (a full-page POST and redirect: nothing lost, but the page flashes), so
  // it is processed here at once; htmx's own pass at the settle then finds it done.
  document.addEventListener("htmx:afterSwap", () => {
    const ws = workspace();
    if (!ws || ws.dataset.shown === "1") return;
    itemShown();
    if (window.htmx) window.htmx.process(ws);
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", itemShown);
  else itemShown();
})();
