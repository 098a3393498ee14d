// The Branches dialog (docs/design.md §24): the open conversation's family as a tree — its
// root, the branches and theirs, and where each branched — moved through by keyboard (the
// WAI-ARIA tree pattern: arrows, Home, End; Enter opens a branch).

import { api, errorText, sessionPath } from "./api.js";
import { $, el } from "./dom.js";

function label(node) {
  const name = node.title || node.id;
  return node.branched_at_seq === null ? name : name + " (branched at entry " + node.branched_at_seq + ")";
}

function treeItem(node, level, currentId) {
  const item = el("li", "tree-item");
  item.setAttribute("role", "treeitem");
  item.setAttribute("aria-level", String(level));
  item.dataset.sessionId = node.id;
  item.tabIndex = -1;
  // Named by its content, as the WAI-ARIA tree pattern does: a label naming only the row
  // would hide the visible names of its branches from its accessible name.
  item.appendChild(el("span", "tree-label", label(node)));
  if (node.id === currentId) {
    item.setAttribute("aria-current", "true");
    item.appendChild(el("span", "tree-current", " · open now"));
  }
  if (node.children.length) {
    item.setAttribute("aria-expanded", "true");
    const group = el("ul", "tree-group");
    group.setAttribute("role", "group");
    for (const child of node.children) group.appendChild(treeItem(child, level + 1, currentId));
    item.appendChild(group);
  }
  return item;
}

// The tree items a person can reach now: those not inside a collapsed item.
function visibleItems(tree) {
  return Array.from(tree.querySelectorAll('[role="treeitem"]')).filter(
    (item) => !item.parentElement.closest('[role="treeitem"][aria-expanded="false"]'),
  );
}

function focusItem(tree, item) {
  for (const other of tree.querySelectorAll('[role="treeitem"]')) {
    other.tabIndex = -1;
    other.setAttribute("aria-selected", "false");
  }
  item.tabIndex = 0;
  item.setAttribute("aria-selected", "true");
  item.focus();
}

export function setupFamilyTree({ sessionId, open }) {
  const dialog = $("tree-dialog");
  const tree = $("family-tree");

  tree.addEventListener("keydown", (event) => {
    const item = event.target.closest('[role="treeitem"]');
    if (!item) return;
    const items = visibleItems(tree);
    const index = items.indexOf(item);
    const expanded = item.getAttribute("aria-expanded");
    let next = null;
    if (event.key === "ArrowDown") next = items[index + 1];
    else if (event.key === "ArrowUp") next = items[index - 1];
    else if (event.key === "Home") next = items[0];
    else if (event.key === "End") next = items[items.length - 1];
    else if (event.key === "ArrowRight") {
      if (expanded === "false") item.setAttribute("aria-expanded", "true");
      else if (expanded === "true") next = item.querySelector('[role="treeitem"]');
    } else if (event.key === "ArrowLeft") {
      if (expanded === "true") item.setAttribute("aria-expanded", "false");
      else next = item.parentElement.closest('[role="treeitem"]');
    } else if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      dialog.close();
      if (item.dataset.sessionId !== sessionId()) open(item.dataset.sessionId);
      return;
    } else {
      return;
    }
    event.preventDefault();
    if (next) focusItem(tree, next);
  });
  tree.addEventListener("click", (event) => {
    const item = event.target.closest('[role="treeitem"]');
    if (!item) return;
    focusItem(tree, item);
    dialog.close();
    if (item.dataset.sessionId !== sessionId()) open(item.dataset.sessionId);
  });

  $("tree-open").addEventListener("click", async () => {
    tree.textContent = "";
    $("tree-status").textContent = "Loading…";
    dialog.showModal();
    const result = await api("GET", sessionPath(sessionId()) + "tree/");
    if (!result.ok) {
      $("tree-status").textContent = "Could not load the branches: " + errorText(result);
      return;
    }
    $("tree-status").textContent = "";
    tree.appendChild(treeItem(result.data, 1, sessionId()));
    const current = tree.querySelector('[aria-current="true"]') || tree.querySelector('[role="treeitem"]');
    focusItem(tree, current);
  });
}
