// Fleet: load per GPU model, the live workers, the latest failed trials; refreshed every 3 s.
import { ago, api, el, fmtWhen, poll, progressBar, userText } from "./api.js";

function fill(selector, rows, empty) {
  const body = document.querySelector(`${selector} tbody`);
  const columns = document.querySelectorAll(`${selector} thead th`).length;
  body.replaceChildren(...rows);
  if (!rows.length) body.append(el("tr", {}, el("td", { colspan: columns, class: "hint" }, empty)));
}

async function refresh() {
  const fleet = await api("/v1/fleet");
  fill("#models", fleet.gpu_models.map((m) => el("tr", { "data-gpu-model": m.gpu_model },
    el("td", {}, userText(m.gpu_model)), el("td", { class: "num" }, m.live_workers), el("td", { class: "num" }, m.busy_workers),
    el("td", {}, progressBar(m.busy_fraction, `${Math.round(m.busy_fraction * 100)} %`)),
    el("td", { class: "num queue-depth" }, m.queued_trials), el("td", { class: "num" }, m.running_trials),
    el("td", { class: "num" }, m.waiting_jobs))), "no GPU model has a live worker or work");
  fill("#workers", fleet.workers.map((w) => el("tr", {},
    el("td", {}, userText(w.name)), el("td", {}, userText(w.hostname)), el("td", {}, w.backend),
    el("td", {}, userText(w.gpu_name), " (", userText(w.gpu_model), ")"), el("td", {}, w.compute_capability ?? ""),
    el("td", {}, [w.driver_version, w.cuda_version].filter(Boolean).join(" / ")),
    el("td", { class: "num" }, w.running_trials), el("td", {}, ago(w.last_heartbeat)))), "no live worker");
  fill("#failures", fleet.recent_failures.map((f) => el("tr", {},
    el("td", {}, fmtWhen(f.finished_at)), el("td", {}, el("a", { href: `/ui/jobs/${f.job_id}` }, f.job_id.slice(0, 8))),
    el("td", {}, userText(f.kernel)), el("td", {}, userText(f.gpu_model)), el("td", {}, f.failure_kind ?? ""),
    el("td", { class: "message" }, (f.failure_message ?? "").slice(0, 300)), el("td", {}, userText(f.worker_name)))),
    "no failed trial");
  document.body.dataset.rendered = "1";
}

poll(refresh, 3000);
