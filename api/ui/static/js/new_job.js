// New job: the kernel's problem signature and parameter values come from /v1/kernels; the job is
// submitted to POST /v1/jobs like any other client's, with unchecked values left out of its space.
import { api, describe, el, sessionMay, showError, userText } from "./api.js";

const form = document.getElementById("new-job");
const kernelSelect = document.getElementById("kernel");
const errorBox = document.getElementById("form-error");
let kernels = [];

function currentKernel() { return kernels.find((k) => k.name === kernelSelect.value); }

function problemFields(kernel) {
  const box = document.getElementById("problem");
  box.replaceChildren(...kernel.problem_params.map((p) => {
    // Own keys only: a problem parameter named "__proto__" or "constructor" has no inherited default.
    const value = Object.hasOwn(kernel.default_problem, p.name) ? kernel.default_problem[p.name] : undefined;
    let input;
    if (p.choices) {
      input = el("select", { "data-problem": p.name, "data-kind": p.kind },
        ...p.choices.map((c) => el("option", { value: c, selected: c === value }, c)));
    } else {
      input = el("input", { "data-problem": p.name, "data-kind": p.kind, value: value ?? "", size: 8,
        type: p.kind === "int" ? "number" : "text", min: p.kind === "int" ? 1 : null, required: true });
    }
    return el("label", {}, `${p.name} `, input);
  }));
}

function rangeFields(kernel) {
  const box = document.getElementById("ranges");
  box.replaceChildren(...Object.entries(kernel.parameters).map(([name, values]) => {
    const row = el("div", { class: "range", "data-parameter": name }, el("span", { class: "name" }, name));
    values.forEach((v, i) => row.append(el("label", {}, el("input", { type: "checkbox", checked: true,
      "data-index": i }), ` ${v}`)));
    for (const [label, state] of [["all", true], ["none", false]]) {
      const button = el("button", { type: "button" }, label);
      button.addEventListener("click", () => { row.querySelectorAll("input").forEach((c) => { c.checked = state; }); spaceSize(); });
      row.append(button);
    }
    return row;
  }));
  box.addEventListener("change", spaceSize);
  spaceSize();
}

function spaceSize() {
  const kernel = currentKernel();
  let size = 1;
  document.querySelectorAll("#ranges .range").forEach((row) => { size *= row.querySelectorAll("input:checked").length; });
  document.getElementById("space-size").textContent =
    `${size.toLocaleString()} combinations before constraints (${kernel.valid_configs_default_problem.toLocaleString()} valid configs of the full space for the default problem).`;
}

function gpuHint(kernel) {
  document.getElementById("gpu-hint").textContent = kernel.recorded_gpu_models.length
    ? `recorded landscapes (replay workers): ${kernel.recorded_gpu_models.join(", ")}` : "";
}

function showKernel() {
  const kernel = currentKernel();
  document.getElementById("kernel-description").replaceChildren(userText(kernel.description),
    ` (version ${kernel.version}; backends ${kernel.backends.join(", ")})`);
  problemFields(kernel);
  rangeFields(kernel);
  gpuHint(kernel);
}

// The request body. Objects keyed by the kernel's names are built with Object.fromEntries, which defines
// each key as the object's own: assigning obj[name] = value with the name "__proto__" set the object's
// prototype instead, and the key was not sent (an unchecked "__proto__" value tuned the full space).
function body() {
  const kernel = currentKernel();
  const problem = Object.fromEntries([...document.querySelectorAll("[data-problem]")].map((input) => {
    const raw = input.value.trim();
    return [input.dataset.problem, input.dataset.kind === "int" && /^-?\d+$/.test(raw) ? Number(raw) : raw];
  }));
  const restricted = [];
  for (const row of document.querySelectorAll("#ranges .range")) {
    const name = row.dataset.parameter;
    const all = kernel.parameters[name];
    const kept = [...row.querySelectorAll("input:checked")].map((c) => all[Number(c.dataset.index)]);
    if (!kept.length) throw new Error(`parameter ${name}: check at least one value`);
    if (kept.length < all.length) restricted.push([name, kept]);
  }
  const request = {
    kernel: kernel.name, problem, gpu_model: document.getElementById("gpu_model").value.trim(),
    strategy: document.getElementById("strategy").value,
    budget_trials: Number(document.getElementById("budget_trials").value),
    parallelism: Number(document.getElementById("parallelism").value),
    profile: document.getElementById("profile").value,
    objective: document.getElementById("objective").value,
    warm_start: document.getElementById("warm_start").checked,
  };
  const seed = document.getElementById("seed").value.trim();
  if (seed) request.seed = Number(seed);
  if (restricted.length) request.space = { parameters: Object.fromEntries(restricted) };
  return request;
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  errorBox.hidden = true;
  const button = document.getElementById("submit");
  button.disabled = true;
  try {
    const job = await api("/v1/jobs", { method: "POST", body: body() });
    location.assign(`/ui/jobs/${job.id}`);
  } catch (error) {
    errorBox.textContent = describe(error);
    errorBox.hidden = false;
    button.disabled = false;
  }
});

// A session without the submit scope may look at the form (what a job would take) but not start a job.
function offerSubmit() {
  if (sessionMay("submit")) return;
  const button = document.getElementById("submit");
  button.disabled = true;
  button.after(el("p", { id: "submit-scope", class: "hint" },
    "Starting a job takes a token with the submit scope; this session's token lacks it."));
}

async function start() {
  offerSubmit();
  try {
    const [kernelList, strategies, models] = await Promise.all([api("/v1/kernels"), api("/v1/strategies"),
      api("/v1/gpu-models")]);
    kernels = kernelList;
    kernelSelect.replaceChildren(...kernels.map((k) => el("option", { value: k.name }, k.name)));
    const wanted = new URLSearchParams(location.search).get("kernel");
    if (wanted && kernels.some((k) => k.name === wanted)) kernelSelect.value = wanted;
    document.getElementById("strategy").replaceChildren(...strategies.names.map((s) =>
      el("option", { value: s, selected: s === strategies.default }, s)));
    const live = models.map((m) => m.gpu_model);
    document.getElementById("gpu-models").replaceChildren(...live.map((m) => el("option", { value: m })));
    if (live.length) document.getElementById("gpu_model").value = live[0];
    kernelSelect.addEventListener("change", showKernel);
    showKernel();
    document.body.dataset.rendered = "1";
  } catch (error) {
    showError(error);
  }
}

start();
