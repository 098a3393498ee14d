// A small highlighter for the code of a `run_code` call (docs/design.md §28): Python and bash
// keywords, strings, comments and numbers. It builds text nodes and <span>s only — every
// piece of the code goes in through textContent, never as markup.

import { el } from "./dom.js";

const KEYWORDS = {
  python: new Set(
    (
      "False None True and as assert async await break class continue def del elif else except " +
      "finally for from global if import in is lambda nonlocal not or pass raise return try while " +
      "with yield match case print len range open self"
    ).split(" "),
  ),
  bash: new Set(
    (
      "if then else elif fi for while until do done case esac in function return local export " +
      "echo cd ls cat grep sed awk printf read set unset source exit true false"
    ).split(" "),
  ),
};

// One alternation per language, tried left to right at each position: a comment, a string
// (triple-quoted first in Python), a number, a word. Anything else is plain text.
const TOKENS = {
  python: /(#[^\n]*)|("""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|[rbfu]{0,2}"(?:\\.|[^"\\\n])*"?|[rbfu]{0,2}'(?:\\.|[^'\\\n])*'?)|(\b\d[\d_]*(?:\.\d+)?(?:e[+-]?\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)/gi,
  bash: /((?:^|(?<=\s))#[^\n]*)|("(?:\\.|[^"\\])*"?|'[^']*'?)|(\b\d+\b)|(\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[A-Za-z_][A-Za-z0-9_-]*)/g,
};

// `text` highlighted as `language` into `code` (an element, emptied first).
export function highlightInto(code, text, language) {
  code.textContent = "";
  const pattern = TOKENS[language];
  if (!pattern) {
    code.textContent = text;
    return code;
  }
  const keywords = KEYWORDS[language];
  pattern.lastIndex = 0;
  let at = 0;
  let match;
  while ((match = pattern.exec(text)) !== null) {
    if (match[0] === "") {
      pattern.lastIndex += 1;
      continue;
    }
    if (match.index > at) code.appendChild(document.createTextNode(text.slice(at, match.index)));
    const [whole, comment, string, number, word] = match;
    let kind = null;
    if (comment !== undefined) kind = "tok-comment";
    else if (string !== undefined) kind = "tok-string";
    else if (number !== undefined) kind = "tok-number";
    else if (word !== undefined && word.startsWith("$")) kind = "tok-variable";
    else if (word !== undefined && keywords.has(word)) kind = "tok-keyword";
    code.appendChild(kind ? el("span", kind, whole) : document.createTextNode(whole));
    at = match.index + whole.length;
  }
  if (at < text.length) code.appendChild(document.createTextNode(text.slice(at)));
  return code;
}
