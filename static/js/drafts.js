// Workspace drafts: what an annotator has chosen or typed on the item they hold and not yet
// sent, kept in this browser so that a reload or a closed laptop loses nothing.
//
// A draft is its annotator's own. Its key is the workspace's data-draft-owner (a keyed hash of
// their account, which says nothing about the item) and the item's token, so the next person at a
// shared browser never sees it refilled; showing an item forgets every other draft, and logging
// out (the form marked data-logout, on every page) forgets them all. Only the form a draft was
// typed in writes it. The server decides everything that matters; a draft only refills a form.
(function () {
  "use strict";

  const PREFIX = "proactbench-draft:";
  const NOT_KEPT = ["csrfmiddlewaretoken", "idempotency_key", "elapsed_ms"];

  function keyOf(ws) {
    const owner = ws && ws.dataset.draftOwner;
    const item = ws && ws.dataset.item;
    return owner && item ? `${PREFIX}${owner}:${item}` : null;
  }

  function forgetAllBut(keep) {
    try {
      Object.keys(localStorage)
        .filter((key) => key.startsWith(PREFIX) && key !== keep)
        .forEach((key) => localStorage.removeItem(key));
    } catch (e) {
      /* storage disabled: there is nothing to forget */
    }
  }

  // A workspace being replaced saves nothing: a text box that loses focus as htmx swaps its
  // workspace out fires "change" with the next item already in the page.
  function save(form) {
    const ws = form.closest("#workspace");
    const key = keyOf(ws);
    if (!key || ws.dataset.leaving === "1") return;
    const values = {};
    new FormData(form).forEach((value, name) => {
      if (!NOT_KEPT.includes(name)) values[name] = value;
    });
    try {
      localStorage.setItem(key, JSON.stringify(values));
    } catch (e) {
      /* storage full or disabled: drafts are a convenience */
    }
  }

  // The item's form refilled from its draft (not a form the server sent back with a problem:
  // that one already holds what was sent); every other draft is forgotten.
  function restoreOnly(ws) {
    const key = keyOf(ws);
    forgetAllBut(key);
    const form = ws.querySelector("form[data-answer]");
    if (!key || !form || form.querySelector(".errorlist")) return;
    let values = null;
    try {
      values = JSON.parse(localStorage.getItem(key) || "null");
    } catch (e) {
      values = null;
    }
    if (!values) return;
    Object.entries(values).forEach(([name, value]) => {
      form.querySelectorAll(`[name="${CSS.escape(name)}"]`).forEach((field) => {
        if (field.type === "radio" || field.type === "checkbox") field.checked = field.value === value;
        else field.value = value;
      });
    });
  }

  function answerForm(event) {
    return event.target.closest ? event.target.closest("form[data-answer]") : null;
  }

  document.addEventListener("input", (event) => {
    const form = answerForm(event);
    if (form) save(form);
  });
  document.addEventListener("change", (event) => {
    const form = answerForm(event);
    if (form) save(form);
  });
  document.addEventListener("htmx:beforeSwap", (event) => {
    const target = event.detail.target;
    if (event.detail.shouldSwap && target && target.id === "workspace") {
      target.dataset.leaving = "1";
    }
  });
  document.addEventListener("submit", (event) => {
    if (event.target.matches && event.target.matches("form[data-logout]")) forgetAllBut(null);
  });

  window.proactbenchDrafts = { restoreOnly };
})();
