// "Upcoming reminders" in the sessions card: the caller's active schedules, next run first
// (GET /api/schedules/, one page of up to 200: more than a user may have active), each with a Cancel button (DELETE /api/schedules/{id}/). The list is
// read again whenever it may have changed: after a turn (the agent may have set or cancelled
// one), when a notice arrives (a one-off is then done), and when the window gets focus.

import { api, errorText } from "./api.js";
import { $, el, iconButton } from "./dom.js";

const list = $("reminder-list");
const status = $("reminders-status");

function whenText(iso) {
  const date = new Date(iso);
  const seconds = Math.round((date.getTime() - Date.now()) / 1000);
  if (seconds < 60) return "in under a minute";
  if (seconds < 3600) return "in " + Math.round(seconds / 60) + " min";
  const sameDay = date.toDateString() === new Date().toDateString();
  const time = date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return sameDay ? "at " + time : date.toLocaleDateString() + " " + time;
}

function repeatText(schedule) {
  if (!schedule.every) return "";
  const unit = schedule.every === 1 ? schedule.unit.replace(/s$/, "") : schedule.unit;
  return " · every " + (schedule.every === 1 ? "" : schedule.every + " ") + unit;
}

function reminderItem(schedule) {
  const item = el("li", "reminder-item");
  item.dataset.scheduleId = schedule.id;
  const text = el("div", "reminder-text");
  text.appendChild(el("span", "reminder-name", (schedule.kind === "prompt" ? "Ask: " : "") + schedule.text));
  text.appendChild(el("span", "reminder-when", whenText(schedule.next_run_at) + repeatText(schedule)));
  item.appendChild(text);
  const cancel = iconButton("close", "Cancel", "small cancel-reminder");
  cancel.setAttribute("aria-label", "Cancel reminder: " + schedule.text);
  cancel.addEventListener("click", () => cancelReminder(schedule, item, cancel));
  item.appendChild(cancel);
  return item;
}

async function cancelReminder(schedule, item, button) {
  button.disabled = true;
  const result = await api("DELETE", "/api/schedules/" + encodeURIComponent(schedule.id) + "/");
  if (result.ok) {
    item.remove();
    if (!list.children.length) status.textContent = "None.";
    return;
  }
  button.disabled = false;
  const old = item.querySelector(".row-error");
  if (old) old.remove();
  item.appendChild(el("p", "row-error", "Not cancelled: " + errorText(result)));
}

export async function refreshReminders() {
  const result = await api("GET", "/api/schedules/?limit=200");
  if (!result.ok) {
    status.textContent = "Could not load reminders: " + errorText(result);
    return;
  }
  list.textContent = "";
  const schedules = result.data.schedules;
  status.textContent = schedules.length ? "" : "None.";
  for (const schedule of schedules) list.appendChild(reminderItem(schedule));
}
