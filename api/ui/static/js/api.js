// Shared by every page: the JSON API client (session cookie + CSRF header), the error banner and a few
// formatters. Pages call only the public API under /v1, like any other client.

export function cookie(name) {
  const found = document.cookie.split("; ").find((c) => c.startsWith(name + "="));
  return found ? decodeURIComponent(found.slice(name.length + 1)) : "";
}

export class ApiError extends Error {
  constructor(status, detail) {
    super(typeof detail === "string" ? detail : JSON.stringify(detail));
    this.status = status;
    this.detail = detail;
  }
}

export function describe(error) {
  const detail = error instanceof ApiError ? error.detail : String(error);
  if (Array.isArray(detail)) return detail.map((d) => `${(d.loc || []).slice(1).join(".")}: ${d.msg}`).join("; ");
  return typeof detail === "string" ? detail : JSON.stringify(detail);
}

// The session's token name and effective scopes, as the page's shell states them (api/ui/routes.py):
// a page offers only the actions they allow. The API checks every request all the same.
const sessionScopes = new Set((document.body.dataset.scopes || "").split(" ").filter(Boolean));

export function sessionMay(scope) {
  return sessionScopes.has(scope);
}

export function sessionName() {
  return document.getElementById("user-name")?.textContent ?? "";
}

// `body`: a value sent as JSON, or a FormData sent as multipart/form-data (the browser writes that
// Content-Type itself, with the parts' boundary).
export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = cookie("kf_csrf");
  const multipart = body instanceof FormData;
  if (body !== undefined && !multipart) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined || multipart ? body : JSON.stringify(body),
  });
  if (response.status === 401) {
    location.assign(`/ui/login?next=${encodeURIComponent(location.pathname + location.search)}`);
    throw new ApiError(401, "session expired");
  }
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) throw new ApiError(response.status, data && data.detail !== undefined ? data.detail : text);
  return data;
}

// The banner holds two errors. A poll's is replaced by the next poll's outcome, so a passing failure
// clears itself. An action's (something the user clicked) stays until the user dismisses it or acts
// again: the job page's next poll, a second later, used to wipe a refused cancel before it was read.
let pollError = null;
let actionError = null;

function showErrors() {
  const box = document.getElementById("error");
  if (!box) return;
  const lines = [];
  if (actionError) {
    const dismiss = el("button", { type: "button", class: "dismiss", title: "dismiss this message" }, "dismiss");
    dismiss.addEventListener("click", () => showActionError(null));
    lines.push(el("div", { class: "action-error" }, el("span", { class: "text" }, describe(actionError)), dismiss));
  }
  if (pollError) lines.push(el("div", { class: "poll-error" }, describe(pollError)));
  box.replaceChildren(...lines);
  box.hidden = !lines.length;
}

// A page load's or poll's error (null: it succeeded); it never clears an action's error.
export function showError(error) {
  pollError = error || null;
  showErrors();
}

// An action's error, kept until dismissed; null at the start of the next action clears the last one's.
export function showActionError(error) {
  actionError = error || null;
  showErrors();
}

// el("td", {class: "num"}, "1.2") → <td class="num">1.2</td>; text children only (no HTML injection).
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

// A user's text as its own element, bidi-isolated (<bdi>; app.css isolates every element that shows
// user text): a right-to-left override (U+202E) in it cannot reverse the text around it.
export function userText(value) {
  return el("bdi", {}, value ?? "");
}

// User texts joined by `separator`, each isolated (userText) from its neighbours.
export function userTexts(values, separator = ", ") {
  const joined = document.createDocumentFragment();
  values.forEach((value, i) => joined.append(...(i ? [separator] : []), userText(value)));
  return joined;
}

// A string for Plotly, which renders its labels, hover text, titles and legend names as its own HTML
// subset (<a href>, <b>, <br>, <span style>, entities): a tune value "<a href=...>" became a link. Escaped,
// it shows as the characters it is; Plotly decodes the entities when it draws. "%" too, so that a user's
// text put into a hovertemplate cannot become a %{...} placeholder.
export function plotlyText(value) {
  return String(value).replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;")
    .replaceAll("%", "&#37;");
}

export function fmtMs(value) {
  if (typeof value !== "number") return ""; // null, or a value that is not a time
  return value >= 100 ? value.toFixed(1) : value >= 1 ? value.toFixed(3) : value.toPrecision(3);
}

export function fmtWhen(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return date.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}

export function ago(iso) {
  if (!iso) return "";
  const seconds = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  return seconds < 90 ? `${seconds.toFixed(0)} s ago` : `${(seconds / 60).toFixed(0)} min ago`;
}

export function stateBadge(state) {
  return el("span", { class: `state ${state}` }, state);
}

export function progressBar(fraction, label) {
  const bar = el("span", { class: "bar", title: label });
  bar.append(el("span", { style: `width:${Math.round(Math.min(1, Math.max(0, fraction)) * 100)}%` }));
  return el("span", {}, bar, " ", label);
}

// Run `task` now and every `ms` while `keepGoing()` says so; errors go to the banner and polling goes on.
export function poll(task, ms, keepGoing = () => true) {
  let timer = null;
  const tick = async () => {
    try {
      await task();
      showError(null);
    } catch (error) {
      showError(error);
    }
    if (keepGoing()) timer = setTimeout(tick, ms);
  };
  tick();
  return () => clearTimeout(timer);
}

const logout = document.getElementById("logout");
if (logout) {
  // Only an ended session goes to the login: a refused logout (a CSRF cookie that another page on this host
  // replaced, say) went there all the same, and the session it had not ended stayed usable in this browser.
  logout.addEventListener("click", async () => {
    showActionError(null);
    try {
      const response = await fetch("/ui/logout", { method: "POST", headers: { "X-CSRF-Token": cookie("kf_csrf") },
        credentials: "same-origin" });
      const text = await response.text();
      if (!response.ok) {
        const data = text ? JSON.parse(text) : null;
        throw new ApiError(response.status, data && data.detail !== undefined ? data.detail : text);
      }
    } catch (error) {
      showActionError(new ApiError(error.status, `not logged out: ${describe(error)}`));
      return;
    }
    location.assign("/ui/login");
  });
}
