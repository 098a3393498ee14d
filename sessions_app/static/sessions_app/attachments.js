// Files in a conversation (docs/design.md §23): the composer's tray of files to send (attach
// button, paste, drag and drop; each uploaded at once with a progress bar, removable until
// sent), and the thumbnails and file chips a sent message shows in the history.

import { el, icon } from "./dom.js";

export const sessionFileUrl = (sessionId, fileId) =>
  "/api/sessions/" + encodeURIComponent(sessionId) + "/files/" + encodeURIComponent(fileId) + "/";

function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

export function sizeText(bytes) {
  if (bytes < 1024) return bytes + " B";
  if (bytes < 1024 * 1024) return Math.round(bytes / 1024) + " KB";
  return (bytes / 1024 / 1024).toFixed(1) + " MB";
}

// The composer's tray. `sessionId()` names the session uploads go to; `onError(text)` shows
// what went wrong; `announce(text)` tells a screen reader what changed.
export function setupAttachments({ sessionId, onError, announce }) {
  const tray = document.getElementById("attachments");
  const input = document.getElementById("attach-input");
  const button = document.getElementById("attach");
  const dropZone = document.getElementById("composer");
  const items = []; // {file, chip, id (once uploaded), request (while uploading), preview}

  function remove(item, { quiet = false } = {}) {
    if (item.request) item.request.abort();
    if (item.preview) URL.revokeObjectURL(item.preview);
    item.chip.remove();
    items.splice(items.indexOf(item), 1);
    tray.hidden = items.length === 0;
    if (!quiet) announce(item.file.name + " removed");
  }

  function chipFor(item) {
    const chip = el("li", "attachment uploading");
    if (item.file.type.startsWith("image/")) {
      item.preview = URL.createObjectURL(item.file);
      const image = el("img", "attachment-thumb");
      image.src = item.preview;
      image.alt = "";
      chip.appendChild(image);
    } else {
      chip.appendChild(icon("file"));
    }
    const label = el("span", "attachment-name", item.file.name || "pasted file");
    chip.appendChild(label);
    const progress = el("progress", "attachment-progress");
    progress.max = 100;
    progress.value = 0;
    progress.setAttribute("aria-label", "Uploading " + (item.file.name || "file"));
    chip.appendChild(progress);
    const drop = el("button", "attachment-remove icon-button");
    drop.type = "button";
    drop.setAttribute("aria-label", "Remove " + (item.file.name || "file"));
    drop.appendChild(icon("close"));
    drop.addEventListener("click", () => {
      remove(item);
      button.focus();
    });
    chip.appendChild(drop);
    item.progress = progress;
    return chip;
  }

  // XMLHttpRequest rather than fetch: only it reports an upload's progress.
  function upload(item) {
    const request = new XMLHttpRequest();
    item.request = request;
    request.open("POST", "/api/sessions/" + encodeURIComponent(sessionId()) + "/files/");
    request.setRequestHeader("X-CSRFToken", csrfToken());
    request.setRequestHeader("Accept", "application/json");
    request.upload.onprogress = (event) => {
      if (event.lengthComputable) item.progress.value = Math.round((event.loaded / event.total) * 100);
    };
    request.onload = () => {
      item.request = null;
      let body = null;
      try {
        body = JSON.parse(request.responseText);
      } catch (error) {
        body = null;
      }
      if (request.status === 201 && body) {
        item.id = body.id;
        item.chip.classList.remove("uploading");
        item.progress.remove();
        item.chip.title = body.name + " · " + sizeText(body.size);
        announce(body.name + " attached");
      } else {
        const why = body && body.detail ? body.detail + " (" + body.code + ")" : "the upload failed";
        onError((item.file.name || "The file") + ": " + why);
        remove(item, { quiet: true });
      }
    };
    request.onerror = () => {
      item.request = null;
      onError((item.file.name || "The file") + ": the server cannot be reached");
      remove(item, { quiet: true });
    };
    const form = new FormData();
    form.append("file", item.file, item.file.name || "pasted");
    request.send(form);
  }

  function add(files) {
    for (const file of files) {
      const item = { file, id: null, request: null, preview: null };
      item.chip = chipFor(item);
      items.push(item);
      tray.appendChild(item.chip);
      tray.hidden = false;
      upload(item);
    }
  }

  button.addEventListener("click", () => input.click());
  input.addEventListener("change", () => {
    add(Array.from(input.files));
    input.value = "";
  });
  document.getElementById("prompt").addEventListener("paste", (event) => {
    const files = Array.from(event.clipboardData ? event.clipboardData.files : []);
    if (files.length) {
      event.preventDefault();
      add(files);
    }
  });
  dropZone.addEventListener("dragover", (event) => {
    if (event.dataTransfer && Array.from(event.dataTransfer.types).includes("Files")) {
      event.preventDefault();
      dropZone.classList.add("dropping");
    }
  });
  dropZone.addEventListener("dragleave", () => dropZone.classList.remove("dropping"));
  dropZone.addEventListener("drop", (event) => {
    dropZone.classList.remove("dropping");
    if (event.dataTransfer && event.dataTransfer.files.length) {
      event.preventDefault();
      add(Array.from(event.dataTransfer.files));
    }
  });

  return {
    // Ids of the uploaded files; null while one is still uploading (the prompt waits).
    ready() {
      if (items.some((item) => !item.id)) return null;
      return items.map((item) => item.id);
    },
    clear() {
      for (const item of [...items]) remove(item, { quiet: true });
    },
  };
}

// What a sent message shows of its attachments: a thumbnail for an image, a chip for any
// other file; each opens the file. `fileUrl(id)` names where a file is read (a share's page
// reads them through its link); the session's own file routes by default.
export function attachmentsElement(sessionId, refs, fileUrl = (id) => sessionFileUrl(sessionId, id)) {
  const list = el("ul", "sent-attachments");
  list.setAttribute("aria-label", "Attached files");
  for (const ref of refs) {
    const item = el("li");
    const link = el("a", "sent-attachment");
    link.href = fileUrl(ref.id);
    link.target = "_blank";
    link.rel = "noopener";
    if (String(ref.mime || "").startsWith("image/")) {
      const image = el("img", "sent-thumb");
      image.src = fileUrl(ref.id) + "thumb/";
      image.alt = ref.name;
      image.loading = "lazy";
      if (ref.width && ref.height) {
        const scale = Math.min(1, 256 / Math.max(ref.width, ref.height));
        image.width = Math.max(1, Math.round(ref.width * scale));
        image.height = Math.max(1, Math.round(ref.height * scale));
      }
      link.appendChild(image);
    } else {
      link.appendChild(icon("file"));
      link.appendChild(el("span", "attachment-name", ref.name));
      link.appendChild(el("span", "attachment-size", sizeText(ref.size || 0)));
    }
    item.appendChild(link);
    list.appendChild(item);
  }
  return list;
}
