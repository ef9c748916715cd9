// Model text as Markdown. markdown-it parses it with raw HTML off (any HTML the model writes
// is shown as text), then DOMPurify keeps only the elements and attributes Markdown makes,
// and only http(s) and mailto links. The result is built as DOM nodes (DOMPurify's fragment),
// never assigned as an HTML string. Images are never loaded: each becomes a link to it (an
// http(s) one) or its alt text.
// Both libraries are vendored in ../vendor (see its README): no build step, no CDN.

import MarkdownIt from "../vendor/markdown-it.js";
import DOMPurify from "../vendor/purify.js";
import { visible } from "./dom.js";

// breaks: a single newline is a line break, as people expect of chat text.
const md = new MarkdownIt({ html: false, linkify: true, breaks: true, typographer: false });

md.renderer.rules.image = (tokens, index, options, env, self) => {
  const token = tokens[index];
  const alt = self.renderInlineAsText(token.children || [], options, env) || "image";
  const label = md.utils.escapeHtml(`Image: ${alt}`);
  const src = token.attrGet("src") || "";
  if (!/^https?:/i.test(src)) return label; // a data: image: its alt text only
  return `<a href="${md.utils.escapeHtml(src)}" class="image-link">${label}</a>`;
};

const ALLOWED_TAGS = [
  "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
  "li", "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
];
const PURIFY = {
  ALLOWED_TAGS,
  ALLOWED_ATTR: ["href", "title", "class", "start", "colspan", "rowspan"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i,
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    if (!node.hasAttribute("href")) return; // a refused URL: the link is only its text
    node.setAttribute("target", "_blank"); // the chat stays where it is
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
  if (node.hasAttribute("title")) node.setAttribute("title", visible(node.getAttribute("title")));
});

/** Render ``text`` as sanitised Markdown into ``el`` (its children are replaced). */
export function renderMarkdown(el, text) {
  const fragment = DOMPurify.sanitize(md.render(String(text ?? "")), PURIFY);
  // Control characters are shown, as dom.js shows them in every other text.
  const walker = document.createTreeWalker(fragment, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = visible(node.nodeValue);
    if (text !== node.nodeValue) node.nodeValue = text;
  }
  el.replaceChildren(fragment);
  return el;
}

/** A ``<div class="md">`` holding ``text`` rendered as sanitised Markdown. */
export function markdownBlock(text, extraClass = "") {
  const el = document.createElement("div");
  el.className = extraClass ? `md ${extraClass}` : "md";
  return renderMarkdown(el, text);
}
