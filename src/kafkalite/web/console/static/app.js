// kafkalite console: the shell (header, hash router) and the cluster overview.
import { render } from "preact";
import { useEffect, useErrorBoundary, useState } from "preact/hooks";
import {
  html, get, enc, useConnection, setConnection, POLL_MS, clusterId, fmtNum, fmtRate, fmtBytes, ErrorBox,
  TimeChart, trimHistory, underReplicated,
} from "./lib.js";
import { TopicsPage, TopicPage } from "./topics.js";
import { MessagesPage } from "./messages.js";
import { GroupsPage, GroupPage } from "./groups.js";
import { SchemasPage, SchemaPage } from "./schemas.js";

// -- the hash router: #/overview, #/topics, #/topics/NAME, #/messages/NAME, #/groups, #/groups/ID,
// #/schemas, #/schemas/SUBJECT

function parseHash() {
  const raw = (location.hash || "").replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts: parts.length ? parts : ["overview"], query: new URLSearchParams(query) };
}

function useRoute() {
  const [route, setRoute] = useState(parseHash());
  useEffect(() => {
    const on = () => setRoute(parseHash());
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return route;
}

// -- overview: brokers, throughput sparkline (messages/s from latest_offset deltas), health

const throughput = { prev: null, prevAt: 0, hist: { t: [], series: { "messages/s": [] } } };

function sampleThroughput(total) {
  const now = Date.now();
  if (throughput.prev !== null && now > throughput.prevAt) {
    const rate = Math.max(0, ((total - throughput.prev) * 1000) / (now - throughput.prevAt));
    throughput.hist.t.push(now / 1000);
    throughput.hist.series["messages/s"].push(rate);
    trimHistory(throughput.hist);
  }
  throughput.prev = total;
  throughput.prevAt = now;
}

async function loadOverview() {
  const [cid, brokers, topics] = await Promise.all([clusterId(), get("/brokers"), get("/topics")]);
  const perTopic = await Promise.all(
    topics.data.map((t) =>
      get(`/topics/${enc(t.topic_name)}/partitions`)
        .then((r) => ({ topic: t, parts: r.data }))
        .catch(() => ({ topic: t, parts: [] }))
    )
  );
  let partitions = 0;
  let under = [];
  let messages = 0;
  let bytes = 0;
  let latestSum = 0;
  for (const { topic, parts } of perTopic) {
    for (const p of parts) {
      partitions++;
      if (underReplicated(p)) under.push(`${topic.topic_name}-${p.partition_id}`);
      bytes += p.size_bytes || 0;
      if (!topic.is_internal) {
        latestSum += p.latest_offset || 0;
        messages += Math.max(0, (p.latest_offset || 0) - (p.earliest_offset || 0));
      }
    }
  }
  sampleThroughput(latestSum);
  return {
    cid, brokers: brokers.data, topics: topics.data.length, partitions, under, messages, bytes,
  };
}

// sampled every 2 s from page load whichever page is shown, so the sparkline has a history
const overview = { data: null, error: null, listeners: new Set() };

let inflight = null;
function sampleOverview() {
  if (!inflight) inflight = sampleOnce().finally(() => (inflight = null));
  return inflight;
}

async function sampleOnce() {
  try {
    overview.data = await loadOverview();
    overview.error = null;
    setConnection(true, null);
  } catch (e) {
    overview.error = e;
    if (e.status === 0) setConnection(false, e.message);
  }
  overview.listeners.forEach((f) => f({ data: overview.data, error: overview.error }));
}

// every 2 s on the overview, every 10 s elsewhere (it reads every topic's partitions)
function startOverviewSampler() {
  let ticks = 0;
  const run = () => {
    const here = parseHash().parts[0] === "overview";
    if (document.hidden || (!here && ticks++ % 5 !== 0)) return;
    sampleOverview();
  };
  run();
  setInterval(run, POLL_MS);
}

function useOverview() {
  const [s, set] = useState({ data: overview.data, error: overview.error });
  useEffect(() => {
    overview.listeners.add(set);
    if (overview.data) sampleOverview();
    return () => overview.listeners.delete(set);
  }, []);
  return s;
}

function Overview() {
  const { data, error } = useOverview();
  const h = throughput.hist;
  const rate = h.t.length ? h.series["messages/s"][h.t.length - 1] : null;
  return html`
    <h1>Cluster overview</h1>
    <${ErrorBox} error=${error} />
    ${data &&
    html`
      <div class="tiles">
        <div class="tile"><div class="k">Cluster</div><div class="v id" id="cluster-id">${data.cid}</div></div>
        <div class="tile"><div class="k">Brokers</div><div class="v" id="broker-count">${data.brokers.length}</div></div>
        <div class="tile"><div class="k">Topics</div><div class="v">${data.topics}</div></div>
        <div class="tile"><div class="k">Partitions</div><div class="v">${data.partitions}</div></div>
        <div class="tile">
          <div class="k">Under-replicated partitions</div>
          <div class=${"v" + (data.under.length ? " bad" : "")} id="under-replicated">${data.under.length}</div>
        </div>
        <div class="tile"><div class="k">Messages retained</div><div class="v">${fmtNum(data.messages)}</div></div>
        <div class="tile"><div class="k">Log size</div><div class="v">${fmtBytes(data.bytes)}</div></div>
      </div>
      <div class="panel">
        <h2>Throughput <span class="muted">(messages/s produced, last 5 minutes)</span>
          <span style="float:right" id="throughput">${fmtRate(rate)} msg/s</span></h2>
        <${TimeChart} id="throughput-chart" t=${h.t} series=${h.series} height=${70} small=${true} />
      </div>
      ${data.under.length > 0 &&
      html`<div class="panel"><h2 class="bad">Under-replicated</h2>${data.under.join(", ")}</div>`}
      <div class="panel">
        <h2>Brokers</h2>
        <table id="brokers">
          <thead><tr><th>ID</th><th>Host</th><th>Port</th><th>Rack</th></tr></thead>
          <tbody>
            ${data.brokers.map(
              (b) => html`<tr><td>${b.broker_id}</td><td>${b.host}</td><td>${b.port}</td>
                <td>${b.rack || html`<span class="muted">–</span>`}</td></tr>`
            )}
          </tbody>
        </table>
      </div>
    `}
  `;
}

// -- the shell

function Header({ section }) {
  const conn = useConnection();
  const link = (name, label) =>
    html`<a href=${"#/" + name} class=${section === name ? "active" : ""}>${label}</a>`;
  return html`<header class="top">
    <span class="brand">kafkalite</span>
    <nav>${link("overview", "Overview")}${link("topics", "Topics")}${link("groups", "Consumer groups")}${link("schemas", "Schemas")}</nav>
    <span class="status" title=${conn.error || ""}>
      <span class=${"dot" + (conn.ok ? "" : " bad")}></span>${conn.ok ? "live" : "disconnected"}
    </span>
  </header>`;
}

/** A page that throws while rendering shows the error instead of blanking the console. */
function Boundary({ children }) {
  const [error, reset] = useErrorBoundary((e) => console.error(e));
  if (error)
    return html`<div class="msg err">This page failed to render: ${String(error.message || error)}
      <button class="plain" onClick=${reset}>Retry</button></div>`;
  return children;
}

function App() {
  const { parts, query } = useRoute();
  const [section, arg] = parts;
  let page;
  if (section === "topics" && arg) page = html`<${TopicPage} key=${arg} topic=${arg} />`;
  else if (section === "topics") page = html`<${TopicsPage} />`;
  else if (section === "messages" && arg)
    page = html`<${MessagesPage} key=${arg} topic=${arg} query=${query} />`;
  else if (section === "groups" && arg) page = html`<${GroupPage} key=${arg} group=${arg} />`;
  else if (section === "groups") page = html`<${GroupsPage} />`;
  else if (section === "schemas" && arg) page = html`<${SchemaPage} key=${arg} subject=${arg} />`;
  else if (section === "schemas") page = html`<${SchemasPage} />`;
  else page = html`<${Overview} />`;
  const nav = section === "messages" ? "topics" : section;
  const where = parts.join("/");
  return html`<${Header} section=${nav} /><main><${Boundary} key=${where}>${page}<//></main>`;
}

startOverviewSampler();
const root = document.getElementById("app");
root.textContent = "";
render(html`<${App} />`, root);
