// Small DOM helpers: every node is built with createElement and textContent (no innerHTML:
// the API's strings are shown, never parsed), so the strict CSP needs no exception.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const SVG = "http://www.w3.org/2000/svg";
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  for (const c of children.flat(Infinity)) if (c !== null && c !== undefined) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/// The page's one live region: errors carry the API envelope's message and code.
export function notify(message, kind = "info") {
  const box = document.getElementById("notice");
  box.replaceChildren(h("p", { class: "notice " + kind }, message));
}
/// A message for the page the console is going to (a navigation clears the notice).
let pending = null;
export function notifyNext(message, kind = "info") { pending = [message, kind]; }
export function flushNotice() {
  document.getElementById("notice").replaceChildren();
  if (pending) { notify(...pending); pending = null; }
}
export function fail(e) {
  notify(e.code ? `${e.message} (${e.code})` : String(e.message || e), "error");
}

export function fmtDate(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

/// A table from rows and columns ({label, value(row) -> string | Node}).
export function table(caption, columns, rows) {
  return h("table", {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.label)))),
    h("tbody", {}, rows.length === 0
      ? h("tr", {}, h("td", { colspan: String(columns.length) }, "Nothing yet."))
      : rows.map((r) => h("tr", {}, columns.map((c) => h("td", {}, c.value(r)))))));
}

/// Every action asks first, in a modal dialog the keyboard can answer (Esc cancels).
export function confirmAction(question) {
  return new Promise((resolve) => {
    const yes = h("button", { type: "button", class: "primary" }, "Confirm");
    const no = h("button", { type: "button" }, "Cancel");
    const dialog = h("dialog", { "aria-labelledby": "confirm-q" }, h("p", { id: "confirm-q" }, question), h("div", { class: "row" }, yes, no));
    const done = (v) => { dialog.close(); dialog.remove(); resolve(v); };
    yes.addEventListener("click", () => done(true));
    no.addEventListener("click", () => done(false));
    dialog.addEventListener("cancel", () => done(false));
    document.body.append(dialog);
    dialog.showModal();
    yes.focus();
  });
}

/// A labelled form field.
export function field(label, input) {
  const id = "f-" + Math.random().toString(36).slice(2, 9);
  input.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), input);
}

/// A button that runs `work`, disabled meanwhile; failures go to the notice with the envelope.
export function action(label, work, attrs = {}) {
  const b = h("button", { type: "button", ...attrs }, label);
  b.addEventListener("click", async () => {
    b.disabled = true;
    try { await work(); } catch (e) { fail(e); } finally { b.disabled = false; }
  });
  return b;
}

/// Horizontal bars, one per label, with the value written beside each.
export function barChart(title, items, format = (v) => String(v)) {
  const max = Math.max(1, ...items.map((i) => i.value));
  const rowH = 26, labelW = 150, barW = 380, width = labelW + barW + 90;
  const svg = s("svg", { viewBox: `0 0 ${width} ${items.length * rowH + 10}`, role: "img", "aria-label": title, class: "chart" });
  svg.append(s("title", {}, title));
  items.forEach((it, i) => {
    const y = i * rowH + 5;
    svg.append(s("text", { x: labelW - 8, y: y + 16, "text-anchor": "end" }, it.label));
    svg.append(s("rect", { x: labelW, y, width: Math.max(1, (it.value / max) * barW), height: rowH - 8, class: "bar" }));
    svg.append(s("text", { x: labelW + (it.value / max) * barW + 6, y: y + 16 }, format(it.value)));
  });
  return svg;
}

/// Differences with their 95 % intervals around zero, one row per variant.
export function intervalChart(title, items) {
  const lo = Math.min(-0.01, ...items.map((i) => i.low)), hi = Math.max(0.01, ...items.map((i) => i.high));
  const labelW = 150, plotW = 400, rowH = 30, width = labelW + plotW + 20;
  const x = (v) => labelW + ((v - lo) / (hi - lo)) * plotW;
  const svg = s("svg", { viewBox: `0 0 ${width} ${items.length * rowH + 30}`, role: "img", "aria-label": title, class: "chart" });
  svg.append(s("title", {}, title));
  svg.append(s("line", { x1: x(0), x2: x(0), y1: 0, y2: items.length * rowH + 10, class: "axis" }));
  items.forEach((it, i) => {
    const y = i * rowH + 18;
    svg.append(s("text", { x: labelW - 8, y: y + 4, "text-anchor": "end" }, it.label));
    svg.append(s("line", { x1: x(it.low), x2: x(it.high), y1: y, y2: y, class: "interval" }));
    svg.append(s("circle", { cx: x(it.value), cy: y, r: 4, class: "point" }));
  });
  const pct = (v) => (v * 100).toFixed(1) + " %";
  svg.append(s("text", { x: labelW, y: items.length * rowH + 26 }, pct(lo)));
  svg.append(s("text", { x: labelW + plotW, y: items.length * rowH + 26, "text-anchor": "end" }, pct(hi)));
  return svg;
}

/// A page's frame: its heading, then its parts.
export function page(title, ...parts) {
  document.title = title + " · Console";
  return h("section", { "aria-labelledby": "page-title" }, h("h1", { id: "page-title", tabindex: "-1" }, title), ...parts);
}
