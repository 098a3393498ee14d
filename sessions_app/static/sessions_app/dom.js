// Small DOM helpers shared by the chat page's modules. Text always goes in through
// textContent: nothing the server sends becomes markup here (rendered markdown goes through
// markdown.js, which sanitizes).

const SVG = "http://www.w3.org/2000/svg";

export const $ = (id) => document.getElementById(id);

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

// An icon from the page's inline sprite (templates/partials/icons.html): drawn, never a
// font glyph, so it shows on every system.
export function icon(name) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "icon");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const use = document.createElementNS(SVG, "use");
  use.setAttribute("href", "#icon-" + name);
  svg.appendChild(use);
  return svg;
}

// A button with an icon and a visible label; `label` is also its accessible name.
export function iconButton(name, label, className) {
  const button = el("button", className);
  button.type = "button";
  button.appendChild(icon(name));
  button.appendChild(el("span", "button-label", label));
  return button;
}
