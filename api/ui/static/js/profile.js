// One model profile (kernelfarm profile-model): the per-operator table with shares, rates, classes and
// hints; the torch.compile A/B; what tuning on the farm bought per operator and end to end. Sections the
// run did not produce (no --compile, --tune or --swap) say so. Every field is read defensively: the
// report is stored as the command wrote it, and older reports may lack newer fields.
import { api, describe, el, fmtMs, fmtWhen, progressBar, showError } from "./api.js";

const profileId = document.body.dataset.profileId;
const num = (value, digits = 1) => (typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "");
const ms = (value) => (typeof value === "number" ? fmtMs(value) : "");
const pct = (value) => (typeof value === "number" ? `${(value * 100).toFixed(1)} %` : "");
const shapes = (list) => (list || []).filter((s) => s && s.length).map((s) => s.join("x")).join(" ") || "–";

function summaryBox(id, items) {
  document.getElementById(id).replaceChildren(...items.filter(([, v]) => v !== undefined && v !== "")
    .map(([k, v]) => el("div", { "data-key": k }, el("span", { class: "k" }, k), v)));
}

function header(p) {
  const r = p.report;
  const c = r.ceilings || {};
  document.getElementById("profile-title").textContent = `${p.model} on ${p.device_name}`;
  summaryBox("profile-summary", [
    ["model", p.model], ["device", `${p.device_name} (${p.gpu_model})`], ["dtype", p.dtype],
    ["batch x sequence", `${p.batch} x ${p.seq}`], ["latency", `${ms(p.latency_ms)} ms per inference`],
    ["profiled", r.profiled_ms !== undefined ? `${ms(r.profiled_ms)} ms (overhead ${pct(r.profiling_overhead)})` : undefined],
    ["table accounts for", r.accounted_ms !== undefined ? `${ms(r.accounted_ms)} ms` : undefined],
    ["ceilings", [c.fp32_flops && `${num(c.fp32_flops / 1e12, 2)} TFLOP/s fp32`,
      c.tensor_flops && `${num(c.tensor_flops / 1e12, 2)} TFLOP/s tensor`,
      c.dram_bytes_per_s && `${num(c.dram_bytes_per_s / 1e9, 0)} GB/s`].filter(Boolean).join(", ") + (c.how ? ` (${c.how})` : "")],
    ["owner", p.owner], ["stored", fmtWhen(p.created_at)],
  ]);
  document.getElementById("model-hints").replaceChildren(...(r.hints || []).map((h) => el("li", {}, `hint: ${h}`)));
}

function operators(r) {
  const ops = r.operators || [];
  const top = Math.max(...ops.map((o) => o.share || 0), 0) || 1;
  document.getElementById("self-time-head").textContent = r.device === "cuda" ? "self CUDA ms" : "self CPU ms";
  document.getElementById("operators-note").textContent = ops.length
    ? `${ops.length} operators (grouped by input shapes), by share of the profiled self time; times per inference`
    : "no operator in this report";
  document.querySelector("#operators tbody").replaceChildren(...ops.map((o) => el("tr", { "data-operator": o.name },
    el("td", {}, o.name), el("td", {}, shapes(o.input_shapes)), el("td", { class: "num" }, o.calls ?? ""),
    el("td", { class: "num" }, num(o.self_ms, 3)),
    el("td", { class: "share" }, progressBar((o.share || 0) / top, pct(o.share))),
    el("td", { class: "num" }, num(o.tflops_per_s, 2)), el("td", { class: "num" }, num(o.gb_per_s, 1)),
    el("td", {}, o.bound ? el("span", { class: `bound ${o.bound}` }, o.bound) : ""),
    el("td", { class: "num" }, typeof o.fraction_of_peak === "number" ? num(o.fraction_of_peak * 100, 0) : ""),
    el("td", { class: "kernels" }, (o.kernels || []).slice(0, 3).map((k) => k.slice(0, 60)).join(", ")),
    el("td", { class: "message" }, o.hint || ""))));
}

function compileAb(r) {
  const ab = r.compile_ab;
  const note = document.getElementById("compile-note");
  document.getElementById("compile-summary").hidden = !ab;
  document.getElementById("compile-ops").hidden = !ab;
  document.getElementById("compile-ops-head").hidden = !ab;
  if (!ab) { note.textContent = "not measured in this run (profile-model --compile)"; return; }
  note.textContent = "";
  summaryBox("compile-summary", [["eager", `${ms(ab.eager_ms)} ms`], ["compiled", `${ms(ab.compiled_ms)} ms`],
    ["speedup", `${num(ab.speedup, 2)}x`], ["compile time", `${num(ab.compile_s, 1)} s`]]);
  document.querySelector("#compile-ops tbody").replaceChildren(...(ab.per_operator || []).map((o) => el("tr", {},
    el("td", {}, o.operator), el("td", { class: "num" }, num(o.eager_ms, 3)), el("td", { class: "num" }, num(o.compiled_ms, 3)),
    el("td", { class: "num" }, num((o.compiled_ms ?? 0) - (o.eager_ms ?? 0), 3)))));
}

function tuning(r) {
  const entries = r.tuning;
  const note = document.getElementById("tuning-note");
  document.getElementById("tuning-ops").hidden = !entries;
  if (!entries) {
    note.textContent = "not tuned in this run (profile-model --tune)";
    summaryBox("end-to-end", [["latency (profile)", `${ms(r.latency_ms)} ms`]]);
    return;
  }
  note.textContent = "baseline and tuned times per call";
  document.querySelector("#tuning-ops tbody").replaceChildren(...entries.map((e) => el("tr", { "data-operator": e.operator },
    el("td", {}, e.operator), el("td", {}, Object.entries(e.kernel_problem || e.problem || {}).map(([k, v]) => `${k}=${v}`).join(", ")),
    el("td", {}, e.kernel || ""), el("td", {}, e.status || ""), el("td", { class: "num" }, e.calls ?? ""),
    el("td", { class: "num" }, pct(e.share)), el("td", { class: "num" }, ms(e.baseline_ms)),
    el("td", { class: "num" }, ms(e.tuned_ms)), el("td", { class: "num" }, e.speedup ? `${num(e.speedup, 2)}x` : ""),
    el("td", {}, e.job_id ? el("a", { href: `/ui/jobs/${e.job_id}` }, e.job_id.slice(0, 8)) : ""))));
  const estimate = entries.find((e) => typeof e.estimated_end_to_end_ms === "number");
  const swap = r.swap;
  summaryBox("end-to-end", [
    ["latency (profile)", `${ms(r.latency_ms)} ms`],
    ["estimated with the tuned operators", estimate ? `${ms(estimate.estimated_end_to_end_ms)} ms ` +
      `(${num(r.latency_ms / estimate.estimated_end_to_end_ms, 2)}x)` : undefined],
    ["swapped in, measured", swap ? `${ms(swap.baseline_ms)} → ${ms(swap.swapped_ms)} ms (${num(swap.speedup, 2)}x)` :
      "not measured (profile-model --swap)"],
    ["outputs", swap ? `${swap.outputs_match ? "match" : "MISMATCH"} (max abs error ${Number(swap.max_abs_error).toPrecision(3)})` : undefined],
    ["swapped", swap && swap.swapped ? Object.keys(swap.swapped).join("; ") || swap.note || "nothing" : undefined],
  ]);
}

async function load() {
  try {
    const profile = await api(`/v1/profiles/${profileId}`);
    header(profile);
    operators(profile.report);
    compileAb(profile.report);
    tuning(profile.report);
    showError(null);
  } catch (error) {
    showError(error);
    document.getElementById("profile-summary").textContent = describe(error);
  }
  document.body.dataset.rendered = "1";
}

load();
