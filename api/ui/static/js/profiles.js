// Model profiles: the stored profile-model reports, newest first, filterable by GPU model.
import { api, el, fmtMs, fmtWhen, poll, userText } from "./api.js";

const PAGE = 50;
const form = document.getElementById("filters");
const select = form.elements.gpu_model;
const body = document.querySelector("#profiles tbody");
let offset = 0;
let count = 0;
const models = new Set();

function row(p) {
  return el("tr", { "data-profile-id": p.id },
    el("td", {}, el("a", { href: `/ui/profiles/${p.id}` }, p.id.slice(0, 8))), el("td", {}, userText(p.model)),
    el("td", {}, userText(p.device_name)), el("td", {}, userText(p.gpu_model)), el("td", {}, p.dtype),
    el("td", { class: "num" }, `${p.batch} x ${p.seq}`), el("td", { class: "num" }, fmtMs(p.latency_ms)),
    el("td", {}, userText(p.owner)), el("td", {}, fmtWhen(p.created_at)));
}

// The API lists a page at a time without a total: one more than a page tells whether there is a next.
async function refresh() {
  const q = new URLSearchParams({ limit: PAGE + 1, offset });
  if (select.value) q.set("gpu_model", select.value);
  const profiles = await api(`/v1/profiles?${q}`);
  count = Math.min(profiles.length, PAGE);
  body.replaceChildren(...profiles.slice(0, PAGE).map(row));
  if (!profiles.length) {
    body.append(el("tr", {}, el("td", { colspan: 9, class: "hint" },
      "no stored profile (kernelfarm profile-model --store sends one)")));
  }
  for (const p of profiles) {
    if (!models.has(p.gpu_model)) { models.add(p.gpu_model); select.append(el("option", { value: p.gpu_model }, p.gpu_model)); }
  }
  document.getElementById("page-info").textContent = count ? `${offset + 1}–${offset + count}` : "";
  document.getElementById("prev").disabled = offset === 0;
  document.getElementById("next").disabled = profiles.length <= PAGE;
  document.body.dataset.rendered = "1";
}

select.addEventListener("change", () => { offset = 0; refresh(); });
document.getElementById("prev").addEventListener("click", () => { offset = Math.max(0, offset - PAGE); refresh(); });
document.getElementById("next").addEventListener("click", () => { offset += PAGE; refresh(); });
poll(refresh, 10000);
