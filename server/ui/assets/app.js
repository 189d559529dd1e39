// The Grapnel dashboard: one events stream (api/events) brings the
// overview on every change; the page draws it. When the replica goes away
// the page tries it again, then moves to another replica's dashboard,
// whose address the overview lists.
'use strict';
let ov = null;
let es = null;
let lastApplied = -1;
let logs = null;

const $ = (id) => document.getElementById(id);
const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c]));
// A failed sub-state (Pending(StartingFailed), Stopping(DeleteFailed)) is
// a failure, whatever its state: it waits for a fix, not for time.
const cls = (state, sub) => /Failed$/.test(sub || '') ? 'bad' :
  ({Running: 'good', Succeeded: 'good', Failed: 'bad', AgentDisconnected: 'bad', NotScheduled: 'warn', Pending: 'warn', Stopping: 'warn'}[state] || '');

function setConn(text, ok) { const c = $('conn'); c.textContent = text; c.className = ok ? 'good' : 'bad'; }

function connect() {
  es = new EventSource('api/events');
  es.onmessage = (e) => { setConn('live', true); ov = JSON.parse(e.data); draw(); };
  es.onerror = () => { es.close(); setConn('reconnecting', false); moveOn(0); };
}

async function reachable(url, sameOrigin) {
  try {
    const r = await fetch(url, sameOrigin ? {cache: 'no-store'} : {mode: 'no-cors', cache: 'no-store'});
    return !sameOrigin || r.ok;
  } catch (e) { return false; }
}

function uiURL(addr) {
  let host = addr;
  const i = addr.lastIndexOf(':');
  const h = addr.slice(0, i);
  if (h === '' || h === '0.0.0.0' || h === '[::]') host = location.hostname + addr.slice(i);
  return location.protocol + '//' + host + '/';
}

// moveOn retries this replica a few times, then every other replica
// whose dashboard the last overview named.
async function moveOn(round) {
  document.body.dataset.move = 'round ' + round;
  if (await reachable('api/overview', true)) { connect(); return; }
  if (round >= 2 && ov) {
    for (const r of ov.replicas) {
      if (!r.ui || r.id === ov.replica) continue;
      const url = uiURL(r.ui);
      document.body.dataset.move = 'round ' + round + ' trying ' + url;
      if (await reachable(url + 'api/overview', false)) { location.href = url + location.hash; return; }
    }
  }
  setTimeout(() => moveOn(round + 1), 500);
}

function rows(tbody, list, fn) { $(tbody).querySelector('tbody').innerHTML = list.map(fn).join(''); }

function draw() {
  $('replica').textContent = ov.replica;
  $('leader').textContent = ov.leader || 'none';
  $('term').textContent = ov.term;
  $('applied').textContent = ov.applied;
  rows('problems', ov.problems, (p) => `<tr data-problem="${p.id}" title="${esc(p.detail)}"><td>${p.id}</td><td class="bad">${esc(p.kind)}</td>` +
    `<td>${esc(new Date(p.sinceMs).toLocaleString())}</td><td>${esc(new Date(p.lastUpdatedMs).toLocaleString())}</td>` +
    `<td>${esc(p.objects.join(', '))}</td><td>${esc(p.summary)}</td></tr>`);
  $('noproblems').hidden = ov.problems.length > 0;
  rows('replicas', ov.replicas, (r) => `<tr data-replica="${esc(r.id)}"><td>${esc(r.id)}${r.id === ov.replica ? ' (this)' : ''}</td>` +
    `<td class="${r.leader ? 'good' : ''}">${esc(r.role)}</td><td class="${r.healthy ? 'good' : 'bad'}">${r.healthy ? 'healthy' : 'unhealthy'} (${esc(r.gossip)})` +
    `${r.storageFailed ? `<br><span class="storage-failed">storage failed: ${esc(r.storageFailed)}</span>` : ''}</td>` +
    `<td>${r.lastContactMs < 0 ? '—' : r.lastContactMs + ' ms'}</td><td class="mono">${esc(r.grpc)}</td>` +
    `<td class="mono">${r.ui ? `<a href="${esc(uiURL(r.ui))}">${esc(r.ui)}</a>` : ''}</td><td class="mono">${esc(r.release || '—')}</td></tr>`);
  rows('agents', ov.agents, (a) => `<tr data-agent="${esc(a.name)}"><td>${esc(a.name)}</td>` +
    `<td class="${a.connected ? 'good' : 'bad'}">${a.connected ? 'connected' : 'disconnected'}</td><td>${esc(a.mode)}</td>` +
    `<td class="cpu">${a.cpu === undefined ? '—' : a.cpu + ' %'}</td><td class="mem">${a.freeMemory === undefined ? '—' : Math.round(a.freeMemory / 1048576) + ' MiB'}</td><td>${a.workloads}</td>` +
    `<td class="mono"${ov.agentReleases ? '' : ' title="only the leader hears the agents\' hellos: see its dashboard"'}>${esc(a.release || '—')}</td></tr>`);
  const states = [...new Set(ov.workloads.map((w) => w.state))].sort();
  const sel = $('statefilter');
  const keep = sel.value;
  sel.innerHTML = '<option value="">every state</option>' + states.map((s) => `<option>${esc(s)}</option>`).join('');
  sel.value = states.includes(keep) ? keep : '';
  drawWorkloads();
  if (ov.applied !== lastApplied) {
    lastApplied = ov.applied;
    $('graph').src = 'api/graph.svg?at=' + ov.applied;
    showDetail();
  }
}

function drawWorkloads() {
  const f = $('filter').value.toLowerCase();
  const s = $('statefilter').value;
  const list = ov.workloads.filter((w) => (!s || w.state === s) &&
    (!f || [w.name, w.agent, w.state, w.subState].some((x) => String(x).toLowerCase().includes(f))));
  rows('workloads', list, (w) => `<tr class="row" data-workload="${esc(w.name)}"><td>${esc(w.name)}</td><td>${esc(w.agent)}</td>` +
    `<td class="mono" title="${esc(w.instance)}">${esc(w.instance.slice(0, 12))}</td><td>${esc(w.runtime)}</td>` +
    `<td class="state ${cls(w.state, w.subState)}">${esc(w.state)}${w.subState && w.subState !== w.state ? '(' + esc(w.subState) + ')' : ''}</td><td>${esc(w.info)}</td></tr>`);
}

function selected() { const m = location.hash.match(/^#\/w\/(.+)$/); return m ? decodeURIComponent(m[1]) : ''; }

async function showDetail() {
  const name = selected();
  if (!name) { $('detail').hidden = true; stopLogs(); return; }
  let d;
  try {
    const r = await fetch('api/workloads/' + encodeURIComponent(name), {cache: 'no-store'});
    if (!r.ok) { $('detail').hidden = false; $('dname').textContent = name; $('dconfig').textContent = await r.text(); return; }
    d = await r.json();
  } catch (e) { return; }
  if (selected() !== name) return;
  $('detail').hidden = false;
  $('dname').textContent = d.name;
  $('dinst').innerHTML = d.instances.map((i) => `<div>${esc(i.agent)} <span class="mono">${esc(i.instance)}</span> <b class="${cls(i.state, i.subState)}">${esc(i.state)}(${esc(i.subState)})</b></div>`).join('') +
    (d.dependencies ? '<div>depends on: ' + Object.entries(d.dependencies).map(([k, v]) => esc(k) + ' ' + esc(v)).join(', ') + '</div>' : '');
  $('dconfig').textContent = d.renderedConfig;
  rows('dtimeline', d.timeline, (e) => `<tr><td>${e.index}</td><td>${e.timeMs ? new Date(e.timeMs).toLocaleString() : ''}</td><td>${esc(e.kind)}</td>` +
    `<td>${esc(e.op || e.state)}</td><td>${esc(e.agent)}</td><td>${esc(e.requester)}</td><td>${esc((e.fields || []).join(', ') || e.reason)}</td></tr>`);
}

function stopLogs() { if (logs) { logs.close(); logs = null; $('logbtn').textContent = 'follow logs'; } }

function toggleLogs() {
  if (logs) { stopLogs(); return; }
  const name = selected();
  if (!name) return;
  $('dlogs').textContent = '';
  logs = new EventSource('api/workloads/' + encodeURIComponent(name) + '/logs?tail=100');
  $('logbtn').textContent = 'stop';
  logs.onmessage = (e) => { const p = $('dlogs'); p.textContent += e.data + '\n'; p.scrollTop = p.scrollHeight; };
  logs.addEventListener('end', (e) => { $('dlogs').textContent += '-- ' + e.data + '\n'; stopLogs(); });
  logs.onerror = () => stopLogs();
}

document.addEventListener('DOMContentLoaded', () => {
  $('filter').addEventListener('input', () => ov && drawWorkloads());
  $('statefilter').addEventListener('change', () => ov && drawWorkloads());
  $('workloads').addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-workload]');
    if (tr) location.hash = '#/w/' + encodeURIComponent(tr.dataset.workload);
  });
  $('logbtn').addEventListener('click', toggleLogs);
  window.addEventListener('hashchange', () => { stopLogs(); showDetail(); });
  connect();
});
