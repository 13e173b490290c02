// The groups list: GET /groups with the filters, sort and page the form and the URL hold (the
// server filters, sorts and pages, so 100k groups cost the browser one page), refreshed at the
// lag interval.  The URL keeps the state: a filtered, sorted page can be bookmarked and shared.
import {
  cell,
  config,
  fill,
  fmtInt,
  getJson,
  groupPageUrl,
  h,
  pageParams,
  poll,
  refreshSeconds,
  showError,
  timeEl,
} from "./common.js";

const form = document.getElementById("filters");
const table = document.getElementById("groups");
const tbody = table.querySelector("tbody");
const summary = document.getElementById("summary");
const prev = document.getElementById("prev");
const next = document.getElementById("next");
const pageLabel = document.getElementById("page");

const FILTERS = ["q", "cluster", "kind", "state", "consumer_status", "min_lag"];
const DESCENDING_FIRST = new Set(["members", "lag", "lag_seconds", "consumer_status", "last_rebalance_ms"]);

/** The list's state: filters, sort, order, offset, limit (from the URL at first). */
const view = {
  sort: pageParams.get("sort") || "group_id",
  order: pageParams.get("order") === "desc" ? "desc" : "asc",
  offset: Math.max(0, parseInt(pageParams.get("offset") || "0", 10) || 0),
  limit: parseInt(pageParams.get("limit") || "50", 10) || 50,
  filters: Object.fromEntries(FILTERS.map((name) => [name, pageParams.get(name) || ""])),
};
let total = 0;

function syncForm() {
  for (const name of FILTERS) form.elements[name].value = view.filters[name];
  form.elements.limit.value = String(view.limit);
}

function readForm() {
  for (const name of FILTERS) view.filters[name] = form.elements[name].value.trim();
  view.limit = parseInt(form.elements.limit.value, 10) || 50;
}

function query() {
  return { ...view.filters, sort: view.sort, order: view.order, offset: view.offset, limit: view.limit };
}

/** The URL shows the state (replaceState: the back button leaves the list, it does not page). */
function syncUrl() {
  const url = new URL(location.href);
  url.search = "";
  for (const [name, value] of Object.entries(query())) {
    const defaults = { sort: "group_id", order: "asc", offset: 0, limit: 50 };
    if (value !== "" && value !== defaults[name]) url.searchParams.set(name, String(value));
  }
  history.replaceState(null, "", url);
}

function sortHeaders() {
  for (const th of table.querySelectorAll("th[data-sort]")) {
    const field = th.dataset.sort;
    if (!th.querySelector("button")) {
      const label = th.textContent;
      const button = h("button", { type: "button", class: "sort" }, label);
      button.addEventListener("click", () => {
        if (view.sort === field) view.order = view.order === "asc" ? "desc" : "asc";
        else {
          view.sort = field;
          view.order = DESCENDING_FIRST.has(field) ? "desc" : "asc";
        }
        view.offset = 0;
        refresh.now();
      });
      fill(th, button);
    }
    if (field === view.sort) th.setAttribute("aria-sort", view.order === "asc" ? "ascending" : "descending");
    else th.removeAttribute("aria-sort");
  }
}

function statusCell(status) {
  return cell(
    "consumer_status",
    status,
    status === null || status === undefined ? "—" : h("span", { class: `badge ${status}` }, status),
  );
}

function row(g) {
  const link = h("a", { href: groupPageUrl(g.group_id, g.cluster).toString() }, g.group_id);
  return h(
    "tr",
    { dataset: { groupId: g.group_id } },
    h("td", { class: "id", dataset: { field: "group_id", value: JSON.stringify(g.group_id) } }, link),
    cell("cluster", g.cluster),
    cell("kind", g.kind),
    cell("state", g.state, g.exists === false ? `${g.state ?? "—"} (gone)` : undefined),
    cell("members", g.members, fmtInt(g.members), "num"),
    cell("lag", g.lag, fmtInt(g.lag), "num"),
    cell("lag_seconds", g.lag_seconds, g.lag_seconds === null ? "—" : g.lag_seconds.toFixed(1), "num"),
    statusCell(g.consumer_status),
    cell("last_rebalance_ms", g.last_rebalance_ms, timeEl(g.last_rebalance_ms)),
  );
}

async function load() {
  const body = await getJson("groups", query());
  total = body.total;
  if (body.groups.length === 0 && view.offset > 0 && total > 0) {
    view.offset = Math.max(0, Math.floor((total - 1) / view.limit) * view.limit);
    return load();  // the list shrank under the page: its last page instead
  }
  showError(null);
  sortHeaders();
  syncUrl();
  fill(tbody, body.groups.map(row));
  if (body.groups.length === 0) {
    fill(tbody, h("tr", {}, h("td", { colspan: "9", class: "notice" }, "No group matches these filters.")));
  }
  const first = body.groups.length ? view.offset + 1 : 0;
  const last = view.offset + body.groups.length;
  summary.textContent = `Groups ${fmtInt(first)}–${fmtInt(last)} of ${fmtInt(total)}`;
  table.dataset.total = String(total);
  const pages = Math.max(1, Math.ceil(total / view.limit));
  pageLabel.textContent = `Page ${fmtInt(Math.floor(view.offset / view.limit) + 1)} of ${fmtInt(pages)}`;
  prev.disabled = view.offset === 0;
  next.disabled = last >= total;
}

let refresh = { now() {} };

async function main() {
  const cfg = await config();
  const clusterSelect = form.elements.cluster;
  for (const name of cfg.clusters) clusterSelect.append(h("option", { value: name }, name));
  syncForm();
  let typing = null;
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    readForm();
    view.offset = 0;
    refresh.now();
  });
  form.addEventListener("change", (e) => {
    if (e.target.name === "q" || e.target.name === "min_lag") return;  // on submit or after typing
    readForm();
    view.offset = 0;
    refresh.now();
  });
  form.addEventListener("input", (e) => {
    if (e.target.name !== "q" && e.target.name !== "min_lag") return;
    clearTimeout(typing);
    typing = setTimeout(() => {
      readForm();
      view.offset = 0;
      refresh.now();
    }, 300);
  });
  form.addEventListener("reset", () => {
    setTimeout(() => {
      for (const name of FILTERS) view.filters[name] = "";
      view.offset = 0;
      syncForm();
      refresh.now();
    });
  });
  prev.addEventListener("click", () => {
    view.offset = Math.max(0, view.offset - view.limit);
    refresh.now();
  });
  next.addEventListener("click", () => {
    if (view.offset + view.limit < total) view.offset += view.limit;
    refresh.now();
  });
  refresh = poll(load, refreshSeconds(cfg));
}

main().catch((e) => showError(`The page could not start: ${e.message || e}`));
