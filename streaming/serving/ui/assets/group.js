// One group's page: GET /groups/{id} (the coordinator's view: header, members, offsets, rhythm,
// abandoned offsets, share and streams state), /groups/{id}/lag (lag now, per partition, and the
// catch-up estimate when the mirror makes one), /groups/{id}/history (the charts),
// /groups/{id}/timeline and Burrow's /v3/kafka/{cluster}/consumer/{id}/lag -- refreshed at the lag
// interval, so that a commit or a rebalance shows without a reload.
import { Chart } from "./charts.js";
import {
  ApiError,
  ago,
  apiUrl,
  cell,
  cluster,
  config,
  describeError,
  fill,
  fmt,
  fmtDuration,
  fmtInt,
  fmtSeconds,
  getJson,
  groupPath,
  h,
  pageParams,
  poll,
  refreshSeconds,
  showError,
  timeEl,
} from "./common.js";

const groupId = pageParams.get("id");
const $ = (id) => document.getElementById(id);
const charts = { group: null, partitions: new Map(), rhythm: null };
let cfg = null;
let latest = null;

/** GET, keeping a 404's body (why a part has nothing for this group) instead of throwing. */
async function maybe(path) {
  try {
    return { ok: true, body: await getJson(path) };
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return { ok: false, body: e.body };
    throw e;
  }
}

function tp(topic, partition) {
  return `${topic}\u0000${partition}`;
}

function dl(items) {
  return h(
    "dl",
    {},
    items
      .filter((x) => x)
      .map(([term, value, field, raw]) =>
        h(
          "div",
          { dataset: field ? { field, value: JSON.stringify(raw === undefined ? null : raw) } : {} },
          h("dt", {}, term),
          h("dd", {}, value),
        ),
      ),
  );
}

function badge(status) {
  return status ? h("span", { class: `badge ${status}` }, status) : "—";
}

function assignmentText(assignment) {
  if (!assignment || assignment.length === 0) return "—";
  return assignment.map((a) => `${a.topic}: ${a.partitions.join(", ")}`).join("; ");
}

function tasksText(tasks) {
  if (!tasks || tasks.length === 0) return "—";
  return tasks.map(([subtopology, partitions]) => `${subtopology}: ${partitions.join(", ")}`).join("; ");
}

// ---------------------------------------------------------------------------------------- header
function renderHeader(snap, lag, burrow) {
  document.title = `${groupId} - coordinator-mirror`;
  $("title").textContent = groupId;
  const modern = ["consumer", "share", "streams"].includes(snap.kind);
  const timing = snap.rebalance_timing;
  const since = timing && timing.in_progress_since_ms;
  const lastRebalance = timing && timing.last;
  const epoch = modern
    ? h("span", {}, `group epoch ${fmt(snap.group_epoch)} / target assignment epoch ${fmt(snap.assignment_epoch)}`)
    : h("span", {}, `generation ${fmt(snap.generation)}`);
  const rebalancing = since
    ? h("span", { class: "badge WARN", dataset: { since: String(since) } }, `rebalancing for ${fmtDuration((Date.now() - since) / 1000)}`)
    : lastRebalance && lastRebalance.duration_ms !== null
      ? h("span", {}, `last took ${fmtMs(lastRebalance.duration_ms)}, `, timeEl(lastRebalance.stable_ms))
      : lastRebalance
        ? h("span", {}, "last ended ", timeEl(lastRebalance.stable_ms), " (its start is not in the log)")
        : "—";
  const status = burrow && burrow.ok ? burrow.body.status.status : null;
  const banners = [];
  if (snap.exists === false) {
    banners.push(h("p", { class: "error" }, "The coordinator no longer lists this group: ", JSON.stringify(snap.exists_reason || {})));
  }
  if (snap.quarantine) {
    banners.push(h("p", { class: "error" }, `Quarantined: the mirror could not fold its records (${snap.quarantine.error_type || "error"}); it shows the last good state.`));
  }
  fill(
    $("header"),
    banners,
    dl([
      ["Cluster", cluster || cfg.cluster, "cluster", cluster || cfg.cluster],
      ["Kind", `${fmt(snap.kind)} (${fmt(snap.type)})`, "kind", snap.kind],
      ["Protocol", `${fmt(snap.protocol_type)}${snap.protocol ? ` / ${snap.protocol}` : ""}${snap.assignor ? `, assignor ${snap.assignor}` : ""}`, "protocol", snap.protocol],
      ["State", h("span", {}, fmt(snap.state), snap.state_since_ms ? h("span", { class: "notice" }, ` since ${ago(snap.state_since_ms)}`) : ""), "state", snap.state],
      [modern ? "Epochs" : "Generation", epoch, modern ? "group_epoch" : "generation", modern ? snap.group_epoch : snap.generation],
      ["Rebalance", rebalancing, "rebalance_in_progress_since_ms", since || null],
      lastRebalance ? ["Last rebalance's phases", phasesEl(Object.entries(lastRebalance.phases_ms || {}).filter(([name]) => name !== "total"), lastRebalance.generation), "rebalance_last", lastRebalance] : null,
      ["Members", fmtInt((snap.members || []).length), "members", (snap.members || []).length],
      !modern && snap.leader ? ["Leader", h("span", { class: "mono" }, snap.leader), "leader", snap.leader] : null,
      ["Consumer status (Burrow)", badge(status), "consumer_status", status],
      ["Created", timeEl(snap.created_ms), "created_ms", snap.created_ms],
      ["Last change", timeEl(snap.last_change_ms), "last_change_ms", snap.last_change_ms],
    ]),
  );
}

// --------------------------------------------------------------------------------------------- lag
function groupTotals(lag) {
  const rows = (lag.partitions || []).filter((p) => !p.abandoned);
  const lags = rows.map((p) => p.lag).filter((v) => v !== null);
  const secs = rows.map((p) => p.lag_seconds).filter((v) => v !== null);
  return {
    lag: lags.length ? lags.reduce((a, b) => a + b, 0) : null,
    seconds: secs.length ? Math.max(...secs) : null,
  };
}

function catchUpText(c) {
  if (!c) return "not available (the mirror does not estimate it)";
  const words = { caught_up: "caught up", catching_up: "catching up", falling_behind: "falling behind", unknown: "unknown" };
  const parts = [words[c.state] || c.state];
  // "in about" only while catching up: caught up says 0 s, which reads as a countdown
  if (c.state === "catching_up" && c.seconds !== null && c.seconds !== undefined) parts.push(`in about ${fmtDuration(c.seconds)}`);
  if (c.consume_rate !== null && c.consume_rate !== undefined) parts.push(`consuming ${fmtInt(Math.round(c.consume_rate))}/s`);
  if (c.produce_rate !== null && c.produce_rate !== undefined) parts.push(`producing ${fmtInt(Math.round(c.produce_rate))}/s`);
  return parts.join(", ");
}

function trendText(trend) {
  if (!trend || trend.lag_per_second === null || trend.lag_per_second === undefined) return "not enough points yet";
  const v = trend.lag_per_second;
  const window = fmtDuration(trend.window_s);
  if (Math.abs(v) < 0.05) return `steady over the last ${window}`;
  return `${v > 0 ? "+" : ""}${v.toFixed(1)} messages/s over the last ${window} (${v > 0 ? "falling behind" : "catching up"})`;
}

/** Whether the lag history holds a point (a group held but not measured yet answers none). */
function measured(history) {
  return history.ok && history.body.times_ms.length > 0;
}

function renderLag(lag, history) {
  const box = $("lag-figures");
  if (!lag.ok) {
    const why = lag.body && (lag.body.message || lag.body.error);
    fill(box, h("p", { class: "notice", dataset: { field: "lag_unavailable" } }, `Lag not available${why ? `: ${why}` : ""}.`));
  } else {
    const body = lag.body;
    const totals = groupTotals(body);
    fill(
      box,
      dl([
        ["Lag now (messages)", fmtInt(totals.lag), "lag", totals.lag],
        ["Lag now (seconds)", fmtSeconds(totals.seconds), "lag_seconds", totals.seconds],
        ["Measured", timeEl(body.sampled_at_ms), "sampled_at_ms", body.sampled_at_ms],
        ["Trend", measured(history) ? trendText(history.body.trend) : "no history", "trend", measured(history) ? history.body.trend.lag_per_second : null],
        ["Time to catch up", catchUpText(body.catch_up), "catch_up", body.catch_up === undefined ? null : body.catch_up],
        body.deleted_topics && body.deleted_topics.length ? ["Deleted topics", body.deleted_topics.join(", "), "deleted_topics", body.deleted_topics] : null,
        body.denied_topics && body.denied_topics.length ? ["Topics not readable (ACL)", body.denied_topics.join(", "), "denied_topics", body.denied_topics] : null,
      ]),
    );
  }
  const parent = $("group-charts");
  if (!measured(history)) {
    if (charts.group) {
      charts.group.remove();
      charts.group = null;
    }
    if (!parent.querySelector(".notice")) fill(parent, h("p", { class: "notice" }, "No lag history for this group (yet)."));
    return;
  }
  const data = history.body;
  if (!charts.group) {
    fill(parent);
    const minutes = Math.round(data.horizon_s / 60);
    charts.group = new Chart(parent, {
      key: "group",
      caption: `The group's lag, last ${minutes} minutes (every lag round for ${Math.round(data.full_resolution_s / 60)} min, one point a minute before)`,
      series: [
        { label: "messages", unit: "messages" },
        { label: "seconds", unit: "seconds" },
      ],
      height: 180,
    });
  }
  charts.group.update(data.times_ms, data.lag, data.lag_seconds);
  renderPartitionCharts(data);
}

function renderPartitionCharts(data) {
  const parent = $("partition-charts");
  const seen = new Set();
  for (const p of data.partitions) {
    const key = tp(p.topic, p.partition);
    seen.add(key);
    let chart = charts.partitions.get(key);
    if (!chart) {
      chart = new Chart(parent, {
        key: `${p.topic}-${p.partition}`,
        caption: `${p.topic} / ${p.partition}${p.abandoned ? " (abandoned)" : ""}`,
        series: [
          { label: "messages", unit: "messages" },
          { label: "seconds", unit: "seconds" },
        ],
        height: 110,
        legend: false,
      });
      charts.partitions.set(key, chart);
    }
    chart.update(data.times_ms, p.lag, p.lag_seconds);
  }
  for (const [key, chart] of charts.partitions) {
    if (!seen.has(key)) {
      chart.remove();
      charts.partitions.delete(key);
    }
  }
}

// ------------------------------------------------------------------------------------- partitions
function renderPartitions(snap, lag, burrow) {
  const offsets = new Map((snap.offsets || []).map((o) => [tp(o.topic, o.partition), o]));
  const statuses = new Map();
  if (burrow && burrow.ok) for (const p of burrow.body.status.partitions || []) statuses.set(tp(p.topic, p.partition), p.status);
  const rows = lag.ok
    ? lag.body.partitions
    : (snap.offsets || []).map((o) => ({ topic: o.topic, partition: o.partition, committed_offset: o.offset }));
  if (rows.length === 0) {
    fill($("partitions-table"), h("p", { class: "notice" }, "No committed offsets and no assigned partitions."));
    return;
  }
  const head = ["Topic", "Partition", "Committed offset", "Log end", "Lag (messages)", "Lag (seconds)", "Owner", "Consumer status", "Last commit", "Trails the newest commit by", "Time to catch up", "Notes"];
  const table = h(
    "table",
    { class: "data", id: "partitions-rows" },
    h("caption", { class: "visually-hidden" }, "Each partition the group commits to or is assigned"),
    h("thead", {}, h("tr", {}, head.map((t, i) => h("th", { scope: "col", class: i >= 1 && i <= 5 ? "num" : undefined }, t)))),
    h(
      "tbody",
      {},
      rows.map((p) => {
        const o = offsets.get(tp(p.topic, p.partition)) || {};
        const status = statuses.has(tp(p.topic, p.partition)) ? statuses.get(tp(p.topic, p.partition)) : null;
        const owner = p.client_id && p.client_id !== "unknown" ? `${p.client_id} @ ${p.member_host}` : "—";
        const notes = [p.abandoned ? "abandoned topic" : null, p.topic_deleted ? "topic deleted" : null].filter(Boolean).join(", ");
        return h(
          "tr",
          { dataset: { topic: p.topic, partition: String(p.partition) } },
          cell("topic", p.topic, undefined, "id"),
          cell("partition", p.partition, undefined, "num"),
          cell("committed_offset", p.committed_offset, fmtInt(p.committed_offset), "num"),
          cell("end_offset", p.end_offset === undefined ? null : p.end_offset, fmtInt(p.end_offset), "num"),
          cell("lag", p.lag === undefined ? null : p.lag, fmtInt(p.lag), "num"),
          cell("lag_seconds", p.lag_seconds === undefined ? null : p.lag_seconds, fmtSeconds(p.lag_seconds), "num"),
          cell("client_id", p.client_id === undefined ? null : p.client_id, owner),
          cell("status", status, badge(status)),
          cell("commit_timestamp_ms", o.commit_timestamp_ms ?? null, timeEl(o.commit_timestamp_ms)),
          cell("commit_trails_ms", o.commit_trails_ms ?? null, o.commit_trails_ms === null || o.commit_trails_ms === undefined ? "—" : fmtDuration(o.commit_trails_ms / 1000)),
          cell("catch_up", p.catch_up === undefined ? null : p.catch_up, p.catch_up ? catchUpText(p.catch_up) : "not available"),
          cell("notes", notes || null, notes || "—"),
        );
      }),
    ),
  );
  fill($("partitions-table"), table);
}

// ---------------------------------------------------------------------------------------- members
function renderMembers(snap, lag) {
  const members = snap.members || [];
  if (members.length === 0) {
    fill($("members-table"), h("p", { class: "notice" }, "No members (the group is empty)."));
    return;
  }
  const lagOf = new Map();
  if (lag.ok) {
    for (const p of lag.body.partitions) {
      if (p.lag === null || p.abandoned) continue;
      lagOf.set(p.consumer_id, (lagOf.get(p.consumer_id) || 0) + p.lag);
    }
  }
  const streams = snap.kind === "streams";
  const modern = ["consumer", "share", "streams"].includes(snap.kind);
  const head = ["Member id", "Instance id", "Client id", "Host", "Rack", streams ? "Active tasks" : "Assigned partitions"];
  if (streams) head.push("Standby tasks", "Warm-up tasks");
  head.push("Lag (messages)");
  if (modern) head.push("Epoch / state");
  const table = h(
    "table",
    { class: "data", id: "members-rows" },
    h("caption", { class: "visually-hidden" }, "The group's members"),
    h("thead", {}, h("tr", {}, head.map((t) => h("th", { scope: "col" }, t)))),
    h(
      "tbody",
      {},
      members.map((m) => {
        const extra = m.extra || {};
        const cells = [
          cell("member_id", m.member_id, undefined, "id mono"),
          cell("instance_id", m.instance_id),
          cell("client_id", m.client_id, undefined, "id"),
          cell("client_host", m.client_host, undefined, "id"),
          cell("rack_id", m.rack_id),
          cell("assignment", m.assignment, streams ? assignmentText(m.assignment) : assignmentText(m.assignment)),
        ];
        if (streams) {
          cells.push(cell("standby_tasks", extra.standby_tasks ?? null, tasksText(extra.standby_tasks)));
          cells.push(cell("warmup_tasks", extra.warmup_tasks ?? null, tasksText(extra.warmup_tasks)));
        }
        const memberLag = lagOf.has(m.member_id) ? lagOf.get(m.member_id) : null;
        cells.push(cell("lag", memberLag, fmtInt(memberLag), "num"));
        if (modern) cells.push(cell("member_epoch", m.member_epoch, `${fmt(m.member_epoch)} / ${fmt(m.member_state)}`));
        return h("tr", { dataset: { memberId: m.member_id } }, cells);
      }),
    ),
  );
  fill($("members-table"), table);
}

// --------------------------------------------------------------------------------------- timeline
const STOPPED = new Set(["ERR", "STOP", "STALL"]);
// the Kafka states a rebalance goes through before Stable, as state/timing.py names its phases
const CLASSIC_PHASES = ["PreparingRebalance", "CompletingRebalance"];
const MODERN_PHASES = ["Assigning", "Reconciling"];

/** A duration in ms: "340 ms" under a second (rebalances on one broker take tens of ms), else as fmtDuration. */
function fmtMs(ms) {
  if (ms === null || ms === undefined) return "—";
  return Math.abs(ms) < 1000 ? `${Math.round(ms)} ms` : fmtDuration(ms / 1000);
}

/** The known phases of a timed rebalance, [Kafka state, ms] (state.timing.phases without the total). */
function rebalancePhases(kind, started, assigned, stable) {
  const [first, second] = kind === "classic" || kind === "simple" ? CLASSIC_PHASES : MODERN_PHASES;
  const known = (v) => v !== null && v !== undefined;
  const out = [];
  if (known(started) && known(assigned)) out.push([first, assigned - started]);
  if (known(assigned)) out.push([second, stable - assigned]);
  return out;
}

/** A rebalance's phases: a bar whose segments are as long as the phases, and each phase in words. */
function phasesEl(phases, generation) {
  if (phases.length === 0) return "no phase in the log";
  const total = phases.reduce((a, [, ms]) => a + Math.max(ms, 0), 0);
  return h(
    "div",
    { class: "phases", dataset: { generation: JSON.stringify(generation) } },
    h(
      "span",
      { class: "phase-bar", "aria-hidden": "true" },
      phases.map(([, ms], i) => {
        const seg = h("span", { class: `phase p${i}` });
        seg.style.flexGrow = String(total > 0 ? Math.max(ms, 0) / total : 1); // CSSOM: the CSP allows no style attribute
        return seg;
      }),
    ),
    h(
      "ul",
      { class: "phase-list" },
      phases.map(([name, ms], i) => h("li", { class: `p${i}`, dataset: { phase: name, ms: JSON.stringify(ms) } }, `${name} ${fmtMs(ms)}`)),
    ),
  );
}

function describe(e) {
  const arrow = (a, b) => `${fmt(a)} → ${fmt(b)}`;
  switch (e.type) {
    case "group_created":
      return ["Group created", e.kind ? `kind ${e.kind}` : ""];
    case "group_deleted":
      return ["Group deleted", e.reason || ""];
    case "kind_changed":
      return ["Kind changed", arrow(e.before, e.after)];
    case "state_changed":
      return ["State changed", arrow(e.before, e.after)];
    case "rebalance_completed":
      return ["Rebalance completed", `generation/epoch ${arrow(e.before, e.after)}${e.skipped ? `, ${e.skipped} skipped` : ""}`];
    case "rebalance_timed": {
      const took = e.duration_ms !== null ? `took ${fmtMs(e.duration_ms)}` : "timed";
      const start = e.started_ms === null ? "; its start is not in the log" : "";
      return [
        `Rebalance ${took}`,
        `generation/epoch ${e.generation}; ${e.members} members, ${e.joined_count} joined, ${e.left_count} left${start}`,
        phasesEl(rebalancePhases(e.kind, e.started_ms, e.assigned_ms, e.stable_ms), e.generation),
      ];
    }
    case "member_joined":
      return ["Member joined", `${fmt(e.client_id)} @ ${fmt(e.client_host)} (${e.member_id}${e.instance_id ? `, instance ${e.instance_id}` : ""})`];
    case "member_left":
      return ["Member left", `${fmt(e.client_id)} (${e.member_id}${e.instance_id ? `, instance ${e.instance_id}` : ""})`];
    case "member_replaced":
      return ["Static member replaced", `instance ${e.instance_id}: ${arrow(e.before, e.after)}`];
    case "leader_changed":
      return ["Leader changed", arrow(e.before, e.after)];
    case "protocol_changed":
      return ["Protocol changed", arrow(e.before, e.after)];
    case "assignment_changed":
      return ["Assignment changed", `${e.member_id}: +${(e.added || []).join(", ") || "nothing"}, −${(e.removed || []).join(", ") || "nothing"}`];
    case "offsets_expired":
      return [`${fmtInt(e.count)} offsets expired`, `${(e.partitions || []).join(", ")} (${e.origin})`];
    case "offsets_deleted":
      return [`${fmtInt(e.count)} offsets deleted`, (e.partitions || []).join(", ")];
    case "expiry_disagreement":
      return ["Expiry disagreement", `${e.reason}: ${(e.partitions || []).join(", ")}`];
    case "group_status_changed": {
      const what = STOPPED.has(e.after) && !STOPPED.has(e.before)
        ? "Commits stopped"
        : STOPPED.has(e.before) && !STOPPED.has(e.after)
          ? "Commits resumed"
          : "Consumer status changed";
      return [what, `consumer status ${arrow(e.before, e.after)}`];
    }
    case "partition_stalled":
      return ["Partition stalled", `${e.topic} / ${e.partition} at offset ${fmtInt(e.offset)}`];
    case "offset_rewound":
      return ["Offset rewound", `${e.topic} / ${e.partition} to ${fmtInt(e.offset)}`];
    case "group_quarantined":
      return ["Group quarantined", `${e.error_type}: ${e.message}`];
    case "group_recovered":
      return ["Group recovered", ""];
    case "reconcile_mismatch":
      return ["Coordinator disagrees", e.side];
    default: {
      const { type, ...rest } = e;
      return [type, JSON.stringify(rest)];
    }
  }
}

function eventTime(e) {
  return e.source_timestamp_ms ?? e.timestamp_ms ?? e.at_ms ?? null;
}

function renderTimeline(timeline) {
  const box = $("timeline-list");
  if (!timeline.ok) {
    fill(box, h("p", { class: "notice" }, "No timeline for this group (it keeps what happened since the mirror started)."));
    return;
  }
  const events = timeline.body.events;
  if (events.length === 0) {
    fill(box, h("p", { class: "notice" }, "Nothing happened to this group since the mirror started."));
    return;
  }
  fill(
    box,
    h("p", { class: "notice" }, `The newest ${fmtInt(events.length)} change events (at most ${fmtInt(timeline.body.kept)} kept), newest first.`),
    h(
      "ol",
      { class: "timeline", id: "timeline-events" },
      events.map((e) => {
        const [what, detail, extra] = describe(e);
        return h(
          "li",
          { dataset: { type: e.type, time: JSON.stringify(eventTime(e)), durationMs: e.duration_ms === undefined ? undefined : JSON.stringify(e.duration_ms), generation: e.generation === undefined ? undefined : JSON.stringify(e.generation) } },
          timeEl(eventTime(e), false),
          h("div", {}, h("span", { class: "what" }, what), detail ? h("div", { class: "detail" }, detail) : null, extra || null),
        );
      }),
    ),
  );
}

// ---------------------------------------------------------------------------------- commit rhythm
function renderRhythm(snap) {
  const box = $("rhythm-body");
  const window = snap.commit_window || [];
  const rate = snap.commits_per_second;
  const figures = dl([
    ["Commits a second (as of the last commit)", rate === null || rate === undefined ? "—" : rate.toFixed(2), "commits_per_second", rate ?? null],
    ["Last commit", timeEl(window.length ? window[window.length - 1][0] : null), "last_commit_ms", window.length ? window[window.length - 1][0] : null],
    ["Partitions committed", fmtInt((snap.offsets || []).length), "offsets", (snap.offsets || []).length],
  ]);
  if (!charts.rhythm) {
    fill(box, figures, h("div", { class: "charts", id: "rhythm-chart" }));
    charts.rhythm = new Chart($("rhythm-chart"), {
      key: "rhythm",
      caption: "Commits a second between the points of the commit window (one point per 5 s of record time in which the group committed)",
      series: [{ label: "commits/s", unit: "rate" }],
      height: 120,
    });
  } else {
    box.replaceChild(figures, box.firstChild);
  }
  const times = [];
  const rates = [];
  for (let i = 1; i < window.length; i++) {
    const [t0, c0] = window[i - 1];
    const [t1, c1] = window[i];
    times.push(t1);
    rates.push(t1 > t0 ? ((c1 - c0) * 1000) / (t1 - t0) : null);
  }
  charts.rhythm.update(times, rates);
}

// ------------------------------------------------------------------------------- abandoned offsets
function renderAbandoned(snap) {
  const box = $("abandoned-body");
  const topics = Object.entries(snap.abandoned_topics || {});
  if (topics.length === 0) {
    fill(box, h("p", { class: "notice" }, "None: every topic the group committed to is still subscribed to."));
    return;
  }
  fill(
    box,
    h("p", { class: "notice" }, "Topics no member subscribes to any more: the broker deletes their offsets when the countdown ends (retention after the last commit)."),
    h(
      "table",
      { class: "data", id: "abandoned-rows" },
      h("caption", { class: "visually-hidden" }, "Abandoned offsets and when the broker deletes them"),
      h("thead", {}, h("tr", {}, ["Topic", "Partitions", "Deleted at", "Countdown"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        topics.map(([topic, a]) =>
          h(
            "tr",
            { dataset: { topic } },
            cell("topic", topic, undefined, "id"),
            cell("partitions", a.partitions, a.partitions.join(", ")),
            cell("expires_at_ms", a.expires_at_ms, timeEl(a.expires_at_ms, false)),
            h("td", { class: "countdown", dataset: { expires: String(a.expires_at_ms ?? "") } }, countdown(a.expires_at_ms)),
          ),
        ),
      ),
    ),
  );
}

function countdown(ms) {
  if (ms === null || ms === undefined) return "not counting down";
  const left = (ms - Date.now()) / 1000;
  return left > 0 ? `in ${fmtDuration(left)}` : "due now";
}

/** Countdowns and "rebalancing for" tick every second between two refreshes. */
function tick() {
  for (const td of document.querySelectorAll("td.countdown")) {
    const ms = td.dataset.expires ? Number(td.dataset.expires) : null;
    td.textContent = countdown(ms);
  }
  const since = document.querySelector("[data-since]");
  if (since) since.textContent = `rebalancing for ${fmtDuration((Date.now() - Number(since.dataset.since)) / 1000)}`;
}

// ---------------------------------------------------------------------------------- share, streams
/** A wide table in a region that scrolls sideways (focusable, named by its section's heading). */
function scrolling(headingId, ...table) {
  return h("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-labelledby": headingId }, h(...table));
}

function renderShare(snap) {
  const section = $("share");
  const share = snap.share_state;
  section.hidden = snap.kind !== "share";
  if (section.hidden) return;
  if (!share) {
    fill($("share-body"), h("p", { class: "notice" }, "No delivery state read (yet): the mirror reads __share_group_state once it exists."));
    return;
  }
  const cols = [
    ["start_offset", "Start offset"],
    ["end_offset", "Log end"],
    ["lag", "Lag"],
    ["in_flight", "In flight"],
    ["available", "Available"],
    ["acknowledged", "Acknowledged"],
    ["archived", "Archived"],
    ["delivery_attempts", "Delivery attempts"],
    ["max_delivery_count", "Highest delivery count"],
  ];
  fill(
    $("share-body"),
    dl([["Lag (messages)", fmtInt(share.lag), "share_lag", share.lag]]),
    scrolling(
      "share-h",
      "table",
      { class: "data", id: "share-rows" },
      h("caption", { class: "visually-hidden" }, "Each share-partition's delivery state"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Topic"), h("th", { scope: "col" }, "Partition"), cols.map(([, t]) => h("th", { scope: "col", class: "num" }, t)), h("th", { scope: "col" }, "State batches"))),
      h(
        "tbody",
        {},
        share.partitions.map((p) =>
          h(
            "tr",
            { dataset: { topic: p.topic, partition: String(p.partition) } },
            cell("topic", p.topic, undefined, "id"),
            cell("partition", p.partition),
            cols.map(([field]) => cell(field, p[field] ?? null, fmtInt(p[field]), "num")),
            h(
              "td",
              {},
              p.state_batches.length
                ? h(
                    "details",
                    {},
                    h("summary", {}, `${p.state_batches.length} batches`),
                    h("ul", { class: "plain" }, p.state_batches.map((b) => h("li", {}, `${fmtInt(b.first_offset)}–${fmtInt(b.last_offset)}: ${b.delivery_state}, delivered ${b.delivery_count}×`))),
                  )
                : "—",
            ),
          ),
        ),
      ),
    ),
  );
}

function renderStreams(snap) {
  const section = $("streams");
  section.hidden = snap.kind !== "streams";
  if (section.hidden) return;
  const topology = snap.topology;
  const members = snap.members || [];
  fill(
    $("streams-body"),
    dl([
      ["Topology epoch", fmt(snap.topology_epoch), "topology_epoch", snap.topology_epoch],
      ["Validated topology epoch", fmt(snap.validated_topology_epoch), "validated_topology_epoch", snap.validated_topology_epoch],
      ["Subtopologies", topology ? topology.subtopologies.join(", ") || "—" : "no topology in the log yet", "subtopologies", topology ? topology.subtopologies : null],
      ["Source topics", topology ? topology.source_topics.join(", ") || "—" : "—", "source_topics", topology ? topology.source_topics : null],
    ]),
    scrolling(
      "streams-h",
      "table",
      { class: "data", id: "tasks-rows" },
      h("caption", { class: "visually-hidden" }, "Each member's tasks by subtopology"),
      h("thead", {}, h("tr", {}, ["Member", "Process", "Active tasks", "Standby tasks", "Warm-up tasks"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        members.map((m) => {
          const extra = m.extra || {};
          return h(
            "tr",
            { dataset: { memberId: m.member_id } },
            cell("client_id", m.client_id, `${fmt(m.client_id)} (${m.member_id})`, "id"),
            cell("process_id", extra.process_id ?? null),
            cell("active_tasks", m.assignment, assignmentText(m.assignment)),
            cell("standby_tasks", extra.standby_tasks ?? null, tasksText(extra.standby_tasks)),
            cell("warmup_tasks", extra.warmup_tasks ?? null, tasksText(extra.warmup_tasks)),
          );
        }),
      ),
    ),
  );
}

// ---------------------------------------------------------------------------------------- links
function renderLinks(groupCluster) {
  const items = [];
  if (cfg.grafana_url && cfg.grafana_dashboards) {
    for (const [name, uid] of Object.entries(cfg.grafana_dashboards)) {
      const url = new URL(`${cfg.grafana_url}/d/${encodeURIComponent(uid)}`);
      url.searchParams.set("var-cluster", groupCluster);
      url.searchParams.set("var-group", groupId);
      items.push(h("li", {}, h("a", { href: url.toString(), rel: "noopener noreferrer", dataset: { link: `grafana-${name}` } }, `Grafana: the ${name} dashboard`)));
    }
  } else {
    items.push(h("li", { class: "notice" }, "Grafana: no base URL configured (setting grafana_url)."));
  }
  const api = [
    ["the group (JSON)", groupPath(groupId)],
    ["its lag (JSON)", groupPath(groupId, "/lag")],
    ["its change events (JSON timeline)", groupPath(groupId, "/timeline")],
    ["its lag history (JSON)", groupPath(groupId, "/history")],
    ["Burrow's status (JSON)", `v3/kafka/${encodeURIComponent(groupCluster)}/consumer/${encodeURIComponent(groupId)}/lag`],
  ];
  for (const [text, path] of api) items.push(h("li", {}, h("a", { href: apiUrl(path).toString() }, `API: ${text}`)));
  fill($("links-list"), items);
}

// ------------------------------------------------------------------------------------------- load
async function load() {
  const groupCluster = cluster || cfg.cluster;
  const burrowPath = `v3/kafka/${encodeURIComponent(groupCluster)}/consumer/${encodeURIComponent(groupId)}/lag`;
  const [snap, lag, timeline, history, burrow] = await Promise.all([
    maybe(groupPath(groupId)),
    maybe(groupPath(groupId, "/lag")),
    maybe(groupPath(groupId, "/timeline")),
    maybe(groupPath(groupId, "/history")),
    cfg.lag_interval_s ? maybe(burrowPath) : Promise.resolve(null),
  ]);
  if (!snap.ok) {
    showError(`The mirror holds no group ${JSON.stringify(groupId)}${snap.body && snap.body.message ? `: ${snap.body.message}` : ""}.`);
    return;
  }
  showError(null);
  latest = { snap: snap.body, lag, timeline, history, burrow };
  renderHeader(snap.body, lag, burrow);
  renderLag(lag, history);
  renderPartitions(snap.body, lag, burrow);
  renderMembers(snap.body, lag);
  renderTimeline(timeline);
  renderRhythm(snap.body);
  renderAbandoned(snap.body);
  renderShare(snap.body);
  renderStreams(snap.body);
  renderLinks(groupCluster);
  document.body.dataset.loaded = String((Number(document.body.dataset.loaded) || 0) + 1);
}

async function main() {
  const back = new URL("groups", location.href);
  if (cluster) back.searchParams.set("cluster", cluster);
  $("crumb-groups").href = back.toString();
  $("back").href = back.toString();
  if (!groupId) {
    showError("No group given: open this page as group?id=<group id>.");
    return;
  }
  $("title").textContent = groupId;
  cfg = await config();
  poll(load, refreshSeconds(cfg));
  setInterval(tick, 1000);
}

main().catch((e) => showError(describeError(e)));

