// uidgen's web console: plain JS, no dependencies, nothing fetched from another origin.
//
// Built to stay open all day: every poll has a timeout, an unreachable server is named in a
// banner (with when it went away) while the last figures stay greyed out, and the chart keeps a
// fixed number of samples, so memory does not grow however long the page is open.
'use strict';

const POLL_MS = 1000;          // the Live panel's refresh
const READY_EVERY = 5;         // /readyz every 5 polls: it asks the store
const APPS_EVERY = 10;         // /v1/apps every 10 polls: it reads the database
const REQUEST_TIMEOUT_MS = 3000;
const CHART_SAMPLES = 600;     // 10 minutes at one sample a second
const MAX_DECODE = 50;         // IDs decoded per click
const TOKEN_KEY = 'uidgen.adminToken';
const CALLER_KEY = 'uidgen.callerToken';

const $ = (id) => document.getElementById(id);

// An element with attributes and children; text always goes in as text, never as HTML, since
// tags, messages and IDs come from clients of the server.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') node.className = v; else if (k === 'text') node.textContent = v; else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

// JSON with every integer beyond 2^53 kept exact as a BigInt: IDs are 64-bit.
function parseJson(text) {
  return JSON.parse(text, (key, value, ctx) =>
    (typeof value === 'number' && !Number.isSafeInteger(value) && ctx && /^-?\d+$/.test(ctx.source))
      ? BigInt(ctx.source) : value);
}

class ApiFailure extends Error {
  constructor(status, body, fallback) {
    super((body && body.message) || fallback);
    this.status = status; this.code = body && body.code; this.fields = (body && body.fields) || {};
  }
}

// The caller token (auth.required), like the admin token in this tab's sessionStorage only.
const callerToken = () => sessionStorage.getItem(CALLER_KEY);
let authRequired = false;   // from /v1/status

// `options` for a request to an ID route (decode, make, segments, apps): the caller token in
// the Authorization header when one is kept. Sent only where the server asks for it.
function asCaller(options = {}) {
  const t = callerToken();
  if (!authRequired || !t) return options;
  return { ...options, headers: { ...(options.headers || {}), authorization: `Bearer ${t}` } };
}

// What to say instead of the server's 401/403 on an ID route: plainly that a caller token is
// needed (or was refused), not an error banner.
function callerNeeded(e) {
  if (!authRequired || (e.status !== 401 && e.status !== 403)) return null;
  if (!callerToken()) return 'This server asks for a caller token: enter one above (Caller token).';
  return e.status === 401 ? `The caller token was refused: ${e.message}` : `The caller token may not do this: ${e.message}`;
}

// A request to this server: the parsed JSON body, or an ApiFailure carrying the server's
// `{code, message, fields}` (status 0 when the server did not answer).
async function api(path, options = {}) {
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), REQUEST_TIMEOUT_MS);
  let response, text;
  try {
    response = await fetch(path, { ...options, signal: ctrl.signal, cache: 'no-store' });
    text = await response.text();
  } catch (e) {
    throw new ApiFailure(0, null, e.name === 'AbortError'
      ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : 'the server cannot be reached');
  } finally {
    clearTimeout(timer);
  }
  let body = null;
  try { body = parseJson(text); } catch (_) { body = null; }
  if (!response.ok) throw new ApiFailure(response.status, body, `${response.status} ${text.slice(0, 200)}`);
  return body === null ? text : body;
}

const fmt = (n) => (typeof n === 'bigint' ? n.toString() : Number(n).toLocaleString('en-US'));
const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

function duration(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  const h = Math.floor(s / 3600);
  return h < 48 ? `${h} h ${Math.floor((s % 3600) / 60)} min` : `${Math.floor(h / 24)} d ${h % 24} h`;
}

// A long span in the largest unit that reads well: years to two years, then days.
function span(ms) {
  const days = Math.floor(ms / 86400000);
  if (days >= 730) return `${(days / 365.25).toFixed(1)} years`;
  return days >= 2 ? `${days} days` : duration(ms);
}

const utc = (ms) => new Date(Number(ms)).toISOString();
// The browser's time with its zone; the zone's full name added only when the short one differs
// ("CET (Europe/Berlin)", but not "UTC (UTC)").
function local(ms) {
  const text = new Date(Number(ms)).toLocaleString(undefined, { timeZoneName: 'short', hour12: false });
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return !zone || text.endsWith(` ${zone}`) ? text : `${text} (${zone})`;
}

// Text with `code spans` (as the API's descriptions write them) as <code> elements, line
// breaks as spaces: the reference shows whole sentences, not their first source line.
function richText(text) {
  return text.replace(/\s*\n\s*/g, ' ').split('`').map((part, i) => (i % 2 ? el('code', { text: part }) : part));
}

// ---------------------------------------------------------------- layouts and bits

let layouts = [];   // GET /v1/layouts, the served one first

function layoutNamed(name) { return layouts.find((l) => l.name === name) || layouts[0]; }

// The 64 bits of `id`, each cell coloured by the field it belongs to.
function bitStrip(id, layout) {
  const bits = BigInt.asUintN(64, id).toString(2).padStart(64, '0');
  const strip = el('div', { class: 'bits', role: 'img', 'aria-label': `the 64 bits of ${id}` });
  for (const f of layout.fields) {
    for (let b = f.bits - 1; b >= 0; b--) {
      const pos = f.shift + b;
      const cell = el('span', { class: `f-${f.name}${b === f.bits - 1 && pos !== 63 ? ' gap' : ''}`,
        title: `bit ${pos}: ${f.name}`, text: bits[63 - pos] });
      strip.append(cell);
    }
  }
  return strip;
}

function legend(layout) {
  return el('div', { class: 'legend' }, ...layout.fields.map((f) =>
    el('span', {}, el('i', { class: `f-${f.name}` }), `${f.name} ${f.bits} bit${f.bits === 1 ? '' : 's'}`)));
}

const FIELD_ORDER = ['time', 'datacenter', 'worker', 'machine', 'process', 'sequence', 'version', 'type', 'method', 'app_id', 'shard', 'index'];

// One decoded ID: its bits, its fields, its time in UTC and in this browser's zone.
function decodedCard(d, layout) {
  const id = BigInt(d.id);
  const kv = el('dl', { class: 'kv' });
  for (const name of FIELD_ORDER) {
    if (d[name] === undefined) continue;
    kv.append(el('dt', { text: name }), el('dd', { class: `field-${name}`, text: fmt(d[name]) }));
  }
  // The ID in the form asked for (GET /v1/ids/{id}?form=), when not plain decimal.
  if (d.text !== undefined && d.text !== id.toString()) {
    kv.append(el('dt', { text: 'written' }), el('dd', { class: 'field-text', text: d.text }));
  }
  if (d.timestamp_ms !== undefined) {
    const zoned = d.zone !== undefined && d.zone !== 'UTC';
    kv.append(el('dt', { text: 'time (UTC)' }), el('dd', { class: 'time-utc', text: zoned ? utc(d.timestamp_ms) : d.timestamp }));
    // The zone picked above, as the server shows it (?tz=): it names the zone.
    if (zoned) kv.append(el('dt', { text: `time (${d.zone})` }), el('dd', { class: 'time-zone', text: d.timestamp }));
    kv.append(el('dt', { text: 'time (local)' }), el('dd', { class: 'time-local', text: local(d.timestamp_ms) }));
  }
  return el('div', { class: 'card decoded' },
    el('div', {}, el('span', { class: 'id', text: id.toString() }), ` · ${d.layout}`),
    bitStrip(id, layout), legend(layout), kv);
}

function errorCard(what, message) {
  return el('div', { class: 'card failed' }, el('span', { class: 'id', text: what }), el('div', { class: 'error', text: message }));
}

// The forms and zones the decode and make panels offer (?form=, ?tz=): the forms the server's
// own document lists (`masked` only where it holds keys), and UTC first, then this browser's
// zone and a few others; the server reads any IANA name or offset.
const ID_FORMS = ['decimal', 'base36', 'base62'];
async function idForms() {
  try {
    const doc = await apiDocument();
    const form = (doc.paths['/v1/ids'].get.parameters || []).find((p) => p.name === 'form');
    if (form && form.schema && Array.isArray(form.schema.enum)) return form.schema.enum;
  } catch (_) { /* the plain forms, which every server reads */ }
  return ID_FORMS;
}
async function fillShownAs() {
  const forms = await idForms();
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const zones = [...new Set(['UTC', browserZone, 'Asia/Shanghai', 'Europe/Berlin', 'America/New_York', '+08:00'].filter(Boolean))];
  for (const select of document.querySelectorAll('select.idform')) {
    select.replaceChildren(...forms.map((f) => el('option', { value: f, text: f })));
  }
  for (const select of document.querySelectorAll('select.tz')) {
    select.replaceChildren(...zones.map((z) => el('option', { value: z, text: z })));
  }
}

// `form=` and `tz=` of the panel `prefix` as a query string.
// (`form=decimal` is left out: it is what the routes read without one.)
function shownAs(prefix) {
  const form = $(`${prefix}-idform`).value;
  const tz = `tz=${encodeURIComponent($(`${prefix}-tz`).value)}`;
  return form === 'decimal' ? tz : `form=${encodeURIComponent(form)}&${tz}`;
}

async function loadLayouts() {
  if (!$('decode-tz').options.length) await fillShownAs();
  layouts = await api('/v1/layouts');
  const select = $('decode-layout');
  select.replaceChildren(...layouts.map((l) =>
    el('option', { value: l.name, text: l.served ? `${l.name} (served)` : l.name })));
  buildMakeForm(layouts[0]);
}

// ---------------------------------------------------------------- decode

async function decode(event) {
  event.preventDefault();
  const out = $('decode-results');
  const ids = $('decode-input').value.split(/[\s,;]+/).filter(Boolean);
  if (ids.length === 0) { out.replaceChildren(errorCard('', 'paste an ID first')); return; }
  const name = $('decode-layout').value;
  const layout = layoutNamed(name);
  const shown = ids.slice(0, MAX_DECODE);
  const cards = await Promise.all(shown.map(async (text) => {
    try {
      const d = await api(`/v1/ids/${encodeURIComponent(text)}?layout=${encodeURIComponent(name)}&${shownAs('decode')}`, asCaller());
      return decodedCard(d, layout);
    } catch (e) {
      const needed = callerNeeded(e);
      return needed ? el('div', { class: 'card caller-needed' }, el('span', { class: 'id', text }), el('p', { class: 'muted', text: needed }))
        : errorCard(text, e.message);
    }
  }));
  if (ids.length > shown.length) cards.push(el('p', { class: 'muted', text: `decoded the first ${MAX_DECODE} of ${ids.length} IDs` }));
  out.replaceChildren(...cards);
}

// ---------------------------------------------------------------- make

// Inputs of the make form: the request's field name, its label, and a hint.
function makeInputs(layout) {
  const has = (n) => layout.fields.some((f) => f.name === n);
  const inputs = [
    ['timestamp', 'timestamp (ISO-8601 or ms)', new Date().toISOString().replace(/\.\d+Z$/, 'Z')],
    ['time', `or time (${layout.unit_ms} ms units since ${layout.epoch})`, ''],
    ['worker', 'worker', '1'],
    ['sequence', 'sequence', '0'],
  ];
  for (const n of ['version', 'type', 'method']) if (has(n)) inputs.push([n, n, '']);
  if (has('datacenter')) inputs.push(['datacenter', 'datacenter (the served one when empty)', '']);
  return inputs;
}

function buildMakeForm(layout) {
  const box = $('make-fields');
  // Keep what the operator typed when the form is rebuilt (after a reconnect).
  const typed = Object.fromEntries([...box.querySelectorAll('input')].map((i) => [i.name, i.value]));
  box.replaceChildren(...makeInputs(layout).map(([name, label, value]) =>
    el('label', {}, label, el('input', { id: `make-${name}`, name, value: typed[name] ?? value, autocomplete: 'off', spellcheck: 'false' }),
      el('span', { class: 'field-error', id: `make-${name}-error` }))));
  // `time` and `timestamp` are alternatives: typing one clears the other.
  const [time, stamp] = [$('make-time'), $('make-timestamp')];
  time.addEventListener('input', () => { if (time.value) stamp.value = ''; });
  stamp.addEventListener('input', () => { if (stamp.value) time.value = ''; });
}

// The body as JSON text: digits go in as numbers written verbatim (exact beyond 2^53), anything
// else as a string, so the server's message says what is wrong with it.
function makeBody() {
  const parts = [];
  for (const input of $('make-fields').querySelectorAll('input')) {
    const v = input.value.trim();
    if (v === '') continue;
    parts.push(`${JSON.stringify(input.name)}:${/^\d+$/.test(v) ? v : JSON.stringify(v)}`);
  }
  return `{${parts.join(',')}}`;
}

async function make(event) {
  event.preventDefault();
  for (const input of $('make-fields').querySelectorAll('input')) {
    input.classList.remove('invalid');
    $(`${input.id}-error`).textContent = '';
  }
  $('make-error').hidden = true;
  try {
    const d = await api(`/v1/ids/make?${shownAs('make')}`, asCaller({ method: 'POST', headers: { 'content-type': 'application/json' }, body: makeBody() }));
    $('make-result').replaceChildren(decodedCard(d, layouts[0]));
  } catch (e) {
    const needed = callerNeeded(e);
    if (needed) {
      $('make-result').replaceChildren(el('p', { class: 'muted caller-needed', text: needed }));
      return;
    }
    $('make-result').replaceChildren();
    let unplaced = false;
    for (const [field, message] of Object.entries(e.fields)) {
      const input = $(`make-${field}`);
      if (input) {
        input.classList.add('invalid');
        $(`make-${field}-error`).textContent = message;
      } else {
        unplaced = true;
      }
    }
    if (unplaced || Object.keys(e.fields).length === 0) {
      $('make-error').textContent = e.message;
      $('make-error').hidden = false;
    }
  }
}

// ---------------------------------------------------------------- live

const chart = { rates: [], last: null, max: 0 };

// One sample a poll; the array never holds more than CHART_SAMPLES.
function chartSample(status) {
  let rate = null;
  const prev = chart.last;
  // A restarted server counts from zero again: start a new baseline instead of a negative rate.
  if (prev && status.ids_issued >= prev.ids_issued && status.now_ms > prev.now_ms && status.uptime_ms >= prev.uptime_ms) {
    rate = (status.ids_issued - prev.ids_issued) * 1000 / (status.now_ms - prev.now_ms);
  }
  chart.last = { ids_issued: status.ids_issued, now_ms: status.now_ms, uptime_ms: status.uptime_ms };
  pushRate(rate);
  return rate;
}

function pushRate(rate) {
  chart.rates.push(rate);
  if (chart.rates.length > CHART_SAMPLES) chart.rates.splice(0, chart.rates.length - CHART_SAMPLES);
  drawChart();
}

function drawChart() {
  // The scale never goes below 1/s (a flat line at the bottom when idle); the caption says the
  // real peak, 0 when nothing was issued.
  const peak = Math.max(0, ...chart.rates.filter((r) => r !== null));
  const max = Math.max(1, peak);
  const w = 600, h = 120, step = w / (CHART_SAMPLES - 1);
  const offset = CHART_SAMPLES - chart.rates.length;
  let d = '', pen = false;
  chart.rates.forEach((r, i) => {
    if (r === null) { pen = false; return; }   // a gap where the server did not answer
    const x = ((offset + i) * step).toFixed(1), y = (h - 4 - (r / max) * (h - 8)).toFixed(1);
    d += `${pen ? 'L' : 'M'}${x},${y}`;
    pen = true;
  });
  $('chart-line').setAttribute('d', d);
  $('chart-max').textContent = fmt(Math.round(peak));
}

const conn = { downSince: null, failures: 0, polls: 0 };

function setOnline(ok, message) {
  const badge = $('conn');
  if (ok) {
    if (conn.downSince !== null) {
      $('offline').hidden = true;
      // It may have come back as another configuration (layout, epoch): ask again.
      loadLayouts().catch(() => {});
    }
    conn.downSince = null; conn.failures = 0;
    badge.className = 'conn ok'; badge.textContent = 'connected';
    $('live').classList.remove('stale');
    return;
  }
  conn.failures += 1;
  if (conn.downSince === null) conn.downSince = new Date();
  badge.className = 'conn down'; badge.textContent = 'unreachable';
  $('live').classList.add('stale');
  const banner = $('offline');
  banner.textContent = `The server does not answer (${message}) since ${conn.downSince.toLocaleTimeString()} — ` +
    `${plural(conn.failures, 'failed poll')}; retrying every second. The figures below are the last ones received.`;
  banner.hidden = false;
}

function showStatus(s) {
  $('version').textContent = `v${s.version}`;
  $('live-worker').textContent = fmt(s.worker_id);
  $('live-assigner').textContent = s.assigner ? `assigned: ${s.assigner}` : 'embedded';
  $('live-generator').textContent = s.generator || '–';
  $('live-layout').textContent = `layout ${s.layout}`;
  $('live-issued').textContent = fmt(s.ids_issued);
  $('live-uptime').textContent = `up ${duration(s.uptime_ms)}`;
  const rate = chartSample(s);
  $('live-rate').textContent = rate === null ? '…' : fmt(Math.round(rate));
  if (s.ring) {
    const pct = s.ring.capacity ? (100 * s.ring.available) / s.ring.capacity : 0;
    $('live-ring-fill').textContent = `${pct.toFixed(1)} %`;
    $('live-ring-bar').style.width = `${pct}%`;
    $('live-ring').textContent = `${fmt(s.ring.available)} of ${fmt(s.ring.capacity)} slots`;
    $('live-borrowed').textContent = fmt(s.ring.borrowed_units);
    $('live-padding').textContent = `${fmt(s.ring.padding_runs)} padding runs`;
  } else {
    $('live-ring-fill').textContent = 'no ring';
    $('live-ring').textContent = `the ${s.generator || 'embedded'} generator has no ring buffer`;
    $('live-borrowed').textContent = '–';
  }
  showRunway(s.runway);
  $('stopped').hidden = !s.stopped;
  $('stopped').textContent = s.stopped || '';
  $('live-updated').textContent = `updated ${new Date(s.now_ms).toLocaleTimeString()}`;
  showZk(s.zookeeper);
  showShardedStats(s.sharded);
  $('admin-disabled').hidden = s.admin_enabled;
  $('token-form').hidden = !s.admin_enabled;
  showAdmin(s.admin_enabled);
  authRequired = Boolean(s.auth_required);
  showCaller();
}

// The time field's runway: the shorter figure (from the borrowed lead) large, coloured once
// the server warns (runway_warning_days) or it has run out.
function showRunway(r) {
  if (!r) return;
  const value = $('live-runway');
  value.textContent = r.left_at_lead_ms === 0 ? 'run out' : span(r.left_at_lead_ms);
  value.className = `value${r.left_at_lead_ms === 0 ? ' bad' : r.warning ? ' warn' : ''}`;
  $('live-runway-sub').textContent = `runs out ${r.runs_out_at.slice(0, 10)}; ${span(r.left_at_clock_ms)} at today's rate`;
}

function fillKv(list, rows) {
  list.replaceChildren(...rows.flatMap(([k, v, cls]) => [el('dt', { text: k }), el('dd', { class: cls || '', text: v })]));
}

function showZk(z) {
  $('zk').hidden = !z;
  if (!z) return;
  const now = Date.now();
  fillKv($('zk-list'), [
    ['connected', z.connected ? 'yes' : 'no — reports are failing', z.connected ? 'ok' : 'bad'],
    ['issuing', z.issuing ? 'yes' : 'no', z.issuing ? 'ok' : 'bad'],
    ['last report', z.last_report_age_ms === undefined ? 'none yet' : `${duration(z.last_report_age_ms)} ago`],
    ['IDs allowed until', `${utc(z.reserved_until_ms)} (${duration(Math.max(0, z.reserved_until_ms - now))} left)`],
    ['outage since', z.outage_since_ms === undefined ? '–' : utc(z.outage_since_ms), z.outage_since_ms === undefined ? '' : 'warn'],
    ['report failures', fmt(z.report_failures)],
    ['reclaimed ids', fmt(z.reclaimed)],
    ['worker id lost', z.lost ? 'yes — see the server log' : 'no', z.lost ? 'bad' : ''],
  ]);
}

function showShardedStats(sh) {
  $('sharded').hidden = !sh;
  if (!sh) return;
  fillKv($('sharded-list'), Object.entries(sh).map(([k, v]) => [k.replaceAll('_', ' '), fmt(v)]));
}

async function pollApps() {
  try {
    const apps = await api('/v1/apps', asCaller());
    $('apps').tBodies[0].replaceChildren(...apps.map((a) => el('tr', {},
      el('td', { text: a.app_id }), el('td', { text: a.name }), el('td', { text: fmt(a.step) }),
      el('td', { text: fmt(a.largest_id) }), el('td', { text: a.shards }))));
  } catch (e) {
    const needed = callerNeeded(e);
    $('apps').tBodies[0].replaceChildren(el('tr', {}, el('td', { colspan: 5, class: needed ? 'muted' : 'bad', text: needed || e.message })));
  }
}

function segmentBar(seg, current) {
  const pct = seg.step > 0 ? (100 * seg.idle) / seg.step : 0;
  const fill = el('div', { class: 'fill' });
  fill.style.width = `${pct}%`;   // through the CSSOM: the page's CSP refuses style attributes
  return el('div', { class: `seg${current ? ' current' : ''}`, title: `value ${seg.value}, max ${seg.max}, step ${seg.step}` },
    fill,
    el('span', { class: 'text', text: seg.step > 0 ? `${fmt(seg.idle)} of ${fmt(seg.step)} left · max ${fmt(seg.max)}` : 'not loaded' }));
}

async function pollSegments() {
  let tags;
  const note = $('segments-note');
  try {
    tags = await api('/v1/segments', asCaller());
  } catch (e) {
    if (e.code === 'segments_disabled') { $('segments').hidden = true; return; }
    const needed = callerNeeded(e);
    if (!needed) throw e;
    $('segments').hidden = false;
    note.textContent = needed; note.hidden = false;
    $('segment-table').tBodies[0].replaceChildren();
    return;
  }
  note.hidden = true;
  $('segments').hidden = false;
  const rows = tags.map((t) => {
    const flags = [
      el('span', { class: `flag${t.init ? '' : ' bad'}`, text: t.init ? 'init' : 'not init' }),
      el('span', { class: 'flag', text: t.next_ready ? 'next ready' : 'next not ready' }),
    ];
    if (t.loading) flags.push(el('span', { class: 'flag', text: 'loading' }));
    if (t.load_failing) flags.push(el('span', { class: 'flag bad', text: t.last_error || 'load failing' }));
    const name = el('td', { class: 'tag', text: t.tag });
    name.addEventListener('click', () => { $('tag-name').value = t.tag; if (t.min_step > 0) $('tag-step').value = t.min_step; });
    // Before its first load a tag has no dynamic step yet: show the stored one when known.
    const step = t.step > 0 ? `${fmt(t.step)} (min ${fmt(t.min_step)})`
      : t.min_step > 0 ? `${fmt(t.min_step)} (stored; no segment loaded yet)` : 'no segment loaded yet';
    return el('tr', {}, name, el('td', { class: 'step', text: step }),
      el('td', {}, segmentBar(t.segments[0], t.pos === 0)), el('td', {}, segmentBar(t.segments[1], t.pos === 1)),
      el('td', {}, ...flags));
  });
  $('segment-table').tBodies[0].replaceChildren(...rows);
}

async function pollReady() {
  const ready = $('live-ready');
  try {
    const text = await api('/readyz');
    ready.textContent = text.startsWith('ready (') ? 'degraded' : 'ready';
    ready.className = text.startsWith('ready (') ? 'value warn' : 'value ok';
    ready.title = text;
  } catch (e) {
    if (e.status === 0) throw e;
    ready.textContent = 'not ready'; ready.className = 'value bad'; ready.title = e.message;
  }
}

let polling = false;

async function poll() {
  if (polling) return;   // a slow answer must not pile up requests
  polling = true;
  try {
    const status = await api('/v1/status');
    setOnline(true);
    showStatus(status);
    const jobs = [];
    if (status.segments_enabled) jobs.push(pollSegments()); else $('segments').hidden = true;
    if (conn.polls % READY_EVERY === 0 || conn.downSince !== null) jobs.push(pollReady());
    if (status.sharded && conn.polls % APPS_EVERY === 0) jobs.push(pollApps());
    await Promise.all(jobs);
    if (layouts.length === 0) await loadLayouts();
  } catch (e) {
    if (e.status === 0) {
      if (conn.downSince === null) pushRate(null);
      setOnline(false, e.message);
    } else {
      setOnline(true);
      $('stopped').hidden = false; $('stopped').textContent = `status: ${e.message}`;
    }
  } finally {
    conn.polls += 1;
    polling = false;
  }
}

// ---------------------------------------------------------------- admin

// The token lives in this tab's sessionStorage and in requests' Authorization header only.
const token = () => sessionStorage.getItem(TOKEN_KEY);

function showAdmin(enabled) {
  const has = Boolean(token());
  $('admin-actions').hidden = !(enabled && has);
  $('token-forget').hidden = !has;
  $('token-btn').textContent = has ? 'Replace token' : 'Use token';
}

// The token is checked at once: a PUT of an empty body to an admin route. The server checks
// the token before it reads the body, so a wrong token is 401/403 and a right one gets to the
// body's 400 (or 404 with segment mode off), and nothing is written either way.
async function useToken(event) {
  event.preventDefault();
  const value = $('admin-token').value.trim();
  if (!value) return;
  const result = $('token-result');
  try {
    await api('/v1/admin/segments/token-check', {
      method: 'PUT', headers: { 'content-type': 'application/json', authorization: `Bearer ${value}` }, body: '{}',
    });
  } catch (e) {
    if (e.status === 0 || e.status === 401 || e.status === 403) {
      result.className = 'error';
      result.textContent = e.status === 0 ? `cannot check the token: ${e.message}` : `token refused: ${e.message}`;
      return;
    }
  }
  $('admin-token').value = '';
  sessionStorage.setItem(TOKEN_KEY, value);
  result.className = 'ok';
  result.textContent = 'token accepted';
  showAdmin(true);
}

function showCaller() {
  const has = Boolean(callerToken());
  $('caller-form').hidden = !authRequired;
  $('caller-needed').hidden = has;
  $('caller-forget').hidden = !has;
  $('caller-btn').textContent = has ? 'Replace caller token' : 'Use caller token';
}

// A caller token is checked at once by decoding an ID (`GET /v1/ids/1`: it takes no ID): 401
// is a token the server does not accept (unknown, revoked or expired). A 403 only says the
// token may not use the `ids` routes; it may still be allowed segment tags, so it is kept.
async function useCallerToken(event) {
  event.preventDefault();
  const value = $('caller-token').value.trim();
  if (!value) return;
  const result = $('caller-result');
  try {
    await api('/v1/ids/1', { headers: { authorization: `Bearer ${value}` } });
  } catch (e) {
    if (e.status === 0 || e.status === 401) {
      result.className = 'error';
      result.textContent = e.status === 0 ? `cannot check the token: ${e.message}` : `caller token refused: ${e.message}`;
      return;
    }
  }
  $('caller-token').value = '';
  sessionStorage.setItem(CALLER_KEY, value);
  result.className = 'ok';
  result.textContent = 'caller token kept for this tab';
  showCaller();
  poll();
}

function forgetCallerToken() {
  sessionStorage.removeItem(CALLER_KEY);
  $('caller-result').textContent = '';
  showCaller();
}

function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  $('tag-result').replaceChildren();
  $('token-result').textContent = '';
  showAdmin(true);
}

// The API's description, fetched once: the console reads bounds from it (a tag's step) rather
// than keep its own copy of them.
let apiDoc = null;
async function apiDocument() {
  if (!apiDoc) apiDoc = await api('/openapi.json');
  return apiDoc;
}

// Why `text` is no step the server takes, in words; null when it is one.
async function badStep(text) {
  let min = 1, max = null;
  try {
    const step = (await apiDocument()).components.schemas.TagUpdate.properties.step;
    min = step.minimum; max = step.maximum;
  } catch (_) { /* the server will say it */ }
  const range = max === null ? `at least ${fmt(min)}` : `from ${fmt(min)} to ${fmt(max)}`;
  if (!/^\d+$/.test(text) || BigInt(text) < BigInt(min) || (max !== null && BigInt(text) > BigInt(max))) {
    return `the step must be a whole number ${range}${text ? `, not “${text}”` : ''}`;
  }
  return null;
}

async function saveTag(event) {
  event.preventDefault();
  const tag = $('tag-name').value.trim();
  const step = $('tag-step').value.trim();
  const description = $('tag-description').value;
  const wrong = await badStep(step);
  $('tag-step').classList.toggle('invalid', Boolean(wrong));
  if (wrong) {
    $('tag-result').replaceChildren(el('p', { class: 'error', text: wrong }));
    return;
  }
  const body = `{"step":${step}${description ? `,"description":${JSON.stringify(description)}` : ''}}`;
  try {
    const row = await api(`/v1/admin/segments/${encodeURIComponent(tag)}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token()}` },
      body,
    });
    $('tag-result').replaceChildren(el('p', { class: 'ok', text: `saved ${row.tag}: step ${fmt(row.step)}, max_id ${fmt(row.max_id)}` }));
  } catch (e) {
    $('tag-result').replaceChildren(el('p', { class: 'error', text: e.message }));
  }
}

// ---------------------------------------------------------------- API reference

// A schema's name or type, for one line of text.
function schemaName(schema) {
  if (!schema) return '';
  if (schema.$ref) return schema.$ref.split('/').pop();
  if (schema.type === 'array') return `[${schemaName(schema.items)}]`;
  return Array.isArray(schema.type) ? schema.type.join('|') : (schema.type || 'object');
}

// Every operation of /openapi.json: method, path, summary, parameters, body, responses.
async function renderApi() {
  const body = $('api-body');
  let doc;
  try { doc = await apiDocument(); } catch (e) { body.replaceChildren(el('p', { class: 'error', text: e.message })); return; }
  const ops = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const lines = [];
      for (const p of op.parameters || []) {
        lines.push(el('li', {}, `${p.in} `, el('code', { text: p.name }), `${p.required ? '' : ' (optional)'}: `, ...richText(p.description || '')));
      }
      const req = op.requestBody && op.requestBody.content && op.requestBody.content['application/json'];
      if (req) lines.push(el('li', {}, 'body ', el('code', { text: schemaName(req.schema) })));
      for (const [status, r] of Object.entries(op.responses || {})) {
        const content = r.content ? Object.entries(r.content)[0] : null;
        lines.push(el('li', {}, el('code', { text: status }), ' ', ...richText(r.description || ''),
          content ? el('code', { text: ` ${content[0]} ${schemaName(content[1].schema)}` }) : ''));
      }
      const about = [op.summary, (op.description || '').split(/\n\s*\n/)[0]].filter(Boolean).join(' ');
      ops.push(el('div', { class: 'op' }, el('span', { class: 'method', text: method }), el('span', { class: 'path', text: path }),
        el('div', { class: 'summary muted' }, ...richText(about)), el('ul', {}, ...lines)));
    }
  }
  body.replaceChildren(el('p', { class: 'muted', text: `${doc.info.title} ${doc.info.version}: ${ops.length} operations` }), ...ops);
}

// ---------------------------------------------------------------- start

document.addEventListener('DOMContentLoaded', () => {
  $('decode-form').addEventListener('submit', decode);
  // Enter decodes; Shift+Enter starts a new line for another ID.
  $('decode-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); $('decode-form').requestSubmit(); }
  });
  $('make-form').addEventListener('submit', make);
  $('token-form').addEventListener('submit', useToken);
  $('token-forget').addEventListener('click', forgetToken);
  $('caller-form').addEventListener('submit', useCallerToken);
  $('caller-forget').addEventListener('click', forgetCallerToken);
  $('tag-form').addEventListener('submit', saveTag);
  $('api').addEventListener('toggle', () => { if ($('api').open) renderApi(); });
  loadLayouts().catch((e) => setOnline(false, e.message));
  poll();
  setInterval(poll, POLL_MS);
});
