// A `run_code` call in the conversation (docs/design.md §28): its code highlighted, its
// output (stdout, stderr, exit code, why the sandbox ended it, whether output was dropped),
// and the files it wrote — images shown inline, other files as chips to download. Files are
// read by their blob id (the session's file route), so an older run shows what it wrote then
// even after a later run changed the file.

import { sessionFileUrl, sizeText } from "./attachments.js";
import { el, icon } from "./dom.js";
import { highlightInto } from "./highlight.js";

export const RUN_CODE = "run_code";

const LANGUAGE_NAMES = { python: "Python", bash: "bash" };
const KILLED_TEXT = {
  timeout: "stopped: time limit",
  memory: "stopped: memory limit",
  output: "stopped: too much output",
};

function parsed(raw) {
  try {
    const value = JSON.parse(raw);
    return value && typeof value === "object" ? value : null;
  } catch (error) {
    return null;
  }
}

// {language, code} of a call's arguments, or null when they are not a run's.
export function runCodeArguments(call) {
  const args = parsed(call.arguments);
  if (!args || typeof args.code !== "string") return null;
  return { language: args.language === "bash" ? "bash" : "python", code: args.code };
}

// The summary's short text: the language and the code's first line.
export function runCodeSummary(run) {
  const first = run.code.trim().split("\n", 1)[0];
  return LANGUAGE_NAMES[run.language] + " · " + (first.length > 50 ? first.slice(0, 47) + "…" : first);
}

// The code block shown in place of the raw arguments: it scrolls sideways and by keyboard.
export function codeElement(run) {
  const block = el("div", "run-code");
  block.appendChild(el("div", "label", LANGUAGE_NAMES[run.language] + " code"));
  const pre = el("pre", "run-source");
  pre.tabIndex = 0;
  pre.setAttribute("aria-label", LANGUAGE_NAMES[run.language] + " code");
  pre.appendChild(highlightInto(el("code", "language-" + run.language), run.code, run.language));
  block.appendChild(pre);
  return block;
}

// The run's result as the tool result's JSON gives it; null for an error text (no sandbox,
// bad arguments), which the caller shows as any tool's error.
export function runResult(entry) {
  if (entry.is_error) return null;
  const result = parsed(entry.content);
  return result && "exit_code" in result ? result : null;
}

function stream(name, text, className) {
  const pre = el("pre", "run-stream " + className, text);
  pre.tabIndex = 0;
  pre.setAttribute("aria-label", name);
  return pre;
}

// Exit code, the sandbox's reason when it ended the run, and dropped output, as badges.
function outcomeElement(result) {
  const line = el("p", "run-outcome");
  const failed = result.killed || (result.exit_code !== null && result.exit_code !== 0);
  if (result.exit_code !== null && result.exit_code !== undefined) {
    line.appendChild(el("span", "run-badge" + (result.exit_code === 0 ? " ok" : " bad"), "exit " + result.exit_code));
  }
  if (result.killed) line.appendChild(el("span", "run-badge bad", KILLED_TEXT[result.killed] || "stopped: " + result.killed));
  if (result.truncated) line.appendChild(el("span", "run-badge warn", "output truncated"));
  line.dataset.failed = failed ? "true" : "false";
  return line;
}

export function outputElement(result) {
  const box = el("div", "run-output");
  box.appendChild(el("div", "label", "Output"));
  box.appendChild(outcomeElement(result));
  if (result.stdout) box.appendChild(stream("Standard output", result.stdout, "stdout"));
  if (result.stderr) box.appendChild(stream("Standard error", result.stderr, "stderr"));
  if (!result.stdout && !result.stderr) box.appendChild(el("p", "run-empty", "No output."));
  return box;
}

// The files a run wrote: the entry's `data.files` (with an image's size), else the result's.
function filesOf(entry, result) {
  const files = (entry.data || {}).files;
  if (Array.isArray(files)) return files;
  return Array.isArray(result.files) ? result.files : [];
}

function baseName(path) {
  return String(path).split("/").pop();
}

// Images inline (each opens the file at full size), other files as chips; null when none.
// Shown under the call, not inside it, so a plot is seen without opening the call.
export function runFilesElement(sessionId, entry, result) {
  const files = filesOf(entry, result).filter((file) => file && file.id && file.path);
  if (!files.length) return null;
  const box = el("div", "run-files");
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", "Files the code wrote");
  const chips = el("ul", "run-chips");
  for (const file of files) {
    const url = sessionFileUrl(sessionId, file.id);
    if (String(file.mime || "").startsWith("image/")) {
      const figure = el("figure", "run-image");
      const link = el("a");
      link.href = url;
      link.target = "_blank";
      link.rel = "noopener";
      const image = el("img");
      image.src = url;
      image.alt = file.path;
      image.loading = "lazy";
      if (file.width && file.height) {
        image.width = file.width;
        image.height = file.height;
      }
      link.appendChild(image);
      figure.appendChild(link);
      figure.appendChild(el("figcaption", "", file.path));
      box.appendChild(figure);
    } else {
      const item = el("li");
      const link = el("a", "sent-attachment run-chip");
      link.href = url;
      link.download = baseName(file.path);
      link.appendChild(icon("download"));
      link.appendChild(el("span", "attachment-name", file.path));
      link.appendChild(el("span", "attachment-size", sizeText(file.size || 0)));
      item.appendChild(link);
      chips.appendChild(item);
    }
  }
  if (chips.children.length) box.appendChild(chips);
  return box;
}
