// Kernels: the catalogue with each kernel's space, problem signature, versions and best time per GPU
// model × problem. The manifest upload form appears once the API offers POST /v1/kernels.
import { api, describe, el, fmtMs, fmtWhen, showError } from "./api.js";

function definition(rows) {
  const list = el("dl");
  for (const [term, value] of rows) list.append(el("dt", {}, term), el("dd", {}, value));
  return list;
}

function matrix(results) {
  if (!results.best.length) return el("p", { class: "hint" }, "no verified measurement yet");
  const models = [...new Set(results.best.map((c) => c.gpu_model))].sort();
  const problems = [...new Map(results.best.map((c) => [c.problem_key, c.problem])).entries()];
  const byCell = new Map(results.best.map((c) => [`${c.gpu_model}|${c.problem_key}`, c]));
  const head = el("tr", {}, el("th", {}, "GPU model \\ problem"),
    ...problems.map(([, problem]) => el("th", {}, Object.entries(problem).map(([k, v]) => `${k}=${v}`).join(" "))));
  const rows = models.map((model) => el("tr", {}, el("th", {}, model), ...problems.map(([key]) => {
    const best = byCell.get(`${model}|${key}`);
    return el("td", { class: "num" }, best ? el("a", { href: `/ui/jobs/${best.job_id}`,
      title: `trial ${best.trial_id}, kernel version ${best.version}` }, `${fmtMs(best.time_ms)} ms`) : "—");
  })));
  return el("table", { class: "grid best-matrix" }, el("thead", {}, head), el("tbody", {}, ...rows));
}

function card(kernel, results) {
  const space = Object.entries(kernel.parameters).map(([name, values]) => `${name}: ${values.join(", ")}`);
  const signature = kernel.problem_params.map((p) => `${p.name} (${p.kind}${p.choices ? `: ${p.choices.join("|")}` : ""})`);
  const versions = results.versions.length
    ? results.versions.map((v) => `v${v.version} ${v.source_hash.slice(0, 12)} — ${v.jobs} job(s), first seen ${fmtWhen(v.created_at)}`)
    : [`v${kernel.version} ${kernel.source_hash.slice(0, 12)} — no job yet`];
  return el("section", { class: "kernel", "data-kernel": kernel.name },
    el("h2", {}, kernel.name, " ", el("a", { href: `/ui/new?kernel=${encodeURIComponent(kernel.name)}`, class: "hint" }, "tune…")),
    el("p", { class: "hint" }, kernel.description),
    definition([
      ["backends", kernel.backends.join(", ")],
      ["problem signature", signature.join(", ")],
      ["default problem", Object.entries(kernel.default_problem).map(([k, v]) => `${k}=${v}`).join(", ")],
      ["search space", el("span", {}, ...space.flatMap((s) => [s, el("br")]))],
      ["constraints", kernel.constraints.join("; ") || "none"],
      ["valid configs", `${kernel.valid_configs_default_problem.toLocaleString()} (default problem)`],
      ["versions", el("span", {}, ...versions.flatMap((s) => [s, el("br")]))],
      ["recorded landscapes", kernel.recorded_gpu_models.join(", ") || "none"],
    ]),
    el("h3", {}, "Best time per GPU model × problem"), matrix(results));
}

// The hook for bring-your-own-kernel: shown only when the API documents POST /v1/kernels, whose body
// is the manifest (JSON) the user picks; the API validates it and answers with the stored kernel.
async function uploadForm() {
  const openapi = await fetch("/openapi.json", { credentials: "same-origin" }).then((r) => r.json());
  const section = document.getElementById("kernel-upload");
  const note = document.getElementById("upload-note");
  if (!openapi.paths?.["/v1/kernels"]?.post) {
    note.textContent = "Uploading kernel manifests becomes available here once this farm's API accepts POST /v1/kernels.";
    return;
  }
  section.hidden = false;
  document.getElementById("upload-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const result = document.getElementById("upload-result");
    try {
      const file = document.getElementById("manifest").files[0];
      const stored = await api(section.dataset.endpoint, { method: "POST", body: JSON.parse(await file.text()) });
      result.textContent = `stored ${stored.name ?? "kernel"}; reloading…`;
      setTimeout(() => location.reload(), 800);
    } catch (error) {
      result.textContent = describe(error);
    }
  });
}

async function start() {
  try {
    const kernels = await api("/v1/kernels");
    const results = await Promise.all(kernels.map((k) => api(`/v1/kernels/${encodeURIComponent(k.name)}/results`)));
    document.getElementById("kernel-list").replaceChildren(...kernels.map((k, i) => card(k, results[i])));
    await uploadForm();
    document.body.dataset.rendered = "1";
  } catch (error) {
    showError(error);
  }
}

start();
