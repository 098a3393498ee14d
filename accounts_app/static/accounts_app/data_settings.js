// The "Data" panel of the sessions card (docs/design.md §21): the retention policy
// (retention_days, PATCH /api/me/), "Download everything" (a plain link: the browser saves
// the zip GET /api/me/export/ streams), the upload of a ChatGPT export or an openai-agents
// database (POST /api/import/, the report shown line by line), and "Delete my account"
// (DELETE /api/me/ with the username typed as confirmation).

import { api, errorText, goToLogin } from "../sessions_app/api.js";

const retentionForm = document.getElementById("retention-form");
const retentionDays = document.getElementById("retention-days");
const retentionPolicy = document.getElementById("retention-policy");
const importForm = document.getElementById("import-form");
const importFile = document.getElementById("import-file");
const importReport = document.getElementById("import-report");
const deleteForm = document.getElementById("delete-account-form");
const deleteConfirm = document.getElementById("delete-confirm");
const deleteButton = document.getElementById("delete-account");
const deleteUsername = document.getElementById("delete-username");
const status = document.getElementById("data-settings-status");
let username = "";

function say(text) {
  status.textContent = text;
}

function describePolicy(me) {
  const days = me.retention_days ?? me.retention_default_days;
  const whose = me.retention_days ? "your choice" : "this server's default";
  const kept = days ? `Conversations idle ${days} days are deleted (${whose}).` : "Conversations are kept until you delete them.";
  retentionPolicy.textContent = `${kept} Test sessions go after ${me.test_session_retention_days} days.`;
}

async function load() {
  const result = await api("GET", "/api/me/");
  if (!result.ok) {
    say("Could not load your settings: " + errorText(result));
    return;
  }
  username = result.data.username;
  deleteUsername.textContent = username;
  retentionDays.value = result.data.retention_days ?? "";
  describePolicy(result.data);
}

async function saveRetention(event) {
  event.preventDefault();
  const text = retentionDays.value.trim();
  const result = await api("PATCH", "/api/me/", { retention_days: text ? Number(text) : null });
  if (result.ok) describePolicy(result.data);
  say(result.ok ? "Saved." : "Not saved: " + errorText(result));
}

function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

function showReport(report) {
  importReport.replaceChildren();
  for (const session of report.sessions) {
    const item = document.createElement("li");
    let text = session.error
      ? `${session.source_id}: not imported, ${session.error}`
      : `${session.source_id}: ${session.imported ? "imported" : "already imported"} (${session.entries} entries)`;
    if (session.branched_at_seq !== null && !session.error) text += `, a branch at entry ${session.branched_at_seq}`;
    if (session.notes.length) text += "; " + session.notes.join("; ");
    item.textContent = text;
    importReport.append(item);
  }
  say(`${report.imported} imported, ${report.unchanged - report.failed} already there, ${report.failed} refused. Reload to see them in your sessions.`);
}

async function upload(event) {
  event.preventDefault();
  if (!importFile.files.length) {
    say("Choose a file first.");
    return;
  }
  const body = new FormData();
  body.append("file", importFile.files[0]);
  say("Importing…");
  let response;
  try {
    response = await fetch("/api/import/", {
      method: "POST",
      credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
      body,
    });
  } catch (error) {
    say("Not imported: the server cannot be reached");
    return;
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    say("Not imported: " + errorText({ status: response.status, data }));
    return;
  }
  showReport(data);
}

async function deleteAccount(event) {
  event.preventDefault();
  if (deleteConfirm.value !== username) return;
  deleteButton.disabled = true;
  const result = await api("DELETE", "/api/me/", { confirm: deleteConfirm.value });
  if (result.status === 204) {
    goToLogin("/accounts/login/");
    return;
  }
  say("Not deleted: " + errorText(result));
  deleteButton.disabled = false;
}

retentionForm.addEventListener("submit", saveRetention);
importForm.addEventListener("submit", upload);
deleteForm.addEventListener("submit", deleteAccount);
deleteConfirm.addEventListener("input", () => {
  deleteButton.disabled = deleteConfirm.value !== username;
});
load();
