// Answers as CommonMark (plus tables and strikethrough), rendered safely and patched into the
// page in place so a streaming answer grows without flicker.
//
// Two independent guards (docs/web.md says why these libraries):
// 1. markdown-it with `html: false`: raw HTML in the text is shown as text, never parsed as
//    markup, and its link validator refuses javascript:, vbscript:, file: and data: URLs.
// 2. DOMPurify over the result with an allow-list of the tags markdown produces, so a bug or
//    a plugin in the renderer still cannot put a script, an event handler or a form on the page.
// Images are never loaded: a picture in an answer would fetch a URL the model chose (a
// tracking pixel, or a way to leak the conversation through the URL), so it is shown as a
// link the reader may open.

import { el, icon } from "./dom.js";

const ALLOWED_TAGS = [
  "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
  "li", "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
];
const ALLOWED_ATTR = ["href", "title", "start", "class", "style"];
const LANGUAGE_CLASS = /^language-[\w+#.-]{1,40}$/;
const ALIGNMENT = /^text-align:(left|center|right)$/;

let renderer = null;

function createRenderer() {
  const md = window.markdownit({ html: false, linkify: true, typographer: false, breaks: false });
  md.renderer.rules.image = (tokens, index) => {
    const token = tokens[index];
    const alt = token.children ? md.renderer.renderInlineAsText(token.children, md.options, {}) : "";
    const href = md.utils.escapeHtml(token.attrGet("src") || "");
    return '<a href="' + href + '">image: ' + md.utils.escapeHtml(alt || href) + "</a>";
  };
  window.DOMPurify.addHook("afterSanitizeAttributes", keepOnlySafeStyling);
  return md;
}

// Only two attributes need a closer look: `class` (kept only as a code block's language) and
// `style` (kept only as a table cell's alignment, turned into a class). Links open in a new tab
// without handing the page to it.
function keepOnlySafeStyling(node) {
  const className = node.getAttribute("class");
  if (className !== null) {
    node.removeAttribute("class");
    if (node.nodeName === "CODE" && LANGUAGE_CLASS.test(className)) node.setAttribute("class", className);
  }
  const style = node.getAttribute("style");
  if (style !== null) {
    node.removeAttribute("style");
    const alignment = style.replace(/\s+/g, "").match(ALIGNMENT);
    if (alignment && (node.nodeName === "TD" || node.nodeName === "TH")) {
      node.setAttribute("class", "align-" + alignment[1]);
    }
  }
  if (node.nodeName === "A" && node.hasAttribute("href")) {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
}

function toSafeFragment(source) {
  renderer = renderer || createRenderer();
  return window.DOMPurify.sanitize(renderer.render(source), {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ADD_ATTR: ["target", "rel"],
    ALLOW_DATA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  });
}

// Every fenced or indented code block gets a small header: its language and a Copy button.
// The button finds its code through the DOM when clicked (see copyCode in chat.js).
function decorateCodeBlocks(fragment) {
  for (const pre of fragment.querySelectorAll("pre")) {
    const code = pre.querySelector("code");
    const language = code && code.className ? code.className.slice("language-".length) : "";
    const block = el("div", "code-block");
    const head = el("div", "code-head");
    head.appendChild(el("span", "code-language", language || "text"));
    const copy = el("button", "copy-code");
    copy.type = "button";
    copy.setAttribute("aria-label", "Copy code");
    copy.appendChild(icon("copy"));
    copy.appendChild(el("span", "copy-label", "Copy"));
    head.appendChild(copy);
    // A long line scrolls the block sideways: it takes focus so the keyboard can scroll it.
    pre.tabIndex = 0;
    pre.setAttribute("aria-label", (language || "text") + " code");
    pre.replaceWith(block);
    block.appendChild(head);
    block.appendChild(pre);
  }
  for (const table of fragment.querySelectorAll("table")) {
    // Wide tables scroll sideways inside the answer instead of widening the page.
    const scroller = el("div", "table-scroll");
    table.replaceWith(scroller);
    scroller.appendChild(table);
  }
  return fragment;
}

export function renderMarkdown(source) {
  return decorateCodeBlocks(toSafeFragment(source));
}

function sameShape(current, next) {
  if (current.nodeType !== next.nodeType || current.nodeName !== next.nodeName) return false;
  if (current.nodeType !== Node.ELEMENT_NODE) return true;
  if (current.attributes.length !== next.attributes.length) return false;
  for (const attribute of next.attributes) {
    if (current.getAttribute(attribute.name) !== attribute.value) return false;
  }
  return true;
}

// Make `target`'s children look like `source`'s while touching only what differs: finished
// paragraphs and code lines of a streaming answer stay the same nodes (no flicker, a reader's
// text selection survives); only the growing tail changes.
export function morphChildren(target, source) {
  const incoming = Array.from(source.childNodes);
  incoming.forEach((next, index) => {
    const current = target.childNodes[index];
    if (!current) {
      target.appendChild(next);
    } else if (!sameShape(current, next)) {
      target.replaceChild(next, current);
    } else if (current.nodeType === Node.ELEMENT_NODE) {
      morphChildren(current, next);
    } else if (current.nodeValue !== next.nodeValue) {
      current.nodeValue = next.nodeValue;
    }
  });
  while (target.childNodes.length > incoming.length) target.lastChild.remove();
}

export function renderMarkdownInto(target, source) {
  morphChildren(target, renderMarkdown(source));
}
