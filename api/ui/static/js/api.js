// Shared by every page: the JSON API client (session cookie + CSRF header), the error banner and a few
// formatters. Pages call only the public API under /v1, like any other client.

function cookie(name) {
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

export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (method !== "GET") headers["X-CSRF-Token"] = cookie("kf_csrf");
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) {
    location.assign(`/ui/login?next=${encodeURIComponent(location.pathname)}`);
    throw new ApiError(401, "session expired");
  }
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) throw new ApiError(response.status, data && data.detail !== undefined ? data.detail : text);
  return data;
}

export function showError(error) {
  const box = document.getElementById("error");
  if (!box) return;
  box.textContent = error ? describe(error) : "";
  box.hidden = !error;
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

export function fmtMs(value) {
  if (value === null || value === undefined) return "";
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
  logout.addEventListener("click", async () => {
    await fetch("/ui/logout", { method: "POST", headers: { "X-CSRF-Token": cookie("kf_csrf") }, credentials: "same-origin" });
    location.assign("/ui/login");
  });
}
