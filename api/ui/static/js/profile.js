// One model profile (kernelfarm profile-model): the per-operator table with shares, rates, classes and
// hints; the torch.compile A/B; what tuning on the farm bought per operator and end to end. Sections the
// run did not produce (no --compile, --tune or --swap) say so. The report is a free-form JSON object that
// any client with a submit token may store (POST /v1/profiles checks only that it is storable), and older
// reports lack newer fields: every field is checked for its type before use (the helpers below), what
// is readable is shown and what is not is left out, so a malformed report never blanks the page. Text
// goes into the page only as text nodes and attribute values (el()), never as HTML.
import { api, describe, el, fmtMs, fmtWhen, progressBar, showError, userText, userTexts } from "./api.js";

const profileId = document.body.dataset.profileId;
const isNum = (value) => typeof value === "number" && Number.isFinite(value);
const num = (value, digits = 1) => (isNum(value) ? value.toFixed(digits) : "");
const ms = (value) => (isNum(value) ? fmtMs(value) : "");
const pct = (value) => (isNum(value) ? `${(value * 100).toFixed(1)} %` : "");
// A JSON object (not null, not an array), else an empty one.
const obj = (value) => (value !== null && typeof value === "object" && !Array.isArray(value) ? value : {});
const isObj = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const list = (value) => (Array.isArray(value) ? value : []);
// A scalar as text; objects, arrays, null and undefined are not readable as one line: "".
const text = (value) => (["string", "number", "boolean"].includes(typeof value) ? String(value) : "");
// A list of texts: the readable items of an array, or a single string as a list of one.
const texts = (value) => (typeof value === "string" ? [value] : list(value).map(text).filter((t) => t !== ""));
const shapes = (value) => list(value).map((s) => (Array.isArray(s) ? s.map(text).join("x") : text(s)))
  .filter((s) => s !== "").join(" ") || "–";

function summaryBox(id, items) {
  document.getElementById(id).replaceChildren(...items.filter(([, v]) => v !== undefined && v !== "")
    .map(([k, v]) => el("div", { "data-key": k }, el("span", { class: "k" }, k), v)));
}

function header(p, r) {
  const c = obj(r.ceilings);
  document.getElementById("profile-title").replaceChildren(userText(text(p.model)), " on ", userText(text(p.device_name)));
  summaryBox("profile-summary", [
    ["model", text(p.model) && userText(text(p.model))],
    ["device", el("span", {}, userText(text(p.device_name)), " (", userText(text(p.gpu_model)), ")")],
    ["dtype", text(p.dtype)],
    ["batch x sequence", `${text(p.batch)} x ${text(p.seq)}`], ["latency", `${ms(p.latency_ms)} ms per inference`],
    ["profiled", isNum(r.profiled_ms) ? `${ms(r.profiled_ms)} ms (overhead ${pct(r.profiling_overhead)})` : undefined],
    ["table accounts for", isNum(r.accounted_ms) ? `${ms(r.accounted_ms)} ms` : undefined],
    ["ceilings", [isNum(c.fp32_flops) && `${num(c.fp32_flops / 1e12, 2)} TFLOP/s fp32`,
      isNum(c.tensor_flops) && `${num(c.tensor_flops / 1e12, 2)} TFLOP/s tensor`,
      isNum(c.dram_bytes_per_s) && `${num(c.dram_bytes_per_s / 1e9, 0)} GB/s`].filter(Boolean).join(", ") +
      (text(c.how) ? ` (${text(c.how)})` : "")],
    ["owner", text(p.owner)], ["stored", fmtWhen(text(p.created_at))],
  ]);
  document.getElementById("model-hints").replaceChildren(...texts(r.hints).map((h) => el("li", {}, "hint: ", userText(h))));
}

function operators(r) {
  const ops = list(r.operators).filter(isObj);
  const share = (o) => (isNum(o.share) ? o.share : 0);
  const top = Math.max(...ops.map(share), 0) || 1;
  document.getElementById("self-time-head").textContent = r.device === "cuda" ? "self CUDA ms" : "self CPU ms";
  document.getElementById("operators-note").textContent = ops.length
    ? `${ops.length} operators (grouped by input shapes), by share of the profiled self time; times per inference`
    : "no operator in this report";
  document.querySelector("#operators tbody").replaceChildren(...ops.map((o) => el("tr", { "data-operator": text(o.name) },
    el("td", {}, userText(text(o.name))), el("td", {}, shapes(o.input_shapes)), el("td", { class: "num" }, text(o.calls)),
    el("td", { class: "num" }, num(o.self_ms, 3)),
    el("td", { class: "share" }, progressBar(share(o) / top, pct(o.share))),
    el("td", { class: "num" }, num(o.tflops_per_s, 2)), el("td", { class: "num" }, num(o.gb_per_s, 1)),
    el("td", {}, text(o.bound) ? el("span", { class: `bound ${text(o.bound)}` }, text(o.bound)) : ""),
    el("td", { class: "num" }, isNum(o.fraction_of_peak) ? num(o.fraction_of_peak * 100, 0) : ""),
    el("td", { class: "kernels" }, userTexts(texts(o.kernels).slice(0, 3).map((k) => k.slice(0, 60)))),
    el("td", { class: "message" }, text(o.hint)))));
}

function compileAb(r) {
  const ab = isObj(r.compile_ab) ? r.compile_ab : null;
  const note = document.getElementById("compile-note");
  document.getElementById("compile-summary").hidden = !ab;
  document.getElementById("compile-ops").hidden = !ab;
  document.getElementById("compile-ops-head").hidden = !ab;
  if (!ab) {
    note.textContent = r.compile_ab ? "this report's torch.compile section is not readable"
      : "not measured in this run (profile-model --compile)";
    return;
  }
  note.textContent = "";
  summaryBox("compile-summary", [["eager", `${ms(ab.eager_ms)} ms`], ["compiled", `${ms(ab.compiled_ms)} ms`],
    ["speedup", `${num(ab.speedup, 2)}x`], ["compile time", `${num(ab.compile_s, 1)} s`]]);
  document.querySelector("#compile-ops tbody").replaceChildren(...list(ab.per_operator).filter(isObj).map((o) => el("tr", {},
    el("td", {}, userText(text(o.operator))), el("td", { class: "num" }, num(o.eager_ms, 3)),
    el("td", { class: "num" }, num(o.compiled_ms, 3)),
    el("td", { class: "num" }, isNum(o.eager_ms) && isNum(o.compiled_ms) ? num(o.compiled_ms - o.eager_ms, 3) : ""))));
}

function jobLink(value) {
  const id = text(value);
  return id ? el("a", { href: `/ui/jobs/${encodeURIComponent(id)}` }, id.slice(0, 8)) : "";
}

function tuning(r) {
  const entries = Array.isArray(r.tuning) ? r.tuning.filter(isObj) : null;
  const note = document.getElementById("tuning-note");
  document.getElementById("tuning-ops").hidden = !entries;
  if (!entries) {
    note.textContent = r.tuning ? "this report's tuning section is not readable"
      : "not tuned in this run (profile-model --tune)";
    summaryBox("end-to-end", [["latency (profile)", `${ms(r.latency_ms)} ms`]]);
    return;
  }
  note.textContent = "baseline and tuned times per call";
  const problem = (e) => Object.entries(isObj(e.kernel_problem) ? e.kernel_problem : obj(e.problem))
    .map(([k, v]) => `${k}=${text(v)}`);
  document.querySelector("#tuning-ops tbody").replaceChildren(...entries.map((e) => el("tr", { "data-operator": text(e.operator) },
    el("td", {}, userText(text(e.operator))), el("td", {}, userTexts(problem(e))),
    el("td", {}, userText(text(e.kernel))), el("td", {}, userText(text(e.status))), el("td", { class: "num" }, text(e.calls)),
    el("td", { class: "num" }, pct(e.share)), el("td", { class: "num" }, ms(e.baseline_ms)),
    el("td", { class: "num" }, ms(e.tuned_ms)), el("td", { class: "num" }, isNum(e.speedup) ? `${num(e.speedup, 2)}x` : ""),
    el("td", {}, jobLink(e.job_id)))));
  const estimate = entries.find((e) => isNum(e.estimated_end_to_end_ms) && e.estimated_end_to_end_ms > 0);
  const swap = isObj(r.swap) ? r.swap : null;
  const swapped = swap && (isObj(swap.swapped) ? Object.keys(swap.swapped) : texts(swap.swapped));
  summaryBox("end-to-end", [
    ["latency (profile)", `${ms(r.latency_ms)} ms`],
    ["estimated with the tuned operators", estimate ? `${ms(estimate.estimated_end_to_end_ms)} ms ` +
      `(${num(r.latency_ms / estimate.estimated_end_to_end_ms, 2)}x)` : undefined],
    ["swapped in, measured", swap ? `${ms(swap.baseline_ms)} → ${ms(swap.swapped_ms)} ms (${num(swap.speedup, 2)}x)` :
      "not measured (profile-model --swap)"],
    ["outputs", swap ? `${swap.outputs_match === true ? "match" : "MISMATCH"}` +
      (isNum(swap.max_abs_error) ? ` (max abs error ${swap.max_abs_error.toPrecision(3)})` : "") +
      (isNum(swap.swapped_rel_l2_vs_float32) && isNum(swap.eager_rel_l2_vs_float32) && isNum(swap.rel_l2_tolerance)
        ? `; against ${text(swap.reference) || "the reference"}: relative L2 error swapped ` +
          `${swap.swapped_rel_l2_vs_float32.toPrecision(3)}, eager ${swap.eager_rel_l2_vs_float32.toPrecision(3)} ` +
          `(bound ${swap.rel_l2_tolerance.toPrecision(3)})` : "") : undefined],
    ["swapped", swap && swap.swapped ? (swapped.length ? userTexts(swapped, "; ") : text(swap.note) || "nothing")
      : undefined],
  ]);
}

async function load() {
  try {
    const profile = obj(await api(`/v1/profiles/${profileId}`));
    const report = obj(profile.report);
    header(profile, report);
    operators(report);
    compileAb(report);
    tuning(report);
    showError(null);
  } catch (error) {
    showError(error);
    document.getElementById("profile-summary").textContent = describe(error);
  }
  document.body.dataset.rendered = "1";
}

load();
