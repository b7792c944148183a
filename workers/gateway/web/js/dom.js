// Every string that comes from the API is untrusted (model replies, tool arguments and
// results, titles): it only ever becomes a Text node, never markup. No HTML-parsing API
// is used anywhere in the page; attributes are set as values (never parsed), and no
// URL-bearing attribute (href, src) ever takes a value from the API.

/** An element with attributes (`class`, `dataset`, `on<event>` handlers) and children;
 * string children are appended as text. */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") {
      for (const [key, v] of Object.entries(value)) if (v !== undefined && v !== null) node.dataset[key] = v;
    }
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, ...children);
  return node;
}

/** Append children: nodes as they are, anything else as text. */
export function append(node, ...children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Set a node's text (never markup). */
export function setText(node, value) {
  node.textContent = value ?? "";
}

/** JSON for display: pretty, and never throws on odd values. */
export function pretty(value) {
  try {
    return JSON.stringify(value, null, 2) ?? "";
  } catch {
    return String(value);
  }
}
