// What both pages share: the API's URLs (relative to the page, with the page's `cluster` passed
// on to every call), JSON fetching, DOM building that only ever makes text nodes, number and time
// formats, and the poller that keeps a page live.  No value from the API is ever parsed as HTML.

export const pageParams = new URLSearchParams(location.search);
/** The cluster the page was opened for (issue 35: several clusters); passed to every API call. */
export const cluster = pageParams.get("cluster") || null;

/** The API's URL for `path` (relative to the mirror's root) with `query` and the page's cluster. */
export function apiUrl(path, query = {}) {
  const url = new URL("../" + path.replace(/^\//, ""), location.href);
  for (const [name, value] of Object.entries(query)) {
    for (const v of Array.isArray(value) ? value : [value]) {
      if (v !== null && v !== undefined && v !== "") url.searchParams.append(name, String(v));
    }
  }
  if (cluster !== null && !url.searchParams.has("cluster")) url.searchParams.set("cluster", cluster);
  return url;
}

/** A group's API path: `groups/<percent-encoded id><suffix>` (an id may hold "/", "%", anything). */
export function groupPath(groupId, suffix = "") {
  return "groups/" + encodeURIComponent(groupId) + suffix;
}

/** The group page's URL for a group (its id and the cluster in the query string). */
export function groupPageUrl(groupId, groupCluster = cluster) {
  const url = new URL("group", location.href);
  url.search = "";
  url.searchParams.set("id", groupId);
  if (groupCluster) url.searchParams.set("cluster", groupCluster);
  return url;
}

export class ApiError extends Error {
  constructor(status, body, url) {
    super(`${status} from ${url.pathname}`);
    this.status = status;
    this.body = body;
  }
}

/** GET a JSON document; an HTTP error becomes an ApiError carrying the status and the body. */
export async function getJson(path, query = {}) {
  const url = apiUrl(path, query);
  const response = await fetch(url, {
    headers: { Accept: "application/json" },
    credentials: "same-origin",
    cache: "no-store",
  });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) throw new ApiError(response.status, body, url);
  return body;
}

/** GET a JSON document; null when it answers 404 (a part of the API that has nothing for it). */
export async function getJsonOrNull(path, query = {}) {
  try {
    return await getJson(path, query);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}

/** An element: `attrs` set through the DOM (never as markup), children as nodes or text. */
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = String(value);
    else if (name === "dataset") {
      // an undefined entry is no attribute (assigning it would write the text "undefined")
      for (const [key, v] of Object.entries(value)) if (v !== null && v !== undefined) node.dataset[key] = v;
    }
    else if (name === "hidden") node.hidden = Boolean(value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }
}

/** Replace a container's content. */
export function fill(container, ...children) {
  container.replaceChildren();
  append(container, children);
}

/** A table cell whose data-value is the API's value itself (JSON), its text the value formatted. */
export function cell(field, value, text = undefined, cls = undefined) {
  return h(
    "td",
    { class: cls, dataset: { field, value: JSON.stringify(value === undefined ? null : value) } },
    text === undefined ? fmt(value) : text,
  );
}

const numberFormat = new Intl.NumberFormat("en-US");

export function fmt(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "number") return numberFormat.format(value);
  return String(value);
}

export function fmtInt(value) {
  return value === null || value === undefined ? "—" : numberFormat.format(value);
}

/** Seconds as "4.2 s", "3 min 20 s", "2 h 5 min", "3 d 4 h". */
export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
  const s = Math.abs(seconds);
  const sign = seconds < 0 ? "-" : "";
  if (s < 10) return `${sign}${s.toFixed(1)} s`;
  if (s < 60) return `${sign}${Math.round(s)} s`;
  if (s < 3600) return `${sign}${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${sign}${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${sign}${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

export function fmtSeconds(seconds) {
  return seconds === null || seconds === undefined ? "—" : fmtDuration(seconds);
}

/** A time (ms since the epoch) as a <time> element: local date and time, ISO in its datetime. */
export function timeEl(ms, withAgo = true) {
  if (ms === null || ms === undefined) return document.createTextNode("—");
  const d = new Date(ms);
  const text = d.toLocaleString("sv-SE", { hour12: false }).replace("T", " ");
  const node = h("time", { datetime: d.toISOString(), title: d.toISOString() }, text);
  if (withAgo) node.append(" (", ago(ms), ")");
  return node;
}

export function ago(ms, now = Date.now()) {
  const s = (now - ms) / 1000;
  return s >= 0 ? `${fmtDuration(s)} ago` : `in ${fmtDuration(-s)}`;
}

/** Show or hide the page's error banner. */
export function showError(message) {
  const box = document.getElementById("error");
  if (!box) return;
  box.hidden = !message;
  box.textContent = message || "";
}

export function describeError(e) {
  if (e instanceof ApiError) {
    if (e.status === 401) return "The mirror asks for credentials (HTTP 401): open the page with them.";
    const detail = e.body && (e.body.message || e.body.error);
    return `The mirror answered ${e.status}${detail ? `: ${detail}` : ""}.`;
  }
  return `The mirror did not answer (${e && e.message ? e.message : e}); showing the last figures.`;
}

/**
 * Run `refresh` now and then every `seconds` (after the previous run finished), paused while the
 * page is hidden; the status line says when the figures were last updated.
 */
export function poll(refresh, seconds) {
  const live = document.getElementById("live");
  let timer = null;
  let running = false;
  let again = false;
  async function tick() {
    timer = null;
    if (document.hidden) return;
    running = true;
    try {
      await refresh();
      if (live) live.textContent = `updated ${new Date().toLocaleTimeString("sv-SE")}, every ${seconds} s`;
    } catch (e) {
      showError(describeError(e));
      if (live) live.textContent = "not updated";
    } finally {
      running = false;
      if (again) {
        again = false;
        tick();
      } else if (!document.hidden) {
        timer = setTimeout(tick, seconds * 1000);
      }
    }
  }
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && timer === null && !running) tick();
  });
  tick();
  return {
    /** Refresh now (after the one running, if one is). */
    now() {
      if (timer !== null) clearTimeout(timer);
      timer = null;
      if (running) again = true;
      else tick();
    },
  };
}

/** The UI's settings (`GET /ui/config`), fetched once. */
let configPromise = null;
export function config() {
  if (configPromise === null) configPromise = getJson("ui/config");
  return configPromise;
}

/** Seconds between two refreshes: the lag interval (what changes the figures), 1 s at least. */
export function refreshSeconds(cfg) {
  const s = cfg && cfg.lag_interval_s;
  return s ? Math.max(1, s) : 10;
}
