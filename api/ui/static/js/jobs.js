// Jobs: a filterable, paged list; state and progress refresh every 2 s.
import { api, el, fmtMs, fmtWhen, poll, progressBar, stateBadge, userText } from "./api.js";

const PAGE = 50;
const form = document.getElementById("filters");
const body = document.querySelector("#jobs tbody");
let offset = 0;
let total = 0;

const params = new URLSearchParams(location.search);
for (const field of form.elements) if (field.name && params.has(field.name)) field.value = params.get(field.name);

function query() {
  const q = new URLSearchParams({ limit: PAGE, offset });
  for (const field of form.elements) if (field.name && field.value.trim()) q.set(field.name, field.value.trim());
  return q;
}

function row(job) {
  const p = job.progress;
  const done = p.complete + p.failed;
  const planned = job.budget_trials || p.total || 1;
  const link = el("a", { href: `/ui/jobs/${job.id}` }, job.id.slice(0, 8));
  return el("tr", { "data-job-id": job.id },
    el("td", {}, link), el("td", {}, userText(job.kernel)), el("td", {}, userText(job.gpu_model)), el("td", {}, job.strategy),
    el("td", { class: "job-state" }, stateBadge(job.state)),
    el("td", {}, progressBar(done / planned, `${done}/${job.budget_trials ?? "∞"}${p.failed ? ` (${p.failed} failed)` : ""}`)),
    el("td", { class: "num" }, job.best ? fmtMs(job.best.time_ms) : ""),
    el("td", {}, userText(job.owner)), el("td", {}, fmtWhen(job.created_at)));
}

async function refresh() {
  const page = await api(`/v1/jobs?${query()}`);
  total = page.total;
  body.replaceChildren(...page.items.map(row));
  if (!page.items.length) body.append(el("tr", {}, el("td", { colspan: 9, class: "hint" }, "no jobs match")));
  document.getElementById("page-info").textContent =
    total ? `${offset + 1}–${Math.min(offset + PAGE, total)} of ${total}` : "";
  document.getElementById("prev").disabled = offset === 0;
  document.getElementById("next").disabled = offset + PAGE >= total;
  document.body.dataset.rendered = "1";
}

let timer = null;
function restart() {
  const q = query();
  q.delete("limit");
  q.delete("offset");
  history.replaceState(null, "", `${location.pathname}${q.toString() ? "?" + q : ""}`);
  if (timer) timer();
  timer = poll(refresh, 2000);
}

form.addEventListener("input", () => { offset = 0; restart(); });
form.addEventListener("submit", (event) => event.preventDefault());
document.getElementById("prev").addEventListener("click", () => { offset = Math.max(0, offset - PAGE); restart(); });
document.getElementById("next").addEventListener("click", () => { offset += PAGE; restart(); });
restart();
