// kafkalite console: the REST v3 client, the 2-second polling hook, formatting and uPlot charts.
import { h } from "preact";
import { useEffect, useRef, useState, useCallback } from "preact/hooks";
import htm from "htm";

export const html = htm.bind(h);
export const POLL_MS = 2000;
export const HISTORY_MS = 5 * 60 * 1000;

// -- REST v3

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function call(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, `the broker is unreachable (${e.message})`);
  }
  const text = await resp.text();
  let json = null;
  if (text) {
    try {
      json = JSON.parse(text);
    } catch (e) {
      json = null;
    }
  }
  if (!resp.ok) {
    const msg = (json && (json.message || json.error)) || text || resp.statusText;
    throw new ApiError(resp.status, `${resp.status}: ${msg}`);
  }
  return json;
}

let clusterPromise = null;

/** The cluster id (GET /v3/clusters, data[0]), cached once it is known. */
export function clusterId() {
  if (!clusterPromise) {
    clusterPromise = call("GET", "/v3/clusters").then((r) => {
      if (!r || !r.data || !r.data.length) throw new ApiError(404, "no cluster in /v3/clusters");
      return r.data[0].cluster_id;
    });
    clusterPromise.catch(() => {
      clusterPromise = null;
    });
  }
  return clusterPromise;
}

/** method + a path under /v3/clusters/{cluster_id} (already encoded). */
export async function api(method, path, body) {
  const cid = await clusterId();
  return call(method, `/v3/clusters/${encodeURIComponent(cid)}${path}`, body);
}
export const get = (path) => api("GET", path);
/** method + a Schema Registry path (Confluent's API at the listener's root). */
export const registry = (method, path, body) => call(method, path, body);
export const enc = encodeURIComponent;

// -- connection status shown in the header (last poll succeeded or not)

const statusListeners = new Set();
export const connection = { ok: true, error: null, at: 0 };
export function setConnection(ok, error) {
  connection.ok = ok;
  connection.error = error;
  connection.at = Date.now();
  statusListeners.forEach((f) => f({ ...connection }));
}
export function useConnection() {
  const [s, set] = useState({ ...connection });
  useEffect(() => {
    statusListeners.add(set);
    return () => statusListeners.delete(set);
  }, []);
  return s;
}

/**
 * Run `load()` now and every `ms` while mounted (never two at once, paused while the tab is hidden).
 * Returns { data, error, loading, refresh }. `deps` restart it.
 */
export function usePoll(load, deps, ms = POLL_MS) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const tick = useRef(null);
  useEffect(() => {
    let alive = true;
    let busy = false;
    let timer = null;
    setState({ data: null, error: null, loading: true });
    const run = async () => {
      if (busy) return;
      busy = true;
      try {
        const data = await load();
        if (alive) setState({ data, error: null, loading: false });
        setConnection(true, null);
      } catch (e) {
        if (alive) setState((s) => ({ data: s.data, error: e, loading: false }));
        if (!(e instanceof ApiError) || e.status === 0) setConnection(false, e.message);
      } finally {
        busy = false;
      }
    };
    tick.current = run;
    run();
    if (ms > 0) {
      timer = setInterval(() => {
        if (!document.hidden) run();
      }, ms);
    }
    return () => {
      alive = false;
      if (timer) clearInterval(timer);
    };
  }, deps);
  const refresh = useCallback(() => tick.current && tick.current(), []);
  return { ...state, refresh };
}

// -- formatting

export function fmtNum(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  return Number(n).toLocaleString("en-US");
}
export function fmtRate(n) {
  if (n === null || n === undefined) return "–";
  return n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(1);
}
export function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}
export function fmtTime(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  const d = new Date(ms);
  const p = (x, n = 2) => String(x).padStart(n, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(
    d.getMinutes()
  )}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

/** base64 → text when the bytes are valid UTF-8, else null. */
export function b64text(b64) {
  if (b64 === null || b64 === undefined) return null;
  try {
    const bin = atob(b64);
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (e) {
    return null;
  }
}

/** text → base64 of its UTF-8 bytes. */
export function textB64(text) {
  let bin = "";
  for (const b of new TextEncoder().encode(text)) bin += String.fromCharCode(b);
  return btoa(bin);
}

/** A REST v3 key/value ({type, data}) as { text, json, kind } for display and search. */
export function decodeData(d) {
  if (d === null || d === undefined) return { text: null, json: false, kind: "null" };
  if (d.type === "JSON") return { text: JSON.stringify(d.data, null, 2), json: true, kind: "json" };
  let s = d.data;
  let kind = "string";
  if (d.type === "BINARY") {
    const t = b64text(d.data);
    if (t === null) return { text: d.data, json: false, kind: "base64" };
    s = t;
    kind = "binary";
  }
  if (typeof s !== "string") s = JSON.stringify(s);
  const trimmed = s.trim();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return { text: JSON.stringify(JSON.parse(trimmed), null, 2), json: true, kind };
    } catch (e) {
      /* not JSON after all */
    }
  }
  return { text: s, json: false, kind };
}

// -- partitions: replica ids and health, whichever shape the REST API gives them in

export const ids = (list, alt) => (Array.isArray(list) ? list : Array.isArray(alt) ? alt : null);
export const replicaIds = (p) => ids(p.replica_ids, p.replicas);
export const isrIds = (p) => ids(p.isr_ids, p.isr);
/** under_replicated when the API says so, else fewer in-sync replicas than replicas. */
export function underReplicated(p) {
  if (typeof p.under_replicated === "boolean") return p.under_replicated;
  const r = replicaIds(p);
  const i = isrIds(p);
  return r !== null && i !== null && i.length < r.length;
}

// -- shared bits of UI

export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<div class="msg err">${error.message || String(error)}</div>`;
}

/** Keep only points from the last HISTORY_MS in a { t: [], ...series } history. */
export function trimHistory(hist) {
  const cutoff = Date.now() / 1000 - HISTORY_MS / 1000;
  let drop = 0;
  while (drop < hist.t.length && hist.t[drop] < cutoff) drop++;
  if (drop) {
    hist.t.splice(0, drop);
    for (const k of Object.keys(hist.series)) hist.series[k].splice(0, drop);
  }
}

const PALETTE = ["#2f6fde", "#e0662b", "#2e9d5b", "#a33ea1", "#c9a227", "#1f9bb5", "#d13b5c",
  "#6b7a8f", "#7c5cd6", "#4f8a10"];

// at least the last minute, so a chart with one or two points still has a sensible time axis
function xRange(min, max) {
  const end = max ?? Date.now() / 1000;
  return [Math.min(min ?? end, end - 60), end];
}

// from 0 (a little below, so a line at 0 is not hidden by the plot's edge) to 10 % above the max
function yRange(max) {
  const top = Math.max(1, (max || 0) * 1.1);
  return [-top * 0.03, top];
}

// uPlot keeps the arrays it is given: hand it copies of the (mutated in place) history
const snapshot = (t, series, labels) => [t.slice(), ...labels.map((l) => series[l].slice())];

/**
 * A uPlot time chart of `series` ({ label: [values] }) over `t` (seconds); rebuilt when the set of
 * series changes, otherwise fed with setData. `height` in px; `small` hides axes (a sparkline).
 */
export function TimeChart({ t, series, height = 200, small = false, id }) {
  const box = useRef(null);
  const plot = useRef(null);
  const labels = Object.keys(series);
  const key = labels.join("\u0001");
  useEffect(() => {
    const el = box.current;
    if (!el || !window.uPlot) return undefined;
    const width = Math.max(200, el.clientWidth || 600);
    const opts = {
      width,
      height,
      legend: { show: !small },
      cursor: { show: !small },
      scales: {
        x: { time: true, range: (u, min, max) => xRange(min, max) },
        y: { range: (u, min, max) => yRange(max) },
      },
      axes: small
        ? [{ show: false }, { show: false }]
        : [{ stroke: "#667085" }, { stroke: "#667085", size: 60 }],
      series: [{}].concat(
        labels.map((l, i) =>
          small
            ? { label: l, stroke: PALETTE[0], width: 1.5, fill: "rgba(47,111,222,.12)" }
            : { label: l, stroke: PALETTE[i % PALETTE.length], width: 1.5 }
        )
      ),
    };
    const u = new window.uPlot(opts, snapshot(t, series, labels), el);
    plot.current = u;
    const onResize = () => u.setSize({ width: Math.max(200, el.clientWidth), height });
    window.addEventListener("resize", onResize);
    return () => {
      window.removeEventListener("resize", onResize);
      u.destroy();
      plot.current = null;
    };
  }, [key, height, small]);
  useEffect(() => {
    if (plot.current) plot.current.setData(snapshot(t, series, labels));
  });
  return html`<div class="chart" id=${id} ref=${box}></div>`;
}
