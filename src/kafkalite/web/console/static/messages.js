// kafkalite console: the message browser (latest, from an offset, from a timestamp; key/value search).
import { useState } from "preact/hooks";
import { html, get, enc, usePoll, fmtTime, b64text, decodeData, ErrorBox, POLL_MS } from "./lib.js";

function toLocalInput(ms) {
  const d = new Date(ms - new Date().getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}

async function fetchRecords(topic, partitionIds, q) {
  const one = async (p) => {
    const params = new URLSearchParams();
    if (q.from && q.from[p] !== undefined) params.set("offset", q.from[p]);
    else if (q.mode === "offset") params.set("offset", q.offset || "0");
    else if (q.mode === "timestamp") params.set("timestamp", String(new Date(q.ts).getTime()));
    params.set("limit", q.limit);
    const r = await get(`/topics/${enc(topic)}/partitions/${p}/records?${params}`);
    return { p, records: r.data || [], next: r.next_offset };
  };
  // a partition this broker cannot read (421 in a cluster: not hosted here) does not hide the others
  const settled = await Promise.allSettled(partitionIds.map(one));
  const failed = settled.filter((r) => r.status === "rejected").map((r) => r.reason);
  if (failed.length === settled.length && failed.length) throw failed[0];
  const results = settled.filter((r) => r.status === "fulfilled").map((r) => r.value);
  const warnings = failed.map((e) => e.message);
  const records = results.flatMap((r) => r.records);
  const next = {};
  for (const r of results) if (r.next !== undefined && r.next !== null) next[r.p] = r.next;
  const newestFirst = q.mode === "latest" && !q.from;
  records.sort((a, b) => {
    const d = a.timestamp - b.timestamp || a.partition_id - b.partition_id || a.offset - b.offset;
    return newestFirst ? -d : d;
  });
  return { records, next, warnings };
}

function Data({ d }) {
  const v = decodeData(d);
  if (v.text === null) return html`<span class="muted">null</span>`;
  return html`<pre class=${v.json ? "json" : ""}>${v.text}</pre>${v.kind === "base64" &&
    html`<span class="badge">base64</span>`}`;
}

function Headers({ headers }) {
  if (!headers || !headers.length) return html`<span class="muted">–</span>`;
  return html`${headers.map((hd) => {
    const t = b64text(hd.value);
    return html`<div><code>${hd.name}</code>: ${t === null
      ? html`<code>${hd.value ?? "null"}</code> <span class="badge">base64</span>`
      : html`<code>${t}</code>`}</div>`;
  })}`;
}

function matches(rec, needle) {
  if (!needle) return true;
  const n = needle.toLowerCase();
  const k = decodeData(rec.key).text;
  const v = decodeData(rec.value).text;
  return (k !== null && k.toLowerCase().includes(n)) || (v !== null && v.toLowerCase().includes(n));
}

export function MessagesPage({ topic, query }) {
  const initial = {
    partition: query.get("partition") ?? "all",
    mode: query.has("offset") ? "offset" : query.has("timestamp") ? "timestamp" : "latest",
    offset: query.get("offset") ?? "0",
    ts: query.has("timestamp")
      ? toLocalInput(Number(query.get("timestamp")))
      : toLocalInput(Date.now() - 3600 * 1000),
    limit: query.get("limit") ?? "50",
    live: true,
    from: null,
  };
  const [draft, setDraft] = useState(initial);
  const [q, setQ] = useState(initial);
  const [search, setSearch] = useState("");
  const parts = usePoll(() => get(`/topics/${enc(topic)}/partitions`), [topic], 0);
  const ids = parts.data ? parts.data.data.map((p) => p.partition_id).sort((a, b) => a - b) : null;
  const chosen = ids === null ? null : q.partition === "all" ? ids : [Number(q.partition)];
  const live = q.mode === "latest" && q.live && !q.from;
  const recs = usePoll(
    async () => (chosen === null ? null : fetchRecords(topic, chosen, q)),
    [topic, JSON.stringify(q), chosen && chosen.join(",")],
    live ? POLL_MS : 0
  );
  const set = (k) => (e) =>
    setDraft({ ...draft, [k]: e.target.type === "checkbox" ? e.target.checked : e.target.value });
  const apply = (e) => {
    e.preventDefault();
    setQ({ ...draft, from: null });
  };
  const data = recs.data;
  const shown = data ? data.records.filter((r) => matches(r, search)) : [];
  const canPage = data && Object.keys(data.next).length > 0 && !live;
  return html`
    <h1><a href="#/topics">Topics</a> / <a href=${"#/topics/" + enc(topic)}>${topic}</a> / messages</h1>
    <form class="panel row" id="browse" onSubmit=${apply}>
      <label>Partition<select name="partition" value=${draft.partition} onChange=${set("partition")}>
        <option value="all">all</option>
        ${(ids || []).map((p) => html`<option value=${String(p)}>${p}</option>`)}
      </select></label>
      <label>From<select name="mode" value=${draft.mode} onChange=${set("mode")}>
        <option value="latest">latest</option>
        <option value="offset">offset</option>
        <option value="timestamp">timestamp</option>
      </select></label>
      ${draft.mode === "offset" &&
      html`<label>Offset<input name="offset" type="number" min="0" style="width:110px"
        value=${draft.offset} onInput=${set("offset")} /></label>`}
      ${draft.mode === "timestamp" &&
      html`<label>Timestamp (local)<input name="timestamp" type="datetime-local" step="1"
        value=${draft.ts} onInput=${set("ts")} /></label>`}
      <label>Limit<input name="limit" type="number" min="1" max="1000" style="width:80px"
        value=${draft.limit} onInput=${set("limit")} /></label>
      ${draft.mode === "latest" &&
      html`<label class="inline"><input type="checkbox" name="live" checked=${draft.live}
        onChange=${set("live")} />live</label>`}
      <button type="submit">Load</button>
      <label style="margin-left:auto">Search key / value
        <input id="search" placeholder="substring" value=${search}
          onInput=${(e) => setSearch(e.target.value)} /></label>
    </form>
    <${ErrorBox} error=${recs.error || parts.error} />
    ${recs.data &&
    recs.data.warnings.map((w) => html`<div class="msg err">Some partitions were not read: ${w}</div>`)}
    <div class="panel">
      <div class="row" style="justify-content:space-between">
        <h2 id="record-count">${data
          ? `${shown.length} of ${data.records.length} loaded record${data.records.length === 1 ? "" : "s"}`
          : "Loading…"}${live ? html` <span class="badge ok">live</span>` : ""}</h2>
        ${canPage &&
        html`<button class="plain" id="next-page"
          onClick=${() => setQ({ ...q, from: data.next })}>Next page →</button>`}
      </div>
      <table id="records">
        <thead><tr><th class="num">Partition</th><th class="num">Offset</th><th>Timestamp</th>
          <th>Key</th><th>Value</th><th>Headers</th></tr></thead>
        <tbody>
          ${shown.map(
            (r) => html`<tr class="record" key=${r.partition_id + ":" + r.offset}
                data-partition=${r.partition_id} data-offset=${r.offset}>
              <td class="num">${r.partition_id}</td>
              <td class="num">${r.offset}</td>
              <td style="white-space:nowrap">${fmtTime(r.timestamp)}</td>
              <td class="key"><${Data} d=${r.key} /></td>
              <td class="value" style="min-width:280px"><${Data} d=${r.value} /></td>
              <td class="headers"><${Headers} headers=${r.headers} /></td>
            </tr>`
          )}
        </tbody>
      </table>
    </div>
  `;
}
