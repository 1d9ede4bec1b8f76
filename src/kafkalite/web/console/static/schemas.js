// kafkalite console: the Schema Registry (subjects, versions, a schema's text, compatibility level and test).
import { useState } from "preact/hooks";
import { html, registry, enc, usePoll, ErrorBox } from "./lib.js";

const LEVELS = ["NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"];

async function loadSubjects() {
  const [latest, config] = await Promise.all([
    registry("GET", "/schemas?latestOnly=true"),
    registry("GET", "/config"),
  ]);
  return { latest, global: config.compatibilityLevel };
}

export function SchemasPage() {
  const { data, error } = usePoll(loadSubjects, []);
  const rows = data ? [...data.latest].sort((a, b) => a.subject.localeCompare(b.subject)) : [];
  return html`
    <h1>Schemas</h1>
    <${ErrorBox} error=${error} />
    ${data && html`<p class="muted">Global compatibility: <b id="global-compat">${data.global}</b></p>`}
    <div class="panel">
      <table id="subjects">
        <thead><tr><th>Subject</th><th>Type</th><th class="num">Latest version</th><th class="num">Id</th></tr></thead>
        <tbody>
          ${rows.map(
            (s) => html`<tr data-subject=${s.subject}>
              <td><a href=${"#/schemas/" + enc(s.subject)}>${s.subject}</a></td>
              <td>${s.schemaType || "AVRO"}</td>
              <td class="num">${s.version}</td>
              <td class="num">${s.id}</td>
            </tr>`
          )}
        </tbody>
      </table>
      ${data && !rows.length && html`<p class="muted">No schemas registered yet.</p>`}
    </div>
  `;
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (e) {
    return text;
  }
}

async function loadSubject(subject) {
  const s = enc(subject);
  const [versions, config] = await Promise.all([
    registry("GET", `/subjects/${s}/versions`),
    registry("GET", `/config/${s}?defaultToGlobal=true`),
  ]);
  return { versions, level: config.compatibilityLevel };
}

function CompatForm({ subject, type }) {
  const [text, setText] = useState("");
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const test = async (ev) => {
    ev.preventDefault();
    setError(null);
    try {
      const body = { schema: text };
      if (type && type !== "AVRO") body.schemaType = type;
      setResult(await registry("POST", `/compatibility/subjects/${enc(subject)}/versions/latest?verbose=true`, body));
    } catch (e) {
      setError(e);
      setResult(null);
    }
  };
  return html`<form class="panel" id="compat-test" onSubmit=${test}>
    <h2>Test a new schema</h2>
    <${ErrorBox} error=${error} />
    <textarea name="schema" rows="6" cols="80" value=${text} onInput=${(e) => setText(e.target.value)}></textarea>
    <div><button type="submit">Test compatibility</button></div>
    ${result && html`<div id="compat-result" class=${result.is_compatible ? "msg" : "msg err"}>
      ${result.is_compatible ? "Compatible" : "Incompatible"}
      ${(result.messages || []).map((m) => html`<div class="muted">${m}</div>`)}</div>`}
  </form>`;
}

export function SchemaPage({ subject }) {
  const { data, error, refresh } = usePoll(() => loadSubject(subject), [subject]);
  const [picked, setPicked] = useState(null);
  const version = picked || (data && data.versions.length ? data.versions[data.versions.length - 1] : null);
  const detail = usePoll(
    () => (version ? registry("GET", `/subjects/${enc(subject)}/versions/${version}`) : Promise.resolve(null)),
    [subject, version],
    0
  );
  const [levelError, setLevelError] = useState(null);
  const setLevel = async (ev) => {
    try {
      await registry("PUT", `/config/${enc(subject)}`, { compatibility: ev.target.value });
      setLevelError(null);
      refresh();
    } catch (e) {
      setLevelError(e);
    }
  };
  const sv = detail.data;
  return html`
    <h1>Subject ${subject}</h1>
    <${ErrorBox} error=${error || detail.error || levelError} />
    ${data && html`<div class="panel row">
      <label>Version<select id="version" value=${version} onChange=${(e) => setPicked(Number(e.target.value))}>
        ${data.versions.map((v) => html`<option value=${v}>${v}</option>`)}</select></label>
      <label>Compatibility<select id="compat-level" value=${data.level} onChange=${setLevel}>
        ${LEVELS.map((l) => html`<option value=${l}>${l}</option>`)}</select></label>
      ${sv && html`<span>id <b id="schema-id">${sv.id}</b> · ${sv.schemaType || "AVRO"}
        ${(sv.references || []).length ? ` · references: ${sv.references.map((r) => r.subject + "/" + r.version).join(", ")}` : ""}</span>`}
    </div>`}
    ${sv && html`<pre class="panel" id="schema-text">${pretty(sv.schema)}</pre>`}
    ${sv && html`<${CompatForm} subject=${subject} type=${sv.schemaType} />`}
  `;
}
