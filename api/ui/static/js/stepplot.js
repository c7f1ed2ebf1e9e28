// A step line (best so far) drawn as inline SVG: the job page's convergence plots. Plotly draws the same
// in ~0.1-0.3 s of first-use set-up after ~1 s of evaluating its bundle on the 2-core VM; this needs
// neither, so the page's first view does not wait for Plotly (docs/benchmarks/UI.md).
const NS = "http://www.w3.org/2000/svg";
const MARGIN = { l: 72, r: 20, t: 10, b: 45 }; // room for 7-character tick labels beside the axis title

function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  for (const child of children) node.append(child instanceof Node ? child : String(child));
  return node;
}

// About `count` round tick values covering [lo, hi] (1, 2 or 5 times a power of ten apart).
export function ticks(lo, hi, count = 5) {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => span / s <= count) ?? 10 * power;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

function padded(values, integer) {
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (hi === lo) { lo -= integer ? 1 : Math.abs(lo) * 0.05 || 1; hi += integer ? 1 : Math.abs(hi) * 0.05 || 1; }
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

function label(value) {
  return Math.abs(value) >= 1000 ? value.toLocaleString("en-US") : String(Number(value.toPrecision(6)));
}

/**
 * Draw `y` over `x` as a step line (horizontal then vertical, Plotly's "hv") with a marker per point,
 * into `box` (replacing what it held). The series stays on the element as `box.kfSeries` ({x, y}).
 * `hover(i)` gives point i's tooltip.
 */
export function stepPlot(box, { x, y, xTitle, yTitle, hover, integerX = false, empty = "no complete trial yet" }) {
  box.kfSeries = { x: [...x], y: [...y] };
  box.dataset.points = String(x.length);
  if (!x.length) {
    box.replaceChildren(svg("svg", { class: "step-plot", role: "img", "aria-label": empty },
      svg("text", { x: "50%", y: "50%", "text-anchor": "middle", class: "empty" }, empty)));
    return;
  }
  const width = Math.max(320, Math.round(box.clientWidth || 600));
  const height = Math.max(200, Math.round(box.clientHeight || 340));
  const [x0, x1] = padded(x, integerX);
  const [y0, y1] = padded(y, false);
  const left = MARGIN.l;
  const right = width - MARGIN.r;
  const top = MARGIN.t;
  const bottom = height - MARGIN.b;
  const sx = (v) => left + ((v - x0) / (x1 - x0)) * (right - left);
  const sy = (v) => bottom - ((v - y0) / (y1 - y0)) * (bottom - top);
  const fixed = (v) => v.toFixed(1);

  const grid = svg("g", { class: "grid" });
  const axes = svg("g", { class: "axes" });
  for (const v of ticks(x0, x1).filter((t) => !integerX || Number.isInteger(t))) {
    grid.append(svg("line", { x1: fixed(sx(v)), x2: fixed(sx(v)), y1: top, y2: bottom }));
    axes.append(svg("text", { x: fixed(sx(v)), y: bottom + 16, "text-anchor": "middle" }, label(v)));
  }
  for (const v of ticks(y0, y1)) {
    grid.append(svg("line", { x1: left, x2: right, y1: fixed(sy(v)), y2: fixed(sy(v)) }));
    axes.append(svg("text", { x: left - 6, y: fixed(sy(v) + 4), "text-anchor": "end" }, label(v)));
  }
  axes.append(svg("line", { class: "axis", x1: left, x2: right, y1: bottom, y2: bottom }),
    svg("line", { class: "axis", x1: left, x2: left, y1: top, y2: bottom }),
    svg("text", { class: "title", x: (left + right) / 2, y: height - 6, "text-anchor": "middle" }, xTitle),
    svg("text", { class: "title", x: 12, y: (top + bottom) / 2, "text-anchor": "middle",
      transform: `rotate(-90 12 ${(top + bottom) / 2})` }, yTitle));

  let d = `M${fixed(sx(x[0]))},${fixed(sy(y[0]))}`;
  for (let i = 1; i < x.length; i++) d += `H${fixed(sx(x[i]))}V${fixed(sy(y[i]))}`;
  const markers = svg("g", { class: "markers" });
  x.forEach((v, i) => markers.append(svg("circle", { cx: fixed(sx(v)), cy: fixed(sy(y[i])), r: 3 },
    svg("title", {}, hover ? hover(i) : `${v}: ${y[i]}`))));
  box.replaceChildren(svg("svg", { class: "step-plot", viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `${yTitle} vs ${xTitle}` }, grid, axes, svg("path", { class: "line", d }), markers));
}
