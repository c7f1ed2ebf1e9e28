// Kernels: the catalogue with each kernel's space, problem signature, versions and best time per GPU
// model × problem; and the form that uploads a kernel (a manifest and the files it names).
import { api, describe, el, fmtMs, fmtWhen, sessionMay, showError, userText, userTexts } from "./api.js";

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
    ...problems.map(([, problem]) => el("th", {}, userTexts(Object.entries(problem).map(([k, v]) => `${k}=${v}`), " "))));
  const rows = models.map((model) => el("tr", {}, el("th", {}, userText(model)), ...problems.map(([key]) => {
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
    el("h2", {}, userText(kernel.name), " ",
      el("a", { href: `/ui/new?kernel=${encodeURIComponent(kernel.name)}`, class: "hint" }, "tune…")),
    el("p", { class: "hint" }, userText(kernel.description)),
    definition([
      ["backends", kernel.backends.join(", ")],
      ["problem signature", userTexts(signature)],
      ["default problem", userTexts(Object.entries(kernel.default_problem).map(([k, v]) => `${k}=${v}`))],
      ["search space", el("span", {}, ...space.flatMap((s) => [userText(s), el("br")]))],
      ["constraints", kernel.constraints.length ? userTexts(kernel.constraints, "; ") : "none"],
      ["valid configs", `${kernel.valid_configs_default_problem.toLocaleString()} (default problem)`],
      ["versions", el("span", {}, ...versions.flatMap((s) => [s, el("br")]))],
      ["recorded landscapes", kernel.recorded_gpu_models.length ? userTexts(kernel.recorded_gpu_models) : "none"],
    ]),
    el("h3", {}, "Best time per GPU model × problem"), matrix(results));
}

async function showKernels() {
  const kernels = await api("/v1/kernels");
  const results = await Promise.all(kernels.map((k) => api(`/v1/kernels/${encodeURIComponent(k.name)}/results`)));
  document.getElementById("kernel-list").replaceChildren(...kernels.map((k, i) => card(k, results[i])));
}

function showUploadResult(text, failed) {
  const result = document.getElementById("upload-result");
  result.textContent = text;
  result.className = failed ? "error" : "hint";
  result.hidden = false;
}

// POST /v1/kernels as `kernelfarm kernel add` sends it: multipart, the manifest as the part `manifest` under
// its own file name (whose suffix says TOML or JSON), each file it names as a part `files`. Offered to a
// session with the kernels scope; any other learns what it takes instead.
function uploadForm() {
  const form = document.getElementById("upload-form");
  if (!sessionMay("kernels")) {
    form.hidden = true;
    form.after(el("p", { id: "upload-scope", class: "hint" },
      "This session's token lacks the kernels scope: ask an admin for one to upload kernels here."));
    return;
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = document.getElementById("upload");
    const manifest = document.getElementById("manifest").files[0];
    if (!manifest) return; // the input is required: the browser says so
    const body = new FormData();
    body.append("manifest", manifest, manifest.name);
    for (const file of document.getElementById("manifest-files").files) body.append("files", file, file.name);
    button.disabled = true;
    showUploadResult("uploading…", false);
    try {
      const stored = await api("/v1/kernels", { method: "POST", body });
      showUploadResult(stored.created ? `stored ${stored.name} as version ${stored.version}`
        : `${stored.name} version ${stored.version} already holds this content: nothing new stored`, false);
      await showKernels();
    } catch (error) {
      showUploadResult(`not stored: ${describe(error)}`, true);
    } finally {
      button.disabled = false;
    }
  });
}

async function start() {
  uploadForm();
  try {
    await showKernels();
    document.body.dataset.rendered = "1";
  } catch (error) {
    showError(error);
  }
}

start();
