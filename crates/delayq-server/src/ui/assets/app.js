// The dashboard's script. Pages work without it; it adds three things:
// * refresh: a page marked data-refresh is fetched again every few seconds and its <main>
//   swapped in place, so the scroll position stays where it was (paused while a field has
//   the focus, a search runs or its results are shown: they would be swapped away);
// * search: the search form steps through a state with the JSON endpoint, showing progress,
//   until the end or until Stop; then, for delayed or ready messages found, it offers to
//   cancel them (a confirmation page that runs the search again);
// * the event feed: a queue page's Events table follows the queue's event stream (Server-Sent
//   Events), newest first, a bounded number of rows.
"use strict";

let searching = false;

function refreshEvery(ms) {
  setInterval(async () => {
    const active = document.activeElement;
    const results = document.querySelector("#search-results tr");
    if (searching || results || (active && ["INPUT", "SELECT", "TEXTAREA"].includes(active.tagName))) {
      return;
    }
    try {
      const response = await fetch(location.href, { credentials: "same-origin" });
      if (!response.ok || response.redirected) {
        return;
      }
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.querySelector("main");
      const main = document.querySelector("main");
      if (fresh && main) {
        main.replaceWith(fresh);
        wireSearch();
      }
    } catch (e) {
      // The server went away for a moment: the next tick tries again.
    }
  }, ms);
}

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) {
    td.className = className;
  }
  return td;
}

function wireSearch() {
  const form = document.getElementById("search");
  if (!form || form.dataset.wired) {
    return;
  }
  form.dataset.wired = "1";
  const stop = document.getElementById("search-stop");
  const progress = document.getElementById("search-progress");
  const rows = document.getElementById("search-results");
  stop.addEventListener("click", () => { searching = false; });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const needle = data.get("contains");
    if (!needle) {
      return;
    }
    rows.replaceChildren();
    const hideCancel = document.getElementById("cancel-found");
    if (hideCancel) {
      hideCancel.hidden = true;
    }
    searching = true;
    stop.hidden = false;
    let cursor = null;
    let scanned = 0;
    let found = 0;
    const total = Number(form.dataset.total || 0);
    while (searching) {
      const query = new URLSearchParams({ state: data.get("state"), contains: needle });
      if (cursor) {
        query.set("cursor", cursor);
      }
      const response = await fetch(form.action + "?" + query, { credentials: "same-origin" });
      const step = await response.json();
      if (!response.ok) {
        progress.textContent = step.error ? step.error.message : "search failed";
        break;
      }
      scanned += step.scanned;
      for (const m of step.messages) {
        found += 1;
        const tr = document.createElement("tr");
        const link = document.createElement("a");
        link.href = m.href;
        link.textContent = m.id;
        const id = document.createElement("td");
        id.appendChild(link);
        tr.append(id, cell(m.when), cell(String(m.attempts), "num"), cell(m.preview, "preview"));
        rows.appendChild(tr);
      }
      progress.textContent = `${found} found, ${scanned} of about ${total} looked at`;
      cursor = step.next;
      if (!cursor) {
        progress.textContent += " (done)";
        break;
      }
    }
    if (cursor && !searching) {
      progress.textContent += " (stopped)";
    }
    searching = false;
    stop.hidden = true;
    // Cancelling what the search found: the confirmation page runs the search again.
    const cancelFound = document.getElementById("cancel-found");
    const state = data.get("state");
    if (cancelFound && found > 0 && (state === "delayed" || state === "ready")) {
      const base = cancelFound.href.split("?")[0];
      cancelFound.href = base + "?" + new URLSearchParams({ action: "cancel_all", state, contains: needle });
      cancelFound.hidden = false;
    }
  });
}

// Rows the feed keeps: what the page shows when it loads, and as many again.
const FEED_ROWS = 50;
let feed = null;

function utc(ms) {
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

// What an event says besides its kind, as the server writes it (event_feed.rs, details).
function eventDetails(e) {
  const parts = [];
  if (e.attempt !== undefined) parts.push(`attempt ${e.attempt}`);
  if (e.due_ms !== undefined) parts.push(`due ${utc(e.due_ms)}`);
  if (e.detail !== undefined) parts.push(e.detail);
  if (e.error !== undefined) parts.push(e.error);
  return parts.join(" · ");
}

// Follows the stream of the page's Events table, once per page: a refresh swaps the table
// for a new one, which each event is then added to. The stream reconnects by itself.
function wireFeed() {
  const table = document.getElementById("events");
  if (!table || feed) {
    return;
  }
  feed = new EventSource(table.dataset.feed);
  const add = (message) => {
    const rows = document.querySelector("#events tbody");
    const current = document.getElementById("events");
    if (!rows || !current) {
      return;
    }
    const e = JSON.parse(message.data);
    const tr = document.createElement("tr");
    tr.dataset.kind = e.kind;
    tr.dataset.id = e.id;
    const link = document.createElement("a");
    link.href = `${current.dataset.queuePath}/messages/${encodeURIComponent(e.id)}`;
    link.textContent = e.id;
    const message_cell = document.createElement("td");
    message_cell.appendChild(link);
    tr.append(cell(utc(e.at_ms)), cell(e.kind), message_cell, cell(eventDetails(e), "preview"));
    rows.prepend(tr);
    while (rows.children.length > FEED_ROWS) {
      rows.lastElementChild.remove();
    }
  };
  for (const kind of ["sent", "delivered", "acked", "retry", "released", "dead", "expired",
    "superseded", "cancelled", "rescheduled", "requeued", "purged"]) {
    feed.addEventListener(kind, add);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  wireSearch();
  wireFeed();
  const every = Number(document.body.dataset.refresh || 0);
  if (every > 0) {
    refreshEvery(every);
  }
});
