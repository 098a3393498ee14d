// The search box of the sessions card: GET /api/search/?q= over the caller's conversations.
// A hit shows the session's title and the matching excerpt, and links to the session at that
// entry (/?session=<id>&seq=<seq>; the page scrolls there and highlights it).
//
// The server sends the excerpt as HTML in which every character of the message is escaped
// and only <mark>…</mark> is markup. It is still never assigned as HTML here: it is split at
// the two tags, each piece is decoded to plain text, and the pieces go in as text nodes and
// <mark> elements.

import { api, errorText } from "./api.js";
import { $, el } from "./dom.js";

const box = $("search-query");
const results = $("search-results");
const hitsList = $("search-hits");
const status = $("search-status");

const WAIT_MS = 250; // typing pauses this long before a search is sent

function decodeEntities(text) {
  return new DOMParser().parseFromString(text, "text/html").documentElement.textContent;
}

export function snippetInto(node, snippet) {
  node.textContent = "";
  let marked = false;
  for (const piece of snippet.split(/(<mark>|<\/mark>)/)) {
    if (piece === "<mark>" || piece === "</mark>") {
      marked = piece === "<mark>";
    } else if (piece) {
      const text = decodeEntities(piece);
      node.appendChild(marked ? el("mark", "", text) : document.createTextNode(text));
    }
  }
}

function hitItem(hit) {
  const item = el("li", "search-hit");
  const link = el("a", "search-link");
  link.href = "/?session=" + encodeURIComponent(hit.session_id) + "&seq=" + hit.seq;
  link.appendChild(el("span", "session-name", hit.title || hit.session_id));
  const snippet = el("span", "search-snippet");
  snippetInto(snippet, hit.snippet);
  link.appendChild(snippet);
  link.appendChild(el("span", "session-meta", (hit.role === "user" ? "you" : "Jarvis") + " · #" + hit.seq));
  item.appendChild(link);
  return item;
}

let latest = 0; // answers to older queries that come back late are dropped

async function runSearch(query) {
  const ticket = ++latest;
  if (!query) {
    results.hidden = true;
    hitsList.textContent = "";
    return;
  }
  results.hidden = false;
  status.textContent = "Searching…";
  const result = await api("GET", "/api/search/?q=" + encodeURIComponent(query));
  if (ticket !== latest) return;
  hitsList.textContent = "";
  if (!result.ok) {
    status.textContent = "Search failed: " + errorText(result);
    return;
  }
  const hits = result.data.hits;
  status.textContent = hits.length ? hits.length + (result.data.next_offset ? "+" : "") + " found" : "Nothing found.";
  for (const hit of hits) hitsList.appendChild(hitItem(hit));
}

export function setupSearch() {
  let timer = null;
  box.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => runSearch(box.value.trim()), WAIT_MS);
  });
  $("search").addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    runSearch(box.value.trim());
  });
  box.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && box.value) {
      event.stopPropagation(); // clears the box; a second Escape closes the drawer
      box.value = "";
      runSearch("");
    }
  });
}
