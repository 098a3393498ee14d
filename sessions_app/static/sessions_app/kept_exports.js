// A deleted session's exports stay the person's (docs/design.md §31, "export before you
// delete"): after a delete the page says where they download and until when. Deleting the open
// conversation reloads the page, so the answer is carried over in sessionStorage.

import { el } from "./dom.js";

const CARRIED = "jarvis.keptExports";

// The words and links for the notice: "Deleted x. Its export stays yours until <date>: x.md".
export function keptExportsLine(sessionId, exports) {
  const line = el("span", "kept-exports");
  const until = new Date(Math.min(...exports.map((kept) => Date.parse(kept.expires_at))));
  line.appendChild(
    document.createTextNode(
      "Deleted " + sessionId + ". Its export stays yours until " + until.toLocaleDateString() + ": ",
    ),
  );
  exports.forEach((kept, index) => {
    if (index) line.appendChild(document.createTextNode(", "));
    const link = el("a", "", kept.filename);
    link.href = kept.url;
    link.setAttribute("download", kept.filename);
    line.appendChild(link);
  });
  return line;
}

export function carryKeptExports(sessionId, exports) {
  if (exports && exports.length) sessionStorage.setItem(CARRIED, JSON.stringify({ sessionId, exports }));
}

// What a delete before this page's load carried for `sessionId`, once.
export function carriedKeptExports(sessionId) {
  const raw = sessionStorage.getItem(CARRIED);
  sessionStorage.removeItem(CARRIED);
  if (!raw || !sessionId) return [];
  try {
    const carried = JSON.parse(raw);
    return carried.sessionId === sessionId && Array.isArray(carried.exports) ? carried.exports : [];
  } catch {
    return [];
  }
}
