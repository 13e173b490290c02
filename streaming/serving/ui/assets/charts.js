// Small time-series charts over the lag history, drawn by the vendored uPlot (assets/vendor: the
// global `uPlot`, loaded before this module).  A chart is a <figure> whose caption names it and
// whose accessible name says the newest values in words; the canvas is decoration for that text.
import { fmtDuration, fmtInt, h } from "./common.js";

const COLORS = { messages: "#0b57b7", seconds: "#a40e26", rate: "#116329" };

/** The plot's width: its figure's (one cell of the charts' grid: min-width 0 in app.css, so the
 * plot never widens its own cell), less the figure's padding. */
function width(figure) {
  const style = getComputedStyle(figure);
  const padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
  return Math.max(160, Math.floor(figure.getBoundingClientRect().width - padding) - 2);
}

function last(values) {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null && values[i] !== undefined) return values[i];
  return null;
}

/** The time axis's span, in s: no point yet -- the last hour up to now (uPlot's own guess for no
 * data spans years, or starts in 1970); one point, or several at one time -- a minute either side. */
export function timeRange(u, lo, hi) {
  if (lo === null || hi === null || !Number.isFinite(lo) || !Number.isFinite(hi)) {
    const now = Date.now() / 1000;
    return [now - 3600, now];
  }
  return lo === hi ? [lo - 60, hi + 60] : [lo, hi];
}

/** The least room between two time ticks, in px: the widest label ("2026-11-29") and a gap. */
const TIME_TICK_SPACE = 90;

function pad2(n) {
  return String(n).padStart(2, "0");
}

/** Time ticks in 24-hour local time, as precise as their spacing: seconds under a minute apart,
 * minutes under a day apart, else the date. */
export function timeLabels(u, splits, axisIdx, foundSpace, foundIncr) {
  return splits.map((v) => {
    if (v === null || v === undefined) return null;
    const d = new Date(v * 1000);
    const hm = `${pad2(d.getHours())}:${pad2(d.getMinutes())}`;
    if (foundIncr < 60) return `${hm}:${pad2(d.getSeconds())}`;
    if (foundIncr < 86400) return hm;
    return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}`;
  });
}

/** A value axis's width: its ticks, the gap and its widest label as drawn (uPlot's documented
 * "auto size" recipe: measured in the axis's own font; kept from the second sizing cycle on, as
 * the recipe does, so that sizing converges). */
export function axisSize(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return axis._size;
  u.ctx.font = axis.font[0];
  let widest = 0;
  for (const v of values || []) if (v !== null) widest = Math.max(widest, u.ctx.measureText(String(v)).width);
  return Math.max(40, Math.ceil(axis.ticks.size + axis.gap + widest / devicePixelRatio) + 2);
}

/**
 * One chart: `series` is a list of {label, unit: "messages"|"seconds"|"rate"}; each unit has its
 * own scale (and axis: the first on the left, a second on the right).
 */
export class Chart {
  constructor(parent, { key, caption, series, height = 130, legend = true }) {
    this.series = series;
    this.caption = caption;
    this.figure = h("figure", { class: "chart", dataset: { chart: key } });
    this.label = h("figcaption", {}, caption);
    this.plotBox = h("div", { role: "img" });
    this.figure.append(this.label, this.plotBox);
    this.figure.chart = this; // for the page's tests: the plot's scales as drawn
    parent.append(this.figure);
    const units = [...new Set(series.map((s) => s.unit))];
    const axes = [
      {
        stroke: "#4a5560",
        grid: { stroke: "#eaeef2" },
        ticks: { stroke: "#d0d7de" },
        // uPlot's default asks 50 px between time ticks, less than its own "4:20:05pm" labels take:
        // they ran into each other under the commit-rhythm chart
        space: TIME_TICK_SPACE,
        values: timeLabels,
      },
    ];
    units.forEach((unit, i) => {
      axes.push({
        scale: unit,
        side: i === 0 ? 3 : 1,
        // as wide as its widest label: a fixed 58 px cut "1 min 50 s" on the seconds axis
        size: axisSize,
        stroke: COLORS[unit],
        grid: { show: i === 0, stroke: "#eaeef2" },
        ticks: { stroke: "#d0d7de" },
        values: (u, ticks) => ticks.map((v) => (unit === "seconds" ? fmtDuration(v) : fmtInt(v))),
      });
    });
    const scales = { x: { time: true, range: timeRange } };
    for (const unit of units) scales[unit] = { auto: true, range: (u, lo, hi) => [0, Math.max(1, hi * 1.05)] };
    this.plot = new globalThis.uPlot(
      {
        width: width(this.figure),
        height,
        scales,
        axes,
        legend: { show: legend, live: true },
        cursor: { drag: { x: false, y: false } },
        series: [
          { value: (u, v) => (v === null ? "—" : new Date(v * 1000).toLocaleTimeString("sv-SE")) },
          ...series.map((s) => ({
            label: s.label,
            scale: s.unit,
            stroke: COLORS[s.unit],
            width: 1.5,
            dash: s.unit === "seconds" ? [5, 3] : undefined,
            spanGaps: false,
            points: { show: false },
            value: (u, v) => (v === null || v === undefined ? "—" : s.unit === "seconds" ? fmtDuration(v) : fmtInt(v)),
          })),
        ],
      },
      [[], ...series.map(() => [])],
      this.plotBox,
    );
    this.resize = new ResizeObserver(() => this.plot.setSize({ width: width(this.figure), height }));
    this.resize.observe(this.figure);
  }

  /** New data: times in ms, then one array per series (null: unknown). */
  update(timesMs, ...values) {
    this.plot.setData([timesMs.map((t) => t / 1000), ...values]);
    const words = this.series.map((s, i) => {
      const v = last(values[i] || []);
      const text = v === null ? "unknown" : s.unit === "seconds" ? fmtDuration(v) : fmtInt(v);
      return `${s.label} now ${text}`;
    });
    const points = timesMs.length;
    this.plotBox.setAttribute("aria-label", `${this.caption}: ${points} points; ${words.join(", ")}`);
    this.figure.dataset.points = String(points);
  }

  remove() {
    this.resize.disconnect();
    this.plot.destroy();
    this.figure.remove();
  }
}
