// The 🔔 badge on sessions in the card: a conversation holds a notice (a reminder, a scheduled
// answer) that this browser has not shown yet.
//
// The rule: this browser remembers, per session, the newest notice it has shown there (its
// server `created_at`, so the two clocks never get compared). A notice is unseen when it is
// newer than that; in a session this browser never showed a notice of, when no tab or
// outbound channel has received it (`delivered_at` is null). Opening the session shows its notices
// and so clears the badge.

import { api, sessionPath } from "./api.js";

const KEY = "jarvis.notices-seen.";

// Only the most recently active conversations are asked (one request each): notices go to the
// conversation a reminder was made in or else to the most recent one.
const CHECKED_SESSIONS = 20;

function seenUpTo(sessionId) {
  try {
    return localStorage.getItem(KEY + sessionId);
  } catch (error) {
    return null;
  }
}

export function markNoticesSeen(sessionId, notices) {
  let newest = seenUpTo(sessionId);
  for (const notice of notices) {
    if (!newest || Date.parse(notice.created_at) > Date.parse(newest)) newest = notice.created_at;
  }
  if (!newest) return;
  try {
    localStorage.setItem(KEY + sessionId, newest);
  } catch (error) {
    // Private mode without storage: badges then rest on delivered_at alone.
  }
}

function isUnseen(notice, newestSeen) {
  if (newestSeen) return Date.parse(notice.created_at) > Date.parse(newestSeen);
  return notice.delivered_at === null;
}

async function unseenCount(sessionId) {
  const result = await api("GET", sessionPath(sessionId) + "proactive/");
  if (!result.ok) return 0;
  const newestSeen = seenUpTo(sessionId);
  return result.data.filter((notice) => isUnseen(notice, newestSeen)).length;
}

// Resolves to a Map of session id -> number of unseen notices (only ids that have some).
export async function unseenNotices(sessionIds) {
  const ids = sessionIds.slice(0, CHECKED_SESSIONS);
  const counts = await Promise.all(ids.map(unseenCount));
  const unseen = new Map();
  ids.forEach((id, index) => {
    if (counts[index]) unseen.set(id, counts[index]);
  });
  return unseen;
}
