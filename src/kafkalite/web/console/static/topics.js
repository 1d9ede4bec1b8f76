// kafkalite console: the topic list (create, delete) and one topic (partitions, editable configs).
import { useState } from "preact/hooks";
import {
  html, api, get, enc, usePoll, fmtNum, fmtBytes, ErrorBox, replicaIds, isrIds, underReplicated, textB64,
} from "./lib.js";

/** "name=value" lines (blank and # lines skipped) as [{name, value}]. */
function parseLines(text, what) {
  const out = [];
  for (const line of text.split("\n")) {
    const s = line.trim();
    if (!s || s.startsWith("#")) continue;
    const i = s.indexOf("=");
    if (i <= 0) throw new Error(`${what} line ${JSON.stringify(s)}: expected name=value`);
    out.push({ name: s.slice(0, i).trim(), value: s.slice(i + 1).trim() });
  }
  return out;
}

function CreateTopic({ onCreated }) {
  const [form, setForm] = useState({ name: "", partitions: "1", rf: "1", configs: "" });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setForm({ ...form, [k]: e.target.value });
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    setBusy(true);
    try {
      const body = {
        topic_name: form.name.trim(),
        partitions_count: parseInt(form.partitions, 10),
        replication_factor: parseInt(form.rf, 10),
        configs: parseLines(form.configs, "config"),
      };
      await api("POST", "/topics", body);
      setForm({ name: "", partitions: "1", rf: "1", configs: "" });
      onCreated(body.topic_name);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="panel" id="create-topic" onSubmit=${submit}>
    <h2>Create a topic</h2>
    <${ErrorBox} error=${error} />
    <div class="row">
      <label>Name<input name="topic_name" required value=${form.name} onInput=${set("name")} /></label>
      <label>Partitions<input name="partitions_count" type="number" min="1" style="width:90px"
        value=${form.partitions} onInput=${set("partitions")} /></label>
      <label>Replication factor<input name="replication_factor" type="number" min="1" style="width:90px"
        value=${form.rf} onInput=${set("rf")} /></label>
      <label>Configs (name=value, one a line)<textarea name="configs" rows="2" cols="36"
        placeholder="retention.ms=86400000" value=${form.configs} onInput=${set("configs")}></textarea></label>
      <button type="submit" disabled=${busy}>Create</button>
    </div>
  </form>`;
}

function DeleteButton({ topic, onDeleted }) {
  const [armed, setArmed] = useState(false);
  const [error, setError] = useState(null);
  if (error) return html`<span class="bad">${error.message}</span>`;
  if (!armed)
    return html`<button class="plain" onClick=${() => setArmed(true)}>Delete</button>`;
  const go = async () => {
    try {
      await api("DELETE", `/topics/${enc(topic)}`);
      onDeleted(topic);
    } catch (e) {
      setError(e);
    }
  };
  return html`<span><button class="danger" onClick=${go}>Delete ${topic}?</button>
    <button class="plain" onClick=${() => setArmed(false)}>Cancel</button></span>`;
}

export function TopicsPage() {
  const [internal, setInternal] = useState(false);
  const [note, setNote] = useState(null);
  const { data, error, refresh } = usePoll(() => get("/topics"), []);
  const topics = data ? data.data.filter((t) => internal || !t.is_internal) : [];
  topics.sort((a, b) => a.topic_name.localeCompare(b.topic_name));
  const done = (msg) => {
    setNote(msg);
    refresh();
  };
  return html`
    <h1>Topics</h1>
    ${note && html`<div class="msg info" id="topics-note">${note}</div>`}
    <${CreateTopic} onCreated=${(t) => done(`Created topic ${t}.`)} />
    <div class="panel">
      <div class="row" style="justify-content:space-between">
        <h2>${topics.length} topic${topics.length === 1 ? "" : "s"}</h2>
        <label class="inline"><input type="checkbox" checked=${internal}
          onChange=${(e) => setInternal(e.target.checked)} />show internal topics</label>
      </div>
      <${ErrorBox} error=${error} />
      <table id="topics">
        <thead><tr><th>Name</th><th class="num">Partitions</th><th class="num">Replication</th>
          <th></th><th></th></tr></thead>
        <tbody>
          ${topics.map(
            (t) => html`<tr data-topic=${t.topic_name}>
              <td><a href=${"#/topics/" + enc(t.topic_name)}>${t.topic_name}</a>
                ${t.is_internal && html` <span class="badge">internal</span>`}</td>
              <td class="num">${t.partitions_count}</td>
              <td class="num">${t.replication_factor}</td>
              <td><a href=${"#/messages/" + enc(t.topic_name)}>messages</a></td>
              <td>${!t.is_internal &&
              html`<${DeleteButton} topic=${t.topic_name}
                onDeleted=${(n) => done(`Deleted topic ${n}.`)} />`}</td>
            </tr>`
          )}
        </tbody>
      </table>
    </div>
  `;
}

function ConfigRow({ topic, c, onSaved }) {
  const [editing, setEditing] = useState(null);
  const [error, setError] = useState(null);
  const save = async (e) => {
    e.preventDefault();
    try {
      await api("PUT", `/topics/${enc(topic)}/configs/${enc(c.name)}`, { value: editing });
      setEditing(null);
      setError(null);
      onSaved();
    } catch (err) {
      setError(err);
    }
  };
  return html`<tr class=${c.is_default ? "" : "hl"} data-config=${c.name}>
    <td>${c.name}</td>
    <td>${editing === null
      ? html`<code>${c.value === null ? "(null)" : c.value}</code>`
      : html`<form class="row" onSubmit=${save}>
          <input name="value" value=${editing} onInput=${(e) => setEditing(e.target.value)} />
          <button type="submit">Save</button>
          <button type="button" class="plain" onClick=${() => setEditing(null)}>Cancel</button>
        </form>`}
      ${error && html`<div class="bad">${error.message}</div>`}</td>
    <td class="muted">${c.source || ""}</td>
    <td>${!c.is_read_only && editing === null &&
    html`<button class="plain" onClick=${() => setEditing(c.value ?? "")}>Edit</button>`}</td>
  </tr>`;
}

function Configs({ topic }) {
  const [filter, setFilter] = useState("");
  const [onlySet, setOnlySet] = useState(false);
  const { data, error, refresh } = usePoll(() => get(`/topics/${enc(topic)}/configs`), [topic], 0);
  const rows = (data ? data.data : [])
    .filter((c) => !onlySet || !c.is_default)
    .filter((c) => !filter || c.name.includes(filter))
    .sort((a, b) => a.name.localeCompare(b.name));
  return html`<div class="panel">
    <div class="row" style="justify-content:space-between">
      <h2>Configs <span class="muted">(highlighted: set on this topic)</span></h2>
      <div class="row">
        <input placeholder="filter" value=${filter} onInput=${(e) => setFilter(e.target.value)} />
        <label class="inline"><input type="checkbox" checked=${onlySet}
          onChange=${(e) => setOnlySet(e.target.checked)} />only overrides</label>
      </div>
    </div>
    <${ErrorBox} error=${error} />
    <table id="configs">
      <thead><tr><th>Name</th><th>Value</th><th>Source</th><th></th></tr></thead>
      <tbody>${rows.map((c) => html`<${ConfigRow} key=${c.name} topic=${topic} c=${c} onSaved=${refresh} />`)}</tbody>
    </table>
  </div>`;
}

function Produce({ topic, partitions }) {
  const empty = { partition: "", key: "", value: "", json: false, headers: "" };
  const [form, setForm] = useState(empty);
  const [note, setNote] = useState(null);
  const [error, setError] = useState(null);
  const set = (k) => (e) =>
    setForm({ ...form, [k]: e.target.type === "checkbox" ? e.target.checked : e.target.value });
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    setNote(null);
    try {
      const body = {
        value: form.json
          ? { type: "JSON", data: JSON.parse(form.value) }
          : { type: "STRING", data: form.value },
        headers: parseLines(form.headers, "header").map((h) => ({ name: h.name, value: textB64(h.value) })),
      };
      if (form.key !== "") body.key = { type: "STRING", data: form.key };
      if (form.partition !== "") body.partition_id = parseInt(form.partition, 10);
      const r = await api("POST", `/topics/${enc(topic)}/records`, body);
      setNote(`Produced to partition ${r.partition_id} at offset ${r.offset}.`);
      setForm({ ...form, value: "" });
    } catch (err) {
      setError(err);
    }
  };
  return html`<form class="panel" id="produce" onSubmit=${submit}>
    <h2>Produce a record</h2>
    <${ErrorBox} error=${error} />
    ${note && html`<div class="msg info">${note}</div>`}
    <div class="row">
      <label>Partition<select name="partition" value=${form.partition} onChange=${set("partition")}>
        <option value="">by key</option>
        ${partitions.map((p) => html`<option value=${String(p)}>${p}</option>`)}
      </select></label>
      <label>Key (empty: none)<input name="key" value=${form.key} onInput=${set("key")} /></label>
      <label>Value<textarea name="value" rows="2" cols="40" value=${form.value}
        onInput=${set("value")}></textarea></label>
      <label>Headers (name=value, one a line)<textarea name="headers" rows="2" cols="24"
        value=${form.headers} onInput=${set("headers")}></textarea></label>
      <label class="inline"><input type="checkbox" name="json" checked=${form.json}
        onChange=${set("json")} />JSON</label>
      <button type="submit">Produce</button>
    </div>
  </form>`;
}

export function TopicPage({ topic }) {
  const { data, error } = usePoll(() => get(`/topics/${enc(topic)}/partitions`), [topic]);
  const parts = data ? [...data.data].sort((a, b) => a.partition_id - b.partition_id) : [];
  const total = parts.reduce(
    (acc, p) => ({
      msgs: acc.msgs + Math.max(0, (p.latest_offset || 0) - (p.earliest_offset || 0)),
      bytes: acc.bytes + (p.size_bytes || 0),
      remote: acc.remote + (p.remote_size_bytes || 0),
    }),
    { msgs: 0, bytes: 0, remote: 0 }
  );
  // tiered storage (KIP-405): a remote size column when the topic has one
  const tiered = parts.some((p) => p.remote_size_bytes != null);
  const list = (xs) => (xs ? xs.join(", ") : "–");
  return html`
    <h1><a href="#/topics">Topics</a> / ${topic}</h1>
    <p><a href=${"#/messages/" + enc(topic)}>Browse messages →</a></p>
    <${ErrorBox} error=${error} />
    <div class="panel">
      <h2>Partitions <span class="muted">${`(${parts.length}; ${fmtNum(total.msgs)} messages, ${fmtBytes(total.bytes)}${tiered ? ` local, ${fmtBytes(total.remote)} remote` : ""})`}</span></h2>
      <table id="partitions">
        <thead><tr><th class="num">Partition</th><th class="num">Leader</th><th>Replicas</th>
          <th>ISR</th><th class="num">Earliest offset</th><th class="num">Latest offset</th>
          <th class="num">Messages</th><th class="num">${tiered ? "Local size" : "Size"}</th>
          ${tiered ? html`<th class="num">Remote size</th>` : null}<th></th></tr></thead>
        <tbody>
          ${parts.map(
            (p) => html`<tr>
              <td class="num">${p.partition_id}</td>
              <td class="num">${p.leader_id ?? "–"}</td>
              <td>${list(replicaIds(p))}</td><td>${list(isrIds(p))}</td>
              <td class="num">${fmtNum(p.earliest_offset)}</td>
              <td class="num">${fmtNum(p.latest_offset)}</td>
              <td class="num">${fmtNum(Math.max(0, (p.latest_offset || 0) - (p.earliest_offset || 0)))}</td>
              <td class="num">${fmtBytes(p.size_bytes)}</td>
              ${tiered ? html`<td class="num">${fmtBytes(p.remote_size_bytes)}</td>` : null}
              <td>${underReplicated(p)
                ? html`<span class="badge bad">under-replicated</span>`
                : html`<span class="badge ok">in sync</span>`}</td>
            </tr>`
          )}
        </tbody>
      </table>
    </div>
    <${Produce} topic=${topic} partitions=${parts.map((p) => p.partition_id)} />
    <${Configs} topic=${topic} />
  `;
}
