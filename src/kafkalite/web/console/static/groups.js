// kafkalite console: consumer groups (state, members, assignments, lag over time, offset resets).
import { useState } from "preact/hooks";
import {
  html, api, get, enc, usePoll, fmtNum, ErrorBox, TimeChart, trimHistory,
} from "./lib.js";

function stateBadge(state) {
  const cls = state === "STABLE" || state === "Stable" ? "ok" : state === "DEAD" || state === "Dead" ? "bad" : "";
  return html`<span class=${"badge " + cls}>${state}</span>`;
}

async function loadGroups() {
  const groups = (await get("/consumer-groups")).data;
  const summaries = await Promise.allSettled(
    groups.map((g) => get(`/consumer-groups/${enc(g.consumer_group_id)}/lag-summary`))
  );
  return groups.map((g, i) => ({
    ...g,
    summary: summaries[i].status === "fulfilled" ? summaries[i].value : null,
  }));
}

// the protocol type as kafka-consumer-groups shows it: "consumer" for every consumer group (an empty one
// keeps it); a simple group (offsets committed without joining, AdminClient's isSimpleConsumerGroup) has none
function protocolLabel(g) {
  if (g.is_simple) return html`<span class="badge">simple</span>`;
  return g.protocol_type || html`<span class="muted">–</span>`;
}

export function GroupsPage() {
  const { data, error } = usePoll(loadGroups, []);
  const groups = data ? [...data].sort((a, b) => a.consumer_group_id.localeCompare(b.consumer_group_id)) : [];
  return html`
    <h1>Consumer groups</h1>
    <${ErrorBox} error=${error} />
    <div class="panel">
      <table id="groups">
        <thead><tr><th>Group</th><th>State</th><th>Protocol</th><th>Assignor</th><th class="num">Total lag</th>
          <th class="num">Max lag</th></tr></thead>
        <tbody>
          ${groups.map(
            (g) => html`<tr data-group=${g.consumer_group_id}>
              <td><a href=${"#/groups/" + enc(g.consumer_group_id)}>${g.consumer_group_id}</a></td>
              <td>${stateBadge(g.state)}</td>
              <td class="protocol">${protocolLabel(g)}</td>
              <td>${g.partition_assignor || html`<span class="muted">–</span>`}</td>
              <td class="num">${g.summary ? fmtNum(g.summary.total_lag) : "–"}</td>
              <td class="num">${g.summary ? fmtNum(g.summary.max_lag) : "–"}</td>
            </tr>`
          )}
        </tbody>
      </table>
      ${data && !groups.length && html`<p class="muted">No consumer groups yet.</p>`}
    </div>
  `;
}

// lag over time per group, kept in memory for the last five minutes (while the page is open)
const lagHistory = new Map();
const MAX_SERIES = 8;

function sampleLag(group, lags) {
  let hist = lagHistory.get(group);
  if (!hist) {
    hist = { t: [], series: {} };
    lagHistory.set(group, hist);
  }
  // one partition: its own line; more: the total, and each partition's while there are few
  const values = {};
  if (lags.length > 1) values.total = lags.reduce((s, l) => s + Math.max(0, l.lag || 0), 0);
  if (lags.length <= MAX_SERIES) {
    for (const l of lags) values[`${l.topic_name}-${l.partition_id}`] = Math.max(0, l.lag || 0);
  }
  const n = hist.t.length;
  hist.t.push(Date.now() / 1000);
  for (const k of Object.keys(values)) {
    if (!hist.series[k]) hist.series[k] = new Array(n).fill(null);
  }
  for (const k of Object.keys(hist.series)) hist.series[k].push(k in values ? values[k] : null);
  trimHistory(hist);
  return hist;
}

async function loadGroup(group) {
  const base = `/consumer-groups/${enc(group)}`;
  const [g, consumers, lags] = await Promise.all([
    get(base),
    get(`${base}/consumers`),
    get(`${base}/lags`).catch((e) => {
      if (e.status === 404) return { data: [] };
      throw e;
    }),
  ]);
  const members = await Promise.all(
    consumers.data.map(async (c) => {
      let assignments = Array.isArray(c.assignments) ? c.assignments : null;
      if (!assignments) {
        try {
          const r = await get(`${base}/consumers/${enc(c.consumer_id)}/assignments`);
          assignments = r.data;
        } catch (e) {
          assignments = [];
        }
      }
      return { ...c, assignments };
    })
  );
  const sorted = [...lags.data].sort(
    (a, b) => a.topic_name.localeCompare(b.topic_name) || a.partition_id - b.partition_id
  );
  sampleLag(group, sorted);
  return { group: g, members, lags: sorted };
}

function ResetOffsets({ group, topics, onDone }) {
  const [form, setForm] = useState({ topic: "", to: "earliest", offset: "0", ts: "" });
  const [preview, setPreview] = useState(null);
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const topic = form.topic || topics[0] || "";
  const set = (k) => (e) => {
    setForm({ ...form, [k]: e.target.value });
    setPreview(null);
  };
  const body = (dryRun) => {
    const b = { topic, to: form.to, dry_run: dryRun };
    if (form.to === "offset") b.offset = parseInt(form.offset, 10);
    if (form.to === "timestamp") b.timestamp = new Date(form.ts).getTime();
    return b;
  };
  const send = async (dryRun) => {
    setError(null);
    setBusy(true);
    try {
      const r = await api("POST", `/consumer-groups/${enc(group)}/reset-offsets`, body(dryRun));
      if (dryRun) {
        setPreview(r.data);
        setResult(null);
      } else {
        setPreview(null);
        setResult(r.data);
        onDone();
      }
    } catch (e) {
      setError(
        e.status === 409
          ? new Error(`${e.message} (stop the group's consumers first: only an empty group can be reset)`)
          : e
      );
    } finally {
      setBusy(false);
    }
  };
  const rows = preview || result;
  return html`<div class="panel" id="reset-offsets">
    <h2>Reset offsets</h2>
    <${ErrorBox} error=${error} />
    ${result && html`<div class="msg info" id="reset-note">Offsets reset for ${result.length} partition${
      result.length === 1 ? "" : "s"}.</div>`}
    <form class="row" id="reset-form" onSubmit=${(e) => { e.preventDefault(); send(true); }}>
      <label>Topic<select name="topic" value=${topic} onChange=${set("topic")}>
        ${topics.map((t) => html`<option value=${t}>${t}</option>`)}
      </select></label>
      <label>To<select name="to" value=${form.to} onChange=${set("to")}>
        <option value="earliest">earliest</option>
        <option value="latest">latest</option>
        <option value="offset">offset</option>
        <option value="timestamp">timestamp</option>
      </select></label>
      ${form.to === "offset" &&
      html`<label>Offset<input name="offset" type="number" min="0" style="width:110px"
        value=${form.offset} onInput=${set("offset")} /></label>`}
      ${form.to === "timestamp" &&
      html`<label>Timestamp (local)<input name="timestamp" type="datetime-local" step="1"
        value=${form.ts} onInput=${set("ts")} /></label>`}
      <button type="submit" id="reset-preview" disabled=${busy || !topic}>Preview (dry run)</button>
      <button type="button" id="reset-execute" class="danger" disabled=${busy || !preview}
        onClick=${() => send(false)}>Execute</button>
    </form>
    ${rows &&
    html`<table id="reset-table" style="margin-top:10px">
      <thead><tr><th>${preview ? "Dry run: " : ""}Topic</th><th class="num">Partition</th>
        <th class="num">Current offset</th><th class="num">New offset</th></tr></thead>
      <tbody>${rows.map(
        (r) => html`<tr><td>${r.topic_name}</td><td class="num">${r.partition_id}</td>
          <td class="num">${fmtNum(r.current_offset)}</td><td class="num">${fmtNum(r.new_offset)}</td></tr>`
      )}</tbody>
    </table>`}
  </div>`;
}

export function GroupPage({ group }) {
  const { data, error, refresh } = usePoll(() => loadGroup(group), [group]);
  const topicList = usePoll(() => get("/topics"), [], 0);
  const hist = lagHistory.get(group);
  const g = data && data.group;
  const total = data ? data.lags.reduce((s, l) => s + Math.max(0, l.lag || 0), 0) : null;
  const groupTopics = data ? [...new Set(data.lags.map((l) => l.topic_name))] : [];
  const otherTopics = topicList.data
    ? topicList.data.data.filter((t) => !t.is_internal).map((t) => t.topic_name).sort()
    : [];
  const resetTopics = [...groupTopics, ...otherTopics.filter((t) => !groupTopics.includes(t))];
  return html`
    <h1><a href="#/groups">Consumer groups</a> / ${group}</h1>
    <${ErrorBox} error=${error} />
    ${data &&
    html`
      <div class="tiles">
        <div class="tile"><div class="k">State</div><div class="v" id="group-state">${g.state}</div></div>
        <div class="tile"><div class="k">Members</div><div class="v" id="member-count">${data.members.length}</div></div>
        <div class="tile"><div class="k">Total lag</div><div class="v" id="total-lag">${fmtNum(total)}</div></div>
        <div class="tile"><div class="k">Assignor</div><div class="v id">${g.partition_assignor || "–"}</div></div>
      </div>
      <div class="panel">
        <h2>Lag over time <span class="muted">(every 2 s, last 5 minutes)</span></h2>
        ${hist && html`<${TimeChart} id="lag-chart" t=${hist.t} series=${hist.series} height=${200} />`}
      </div>
      <div class="split">
        <div class="panel">
          <h2>Members</h2>
          <table id="members">
            <thead><tr><th>Consumer</th><th>Client</th><th>Instance</th><th>Assignments</th></tr></thead>
            <tbody>
              ${data.members.map(
                (m) => html`<tr><td><code>${m.consumer_id}</code></td><td>${m.client_id}</td>
                  <td>${m.instance_id || html`<span class="muted">–</span>`}</td>
                  <td>${m.assignments.map((a) => html`<span class="badge">${a.topic_name}-${a.partition_id}</span>`)}</td></tr>`
              )}
            </tbody>
          </table>
          ${!data.members.length && html`<p class="muted">No members (the group is empty).</p>`}
        </div>
        <div class="panel">
          <h2>Lag per partition</h2>
          <table id="lags">
            <thead><tr><th>Topic</th><th class="num">Partition</th><th class="num">Committed</th>
              <th class="num">Log end</th><th class="num">Lag</th><th>Consumer</th></tr></thead>
            <tbody>
              ${data.lags.map(
                (l) => html`<tr data-tp=${l.topic_name + "-" + l.partition_id}>
                  <td><a href=${`#/messages/${enc(l.topic_name)}?partition=${l.partition_id}&offset=${Math.max(0, l.current_offset ?? 0)}`}>${l.topic_name}</a></td>
                  <td class="num">${l.partition_id}</td>
                  <td class="num">${fmtNum(l.current_offset)}</td>
                  <td class="num">${fmtNum(l.log_end_offset)}</td>
                  <td class=${"num lag" + (l.lag > 0 ? " bad" : "")}>${fmtNum(l.lag)}</td>
                  <td><code class="muted">${l.consumer_id || "–"}</code></td>
                </tr>`
              )}
            </tbody>
          </table>
        </div>
      </div>
      <${ResetOffsets} group=${group} topics=${resetTopics} onDone=${refresh} />
    `}
  `;
}
