// SPDX-License-Identifier: MIT
// fiberctl web's page script: polls the JSON API of client/web-api.c once a second and
// draws what fiberd says. Every request carries the cookie fiberctl set; a change
// (cancel, retry) is a POST, which the server takes only from this page's origin. Text
// from fiberd goes into the page as text (textContent), never as markup.
"use strict";

const STATES = ["queued", "running", "done", "failed", "cancelled", "scheduled", "waiting",
                "retrying", "dead"];
const CANCELLABLE = new Set(["queued", "running", "scheduled", "waiting", "retrying"]);
const RETRYABLE = new Set(["dead", "failed", "cancelled"]);
const POINTS = 60;          // the throughput graph's seconds
const SLOW_EVERY = 5;       // histograms and schedules: every 5th tick

const $ = (id) => document.getElementById(id);
let charts = {}, selected = null, tick = 0, last = null, finishedSeen = 0;

async function api(path, method) {
  const r = await fetch("/api/" + path, {method: method || "GET", credentials: "same-origin",
                                         cache: "no-store"});
  const text = await r.text();
  if (!r.ok) {
    let msg = text;
    try { msg = JSON.parse(text).error.message; } catch (e) { /* not JSON */ }
    throw new Error(msg || r.statusText);
  }
  return r.headers.get("Content-Type").startsWith("application/json") ? JSON.parse(text) : text;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

const fmtTime = (ms) => ms ? new Date(ms).toLocaleString() : "–";
function fmtDur(ns) {
  if (ns === null || ns === undefined) return "–";
  if (ns < 1e3) return ns + " ns";
  if (ns < 1e6) return (ns / 1e3).toFixed(ns < 1e4 ? 1 : 0) + " µs";
  if (ns < 1e9) return (ns / 1e6).toFixed(ns < 1e7 ? 1 : 0) + " ms";
  return (ns / 1e9).toFixed(1) + " s";
}
function ran(job) {
  if (!job.started_ms) return "–";
  const ms = (job.finished_ms || Date.now()) - job.started_ms;
  return ms < 1 ? "< 1 ms" : fmtDur(ms * 1e6);   // the record has ms
}
function showError(e) {
  $("error").hidden = !e;
  $("error").textContent = e ? String(e.message || e) : "";
  $("conn").className = "dot " + (e ? "down" : "live");
}

// ------------------------------------------------------------------ charts ----------
function cssVar(name) { return getComputedStyle(document.body).getPropertyValue(name).trim(); }
const PALETTE = ["#2f6fdf", "#2e9d5b", "#c98a10", "#d0443e", "#8a5cd0", "#1b9aaa", "#7a7f87"];

function makeCharts() {
  if (typeof Chart === "undefined") { $("nocharts").hidden = false; return; }
  Chart.defaults.animation = false;
  Chart.defaults.color = cssVar("--muted");
  Chart.defaults.borderColor = cssVar("--line");
  Chart.defaults.maintainAspectRatio = false;
  charts.throughput = new Chart($("throughput"), {
    type: "line",
    data: {labels: [], datasets: [{label: "jobs/s", data: [], borderColor: PALETTE[0],
                                   backgroundColor: PALETTE[0] + "33", fill: true,
                                   pointRadius: 0, tension: 0.25}]},
    options: {plugins: {legend: {display: false}},
              scales: {y: {beginAtZero: true, suggestedMax: 1}, x: {ticks: {maxTicksLimit: 7}}}},
  });
  charts.byClass = new Chart($("latency-class"), {
    type: "bar", data: {labels: [], datasets: []},
    options: {scales: {y: {beginAtZero: true, title: {display: true, text: "jobs"}}}},
  });
  charts.byGroup = new Chart($("latency-group"), {
    type: "bar", data: {labels: [], datasets: []},
    options: {scales: {y: {beginAtZero: true}}},
  });
}

// One second's throughput: finished jobs (done + failed + cancelled since start-up).
function pushThroughput(stats) {
  const j = stats.jobs, now = Date.now();
  const finished = (j.done || 0) + (j.failed || 0) + (j.cancelled || 0);
  const canvas = $("throughput");
  if (last) {
    const rate = Math.max(0, (finished - last.finished) / ((now - last.at) / 1000));
    finishedSeen += Math.max(0, finished - last.finished);
    canvas.dataset.finished = finishedSeen;   // what the graph has shown, for the tests
    if (charts.throughput) {
      const d = charts.throughput.data;
      d.labels.push(new Date(now).toLocaleTimeString());
      d.datasets[0].data.push(+rate.toFixed(2));
      if (d.labels.length > POINTS) { d.labels.shift(); d.datasets[0].data.shift(); }
      charts.throughput.update();
    }
    canvas.dataset.points = (+canvas.dataset.points || 0) + 1;
  }
  last = {finished, at: now};
}

// The histograms of `metrics` (fiberd_job_{run,queue_wait}_seconds_bucket{plugin,class,le}),
// summed over plugins, per class, as counts per bucket.
function classHistograms(text, kind) {
  const name = "fiberd_job_" + kind + "_seconds_bucket{";
  const cum = {};   // class -> le -> cumulative count
  const les = new Set();
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /class="([^"]*)".*le="([^"]*)"\}\s+(\d+)/.exec(line);
    if (!m) continue;
    const [, cls, le, n] = m;
    cum[cls] = cum[cls] || {};
    cum[cls][le] = (cum[cls][le] || 0) + Number(n);
    les.add(le);
  }
  const order = [...les].sort((a, b) => (a === "+Inf") - (b === "+Inf") || a - b);
  const per = {};
  let lo = order.length, hi = -1;
  for (const cls of Object.keys(cum)) {
    per[cls] = order.map((le, i) => (cum[cls][le] || 0) - (i ? (cum[cls][order[i - 1]] || 0) : 0));
    per[cls].forEach((n, i) => { if (n > 0) { lo = Math.min(lo, i); hi = Math.max(hi, i); } });
  }
  if (hi < 0) return {labels: [], per: {}};
  const label = (le) => le === "+Inf" ? "more" : "≤ " + fmtDur(Math.round(Number(le) * 1e9));
  const labels = order.slice(lo, hi + 1).map(label);
  for (const cls of Object.keys(per)) per[cls] = per[cls].slice(lo, hi + 1);
  return {labels, per};
}

async function refreshHistograms(stats) {
  if (!charts.byClass) return;
  const h = classHistograms(await api("metrics"), $("lat-kind").value);
  charts.byClass.data.labels = h.labels;
  charts.byClass.data.datasets = Object.keys(h.per).map((cls, i) => ({
    label: cls, data: h.per[cls], backgroundColor: PALETTE[i % PALETTE.length]}));
  charts.byClass.update();
  const groups = stats.groups || [];
  charts.byGroup.data.labels = groups.map((g) => g.name);
  charts.byGroup.data.datasets = [["p50", "ready_to_run_p50_ns"], ["p99", "ready_to_run_p99_ns"],
                                  ["max", "ready_to_run_max_ns"]].map(([l, k], i) => ({
    label: l, data: groups.map((g) => +((g[k] || 0) / 1e3).toFixed(1)),
    backgroundColor: PALETTE[i]}));
  charts.byGroup.update();
}

// ------------------------------------------------------------------ tables ----------
function actionButtons(job, into) {
  if (CANCELLABLE.has(job.state)) {
    const b = el("button", "cancel", "cancel");
    b.dataset.id = job.id;
    b.addEventListener("click", (ev) => { ev.stopPropagation(); act("cancel", job.id, b); });
    into.append(b);
  }
  if (RETRYABLE.has(job.state)) {
    const b = el("button", "retry", "retry");
    b.dataset.id = job.id;
    b.addEventListener("click", (ev) => { ev.stopPropagation(); act("retry", job.id, b); });
    into.append(b);
  }
}

async function act(what, id, button) {
  button.disabled = true;
  try {
    await api(what + "?id=" + id, "POST");
    showError(null);
  } catch (e) { showError(e); }
  refresh();
}

function progressCell(job) {
  const td = el("td");
  const p = job.progress;
  if (p && p.total) {
    const bar = el("progress");
    bar.max = p.total; bar.value = p.done;
    bar.title = p.done + " / " + p.total;
    td.append(bar);
  } else if (p) td.textContent = String(p.done);
  else td.textContent = "–";
  return td;
}

// The table keeps its rows from tick to tick (keyed by job id): a row is redrawn when its
// job's state changed, else only its progress and run time, so a click is never lost.
const rowsById = new Map();

function fillRow(tr, job) {
  tr.dataset.state = job.state;
  const st = el("td");
  st.append(el("span", job.state, "state " + job.state));
  const act = el("td");
  actionButtons(job, act);
  tr.replaceChildren(el("td", job.id, "num"), el("td", job.plugin), el("td", job.class), st,
                     progressCell(job), el("td", fmtTime(job.created_ms)),
                     el("td", ran(job), "num"), act);
}

function renderJobs(jobs) {
  const body = $("jobs").tBodies[0];
  const seen = new Set();
  jobs.forEach((job, i) => {
    let tr = rowsById.get(job.id);
    if (!tr) {
      tr = el("tr");
      tr.dataset.id = job.id;
      tr.addEventListener("click", () => {
        selected = job.id;
        for (const r of body.rows) r.classList.toggle("selected", r === tr);
        refreshDetail();
      });
      rowsById.set(job.id, tr);
      fillRow(tr, job);
    } else if (tr.dataset.state !== job.state) {
      fillRow(tr, job);
    } else {
      tr.cells[4].replaceWith(progressCell(job));
      tr.cells[6].textContent = ran(job);
    }
    tr.classList.toggle("selected", job.id === selected);
    if (body.rows[i] !== tr) body.insertBefore(tr, body.rows[i] || null);
    seen.add(job.id);
  });
  for (const [id, tr] of rowsById) {
    if (!seen.has(id)) { tr.remove(); rowsById.delete(id); }
  }
  $("jobs-empty").hidden = jobs.length > 0;
}

function renderSchedules(list) {
  const rows = list.map((s) => {
    const tr = el("tr");
    tr.append(el("td", s.name), el("td", s.owner, "num"),
              el("td", s.cron ? s.cron + " (" + s.tz + ")" : "every " + fmtDur(s.every_ms * 1e6)),
              el("td", s.plugin), el("td", fmtTime(s.next_ms)),
              el("td", s.last_job === null ? "–" : s.last_job, "num"),
              el("td", s.paused ? "paused" : "active"));
    return tr;
  });
  $("schedules").tBodies[0].replaceChildren(...rows);
  $("schedules-empty").hidden = list.length > 0;
}

const pretty = (v) => v === null || v === undefined ? "–" : JSON.stringify(v, null, 2);

async function refreshDetail() {
  if (selected === null) { $("detail").hidden = true; return; }
  let d;
  try { d = await api("job?id=" + selected); } catch (e) { showError(e); return; }
  const job = d.job;
  $("detail").hidden = false;
  $("detail").dataset.state = job.state;
  $("detail-id").textContent = job.id;
  const dl = $("detail-fields");
  const fields = [["plugin", job.plugin], ["class", job.class], ["state", job.state],
                  ["owner", "uid " + job.owner], ["priority", job.priority],
                  ["created", fmtTime(job.created_ms)], ["started", fmtTime(job.started_ms)],
                  ["finished", fmtTime(job.finished_ms)], ["ran", ran(job)],
                  ["attempt", (job.attempt + 1) + " of " + job.max_attempts]];
  if (job.progress) fields.push(["progress", job.progress.done + " / " + (job.progress.total || "?")]);
  if (job.error) fields.push(["error", job.error.code + ": " + job.error.message]);
  if (job.run_at_ms) fields.push(["due", fmtTime(job.run_at_ms)]);
  if (job.next_attempt_ms) fields.push(["next attempt", fmtTime(job.next_attempt_ms)]);
  dl.replaceChildren(...fields.flatMap(([k, v]) => [el("dt", k), el("dd", String(v))]));
  const actions = $("detail-actions");
  actions.replaceChildren();
  actionButtons(job, actions);
  $("detail-args").textContent = "args" in job ? pretty(job.args) : "(this fiberd does not say)";
  $("detail-result").textContent = pretty(job.result);
  const logs = d.logs && d.logs.lines ? d.logs.lines : [];
  $("detail-logs").textContent = logs.length
      ? (d.logs.dropped ? "(" + d.logs.dropped + " older lines dropped)\n" : "") +
        logs.map((l) => new Date(l.time_ms).toLocaleTimeString() + "  " + l.text).join("\n")
      : "(no lines)";
}

// ------------------------------------------------------------------ the loop ---------
async function refresh() {
  try {
    const stats = await api("stats");
    for (const s of STATES) $("count-" + s).textContent = (stats.jobs[s] ?? 0).toLocaleString();
    pushThroughput(stats);
    let q = "jobs?limit=200";
    if ($("state-filter").value) q += "&state=" + encodeURIComponent($("state-filter").value);
    if ($("plugin-filter").value.trim())
      q += "&plugin=" + encodeURIComponent($("plugin-filter").value.trim());
    renderJobs((await api(q)).jobs || []);
    if (selected !== null) await refreshDetail();
    if (tick % SLOW_EVERY === 0) {
      renderSchedules(await api("schedules"));
      await refreshHistograms(stats);
    }
    showError(null);
  } catch (e) { showError(e); }
  document.body.dataset.ticks = ++tick;
}

async function start() {
  makeCharts();
  try {
    const p = await api("ping");
    $("who").textContent = "fiberd " + p.version + " on " + p.socket + " — as uid " + p.uid;
  } catch (e) { showError(e); }
  for (const s of STATES) {
    document.querySelector('.count[data-state="' + s + '"]').addEventListener("click", () => {
      $("state-filter").value = $("state-filter").value === s ? "" : s;
      refresh();
    });
  }
  $("state-filter").addEventListener("change", refresh);
  $("plugin-filter").addEventListener("change", refresh);
  $("lat-kind").addEventListener("change", () => { tick = 0; refresh(); });
  $("detail-close").addEventListener("click", () => { selected = null; refreshDetail(); });
  await refresh();
  // one request chain at a time: the next tick starts a second after this one ended
  const loop = async () => { await refresh(); setTimeout(loop, 1000); };
  setTimeout(loop, 1000);
}

document.addEventListener("DOMContentLoaded", start);
