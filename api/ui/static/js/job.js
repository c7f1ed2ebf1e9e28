// Job: summary, convergence, every trial, the parameter heatmap, parallel coordinates, the roofline and
// the trial table. While the job runs the page polls.
// The first view (header and progress, the table's first page, best so far vs evaluations) comes from
// three small answers (the job, its first 50 trials as columns, its convergence curve) and needs no
// Plotly: the convergence plots are inline SVG (stepplot.js). Then one request (/trial-columns) brings
// every trial, and two builds of one plotly.js version draw the rest: the cartesian partial bundle
// (1.5 MB) the heatmap, the full bundle (4.8 MB, from the plotly wheel) the WebGL traces (every trial,
// parallel coordinates, roofline). Each plot is always drawn by the same build.
import {
  api, describe, el, fmtMs, fmtWhen, plotlyText, progressBar, sessionMay, sessionName, showActionError, showError,
  stateBadge, userText, userTexts,
} from "./api.js";
import { stepPlot } from "./stepplot.js";

// Milliseconds per stage of the last render, and when this script started (benchmarks/ui reads them).
window.kfStages = { scriptStart: performance.now() };
const jobId = document.body.dataset.jobId;
const CONFIG = { displaylogo: false, responsive: true };
const FAILED_COLORS = { compile: "#d69e2e", launch: "#dd6b20", timeout: "#805ad5", crash: "#c53030",
  wrong_result: "#b83280", constraint: "#718096" };
const LAYOUT = { margin: { l: 60, r: 20, t: 10, b: 45 }, paper_bgcolor: "#fff", plot_bgcolor: "#fff",
  font: { family: "system-ui, sans-serif", size: 12 } };
const TABLE_PAGE = 50;
let job = null;
let cols = null; // every trial, as columns (null until loaded)
let head = null; // the first TABLE_PAGE trials, as columns: the table's first page before `cols` comes
let cartesian = null; // Plotly, cartesian partial bundle
let full = null; // Plotly, full bundle
let lastProgress = "";
const table = { sortKey: "seq", sortDir: 1, page: 0, rows: [] };

function layout(extra) { return { ...LAYOUT, ...extra }; }

// A number the page can draw, or null. PostgreSQL writes a NaN or infinite float as the JSON string "NaN" or
// "Infinity" (a broken measurement), and metrics are whatever a worker stored: as text, a trial's time
// broke every plot after the first view (value.toPrecision is not a function). Such a value counts as none.
const finite = (value) => (typeof value === "number" && Number.isFinite(value) ? value : null);

// A /trial-columns answer with its numeric columns made of finite numbers and nulls (finite).
function numericColumns(answer) {
  for (const key of ["time_ms", "time_p20_ms", "time_p80_ms", "started_s", "finished_s"]) {
    if (Array.isArray(answer[key])) answer[key] = answer[key].map(finite);
  }
  for (const group of [answer.metrics, answer.profile]) {
    for (const [key, values] of Object.entries(group ?? {})) group[key] = Array.isArray(values) ? values.map(finite) : [];
  }
  const ceilings = answer.ceilings;
  if (ceilings && !(finite(ceilings.peak_flops_per_s) > 0 && finite(ceilings.peak_bytes_per_s) > 0)) answer.ceilings = null;
  return answer;
}

// The /convergence answer's points that have a finite best time (its best is null where none had one).
function finiteCurve(curve) {
  const keep = curve.best_ms.map((b, i) => (finite(b) !== null && finite(curve.wall_s[i]) !== null ? i : -1))
    .filter((i) => i >= 0);
  return { evals: keep.map((i) => curve.evaluations[i]), wall: keep.map((i) => curve.wall_s[i]),
    best: keep.map((i) => curve.best_ms[i]) };
}

// ---------------------------------------------------------------- summary
const PRIOR_STATES = {
  in_use: "used",
  held_back: "held back: the job's own measurements had not yet shown that they rank its configs alike",
  dropped: "dropped: the job's own measurements disagreed with them",
};

// The prior the job learned from: kept by the job, since its status message says it only while it runs.
function warmStart(job) {
  const prior = job.warm_start_prior;
  if (!job.warm_start) return "off (cold start by request)";
  if (!prior) return "not decided yet";
  if (prior.state === "none") return "cold start: no other GPU model had tuned this kernel and problem";
  return `${prior.trials} trials from ${prior.sources.join(", ")} (${PRIOR_STATES[prior.state] || prior.state})`;
}

const isLive = (state) => state === "queued" || state === "running";

// What a plot or note of complete trials says when there is none: a finished job will get none.
function noCompleteTrial() {
  return job && !isLive(job.state) ? "no trial succeeded" : "no complete trial yet";
}

let cancelling = false; // a cancel request is on its way: the button, redrawn by each poll, stays disabled

function cancelButton() {
  // Offered only where the API would take it (mayCancel); a refusal all the same (the farm overloaded, say)
  // stays in the banner.
  const cancel = el("button", { type: "button", id: "cancel", disabled: cancelling,
    title: "takes a submit token of the job's owner, or an admin token" }, "Cancel job");
  cancel.addEventListener("click", async () => {
    showActionError(null); // this action replaces the last one's error
    cancelling = true;
    cancel.disabled = true;
    try {
      job = await api(`/v1/jobs/${jobId}/cancel`, { method: "POST" });
    } catch (error) {
      showActionError(error);
    } finally {
      cancelling = false;
      summary();
    }
  });
  return cancel;
}

// The API's rule for a cancel: a submit token of the job's owner, or an admin token.
function mayCancel() {
  return sessionMay("admin") || (sessionMay("submit") && job.owner === sessionName());
}

function summary() {
  const p = job.progress;
  const done = p.complete + p.failed;
  const items = [
    ["kernel", userText(job.kernel)], ["GPU model", userText(job.gpu_model)],
    ["problem", userTexts(Object.entries(job.problem).map(([k, v]) => `${k}=${v}`))],
    ["state", stateBadge(job.state)],
    ["progress", progressBar(done / (job.budget_trials || p.total || 1), `${done}/${job.budget_trials ?? "∞"}`)],
    ["trials", `${p.complete} complete, ${p.failed} failed, ${p.running} running, ${p.queued} queued`],
    ["best", job.best ? el("span", {}, `${fmtMs(job.best.time_ms)} ms — `, userText(job.best.config_key))
      : isLive(job.state) ? "none yet" : "none: no trial succeeded"],
    ["strategy", `${job.strategy} (seed ${job.seed}, parallelism ${job.parallelism})`],
    ["warm start", warmStart(job)],
    ["created", fmtWhen(job.created_at)], ["finished", fmtWhen(job.finished_at)], ["owner", userText(job.owner)],
    ["status", userText(job.status_message || "")],
  ];
  const box = document.getElementById("summary");
  box.replaceChildren(...items.map(([k, v]) => el("div", { "data-key": k }, el("span", { class: "k" }, k), v)));
  // A finished job has nothing to cancel.
  if (isLive(job.state) && mayCancel()) box.append(el("div", {}, cancelButton()));
  document.getElementById("job-title").replaceChildren(userText(job.kernel), " on ", userText(job.gpu_model));
  document.body.dataset.state = job.state;
}

// ---------------------------------------------------------------- convergence and every trial
// Best so far after each finished trial, as the points where it improves (and the last one): the line
// is drawn as steps, so the points in between add nothing but drawing time.
function convergenceSeries() {
  const order = [];
  for (let i = 0; i < cols.count; i++) {
    if ((cols.state[i] === "complete" || cols.state[i] === "failed") && cols.finished_s[i] !== null) order.push(i);
  }
  order.sort((a, b) => cols.finished_s[a] - cols.finished_s[b]);
  const evals = [];
  const wall = [];
  const best = [];
  let current = Infinity;
  order.forEach((i, k) => {
    const time = cols.state[i] === "complete" ? cols.time_ms[i] : null;
    const improves = time !== null && time < current;
    if (improves) current = time;
    if (current < Infinity && (improves || k === order.length - 1)) {
      evals.push(k + 1); wall.push(cols.finished_s[i]); best.push(current);
    }
  });
  return { evals, wall, best };
}

// The curve as the API's /convergence answers it (first view) or as computed from every trial (later).
function convergenceEvals(curve) {
  const { evals, best } = curve;
  stepPlot(document.getElementById("conv-evals"), { x: evals, y: best, xTitle: "evaluations",
    yTitle: "best time (ms)", integerX: true, empty: noCompleteTrial(),
    hover: (i) => `after ${evals[i]} evaluations: ${fmtMs(best[i])} ms` });
}

function convergenceTime(curve) {
  const { wall, best } = curve;
  stepPlot(document.getElementById("conv-time"), { x: wall, y: best, xTitle: "seconds since submission",
    yTitle: "best time (ms)", empty: noCompleteTrial(), hover: (i) => `at ${wall[i].toFixed(1)} s: ${fmtMs(best[i])} ms` });
}

function allTrials() {
  const okX = [];
  const okY = [];
  const failed = new Map(); // failure kind → the trials' seq (a Map: any kind is a key, "__proto__" too)
  for (let i = 0; i < cols.count; i++) {
    if (cols.state[i] === "complete" && cols.time_ms[i] !== null) {
      okX.push(cols.seq[i]); okY.push(cols.time_ms[i]);
    } else if (cols.state[i] === "failed") {
      const kind = cols.failure_kind[i] || "unknown";
      if (!failed.has(kind)) failed.set(kind, []);
      failed.get(kind).push(cols.seq[i]);
    }
  }
  const traces = [{ x: okX, y: okY, type: "scattergl", mode: "markers", name: "complete",
    marker: { size: 5, color: "#2b6cb0", opacity: 0.7 }, hovertemplate: "trial %{x}: %{y:.4f} ms<extra></extra>" }];
  // Failed trials have no time: drawn as crosses in a band of their own above the time axis (y2), not at a
  // made-up time on it (an all-failed job drew them at "1 ms").
  for (const [kind, xs] of failed) {
    traces.push({ x: xs, y: xs.map(() => 0), yaxis: "y2", type: "scattergl", mode: "markers",
      name: plotlyText(`failed: ${kind}`),
      marker: { symbol: "x", size: 7, color: Object.hasOwn(FAILED_COLORS, kind) ? FAILED_COLORS[kind] : "#c53030" },
      hovertemplate: `trial %{x}: failed (${plotlyText(kind)})<extra></extra>` });
  }
  full.react("all-trials", traces, layout({ xaxis: { title: { text: "trial (proposal order)" } },
    yaxis: { title: { text: "time (ms)" }, domain: failed.size ? [0, 0.84] : [0, 1] },
    yaxis2: { domain: [0.88, 1], range: [-1, 1], tickvals: [0], ticktext: ["failed"], fixedrange: true,
      showgrid: false, zeroline: false, visible: failed.size > 0 },
    legend: { orientation: "h", y: 1.12 } }), CONFIG);
}

// ---------------------------------------------------------------- heatmap
function uniqueSorted(values) {
  const seen = [...new Set(values.filter((v) => v !== null && v !== undefined))];
  const numeric = seen.every((v) => typeof v === "number");
  return numeric ? seen.sort((a, b) => a - b) : seen.map(String).sort();
}

function median(values) {
  const sorted = Float64Array.from(values).sort();
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function setupHeatmapControls() {
  const xs = document.getElementById("heat-x");
  const ys = document.getElementById("heat-y");
  if (xs.options.length) return;
  const varied = cols.parameters.filter((p) => uniqueSorted(cols.config[p]).length > 1);
  const choices = varied.length >= 2 ? varied : cols.parameters;
  for (const select of [xs, ys]) select.replaceChildren(...cols.parameters.map((p) => el("option", { value: p }, p)));
  xs.value = choices[0] ?? "";
  ys.value = choices[1] ?? choices[0] ?? "";
  xs.addEventListener("change", heatmap);
  ys.addEventListener("change", heatmap);
}

function heatmap() {
  const started = performance.now();
  const px = document.getElementById("heat-x").value;
  const py = document.getElementById("heat-y").value;
  if (!px || !py) return;
  const xv = uniqueSorted(cols.config[px]);
  const yv = uniqueSorted(cols.config[py]);
  const xi = new Map(xv.map((v, i) => [String(v), i]));
  const yi = new Map(yv.map((v, i) => [String(v), i]));
  const cells = new Map();
  for (let i = 0; i < cols.count; i++) {
    if (cols.state[i] !== "complete" || cols.time_ms[i] === null) continue;
    // A trial without a value for one of the two (a row older than its kernel's space) has no cell: its
    // key was NaN, and z[NaN] undefined stopped every plot after this one.
    const x = xi.get(String(cols.config[px][i]));
    const y = yi.get(String(cols.config[py][i]));
    if (x === undefined || y === undefined) continue;
    const key = x + y * xv.length;
    let list = cells.get(key);
    if (!list) cells.set(key, (list = []));
    list.push(cols.time_ms[i]);
  }
  const z = yv.map(() => xv.map(() => null));
  const n = yv.map(() => xv.map(() => 0));
  for (const [key, list] of cells) {
    const x = key % xv.length;
    const y = Math.floor(key / xv.length);
    z[y][x] = median(list);
    n[y][x] = list.length;
  }
  // Tune values are the user's (an uploaded kernel's strings): escaped, as the categories themselves, so
  // that tick labels and hover text show them as text (escaping keeps distinct values distinct).
  cartesian.react("heatmap", [{ type: "heatmap", x: xv.map(plotlyText), y: yv.map(plotlyText), z, customdata: n,
    colorscale: "Viridis", reversescale: true, colorbar: { title: { text: "median ms" } }, hoverongaps: false,
    hovertemplate: `${plotlyText(px)}=%{x}, ${plotlyText(py)}=%{y}<br>median %{z:.4f} ms over %{customdata} trials` +
      "<extra></extra>" }],
  layout({ xaxis: { title: { text: plotlyText(px) }, type: "category" },
    yaxis: { title: { text: plotlyText(py) }, type: "category" } }), CONFIG);
  window.kfHeatmap = { x: px, y: py, cells: cells.size, ms: performance.now() - started };
  document.getElementById("heatmap").dataset.cells = String(cells.size);
}

// ---------------------------------------------------------------- parallel coordinates
// Lines drawn at most: the fastest ones. Ten thousand lines are unreadable, and drawing them took
// 12-20 s in headless Chromium's software WebGL on the 2-core VM.
const PARCOORDS_MAX = 1000;

function parcoords() {
  const index = [];
  for (let i = 0; i < cols.count; i++) if (cols.state[i] === "complete" && cols.time_ms[i] !== null) index.push(i);
  const note = document.getElementById("parcoords-note");
  if (!index.length) { full.purge("parcoords"); note.textContent = noCompleteTrial(); return; }
  if (index.length > PARCOORDS_MAX) {
    index.sort((a, b) => cols.time_ms[a] - cols.time_ms[b]);
    note.textContent = `the ${PARCOORDS_MAX} fastest of ${index.length} complete trials`;
    index.length = PARCOORDS_MAX;
  } else {
    note.textContent = `${index.length} complete trials`;
  }
  const times = index.map((i) => cols.time_ms[i]);
  const dimensions = cols.parameters.map((p) => {
    const values = uniqueSorted(cols.config[p]);
    const position = new Map(values.map((v, k) => [String(v), k]));
    // The axis title is Plotly's HTML; parcoords writes tick labels as plain text (escaped, they showed
    // "&lt;"): so only the title is escaped.
    return { label: plotlyText(p), values: index.map((i) => position.get(String(cols.config[p][i]))),
      tickvals: values.map((_, k) => k), ticktext: values.map(String) };
  });
  dimensions.push({ label: "time (ms)", values: times });
  full.react("parcoords", [{ type: "parcoords", dimensions,
    line: { color: times, colorscale: "Viridis", reversescale: true, showscale: true } }],
  layout({ margin: { l: 60, r: 60, t: 50, b: 20 } }), CONFIG);
}

// ---------------------------------------------------------------- roofline and top-k ncu metrics
const NCU = [["achieved_occupancy_pct", "occupancy %"], ["dram_throughput_pct", "DRAM throughput %"],
  ["l2_hit_rate_pct", "L2 hit rate %"], ["sm_throughput_pct", "SM throughput %"], ["registers_per_thread", "registers"]];

function ncuText(i) {
  return NCU.filter(([k]) => cols.profile[k] && cols.profile[k][i] !== null)
    .map(([k, label]) => `${label}: ${Number(cols.profile[k][i]).toFixed(1)}`).join("<br>");
}

function roofline() {
  const note = document.getElementById("roofline-note");
  const ai = cols.metrics.arithmetic_intensity;
  const flops = cols.metrics.achieved_flops_per_s;
  const ceilings = cols.ceilings;
  const index = [];
  if (ai && flops) for (let i = 0; i < cols.count; i++) if (ai[i] > 0 && flops[i] > 0) index.push(i);
  if (!index.length || !ceilings) {
    full.purge("roofline");
    document.getElementById("roofline").hidden = true;
    note.hidden = false;
    note.textContent = "No roofline data: this job's trials carry no achieved FLOP/s and arithmetic intensity " +
      "(the cuda backend records them against the GPU's measured ceilings; replay and fake workers do not).";
    return;
  }
  document.getElementById("roofline").hidden = false;
  note.hidden = true;
  const peak = ceilings.peak_flops_per_s / 1e9;
  const bandwidth = ceilings.peak_bytes_per_s / 1e9;
  const xs = index.map((i) => ai[i]);
  const low = Math.min(...xs, peak / bandwidth) / 4;
  const high = Math.max(...xs, peak / bandwidth) * 4;
  const roofX = [low, peak / bandwidth, high];
  const roofY = roofX.map((x) => Math.min(peak, x * bandwidth));
  full.react("roofline", [
    { x: roofX, y: roofY, type: "scatter", mode: "lines", name: plotlyText(`roof (${ceilings.peak_kind ?? "fp32"}, measured)`),
      line: { color: "#1a202c" }, hovertemplate: "%{y:.0f} GFLOP/s<extra>roof</extra>" },
    { x: xs, y: index.map((i) => flops[i] / 1e9), type: "scattergl", mode: "markers", name: "trials",
      text: index.map((i) => `trial ${cols.seq[i]}: ${fmtMs(cols.time_ms[i])} ms<br>${ncuText(i)}`),
      marker: { size: 6, color: index.map((i) => cols.time_ms[i]), colorscale: "Viridis", reversescale: true },
      hovertemplate: "%{text}<extra></extra>" },
  ], layout({ xaxis: { type: "log", title: { text: "arithmetic intensity (FLOP/byte)" } },
    yaxis: { type: "log", title: { text: "achieved GFLOP/s" } }, legend: { orientation: "h", y: 1.08 } }), CONFIG);
}

function topk() {
  const profiled = NCU.filter(([k]) => cols.profile[k]);
  const note = document.getElementById("topk-note");
  const head = document.querySelector("#topk thead");
  const body = document.querySelector("#topk tbody");
  const complete = [];
  for (let i = 0; i < cols.count; i++) if (cols.state[i] === "complete" && cols.time_ms[i] !== null) complete.push(i);
  complete.sort((a, b) => cols.time_ms[a] - cols.time_ms[b]);
  const top = complete.slice(0, 10);
  head.replaceChildren(el("tr", {}, el("th", {}, "trial"), el("th", { class: "num" }, "time (ms)"),
    ...profiled.map(([, label]) => el("th", { class: "num" }, label)), el("th", {}, "config")));
  body.replaceChildren(...top.map((i) => el("tr", {}, el("td", {}, cols.seq[i]),
    el("td", { class: "num" }, fmtMs(cols.time_ms[i])),
    ...profiled.map(([k]) => el("td", { class: "num" }, cols.profile[k][i] === null ? "" : Number(cols.profile[k][i]).toFixed(1))),
    el("td", {}, userTexts(cols.parameters.map((p) => `${p}=${cols.config[p][i]}`))))));
  note.hidden = profiled.length > 0;
  note.textContent = "No Nsight Compute metrics recorded for this job (profile mode none, or a backend that does not profile).";
}

// ---------------------------------------------------------------- trial table
// Until every trial is loaded the table shows `head` (the first page in proposal order): enough for
// its default view; sorting, filtering and paging wait for `cols`.
const rowsOf = () => cols ?? head;
const defaultView = () => table.page === 0 && table.sortKey === "seq" && table.sortDir === 1 &&
  !document.getElementById("trial-filter").value.trim() && !document.getElementById("trial-state").value;

function tableColumns() {
  const cols = rowsOf();
  return [["seq", "trial"], ["state", "state"], ["failure_kind", "failure"], ["time_ms", "time (ms)"],
    ["time_p20_ms", "p20"], ["time_p80_ms", "p80"], ...cols.parameters.map((p) => [`config.${p}`, p]),
    ...NCU.filter(([k]) => cols.profile[k]).map(([k, label]) => [`profile.${k}`, label]), ["worker", "worker"]];
}

function cell(key, i) {
  const cols = rowsOf();
  if (key.startsWith("config.")) return cols.config[key.slice(7)][i];
  if (key.startsWith("profile.")) return cols.profile[key.slice(8)][i];
  return cols[key][i];
}

function matches(i, terms, state) {
  const cols = rowsOf();
  if (state && cols.state[i] !== state) return false;
  for (const term of terms) {
    // name=value splits at the first "=" only: "p=a=b" asks for p equal to "a=b", which no number is.
    const at = term.indexOf("=");
    const [name, value] = at >= 0 ? [term.slice(0, at), term.slice(at + 1)] : [null, term];
    if (name !== null) {
      if (!Object.hasOwn(cols.config, name) || String(cols.config[name][i]) !== value) return false;
    } else if (![cols.state[i], cols.failure_kind[i], cols.worker[i], String(cols.seq[i])]
      .some((v) => v !== null && String(v).toLowerCase().includes(value.toLowerCase()))) return false;
  }
  return true;
}

function filteredRows() {
  const cols = rowsOf();
  const terms = document.getElementById("trial-filter").value.trim().split(/\s+/).filter(Boolean);
  const state = document.getElementById("trial-state").value;
  const rows = [];
  for (let i = 0; i < cols.seq.length; i++) if (matches(i, terms, state)) rows.push(i);
  const { sortKey, sortDir } = table;
  rows.sort((a, b) => {
    const x = cell(sortKey, a);
    const y = cell(sortKey, b);
    if (x === y) return cols.seq[a] - cols.seq[b];
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return (x < y ? -1 : 1) * sortDir;
  });
  return rows;
}

// Failure messages are not among /trial-columns' columns (every poll would carry them); the table asks
// /trials?state=failed for those of the failed trials it shows. That list pages in proposal order, so a
// failed trial's offset in it is its rank among the job's failed trials, counted in the columns.
const FAILURE_PAGE = 1000; // the most trials /trials answers at once
const failureMessages = new Map(); // seq → the trial's failure message ("" for none)
const failureAsked = new Set(); // seqs asked for since the job's count of failed trials last changed
let failedCountAsked = -1;

function failureCell(kind, seq) {
  const message = failureMessages.get(seq);
  // Long messages (a compiler's log) are cut in the cell; the whole one is its tooltip.
  return el("td", { class: "failure" }, kind ?? "", message ? el("div", { class: "failure-message", title: message },
    message.length > 300 ? `${message.slice(0, 300)}…` : message) : "");
}

async function loadFailureMessages(shown) {
  const trials = rowsOf();
  const rank = new Map(); // row index → rank among the failed trials
  trials.state.forEach((state, i) => { if (state === "failed") rank.set(i, rank.size); });
  if (rank.size !== failedCountAsked) { failureAsked.clear(); failedCountAsked = rank.size; }
  const wanted = shown.filter((i) => rank.has(i) && !failureMessages.has(trials.seq[i]) && !failureAsked.has(trials.seq[i]));
  if (!wanted.length) return;
  const windows = []; // [offset, limit] over the ranks wanted, each at most a page
  for (const r of wanted.map((i) => rank.get(i)).sort((a, b) => a - b)) {
    const last = windows.at(-1);
    if (last && r < last[0] + FAILURE_PAGE) last[1] = r - last[0] + 1;
    else windows.push([r, 1]);
  }
  const asked = wanted.map((i) => trials.seq[i]);
  asked.forEach((seq) => failureAsked.add(seq));
  try {
    const answers = await Promise.all(windows.map(([offset, limit]) =>
      api(`/v1/jobs/${jobId}/trials?state=failed&order=seq&limit=${limit}&offset=${offset}`)));
    for (const answer of answers) for (const t of answer.items) failureMessages.set(t.seq, t.failure_message ?? "");
  } catch (error) {
    asked.forEach((seq) => failureAsked.delete(seq)); // asked again on the next render
    showError(error);
    return;
  }
  trialTable();
}

function trialTable() {
  const columns = tableColumns();
  const partial = cols === null;
  const total = rowsOf().count; // every trial of the job, also in `head`
  if (partial && !defaultView()) {
    document.querySelector("#trials tbody").replaceChildren(el("tr", {},
      el("td", { colspan: columns.length, class: "hint" }, "loading every trial…")));
    return;
  }
  table.rows = filteredRows();
  const matching = partial ? total : table.rows.length;
  const pages = Math.max(1, Math.ceil(matching / TABLE_PAGE));
  table.page = Math.min(table.page, pages - 1);
  const head = el("tr", {}, ...columns.map(([key, label]) => {
    const th = el("th", { "data-key": key, class: key === table.sortKey ? (table.sortDir > 0 ? "asc" : "desc") : null },
      key.startsWith("config.") ? userText(label) : label);
    th.addEventListener("click", () => {
      table.sortDir = table.sortKey === key ? -table.sortDir : 1;
      table.sortKey = key;
      trialTable();
    });
    return th;
  }));
  document.querySelector("#trials thead").replaceChildren(head);
  const shown = table.rows.slice(table.page * TABLE_PAGE, (table.page + 1) * TABLE_PAGE);
  const seqs = rowsOf().seq;
  document.querySelector("#trials tbody").replaceChildren(...shown.map((i) => el("tr", { "data-seq": seqs[i] },
    ...columns.map(([key]) => {
      const value = cell(key, i);
      if (key === "failure_kind") return failureCell(value, seqs[i]);
      const numeric = typeof value === "number" && !key.startsWith("config.") && key !== "seq";
      if (numeric) return el("td", { class: "num" }, key.startsWith("time") ? fmtMs(value) : value.toFixed(1));
      return el("td", {}, key.startsWith("config.") || key === "worker" ? userText(value) : value ?? "");
    }))));
  document.getElementById("trial-count").textContent = `${matching} of ${total} trials`;
  document.getElementById("trials-page").textContent = `page ${table.page + 1} of ${pages}`;
  document.getElementById("trials-prev").disabled = table.page === 0;
  document.getElementById("trials-next").disabled = table.page >= pages - 1;
  loadFailureMessages(shown);
}

// One CSV cell, as the API's csv export writes it (core/exports/csv_format.py): OWASP's advice on CSV
// injection. A spreadsheet runs a text cell that begins with = + - @ TAB or CR as a formula, so such a
// string gets a leading '; numbers stay numbers (-1.5). A comma, quote, CR or LF makes the cell quoted.
function csvValue(value) {
  if (value === null || value === undefined) return "";
  let text = String(value);
  if (typeof value === "string" && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

async function downloadCsv() {
  showActionError(null);
  try {
    await everyTrial;
  } catch (error) {
    showActionError(error); // the load of every trial failed: say so rather than wait for ever
    return;
  }
  const columns = tableColumns();
  const lines = [columns.map(([key]) => csvValue(key.replace(/^(config|profile)\./, ""))).join(",")];
  for (const i of table.rows) lines.push(columns.map(([key]) => csvValue(cell(key, i))).join(","));
  const blob = new Blob([lines.join("\n") + "\n"], { type: "text/csv" });
  const link = el("a", { href: URL.createObjectURL(blob), download: `trials-${jobId}.csv` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
}

document.getElementById("trial-filter").addEventListener("input", () => { table.page = 0; trialTable(); });
document.getElementById("trial-state").addEventListener("change", () => { table.page = 0; trialTable(); });
document.getElementById("trials-prev").addEventListener("click", () => { table.page -= 1; trialTable(); });
document.getElementById("trials-next").addEventListener("click", () => { table.page += 1; trialTable(); });
document.getElementById("csv").addEventListener("click", downloadCsv);

// ---------------------------------------------------------------- loading and live updates
function timed(name, stage) {
  const started = performance.now();
  stage();
  window.kfStages[name] = performance.now() - started;
}

const nextFrame = () => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));

// Every trial's columns, which the CSV download waits for: pending until they are loaded, resolved once
// they are, rejected with the error when the load (or the first view before it) failed. A rejected one
// is replaced by a pending one when the next poll tries again, so a later load can still resolve it.
let everyTrial, everyTrialLoaded, everyTrialFailed, everyTrialRejected = false;
function expectEveryTrial() {
  everyTrialRejected = false;
  everyTrial = new Promise((resolve, reject) => { everyTrialLoaded = resolve; everyTrialFailed = reject; });
  everyTrial.catch(() => {}); // a failure nobody waits for is shown by loop(); not an unhandled rejection
}
expectEveryTrial();

// The first view: header and progress, the table's first page and best so far vs evaluations, from
// three small answers and without Plotly. Then best so far vs wall time from the same curve.
async function firstView() {
  const asked = performance.now();
  let curve;
  [job, head, curve] = await Promise.all([api(`/v1/jobs/${jobId}`),
    api(`/v1/jobs/${jobId}/trial-columns?limit=${TABLE_PAGE}`), api(`/v1/jobs/${jobId}/convergence`)]);
  window.kfStages.fetch = performance.now() - asked;
  numericColumns(head);
  lastProgress = JSON.stringify([job.state, job.progress]);
  const series = finiteCurve(curve);
  for (const [name, stage] of [["summary", summary], ["table", trialTable],
    ["conv-evals", () => convergenceEvals(series)]]) timed(name, stage);
  await nextFrame(); // drawn on screen, not only in the DOM
  window.kfFirstRenderMs = performance.now();
  document.body.dataset.rendered = "1";
  timed("conv-time", () => convergenceTime(series));
}

// Everything from every trial's columns: on the first load after the first view, and on each update.
async function renderAll() {
  const first = document.body.dataset.complete !== "1";
  const series = convergenceSeries();
  for (const [name, stage] of [["summary", summary], ["table", trialTable], ["conv-evals", () => convergenceEvals(series)],
    ["conv-time", () => convergenceTime(series)], ["top-k", topk]]) timed(name, stage);
  if (cartesian === null) {
    const asked = performance.now();
    cartesian = await loadPlotly("/ui/vendor/plotly-cartesian.min.js");
    window.kfStages.cartesianPlotly = performance.now() - asked;
  }
  timed("heatmap", () => { setupHeatmapControls(); heatmap(); });
  if (full === null) {
    const asked = performance.now();
    full = await loadPlotly("/ui/vendor/plotly.min.js");
    window.kfStages.fullPlotly = performance.now() - asked;
  }
  timed("all-trials", allTrials);
  // Below the fold and the heaviest to draw: when scrolled into view.
  whenVisible("parcoords", () => timed("parcoords", parcoords));
  whenVisible("roofline", () => timed("roofline", roofline));
  if (first) {
    await nextFrame();
    window.kfCompleteMs = performance.now();
    document.body.dataset.complete = "1";
  }
}

// Draw now if the element is on screen, else once it is (and redraw on later data while it is).
const observed = new Map();
function whenVisible(id, draw) {
  const target = document.getElementById(id);
  const entry = observed.get(id);
  if (entry) { entry.draw = draw; if (entry.seen) draw(); return; }
  const state = { draw, seen: false };
  observed.set(id, state);
  new IntersectionObserver((entries, observer) => {
    if (entries.some((e) => e.isIntersecting)) {
      state.seen = true;
      observer.disconnect();
      state.draw();
    }
  }, { rootMargin: "200px" }).observe(target.closest("section"));
}

// Each Plotly build sets window.Plotly: keep each build's object and give the name back to the first.
function loadPlotly(src) {
  return new Promise((resolve, reject) => {
    const before = window.Plotly;
    const script = el("script", { src });
    script.addEventListener("load", () => {
      const loaded = window.Plotly;
      if (before) window.Plotly = before;
      resolve(loaded);
    }, { once: true });
    script.addEventListener("error", () => reject(new Error(`could not load ${src}`)), { once: true });
    document.head.append(script);
  });
}

async function refresh() {
  if (cols === null && everyTrialRejected) expectEveryTrial();
  if (head === null) {
    await firstView();
    // Every trial, while the cartesian bundle downloads and is evaluated.
    const cartesianLoading = loadPlotly("/ui/vendor/plotly-cartesian.min.js");
    cartesianLoading.catch(() => {}); // awaited below; a failure surfaces there
    const asked = performance.now();
    cols = numericColumns(await api(`/v1/jobs/${jobId}/trial-columns`));
    window.kfStages.everyTrial = performance.now() - asked;
    everyTrialLoaded(cols);
    cartesian = await cartesianLoading;
    await renderAll();
    return;
  }
  const fresh = await api(`/v1/jobs/${jobId}`);
  const progress = JSON.stringify([fresh.state, fresh.progress]);
  job = fresh;
  if (progress !== lastProgress || cols === null) {
    cols = numericColumns(await api(`/v1/jobs/${jobId}/trial-columns`));
    everyTrialLoaded(cols);
    lastProgress = progress;
    await renderAll();
  } else {
    summary();
  }
}

async function loop() {
  try {
    await refresh();
    showError(null);
  } catch (error) {
    showError(error);
    if (cols === null) { everyTrialRejected = true; everyTrialFailed(error); }
    if (error && error.status === 404) { document.getElementById("summary").textContent = describe(error); return; }
  }
  if (!job || job.state === "queued" || job.state === "running") setTimeout(loop, 2000);
}

loop();
