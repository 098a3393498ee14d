// The model picker in the conversation header: shows the session's model and switches it
// (PATCH /api/sessions/{id}/ {model}) from the next message on. The server appends a
// `model_change` entry that every open tab receives, so the log says when it changed.
// Choices: `offline`, or any `openai:<model>` / `anthropic:<model>`
// typed in; the server refuses names it does not accept and the picker shows the old one.
// Beside it, the session's thinking level (off, low, medium, high; PATCH {thinking}), which
// the server records as a `thinking_change` entry the same way.

import { api, errorText, sessionPath } from "./api.js";
import { $, el } from "./dom.js";

const select = $("model-select");
const other = $("model-other");
const nameBox = $("model-name");
const thinkingSelect = $("thinking-select");

let current = "";
let currentThinking = "off";

export function showThinking(level) {
  currentThinking = level || "off";
  thinkingSelect.value = currentThinking;
}

// The select holds the fixed choices plus, when the session uses one, that typed-in model.
export function showModel(model) {
  // A refresh of the same model leaves a name being typed alone.
  if (!other.hidden && (model || "") === current) return;
  current = model || "";
  const fixed = ["", "offline", "other"];
  for (const option of [...select.options]) {
    if (!fixed.includes(option.value)) option.remove();
  }
  if (!fixed.includes(current)) {
    const option = el("option", "", current);
    option.value = current;
    select.insertBefore(option, select.querySelector('option[value="other"]'));
  }
  // "default" (the agent's model) is what a new session has; once a model is set, the API
  // takes only a model name, so it is no longer a choice.
  const byDefault = select.querySelector('option[value=""]');
  byDefault.hidden = byDefault.disabled = current !== "";
  select.value = current;
  other.hidden = true;
}

export function setupModelPicker({ sessionId, onError }) {
  async function choose(model) {
    if (model === current) {
      other.hidden = true;
      return showModel(current);
    }
    select.disabled = true;
    const result = await api("PATCH", sessionPath(sessionId()), { model });
    select.disabled = false;
    other.hidden = true;
    if (!result.ok) {
      onError("Model not changed: " + errorText(result));
      showModel(current);
      return;
    }
    onError("");
    showModel(result.data.model);
  }

  thinkingSelect.addEventListener("change", async () => {
    const thinking = thinkingSelect.value;
    thinkingSelect.disabled = true;
    const result = await api("PATCH", sessionPath(sessionId()), { thinking });
    thinkingSelect.disabled = false;
    if (!result.ok) {
      onError("Thinking not changed: " + errorText(result));
      showThinking(currentThinking);
      return;
    }
    onError("");
    showThinking(result.data.thinking);
  });

  select.addEventListener("change", () => {
    if (select.value === "other") {
      other.hidden = false;
      nameBox.value = "";
      nameBox.focus();
      return;
    }
    choose(select.value);
  });
  nameBox.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.stopPropagation();
      other.hidden = true;
      showModel(current);
      select.focus();
    }
  });
  $("model-picker").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = nameBox.value.trim();
    if (name) choose(name);
  });
}
