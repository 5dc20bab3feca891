// memtrail view: the browser side of `memtrail view`.
//
// Plain ES2020, no framework and no build step. Every string that comes
// from the data (function and file names, C++ templates full of < > &,
// program arguments) goes into the page through textContent,
// createTextNode or setAttribute, never through innerHTML.
//
// All the data comes through api(path), and every view's path is built by
// viewURL(view, params), so that a saved page can carry the responses,
// keyed by their exact paths, in <script id="memtrail-data"
// type="application/json">.
'use strict';

(function () {

// ---------------------------------------------------------------------------
// Small DOM helpers

const SVG_NS = 'http://www.w3.org/2000/svg';

function $(sel, root) { return (root || document).querySelector(sel); }
function $$(sel, root) { return Array.from((root || document).querySelectorAll(sel)); }

// el makes an HTML element. props: class, text, on<event> handlers, or
// attributes (set with setAttribute). Children are nodes or strings (made
// text nodes).
function el(tag, props, ...kids) {
  return fill(document.createElement(tag), props, kids);
}

function svgEl(tag, props, ...kids) {
  return fill(document.createElementNS(SVG_NS, tag), props, kids);
}

function fill(e, props, kids) {
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.setAttribute('class', v);
      else if (k === 'text') e.textContent = String(v);
      else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
  }
  for (const c of kids.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function clear(e) {
  while (e.firstChild) e.removeChild(e.firstChild);
  return e;
}

function svgTitle(text) { return svgEl('title', { text }); }

// ---------------------------------------------------------------------------
// Formatting, as memtrail's text report writes numbers

function fmtCount(n) {
  n = Math.round(Number(n) || 0);
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function plural(n, noun) {
  return n === 1 ? '1 ' + noun : fmtCount(n) + ' ' + noun + 's';
}

const BYTE_UNITS = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

// fmtSize: "204 B", "2.39 KiB", "999.9 KiB", "1.95 MiB".
// fixedLikeGo writes v with d decimals as Go's fmt does, so that the UI
// and memtrail report agree: both round the exact value, but where it is
// exactly halfway (53.25 KiB), toFixed rounds up and Go to the even digit.
function fixedLikeGo(v, d) {
  const extra = 30, exact = v.toFixed(d + extra), rest = exact.slice(-extra);
  if (/^50*$/.test(rest)) {
    const head = exact.slice(0, -extra), last = head.replace('.', '').slice(-1);
    if (Number(last) % 2 === 0) return head.endsWith('.') ? head.slice(0, -1) : head;
  }
  return v.toFixed(d);
}

function fmtSize(n) {
  n = Number(n) || 0;
  if (n < 1024) return fmtCount(n) + ' B';
  let v = n / 1024, u = 0;
  while (v >= 1024 && u < BYTE_UNITS.length - 1) { v /= 1024; u++; }
  return fixedLikeGo(v, v < 10 ? 2 : 1) + ' ' + BYTE_UNITS[u];
}

function fmtBytesExact(n) {
  return n < 1024 ? fmtSize(n) : fmtSize(n) + ' (' + fmtCount(n) + ' bytes)';
}

// fmtDuration: a span in ns: "512 ns", "7.5 µs", "0.45 ms", "12.5 ms", "3.27 s".
function fmtDuration(ns) {
  ns = Math.max(Number(ns) || 0, 0);
  const ms = ns / 1e6;
  if (ns < 1000) return Math.round(ns) + ' ns';
  if (ns < 10000) return fixedLikeGo(ns / 1e3, 1) + ' µs';
  if (ms < 10) return fixedLikeGo(ms, 2) + ' ms';
  if (ms < 1000) return fixedLikeGo(ms, 1) + ' ms';
  if (ms < 100000) return fixedLikeGo(ms / 1000, 2) + ' s';
  return fixedLikeGo(ms / 1000, 0) + ' s';
}

function fmtPercent(part, whole) {
  if (!whole) return '–';
  return fixedLikeGo(100 * part / whole, 1) + '%';
}

// The number formats, for the browser tests that hold them to memtrail
// report's.
window.memtrailFormat = { size: fmtSize, duration: fmtDuration };

const COST_LABELS = {
  peak: 'bytes live at the peak',
  leaked: 'still in use at exit',
  allocated: 'bytes allocated',
  allocations: 'allocations',
  temporary: 'temporary allocations',
};

function costIsCount(cost) { return cost === 'allocations' || cost === 'temporary'; }

function fmtCost(cost, v) {
  if (cost === 'allocations') return plural(v, 'allocation');
  if (cost === 'temporary') return plural(v, 'temporary allocation');
  return fmtSize(v);
}

function fmtCostShort(cost, v) {
  return costIsCount(cost) ? fmtCount(v) : fmtSize(v);
}

function basename(p) {
  const s = String(p || '');
  const i = s.lastIndexOf('/');
  return i >= 0 ? s.slice(i + 1) : s;
}

// frameWhere says where a frame is: "widget.c:31", or "in libc.so.6".
function frameWhere(f, full) {
  if (f.file) {
    const name = full ? f.file : basename(f.file);
    return f.line ? name + ':' + f.line : name;
  }
  if (f.object) return 'in ' + (full ? f.object : basename(f.object));
  return '';
}

// frameName names a frame as memtrail report does: a frame of no known
// function by its object and offset (the server's "name").
function frameName(f) { return f.function || f.name || (f.address ? '?? ' + f.address : '??'); }

function shellQuote(s) {
  s = String(s);
  if (s !== '' && !/[\s'"\\$`*?[\]{}()<>|&;#~!]/.test(s)) return s;
  return "'" + s.replace(/'/g, "'\\''") + "'";
}

function commandLine(program, args) {
  if (!args || args.length === 0) return program || '';
  return args.map(shellQuote).join(' ');
}

const SIGNALS = {
  1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 4: 'SIGILL', 5: 'SIGTRAP', 6: 'SIGABRT', 7: 'SIGBUS',
  8: 'SIGFPE', 9: 'SIGKILL', 10: 'SIGUSR1', 11: 'SIGSEGV', 12: 'SIGUSR2', 13: 'SIGPIPE',
  14: 'SIGALRM', 15: 'SIGTERM', 16: 'SIGSTKFLT', 17: 'SIGCHLD', 18: 'SIGCONT', 19: 'SIGSTOP',
  20: 'SIGTSTP', 21: 'SIGTTIN', 22: 'SIGTTOU', 23: 'SIGURG', 24: 'SIGXCPU', 25: 'SIGXFSZ',
  26: 'SIGVTALRM', 27: 'SIGPROF', 28: 'SIGWINCH', 29: 'SIGIO', 30: 'SIGPWR', 31: 'SIGSYS',
};

// endText says how a process ended, from the report's {how, code}.
function endText(end) {
  if (!end) return 'unknown';
  switch (end.how) {
    case 'exited': case 'exit': return 'exited with status ' + end.code;
    case 'signaled': case 'signal': case 'killed':
      return 'killed by signal ' + end.code + (SIGNALS[end.code] ? ' (' + SIGNALS[end.code] + ')' : '');
    case 'exec': return 'replaced by exec';
    case 'exec_unrecorded':
      return end.why === 'statically_linked' ? "exec'd a program not recorded: statically linked" : "exec'd without memtrail";
    case 'running': return 'still running when the trace ended';
    case 'not_recorded': return 'end not recorded';
    default: return String(end.how || 'unknown');
  }
}

// niceStep returns a round step (1, 2 or 5 times a power of ten) that cuts
// span into about n parts.
function niceStep(span, n) {
  if (!(span > 0)) return 1;
  const raw = span / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const norm = raw / mag;
  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

function trimNumber(v) {
  return String(Number(v.toPrecision(6)));
}

// byteTicks returns the ticks of a bytes axis from 0 to max.
function byteTicks(max, n) {
  let unit = 1, name = 'B';
  const names = ['KiB', 'MiB', 'GiB', 'TiB'];
  for (let i = 0; i < names.length && max / (unit * 1024) >= 1; i++) { unit *= 1024; name = names[i]; }
  let step = niceStep(max / unit, n);
  if (unit === 1) step = Math.max(1, Math.round(step));
  const ticks = [];
  for (let i = 0; ; i++) {
    const v = i * step;
    ticks.push({ value: v * unit, label: v === 0 ? '0' : trimNumber(v) + ' ' + name });
    if (v * unit >= max || i > 50) break;
  }
  return ticks;
}

// timeTicks returns the ticks of a time axis (ns) from t0 to t1.
function timeTicks(t0, t1, n) {
  const span = t1 - t0;
  let unit = 1, name = 'ns';
  if (t1 >= 1e9 && span >= 1e8) { unit = 1e9; name = 's'; }
  else if (t1 >= 1e6 && span >= 1e5) { unit = 1e6; name = 'ms'; }
  else if (t1 >= 1e3 && span >= 1e2) { unit = 1e3; name = 'µs'; }
  const step = niceStep(span / unit, n) * unit;
  const ticks = [];
  for (let v = Math.ceil(t0 / step) * step; v <= t1 + 1e-6; v += step) {
    ticks.push({ value: v, label: trimNumber(v / unit) + ' ' + name });
  }
  return ticks;
}

// ---------------------------------------------------------------------------
// The data: api() and viewURL()

// In a saved page, the responses are in the page and nothing is fetched.
let STATIC = null;
let staticError = null;

function readStaticData() {
  const node = document.getElementById('memtrail-data');
  if (!node) return;
  try {
    const data = JSON.parse(node.textContent || '{}');
    STATIC = data && typeof data === 'object' ? data : {};
  } catch (e) {
    STATIC = {};
    staticError = 'the data saved in this page cannot be read: ' + e.message;
  }
}

const responses = new Map(); // path -> Promise, so that views share them

// api returns a promise of the JSON answer to the GET request of path. An
// error answer ({"error": "..."}) rejects with its message.
function api(path) {
  if (responses.has(path)) return responses.get(path);
  let p;
  if (STATIC) {
    p = Object.prototype.hasOwnProperty.call(STATIC, path)
      ? Promise.resolve(STATIC[path])
      : Promise.reject(new Error('not included in this file'));
  } else {
    p = fetch(path, { headers: { Accept: 'application/json' } }).then(
      async (resp) => {
        let body = null;
        try { body = await resp.json(); } catch (e) { body = null; }
        if (!resp.ok) {
          if (body && typeof body.error === 'string' && body.error) throw new Error(body.error);
          throw new Error('the server answered ' + resp.status + (resp.statusText ? ' ' + resp.statusText : ''));
        }
        if (body === null || typeof body !== 'object') throw new Error('the server did not answer with JSON');
        return body;
      },
      (err) => { throw new Error('cannot reach the memtrail server (' + (err && err.message ? err.message : err) + ')'); });
  }
  responses.set(path, p);
  p.catch(() => { if (responses.get(path) === p) responses.delete(path); });
  return p;
}

// viewURL returns the path of a view: "/api/view?view=NAME" and then, in
// this order and only when set and not the default, &pid= &cost= &from=
// &to= &top= &sort=.
function viewURL(view, params) {
  const p = params || {};
  let u = '/api/view?view=' + view;
  if (p.pid !== undefined && p.pid !== null && p.pid !== '') u += '&pid=' + encodeURIComponent(p.pid);
  if (p.cost && p.cost !== 'peak') u += '&cost=' + encodeURIComponent(p.cost);
  if (p.from !== undefined && p.from !== null && p.from > 0) u += '&from=' + Math.round(p.from);
  if (p.to !== undefined && p.to !== null) u += '&to=' + Math.round(p.to);
  if (p.top !== undefined && p.top !== null && p.top !== 10) u += '&top=' + encodeURIComponent(p.top);
  if (p.sort && p.sort !== 'size') u += '&sort=' + encodeURIComponent(p.sort);
  if (p.thread) u += '&thread=' + encodeURIComponent(p.thread);
  if (p.module) u += '&module=' + encodeURIComponent(p.module);
  return u;
}

function sourceURL(path) {
  return '/api/source?path=' + encodeURIComponent(path);
}

function errorMessage(e) {
  if (!e) return 'unknown error';
  if (typeof e === 'string') return e;
  return e.message || String(e);
}

// ---------------------------------------------------------------------------
// State: the process and the window every view covers

const state = {
  pid: null,        // null: the trace's program (the default)
  defaultPid: null, // its pid, once the summary says
  from: null,       // the window, ns after the start of the process; null: the whole run
  to: null,
  tab: 'timeline',
  summary: null,    // the summary of the whole run (the header's)
  thread: '',       // the threads and the module every view keeps, as report's -thread and -module
  module: '',
  belowMain: true,  // false: call stacks end at main
  object: null,     // the object selected in the Objects tab
};

// common returns the parameters every view takes, with extra ones.
function common(extra) {
  return Object.assign({ pid: state.pid, from: state.from, to: state.to, thread: state.thread, module: state.module }, extra || {});
}

function windowKey() {
  return [state.pid, state.from, state.to, state.thread, state.module, state.belowMain].join('|');
}

function hasWindow() { return state.from !== null || state.to !== null; }

// The address's fragment holds the tab first, then the process, the
// window and the filters: "#/leaks", "#/objects&pid=42&from=1000&to=5000".
// (The slash keeps the browser from scrolling to the element of that id,
// as it does at the end of a page's load; "#leaks" and the older
// "#tab=leaks" are read too.)
function hashParams(hash) {
  return new URLSearchParams(hash.replace(/^#\/?/, ''));
}

// hashTab returns the tab a fragment names.
function hashTab(hash) {
  const h = hashParams(hash);
  let tab = 'timeline';
  for (const [k, v] of h) if (v === '' && TABS[k]) tab = k;
  if (h.get('tab') && TABS[h.get('tab')]) tab = h.get('tab');
  return tab;
}

// PROCESS_ID is how the server names a process (report's -pid): 1234, or
// 1234.2 for the second image of a pid that exec'd.
const PROCESS_ID = /^\d+(\.\d+)?$/;

function readHash() {
  const h = hashParams(location.hash);
  state.tab = hashTab(location.hash);
  const pid = h.get('pid');
  state.pid = pid && PROCESS_ID.test(pid) ? pid : null;
  const from = h.get('from'), to = h.get('to');
  state.from = from !== null && /^\d+$/.test(from) ? Number(from) : null;
  state.to = to !== null && /^\d+$/.test(to) ? Number(to) : null;
  if (state.from !== null && state.to !== null && state.to <= state.from) { state.from = null; state.to = null; }
  state.thread = h.get('thread') || '';
  state.module = h.get('module') || '';
  state.belowMain = h.get('main') !== 'hide';
}

function hashOf() {
  const h = new URLSearchParams();
  if (state.pid !== null) h.set('pid', state.pid);
  if (state.from !== null) h.set('from', String(state.from));
  if (state.to !== null) h.set('to', String(state.to));
  if (state.thread) h.set('thread', state.thread);
  if (state.module) h.set('module', state.module);
  if (!state.belowMain) h.set('main', 'hide');
  const rest = h.toString();
  return '#/' + state.tab + (rest ? '&' + rest : '');
}

// writeHash puts the state in the address: a new entry of the history
// when the tab changes (so that Back goes to the tab before), the same
// one otherwise.
function writeHash() {
  const hash = hashOf();
  if (hash === location.hash) return;
  try {
    if (location.hash && hashTab(location.hash) !== state.tab) history.pushState(null, '', hash);
    else history.replaceState(null, '', hash);
  } catch (e) { /* a saved page opened from disk may refuse; the state is only a convenience */ }
}

// followHash shows what the address says, after Back, Forward or an
// edit of the fragment.
function followHash() {
  if (location.hash === hashOf()) return;
  const before = windowKey();
  readHash();
  if (windowKey() !== before) {
    updateWindowLabel();
    showFilters();
    updateDownloads();
    loadSummary();
  }
  showTab(state.tab);
}

// loadServerInfo reads what the server says of itself once (api keeps
// the answer): the bounds of what a request may ask for, which the views
// keep to, and the formats it exports, which get a download link each.
// serverInfoRead is done when it has.
let serverInfoRead = Promise.resolve();
function loadServerInfo() {
  serverInfoRead = readServerInfo();
}

async function readServerInfo() {
  if (STATIC) return;
  let st;
  try { st = await api('/api/status'); } catch (e) { return; }
  const limits = st.limits || {};
  if (Number(limits.top) > 0) objectsMax = Number(limits.top);
  const box = $('#downloads');
  for (const f of Array.isArray(st.formats) ? st.formats : []) {
    box.appendChild(el('a', { 'data-format': f.name, 'data-cost': f.cost ? 'yes' : null, 'data-whole-pid': f.whole_pid ? 'yes' : null, download: '', title: f.summary || '', text: f.name }));
  }
  updateDownloads();
}

// updateDownloads points the download links at the process shown (the
// pid alone, for a format of every image of a pid), and the formats
// weighed by a cost at the flame graph's.
function updateDownloads() {
  for (const a of $$('#downloads a')) {
    const f = a.getAttribute('data-format');
    let u = '/api/export?format=' + encodeURIComponent(f);
    if (state.pid !== null) {
      const pid = a.getAttribute('data-whole-pid') ? state.pid.replace(/\..*/, '') : state.pid;
      u += '&pid=' + encodeURIComponent(pid);
    }
    const cost = $('#flame-cost').value;
    if (a.getAttribute('data-cost') && cost && cost !== 'peak') u += '&cost=' + encodeURIComponent(cost);
    a.setAttribute('href', u);
  }
}

// showFilters puts the state's filters in their fields.
function showFilters() {
  $('#filter-thread').value = state.thread;
  $('#filter-module').value = state.module;
  $('#filter-below-main').checked = !state.belowMain;
}

// setFilters makes every view keep the threads and module of the fields,
// and end call stacks at main or not.
function setFilters() {
  state.thread = $('#filter-thread').value.trim();
  state.module = $('#filter-module').value.trim();
  state.belowMain = !$('#filter-below-main').checked;
  $('#filter-bar').classList.toggle('on', !!(state.thread || state.module));
  writeHash();
  reloadViews();
}

// A view's status line: loading, an error, or nothing.
function setStatus(id, kind, text) {
  const s = document.getElementById(id);
  if (!s) return;
  s.className = 'status' + (kind ? ' ' + kind : '');
  s.textContent = text || '';
}

// Tokens let a view ignore the answers to requests it no longer wants.
const tokens = {};
function nextToken(name) { tokens[name] = (tokens[name] || 0) + 1; return tokens[name]; }
function isCurrent(name, tok) { return tokens[name] === tok; }

// ---------------------------------------------------------------------------
// Frame links: every frame with a file opens its source

function frameLink(f, text) {
  const label = text !== undefined ? text : frameWhere(f, false);
  if (!f.file) return el('span', { class: 'where', text: label });
  return el('a', {
    class: 'frame-link', href: '#', 'data-file': f.file, 'data-line': String(f.line || 0),
    title: 'open ' + f.file + (f.line ? ':' + f.line : ''), text: label,
  });
}

// stackList renders a call stack, innermost frame first.
function stackList(stack) {
  if (!stack || stack.length === 0) return el('p', { class: 'muted', text: 'no call stack' });
  const ol = el('ol', { class: 'stack' });
  // Below main, the C runtime's start-up: the server marks its frames.
  let hidden = 0;
  if (!state.belowMain) {
    hidden = stack.filter((f) => f.below_main).length;
    stack = stack.filter((f) => !f.below_main);
  }
  if (hidden > 0) ol.classList.add('below-main-hidden');
  for (const f of stack) {
    const li = el('li', { class: 'stack-frame' }, el('span', { class: 'fn', text: frameName(f) }));
    if (f.inlined) li.appendChild(el('span', { class: 'tag', text: 'inlined' }));
    li.appendChild(document.createTextNode(' '));
    if (f.file) {
      li.appendChild(frameLink(f, frameWhere(f, false)));
    } else if (f.object) {
      li.appendChild(el('span', { class: 'where', text: 'in ' + basename(f.object), title: f.object }));
    }
    ol.appendChild(li);
  }
  if (hidden > 0) ol.appendChild(el('li', { class: 'below-main muted', text: plural(hidden, 'frame') + ' below main, hidden' }));
  return ol;
}

// ---------------------------------------------------------------------------
// The summary header

async function loadSummary() {
  const tok = nextToken('summary');
  const err = $('#summary-error');
  try {
    const r = await api(viewURL('summary', { pid: state.pid, top: 50 }));
    if (!isCurrent('summary', tok)) return true;
    err.hidden = true;
    renderSummary(r);
    return true;
  } catch (e) {
    if (!isCurrent('summary', tok)) return true;
    err.hidden = false;
    err.textContent = errorMessage(e);
    if (!state.summary) $('#summary-program').textContent = 'memtrail';
    return false;
  }
}

function renderSummary(r) {
  state.summary = r;
  const s = r.summary || {};
  const prog = $('#summary-program');
  clear(prog);
  prog.appendChild(el('span', { class: 'cmd', text: commandLine(r.program, r.args) }));
  // The process's name in the list, which says which image of its pid it is.
  const shown = (Array.isArray(r.processes) ? r.processes : []).find((p) => p.selected);
  const id = shown && shown.id ? shown.id : String(r.pid);
  prog.appendChild(el('span', { class: 'pid', text: 'pid ' + id }));
  prog.setAttribute('title', (r.program || '') + ', pid ' + id + (r.forked ? ', forked from ' + r.ppid : ''));
  document.title = 'memtrail: ' + basename(r.program || '');

  $('#summary-runtime').textContent = fmtDuration(s.run_time_ns);
  const allocs = $('#summary-allocations');
  allocs.textContent = fmtCount(s.allocations) + ' (' + fmtSize(s.bytes_allocated) + ')';
  allocs.setAttribute('title', plural(s.allocations, 'allocation') + ', ' + plural(s.frees, 'free') + ', ' +
    fmtBytesExact(s.bytes_allocated) + ' allocated');
  const peak = $('#summary-peak');
  peak.textContent = fmtSize(s.peak_bytes) + ' at ' + fmtDuration(s.peak_time_ns);
  peak.setAttribute('title', fmtBytesExact(s.peak_bytes) + ', ' + fmtDuration(s.peak_time_ns) + ' after start');
  // The stack, when the trace has it: all threads at once, and with the
  // heap.
  $('#summary-stack-stat').hidden = !(s.stack_peak_bytes > 0);
  if (s.stack_peak_bytes > 0) {
    const stack = $('#summary-stack');
    stack.textContent = fmtSize(s.stack_peak_bytes) + ' at ' + fmtDuration(s.stack_peak_time_ns);
    stack.setAttribute('title', fmtBytesExact(s.stack_peak_bytes) + ' of stack in use by all threads at once, ' +
      fmtDuration(s.stack_peak_time_ns) + ' after start; heap and stack together peaked at ' + fmtSize(s.peak_total_bytes || 0) +
      ' at ' + fmtDuration(s.peak_total_time_ns || 0));
  }
  const exit = $('#summary-exit');
  exit.textContent = fmtSize(s.in_use_at_exit_bytes) + ' in ' + plural(s.in_use_at_exit_blocks, 'block');
  // Red only for what is lost: memory still reachable at exit is no
  // leak (memcheck's classes, from the scan at exit, when there is one).
  const lost = (s.definitely_lost_bytes || 0) + (s.indirectly_lost_bytes || 0);
  const scanned = s.leak_scan === 'done';
  const exitKind = s.in_use_at_exit_bytes === 0 ? '' : !scanned ? 'warn' : lost > 0 ? 'bad' : s.possibly_lost_bytes > 0 ? 'warn' : 'reachable';
  exit.setAttribute('title', fmtBytesExact(s.in_use_at_exit_bytes) + (!scanned ? '' :
    ': ' + fmtSize(lost) + ' definitely or indirectly lost, ' + fmtSize(s.possibly_lost_bytes || 0) + ' possibly lost, ' +
    fmtSize(s.still_reachable_bytes || 0) + ' still reachable'));
  for (const k of ['bad', 'warn', 'reachable']) exit.classList.toggle(k, k === exitKind);
  const end = $('#summary-end');
  end.textContent = endText(s.end);
  end.classList.toggle('bad', !!(s.end && (s.end.how !== 'exited' || s.end.code !== 0)));

  // The processes to choose from.
  const procs = Array.isArray(r.processes) ? r.processes : [];
  const sel = $('#process');
  clear(sel);
  for (const p of procs) {
    const id = p.id || String(p.pid);
    const label = 'pid ' + id + ': ' + commandLine(p.program, p.args) + ' (' + endText(p.end) + ', ' +
      plural(p.allocations, 'allocation') + ', peak ' + fmtSize(p.peak_bytes) + ')';
    const o = el('option', { value: id, text: label });
    if (p.selected) o.selected = true;
    sel.appendChild(o);
    if (p.selected && state.pid === null) state.defaultPid = id;
  }
  if (state.defaultPid === null && state.pid === null) state.defaultPid = String(r.pid);
  $('#process-picker').hidden = procs.length <= 1;

  // Warnings and problems, briefly.
  const notes = clear($('#summary-notes'));
  const probs = r.problems || {};
  const counts = [
    ['invalid free', probs.invalid_frees], ['double free', probs.double_frees],
    ['mismatched free', probs.mismatched_frees], ['invalid realloc', probs.invalid_reallocs],
  ].map(([name, list]) => [name, (list || []).reduce((n, p) => n + (p.count || 0), 0)]).filter(([, n]) => n > 0);
  if (counts.length) {
    notes.appendChild(el('a', {
      class: 'note bad', href: '#', title: 'see them in the Leaks tab',
      text: counts.map(([name, n]) => plural(n, name)).join(', '),
      onclick: (e) => { e.preventDefault(); showTab('leaks'); },
    }));
  }
  if (s.lost_events > 0) notes.appendChild(el('span', { class: 'note bad', text: plural(s.lost_events, 'event') + ' lost' }));
  const warnings = Array.isArray(r.warnings) ? r.warnings : [];
  if (warnings.length) {
    notes.appendChild(el('span', { class: 'note warn', title: warnings.join('\n'), text: plural(warnings.length, 'warning') }));
  }
  updateWindowLabel();
}

function updateWindowLabel() {
  const label = $('#window-label');
  const reset = $('#window-reset');
  const moves = ['#window-earlier', '#window-later', '#window-wider'].map((s) => $(s));
  if (!hasWindow()) {
    const rt = state.summary && state.summary.summary ? state.summary.summary.run_time_ns : null;
    label.textContent = 'Whole run' + (rt ? ' (' + fmtDuration(rt) + ')' : '');
    label.classList.remove('on');
    reset.disabled = true;
    for (const b of moves) b.disabled = true;
    return;
  }
  for (const b of moves) b.disabled = false;
  const from = state.from || 0;
  const to = state.to;
  label.textContent = 'Window: ' + fmtDuration(from) + ' – ' + (to !== null ? fmtDuration(to) : 'end') +
    (to !== null ? ' (' + fmtDuration(to - from) + ')' : '');
  label.classList.add('on');
  reset.disabled = false;
}

// runTime returns the process's run time in ns, 0 if unknown.
function runTime() {
  return state.summary && state.summary.summary ? Number(state.summary.summary.run_time_ns) || 0 : 0;
}

// moveWindow pans the window by a share of its length (-0.5: back by
// half), or with wider set makes it twice as long around its middle,
// within the run.
function moveWindow(share, wider) {
  const run = runTime();
  const from = state.from || 0;
  const to = state.to !== null ? state.to : run;
  const len = Math.max(to - from, 1);
  let f = from + share * len, t = to + share * len;
  if (wider) { f = from - len / 2; t = to + len / 2; }
  if (f < 0) { t -= f; f = 0; }
  if (run && t > run) { f = Math.max(0, f - (t - run)); t = run; }
  if (f <= 0 && run && t >= run) { tl.selected = null; setWindow(null, null); return; }
  setWindow(f, Math.max(t, f + 1));
}

// setWindow makes [from, to) the window of every view; null, null: the whole run.
function setWindow(from, to) {
  state.from = from === null ? null : Math.max(0, Math.round(from));
  state.to = to === null ? null : Math.round(to);
  if (state.from === 0 && state.to === null) state.from = null;
  updateWindowLabel();
  writeHash();
  reloadViews();
}

function setProcess(pid) {
  state.pid = pid === state.defaultPid ? null : pid;
  state.from = null;
  state.to = null;
  tl.selected = null;
  fl.zoomPath = null;
  setSelectedObject(null);
  writeHash();
  updateDownloads();
  loadSummary();
  updateWindowLabel();
  reloadViews();
}

// ---------------------------------------------------------------------------
// Tabs

const TABS = {
  timeline: () => loadTimeline(),
  flame: () => loadFlame(),
  leaks: () => loadLeaks(),
  tables: () => loadTable(),
  objects: () => loadObjects(),
  heap: () => { hm.time = state.to; hm.pinned = null; loadHeap(true); },
  diff: () => loadDiff(),
};
const loadedKey = {};

function showTab(name) {
  if (!TABS[name]) return;
  state.tab = name;
  for (const b of $$('button[data-tab]')) {
    const on = b.getAttribute('data-tab') === name;
    b.classList.toggle('active', on);
    b.setAttribute('aria-selected', on ? 'true' : 'false');
  }
  for (const p of $$('main > .panel')) p.classList.toggle('active', p.id === 'tab-' + name);
  writeHash();
  ensureTab(name);
}

function ensureTab(name) {
  const key = windowKey();
  if (loadedKey[name] !== key) {
    loadedKey[name] = key;
    TABS[name]();
  } else if (name === 'timeline') {
    redrawTimelineIfResized();
  } else if (name === 'flame') {
    redrawFlameIfResized();
  }
}

// reloadViews reloads the visible tab for the new process or window; the
// others load when shown.
function reloadViews() {
  ensureTab(state.tab);
}

// ---------------------------------------------------------------------------
// Timeline

const tl = {
  data: null,      // the timeline view
  sum: null,       // the summary of the same window (peak and end)
  g: null,         // geometry of the drawing
  selected: null,  // the index of the step clicked
  drag: null,
  width: 0,
};

async function loadTimeline() {
  const tok = nextToken('timeline');
  setStatus('timeline-status', 'loading', 'Loading…');
  const svg = $('#timeline');
  try {
    const [t, s] = await Promise.all([
      api(viewURL('timeline', common())),
      api(viewURL('summary', common({ top: 50 }))).catch(() => null),
    ]);
    if (!isCurrent('timeline', tok)) return;
    tl.data = t;
    tl.sum = s;
    if (tl.selected !== null && (!t.data || tl.selected >= (t.data.points || []).length)) tl.selected = null;
    setStatus('timeline-status', '', '');
    drawTimeline();
    renderStepDetail();
  } catch (e) {
    if (!isCurrent('timeline', tok)) return;
    tl.data = null;
    clear(svg);
    svg.setAttribute('height', '0');
    clear($('#timeline-detail'));
    setStatus('timeline-status', 'error', errorMessage(e));
  }
}

function redrawTimelineIfResized() {
  const w = $('#timeline').parentNode.clientWidth;
  if (tl.data && w && w !== tl.width) drawTimeline();
}

function drawTimeline() {
  const svg = $('#timeline');
  const wrap = svg.parentNode;
  clear(svg);
  $('#timeline-readout').hidden = true;
  const t = tl.data;
  if (!t || !t.data) return;
  const pts = Array.isArray(t.data.points) ? t.data.points : [];
  const W = Math.max(wrap.clientWidth, 300);
  tl.width = wrap.clientWidth;
  // Stack memory, when the trace has it, goes above the heap, as in the
  // tracking-and-visualizing paper's figure of both.
  const hasStack = pts.some((p) => (p.stack_bytes || 0) > 0);
  $('#timeline-title').textContent = hasStack ? 'Stack and heap over time' : 'Heap over time';
  $('#legend-stack').hidden = !hasStack;
  const H0 = hasStack ? 80 : 0, GAP0 = hasStack ? 16 : 0;
  const H1 = 210, H2 = 48, H3 = 48, GAP = 16;
  const M = { left: 78, right: 24, top: 22, bottom: 30 };
  const H = M.top + H0 + GAP0 + H1 + GAP + H2 + GAP + H3 + M.bottom;
  svg.setAttribute('width', String(W));
  svg.setAttribute('height', String(H));
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  if (pts.length === 0) {
    svg.setAttribute('height', '60');
    svg.appendChild(svgEl('text', { x: 20, y: 34, class: 'empty', text: 'No heap activity in this window.' }));
    tl.g = null;
    return;
  }
  const step = Math.max(Number(t.data.step_ns) || 1, 1);
  const t0 = Number(t.data.start_ns) || 0;
  const win = t.window || {};
  const t1 = Math.max(t0 + pts.length * step, Number(win.to_ns) || 0, t0 + 1);
  const plotW = W - M.left - M.right;
  const x = (tn) => M.left + (tn - t0) / (t1 - t0) * plotW;
  const yTop0 = M.top, yBase0 = M.top + H0;
  const yTop1 = yBase0 + GAP0, yBase1 = yTop1 + H1;
  const yTop = hasStack ? yTop0 : yTop1; // of the whole drawing
  const yTop2 = yBase1 + GAP, yBase2 = yTop2 + H2;
  const yTop3 = yBase2 + GAP, yBase3 = yTop3 + H3;

  const sum = tl.sum && tl.sum.summary ? tl.sum.summary : null;
  let maxBytes = 0, maxBlocks = 0, maxAllocs = 0, maxStack = 0;
  for (const p of pts) {
    maxStack = Math.max(maxStack, p.stack_bytes || 0);
    maxBytes = Math.max(maxBytes, p.peak_bytes || 0);
    maxBlocks = Math.max(maxBlocks, p.peak_blocks || 0);
  }
  if (sum) maxBytes = Math.max(maxBytes, sum.peak_bytes || 0, sum.in_use_at_exit_bytes || 0);

  // Several points a pixel: draw one column per group of k points, with
  // the most bytes and blocks and the sum of the allocations.
  const k = Math.max(1, Math.ceil(pts.length / Math.max(plotW, 1)));
  const groups = [];
  for (let i = 0; i < pts.length; i += k) {
    const g = { i, n: Math.min(k, pts.length - i), bytes: 0, blocks: 0, allocs: 0, stack: 0 };
    for (let j = i; j < i + g.n; j++) {
      g.stack = Math.max(g.stack, pts[j].stack_bytes || 0);
      g.bytes = Math.max(g.bytes, pts[j].peak_bytes || 0);
      g.blocks = Math.max(g.blocks, pts[j].peak_blocks || 0);
      g.allocs += pts[j].allocations || 0;
    }
    maxAllocs = Math.max(maxAllocs, g.allocs);
    groups.push(g);
  }

  const ticks = byteTicks(Math.max(maxBytes, 1) * 1.04, 5);
  const yMax = Math.max(ticks[ticks.length - 1].value, maxBytes, 1);
  const y1 = (b) => yBase1 - b / yMax * H1;
  const y2 = (b) => yBase2 - (maxBlocks ? b / maxBlocks * (H2 - 4) : 0);
  const y3 = (a) => yBase3 - (maxAllocs ? a / maxAllocs * (H3 - 2) : 0);
  const y0 = (b) => yBase0 - (maxStack ? b / maxStack * (H0 - 6) : 0);

  // Grid and axes.
  const grid = svgEl('g', { class: 'grid' });
  for (const tk of ticks) {
    const yy = y1(tk.value);
    grid.appendChild(svgEl('line', { x1: M.left, x2: W - M.right, y1: yy, y2: yy }));
    grid.appendChild(svgEl('text', { x: M.left - 8, y: yy + 4, class: 'ylabel', text: tk.label }));
  }
  const tticks = timeTicks(t0, t1, Math.max(2, Math.floor(plotW / 110)));
  for (const tk of tticks) {
    const xx = x(tk.value);
    grid.appendChild(svgEl('line', { x1: xx, x2: xx, y1: hasStack ? yTop0 : yTop1, y2: yBase3, class: 'vgrid' }));
    grid.appendChild(svgEl('text', { x: xx, y: yBase3 + 18, class: 'xlabel', text: tk.label }));
  }
  svg.appendChild(grid);
  svg.appendChild(svgEl('text', { x: M.left - 8, y: yTop2 + 12, class: 'ylabel', text: fmtCount(maxBlocks) }));
  svg.appendChild(svgEl('text', { x: M.left - 8, y: yBase2, class: 'ylabel muted', text: 'blocks' }));
  svg.appendChild(svgEl('text', { x: M.left - 8, y: yTop3 + 12, class: 'ylabel', text: fmtCount(maxAllocs) }));
  svg.appendChild(svgEl('text', { x: M.left - 8, y: yBase3, class: 'ylabel muted', text: 'allocs' }));
  if (hasStack) {
    svg.appendChild(svgEl('text', { x: M.left - 8, y: yTop0 + 12, class: 'ylabel', text: fmtSize(maxStack) }));
    svg.appendChild(svgEl('text', { x: M.left - 8, y: yBase0, class: 'ylabel muted', text: 'stack' }));
  }
  for (const yb of hasStack ? [yBase0, yBase1, yBase2, yBase3] : [yBase1, yBase2, yBase3]) {
    svg.appendChild(svgEl('line', { x1: M.left, x2: W - M.right, y1: yb, y2: yb, class: 'axis' }));
  }

  // The heap, as steps: each point holds the most live in its step.
  let area = 'M' + x(t0).toFixed(2) + ',' + yBase1;
  let line = '';
  let blocks = '';
  for (const g of groups) {
    const xa = x(t0 + g.i * step).toFixed(2), xb = x(Math.min(t0 + (g.i + g.n) * step, t1)).toFixed(2);
    const yy = y1(g.bytes).toFixed(2);
    area += 'L' + xa + ',' + yy + 'L' + xb + ',' + yy;
    line += (line ? 'L' : 'M') + xa + ',' + yy + 'L' + xb + ',' + yy;
    const yb = y2(g.blocks).toFixed(2);
    blocks += (blocks ? 'L' : 'M') + xa + ',' + yb + 'L' + xb + ',' + yb;
  }
  const last = groups[groups.length - 1];
  area += 'L' + x(Math.min(t0 + (last.i + last.n) * step, t1)).toFixed(2) + ',' + yBase1 + 'Z';
  svg.appendChild(svgEl('path', { d: area, class: 'heap-area' }));
  if (hasStack) {
    // The stack in use, as steps: each point holds the most of its step.
    let stackArea = 'M' + x(t0).toFixed(2) + ',' + yBase0;
    for (const g of groups) {
      const xa = x(t0 + g.i * step).toFixed(2), xb = x(Math.min(t0 + (g.i + g.n) * step, t1)).toFixed(2);
      const yy = y0(g.stack).toFixed(2);
      stackArea += 'L' + xa + ',' + yy + 'L' + xb + ',' + yy;
    }
    stackArea += 'L' + x(Math.min(t0 + (last.i + last.n) * step, t1)).toFixed(2) + ',' + yBase0 + 'Z';
    svg.appendChild(svgEl('path', { id: 'timeline-stack', d: stackArea, class: 'stack-area' },
      svgTitle('stack in use, all threads: up to ' + fmtSize(maxStack))));
  }
  svg.appendChild(svgEl('path', { d: line, class: 'heap-line' }));
  svg.appendChild(svgEl('path', { d: blocks, class: 'blocks-line' }));

  // The allocations of each step, as bars.
  const bars = svgEl('g', { class: 'alloc-bars' });
  for (const g of groups) {
    if (!g.allocs) continue;
    const xa = x(t0 + g.i * step), xb = x(Math.min(t0 + (g.i + g.n) * step, t1));
    const w = Math.max(xb - xa - (xb - xa > 3 ? 1 : 0), 0.8);
    bars.appendChild(svgEl('rect', { x: xa.toFixed(2), y: y3(g.allocs).toFixed(2), width: w.toFixed(2), height: (yBase3 - y3(g.allocs)).toFixed(2) }));
  }
  svg.appendChild(bars);

  // The step clicked.
  const stepMark = svgEl('rect', { class: 'step-selected', x: 0, y: yTop, width: 0, height: yBase3 - yTop, visibility: 'hidden' });
  svg.appendChild(stepMark);

  // Markers: the peak of the stack, the peak of the heap, and what is in
  // use at the end.
  const windowed = hasWindow();
  if (hasStack && sum && sum.stack_peak_bytes > 0) {
    const sx = x(Math.min(Math.max(sum.stack_peak_time_ns || 0, t0), t1));
    const sy = y0(Math.min(sum.stack_peak_bytes, maxStack));
    const anchorEnd = sx > W - M.right - 140;
    svg.appendChild(svgEl('g', { id: 'timeline-stack-marker', class: 'marker stack' },
      svgTitle('peak stack: ' + fmtBytesExact(sum.stack_peak_bytes) + ' at ' + fmtDuration(sum.stack_peak_time_ns) +
        ' after start' + (sum.deepest_stack ? '; click to see the deepest call stack' : '')),
      svgEl('circle', { cx: sx, cy: sy, r: 4 }),
      svgEl('text', { x: anchorEnd ? sx - 8 : sx + 8, y: Math.max(sy - 5, yTop0 + 10), class: anchorEnd ? 'end' : '', text: 'stack peak ' + fmtSize(sum.stack_peak_bytes) })));
  }
  if (sum && sum.peak_bytes > 0) {
    const px = x(Math.min(Math.max(sum.peak_time_ns || 0, t0), t1));
    const py = y1(sum.peak_bytes);
    const label = 'peak ' + fmtSize(sum.peak_bytes);
    const anchorEnd = px > W - M.right - 120;
    svg.appendChild(svgEl('g', { id: 'timeline-peak-marker', class: 'marker peak' },
      svgTitle((windowed ? 'peak of the window: ' : 'peak: ') + fmtBytesExact(sum.peak_bytes) + ' at ' +
        fmtDuration(sum.peak_time_ns) + ' after start'),
      svgEl('line', { x1: px, x2: px, y1: py, y2: yBase1, class: 'marker-line' }),
      svgEl('circle', { cx: px, cy: py, r: 5 }),
      svgEl('text', { x: anchorEnd ? px - 9 : px + 9, y: Math.max(py - 6, yTop1 - 8), class: anchorEnd ? 'end' : '', text: label })));
  }
  if (sum) {
    const toNs = Number(win.to_ns) || t1;
    const ex = x(Math.min(toNs, t1));
    const ey = y1(sum.in_use_at_exit_bytes || 0);
    const atEnd = !state.summary || !state.summary.summary || toNs >= (state.summary.summary.run_time_ns || 0);
    const what = atEnd ? 'in use at exit' : 'in use at ' + fmtDuration(toNs);
    const d = 'M' + ex + ',' + (ey - 6) + 'l6,6l-6,6l-6,-6Z';
    svg.appendChild(svgEl('g', { id: 'timeline-exit-marker', class: 'marker exit' },
      svgTitle(what + ': ' + fmtBytesExact(sum.in_use_at_exit_bytes || 0) + ' in ' + plural(sum.in_use_at_exit_blocks || 0, 'block')),
      svgEl('path', { d }),
      svgEl('text', { x: ex - 10, y: ey + 20 < yBase1 - 2 ? ey + 20 : ey - 9, class: 'end', text: what + ' ' + fmtSize(sum.in_use_at_exit_bytes || 0) })));
  }

  // Hover, click and drag.
  const hover = svgEl('line', { class: 'hover-line', x1: 0, x2: 0, y1: yTop, y2: yBase3, visibility: 'hidden' });
  const selRect = svgEl('rect', { class: 'drag-rect', x: 0, y: yTop, width: 0, height: yBase3 - yTop, visibility: 'hidden' });
  svg.appendChild(hover);
  svg.appendChild(selRect);

  tl.g = { M, W, H, t0, t1, step, plotW, x, pts, stepMark, hover, selRect, yTop1: yTop, yBase3 };
  markSelectedStep();
  updateObjectMarker();
}

function markSelectedStep() {
  const g = tl.g;
  if (!g) return;
  if (tl.selected === null || tl.selected >= g.pts.length) {
    g.stepMark.setAttribute('visibility', 'hidden');
    return;
  }
  const xa = g.x(g.t0 + tl.selected * g.step), xb = g.x(Math.min(g.t0 + (tl.selected + 1) * g.step, g.t1));
  g.stepMark.setAttribute('x', xa.toFixed(2));
  g.stepMark.setAttribute('width', Math.max(xb - xa, 1.5).toFixed(2));
  g.stepMark.setAttribute('visibility', 'visible');
}

// svgX returns the x of a pointer event in the chart's coordinates.
function svgX(ev) {
  const svg = $('#timeline');
  const r = svg.getBoundingClientRect();
  return ev.clientX - r.left;
}

function timeAt(px) {
  const g = tl.g;
  const cx = Math.min(Math.max(px, g.M.left), g.W - g.M.right);
  return g.t0 + (cx - g.M.left) / g.plotW * (g.t1 - g.t0);
}

function stepAt(px) {
  const g = tl.g;
  const i = Math.floor((timeAt(px) - g.t0) / g.step);
  return Math.min(Math.max(i, 0), g.pts.length - 1);
}

function setupTimelineEvents() {
  const svg = $('#timeline');
  const readout = $('#timeline-readout');
  svg.addEventListener('pointerdown', (ev) => {
    if (!tl.g || ev.button !== 0) return;
    if (ev.target.closest && ev.target.closest('#timeline-stack-marker')) {
      // The stack's peak: where the stack was deepest.
      ev.preventDefault();
      tl.selected = null;
      markSelectedStep();
      renderDeepestStack();
      return;
    }
    const px = svgX(ev);
    if (px < tl.g.M.left - 4 || px > tl.g.W - tl.g.M.right + 4) return;
    tl.drag = { x0: px, x1: px, moved: false };
    try { svg.setPointerCapture(ev.pointerId); } catch (e) { /* not essential */ }
    ev.preventDefault();
  });
  svg.addEventListener('pointermove', (ev) => {
    const g = tl.g;
    if (!g) return;
    const px = svgX(ev);
    if (tl.drag) {
      tl.drag.x1 = px;
      if (Math.abs(px - tl.drag.x0) > 3) tl.drag.moved = true;
      if (tl.drag.moved) {
        const a = Math.max(Math.min(tl.drag.x0, px), g.M.left), b = Math.min(Math.max(tl.drag.x0, px), g.W - g.M.right);
        g.selRect.setAttribute('x', a.toFixed(1));
        g.selRect.setAttribute('width', Math.max(b - a, 0).toFixed(1));
        g.selRect.setAttribute('visibility', 'visible');
        readout.hidden = false;
        readout.textContent = fmtDuration(timeAt(a)) + ' – ' + fmtDuration(timeAt(b)) + '\nrelease to look at this window';
        placeReadout(px, ev);
        return;
      }
    }
    if (px < g.M.left || px > g.W - g.M.right) {
      g.hover.setAttribute('visibility', 'hidden');
      readout.hidden = true;
      return;
    }
    const i = stepAt(px);
    const p = g.pts[i];
    g.hover.setAttribute('x1', px.toFixed(1));
    g.hover.setAttribute('x2', px.toFixed(1));
    g.hover.setAttribute('visibility', 'visible');
    const from = g.t0 + i * g.step;
    readout.textContent = fmtDuration(timeAt(px)) + '  (step ' + fmtDuration(from) + ' – ' + fmtDuration(from + g.step) + ')\n' +
      'heap: up to ' + fmtSize(p.peak_bytes) + ', ' + fmtSize(p.end_bytes) + ' at its end\n' +
      (p.stack_bytes ? 'stack: up to ' + fmtSize(p.stack_bytes) + '\n' : '') +
      'live blocks: up to ' + fmtCount(p.peak_blocks) + '\n' +
      plural(p.allocations || 0, 'allocation') + ', ' + plural(p.frees || 0, 'free');
    readout.hidden = false;
    placeReadout(px, ev);
  });
  const finish = (ev) => {
    const g = tl.g;
    const d = tl.drag;
    tl.drag = null;
    if (!g || !d) return;
    g.selRect.setAttribute('visibility', 'hidden');
    if (d.moved) {
      const a = timeAt(Math.min(d.x0, d.x1)), b = timeAt(Math.max(d.x0, d.x1));
      const win = (tl.data && tl.data.window) || {};
      const maxTo = Number(win.to_ns) || g.t1;
      let from = Math.floor(a), to = Math.min(Math.ceil(b), maxTo);
      if (to - from < 1) return;
      readout.hidden = true;
      tl.selected = null;
      setWindow(from, to);
    } else if (ev.type === 'pointerup') {
      tl.selected = stepAt(d.x0);
      markSelectedStep();
      renderStepDetail();
    }
  };
  svg.addEventListener('pointerup', finish);
  svg.addEventListener('pointercancel', finish);
  svg.addEventListener('pointerleave', () => {
    if (tl.drag) return;
    if (tl.g) tl.g.hover.setAttribute('visibility', 'hidden');
    readout.hidden = true;
  });
}

function placeReadout(px, ev) {
  const readout = $('#timeline-readout');
  const wrap = readout.parentNode;
  const r = wrap.getBoundingClientRect();
  const py = ev.clientY - r.top;
  const w = readout.offsetWidth || 220;
  let left = px + 14;
  if (left + w > wrap.clientWidth - 4) left = px - w - 14;
  readout.style.left = Math.max(left, 0) + 'px';
  readout.style.top = Math.max(py - 10, 0) + 'px';
}

function renderStepDetail() {
  const box = clear($('#timeline-detail'));
  const g = tl.g;
  if (tl.selected === null || !g || !g.pts[tl.selected]) {
    box.appendChild(el('p', { class: 'muted', text: 'Click the chart to see a step; drag across it to choose a time window.' }));
    return;
  }
  const i = tl.selected;
  const p = g.pts[i];
  const from = g.t0 + i * g.step, to = from + g.step;
  const rows = [
    ['allocations', fmtCount(p.allocations)],
    ['frees', fmtCount(p.frees)],
    ['bytes allocated', fmtBytesExact(p.bytes_allocated)],
    ['bytes freed', fmtBytesExact(p.bytes_freed)],
    ['most in use in the step', fmtBytesExact(p.peak_bytes) + ' in ' + plural(p.peak_blocks, 'block')],
    ['in use at its end', fmtBytesExact(p.end_bytes) + ' in ' + plural(p.end_blocks, 'block')],
  ];
  box.appendChild(el('h3', { class: 'step-title', text: 'Step ' + fmtDuration(from) + ' – ' + fmtDuration(to) + ' after start' }));
  const dl = el('dl', { class: 'kv' });
  for (const [k, v] of rows) dl.appendChild(el('div', null, el('dt', { text: k }), el('dd', { text: v })));
  box.appendChild(dl);
  box.appendChild(el('button', {
    type: 'button', class: 'small', text: 'Look at this step only',
    onclick: () => { tl.selected = null; setWindow(from, lastOf(from, to)); },
  }));
  const events = el('div', { id: 'timeline-events', class: 'events' });
  box.appendChild(events);
  loadStepEvents(events, from, lastOf(from, to));
}

// renderDeepestStack shows, under the timeline, the deepest the stack of
// a thread went: its call stack, each frame with its size (from the trace
// or gcc's .su files), the same frames in a row made one.
function renderDeepestStack() {
  const box = clear($('#timeline-detail'));
  const sum = tl.sum && tl.sum.summary ? tl.sum.summary : null;
  const d = sum && sum.deepest_stack;
  if (!d) {
    box.appendChild(el('p', { class: 'muted', text: 'This trace has no call stack of its deepest stack.' }));
    return;
  }
  box.appendChild(el('h3', { id: 'deepest-title', class: 'step-title', text: 'Deepest stack: ' + fmtSize(d.bytes) + ' in thread ' + d.thread + ', ' +
    fmtDuration(d.time_ns) + ' after start' + (d.function_entry ? ', at a function entry' : ', at a heap event') }));
  const ol = el('ol', { id: 'deepest-stack', class: 'stack' });
  const frames = d.stack || [];
  for (let i = 0; i < frames.length;) {
    const f = frames[i];
    let n = 1;
    while (i + n < frames.length && sameDeepestFrame(frames[i + n], f)) n++;
    const li = el('li', { class: 'stack-frame' }, el('span', { class: 'fn', text: frameName(f) }));
    if (n > 1) li.appendChild(el('span', { class: 'tag', text: '× ' + n }));
    if (f.frame_bytes) {
      li.appendChild(el('span', { class: 'frame-size', title: 'its frame, from ' + (f.frame_bytes_from || 'the trace'),
        text: ' ' + fmtSize(f.frame_bytes) + (n > 1 ? ' each' : '') }));
    }
    li.appendChild(document.createTextNode(' '));
    if (f.file) li.appendChild(frameLink(f, frameWhere(f, false)));
    ol.appendChild(li);
    i += n;
  }
  box.appendChild(frames.length ? ol : el('p', { class: 'muted', text: 'no call stack' }));
}

// sameDeepestFrame says whether two frames in a row of the deepest stack
// are a recursion to show as one, as the text report's sameFrame does: the
// same function, line and size; a frame with no function is known only by
// its address, so distinct unnamed functions are not made one.
function sameDeepestFrame(a, b) {
  return a.function === b.function && a.file === b.file && a.line === b.line && a.object === b.object &&
    a.inlined === b.inlined && a.frame_bytes === b.frame_bytes && (a.function !== '' || a.address === b.address);
}

// lastOf returns the last ns of a step from from up to to, which is the
// next step's: windows and event queries include both their ends.
function lastOf(from, to) {
  return Math.max(from, Math.round(to) - 1);
}

// eventsURL returns the path of the memory events of a stretch of the run.
function eventsURL(from, to) {
  let u = '/api/events?from=' + Math.max(0, Math.round(from)) + '&to=' + Math.max(0, Math.round(to));
  if (state.pid !== null) u += '&pid=' + encodeURIComponent(state.pid);
  return u;
}

// loadStepEvents lists what happened in a step: its first events, each
// with its call stack.
async function loadStepEvents(box, from, to) {
  const tok = nextToken('events');
  box.appendChild(el('p', { class: 'muted', text: 'Loading the events of this step…' }));
  let r;
  try {
    r = await api(eventsURL(from, to));
  } catch (e) {
    if (!isCurrent('events', tok)) return;
    clear(box).appendChild(el('p', { class: 'error', text: 'The events of this step: ' + errorMessage(e) }));
    return;
  }
  if (!isCurrent('events', tok)) return;
  clear(box);
  const list = Array.isArray(r.events) ? r.events : [];
  const count = Number(r.count) || list.length;
  if (count === 0) {
    box.appendChild(el('p', { class: 'muted', text: 'No allocation or free in this step.' }));
    return;
  }
  box.appendChild(el('h3', { text: plural(count, 'event') + ' in this step' +
    (list.length < count ? ', the first ' + fmtCount(list.length) + ':' : ':') }));
  const table = el('table', { class: 'data events-table' });
  table.appendChild(el('thead', null, el('tr', null,
    el('th', { class: 'num', text: 'time' }), el('th', { text: 'event' }), el('th', { class: 'num', text: 'size' }),
    el('th', { text: 'address' }), el('th', { class: 'num', text: 'thread' }), el('th', { text: 'at' }))));
  const tb = el('tbody');
  for (const e of list) {
    const stack = Array.isArray(e.stack) ? e.stack : [];
    const top = stack[0];
    const at = el('td', { class: 'at' });
    if (top) {
      at.appendChild(el('span', { class: 'fn', text: frameName(top) }));
      if (top.file) { at.appendChild(document.createTextNode(' ')); at.appendChild(frameLink(top)); }
    }
    const what = (e.kind || '?') + (e.api && e.api !== e.kind ? ' (' + e.api + ')' : '');
    const tr = el('tr', { class: 'event', title: 'click to see its call stack' },
      el('td', { class: 'num', text: fmtDuration(e.time_ns) }),
      el('td', { text: what }),
      el('td', { class: 'num', text: fmtSize(e.size || 0), title: fmtCount(e.size || 0) + ' bytes' }),
      el('td', null, el('code', { text: (e.old_address ? e.old_address + ' → ' : '') + (e.address || '') })),
      el('td', { class: 'num', text: e.thread ? String(e.thread) : '' }),
      at);
    const stackRow = el('tr', { class: 'event-stack', hidden: true }, el('td', { colspan: '6' }, stackList(stack)));
    tr.addEventListener('click', (ev) => {
      if (ev.target.closest('a')) return;
      stackRow.hidden = !stackRow.hidden;
      tr.classList.toggle('open', !stackRow.hidden);
    });
    tb.appendChild(tr);
    tb.appendChild(stackRow);
  }
  table.appendChild(tb);
  box.appendChild(el('div', { class: 'table-wrap events-wrap' }, table));
}

// ---------------------------------------------------------------------------
// Flame graph and sunburst

const fl = {
  data: null,
  root: null,
  nodes: [],       // by id
  zoom: null,      // the node that fills the width
  zoomPath: null,  // the function names from the root to it, to keep it across reloads
  selected: null,
  cost: 'peak',
  width: 0,
};

let measureCtx = null;
function textWidth(s) {
  if (!measureCtx) {
    const c = document.createElement('canvas');
    measureCtx = c.getContext('2d');
    if (measureCtx) measureCtx.font = '12px ' + getComputedStyle(document.body).fontFamily;
  }
  return measureCtx ? measureCtx.measureText(s).width : s.length * 7;
}

// fitText cuts s to fit in w pixels, with an ellipsis.
function fitText(s, w) {
  if (w < 14) return '';
  if (textWidth(s) <= w) return s;
  let lo = 0, hi = s.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (textWidth(s.slice(0, mid) + '…') <= w) lo = mid; else hi = mid - 1;
  }
  return lo > 0 ? s.slice(0, lo) + '…' : '';
}

function buildFlameTree(d, programName) {
  const nodes = [];
  const make = (src, parent, depth) => {
    const n = {
      id: nodes.length, parent, depth,
      fn: src.function || '', name: src.name || '', file: src.file || '', line: src.line || 0, object: src.object || '',
      address: src.address || '', inlined: !!src.inlined,
      cost: Number(src.cost) || 0, self: Number(src.self) || 0, children: [], omitted: false,
    };
    nodes.push(n);
    for (const c of (src.children || [])) n.children.push(make(c, n, depth + 1));
    if (src.omitted_children > 0) {
      const o = {
        id: nodes.length, parent: n, depth: depth + 1, fn: '', file: '', line: 0, object: '', address: '',
        cost: Number(src.omitted_cost) || 0, self: 0, children: [], omitted: true, count: src.omitted_children,
      };
      nodes.push(o);
      n.children.push(o);
    }
    return n;
  };
  const root = make({ function: 'all', cost: d.total, children: d.children,
    omitted_children: d.omitted_children, omitted_cost: d.omitted_cost }, null, 0);
  root.isRoot = true;
  root.label = 'all' + (programName ? ' (' + basename(programName) + ')' : '');
  return { root, nodes };
}

function nodeLabel(n) {
  if (n.isRoot) return n.label;
  if (n.omitted) return plural(n.count, 'smaller one');
  return n.fn || n.name || (n.address ? '?? ' + n.address : '??');
}

function nodeTitle(n) {
  const total = fl.root ? fl.root.cost : 0;
  const cost = fmtCost(fl.cost, n.cost) + ' (' + fmtPercent(n.cost, total) + ' of total)';
  if (n.isRoot) return 'all — ' + cost;
  if (n.omitted) return plural(n.count, 'function') + ' under 0.1% of the total each — ' + cost;
  const where = frameWhere({ file: n.file, line: n.line, object: n.object }, true);
  return nodeLabel(n) + (where ? ' — ' + where : '') + ' — ' + cost;
}

function pathOf(n) {
  const p = [];
  for (let m = n; m && !m.isRoot; m = m.parent) p.unshift(m.fn + '\u0000' + m.file);
  return p;
}

function findPath(root, path) {
  let n = root;
  for (const key of path || []) {
    const c = n.children.find((ch) => !ch.omitted && ch.fn + '\u0000' + ch.file === key);
    if (!c) break;
    n = c;
  }
  return n;
}

async function loadFlame() {
  const tok = nextToken('flame');
  const cost = $('#flame-cost').value;
  const inverted = $('#flame-inverted').checked;
  setStatus('flame-status', 'loading', 'Loading…');
  try {
    const r = await api(viewURL(inverted ? 'bottom-up' : 'top-down', common({ cost })));
    if (!isCurrent('flame', tok)) return;
    const d = r.data || {};
    fl.data = r;
    fl.cost = d.cost || cost;
    const t = buildFlameTree(d, r.program);
    fl.root = t.root;
    fl.nodes = t.nodes;
    fl.zoom = findPath(fl.root, fl.zoomPath);
    fl.selected = fl.zoom.isRoot ? null : fl.zoom;
    setStatus('flame-status', '', fl.root.cost === 0 ? 'Nothing to show: no ' + (COST_LABELS[fl.cost] || fl.cost) + ' in this window.' : '');
    drawFlame();
    renderFlameSelected();
  } catch (e) {
    if (!isCurrent('flame', tok)) return;
    fl.root = null;
    fl.nodes = [];
    const svg = clear($('#flame'));
    svg.setAttribute('height', '0');
    clear($('#flame-selected'));
    $('#flame-search-info').textContent = '';
    setStatus('flame-status', 'error', errorMessage(e));
  }
}

function redrawFlameIfResized() {
  const w = $('#flame').parentNode.clientWidth;
  if (fl.root && w && w !== fl.width) drawFlame();
}

// frameColor: warm for the program's code, sand for libraries, grey when unknown.
function frameColor(n) {
  if (n.isRoot) return 'hsl(220, 12%, 78%)';
  if (n.omitted) return 'hsl(0, 0%, 85%)';
  let h = 0;
  for (let i = 0; i < n.fn.length; i++) h = (h * 31 + n.fn.charCodeAt(i)) >>> 0;
  const prog = fl.data && fl.data.program;
  if (!n.fn) return 'hsl(0, 0%, 72%)';
  if (n.object && prog && n.object !== prog) return 'hsl(' + (38 + h % 14) + ', ' + (55 + h % 15) + '%, ' + (66 + (h >> 4) % 10) + '%)';
  return 'hsl(' + (4 + h % 28) + ', ' + (72 + h % 18) + '%, ' + (60 + (h >> 4) % 10) + '%)';
}

function frameAttrs(n, cls) {
  const a = { class: cls };
  if (!n.omitted) {
    a['data-function'] = n.isRoot ? 'all' : n.fn;
    a['data-file'] = n.file;
    a['data-line'] = String(n.line);
    // Reachable with Tab: Enter zooms, O opens the source.
    a.tabindex = '0';
    a.role = 'button';
    a['aria-label'] = nodeTitle(n);
  }
  a['data-node'] = String(n.id);
  return a;
}

function drawFlame() {
  const svg = $('#flame');
  clear(svg);
  if (!fl.root) return;
  fl.width = svg.parentNode.clientWidth;
  $('#flame-reset').disabled = !fl.zoom || fl.zoom.isRoot;
  if ($('#flame-sunburst').checked) drawSunburst(svg);
  else drawIcicle(svg);
  applyFlameSearch();
}

function drawIcicle(svg) {
  const W = Math.max(svg.parentNode.clientWidth, 300);
  const ROW = 20;
  const z = fl.zoom || fl.root;
  // The rows of the zoomed node's ancestors, full width, then its subtree.
  const ancestors = [];
  for (let m = z.parent; m; m = m.parent) ancestors.unshift(m);
  let maxDepth = z.depth;
  const items = [];
  for (const a of ancestors) items.push({ n: a, x: 0, w: W, anc: true });
  const walk = (n, x, w) => {
    items.push({ n, x, w, anc: false });
    if (n.depth > maxDepth) maxDepth = n.depth;
    if (!n.cost) return;
    let cx = x;
    for (const c of n.children) {
      const cw = c.cost / n.cost * w;
      if (cw >= 0.5) walk(c, cx, cw);
      cx += cw;
    }
  };
  walk(z, 0, W);
  const H = (maxDepth + 1) * ROW + 2;
  svg.setAttribute('width', String(W));
  svg.setAttribute('height', String(H));
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  const frag = document.createDocumentFragment();
  for (const it of items) {
    const n = it.n;
    let cls = n.omitted ? 'frame-omitted' : 'frame';
    if (it.anc) cls += ' ancestor';
    if (fl.selected === n) cls += ' selected';
    const g = svgEl('g', frameAttrs(n, cls));
    g.appendChild(svgTitle(nodeTitle(n)));
    const y = n.depth * ROW;
    g.appendChild(svgEl('rect', {
      x: it.x.toFixed(2), y, width: Math.max(it.w - 1, 0.5).toFixed(2), height: ROW - 1, rx: 2, fill: frameColor(n),
    }));
    const label = fitText(nodeLabel(n), it.w - 8);
    if (label) g.appendChild(svgEl('text', { x: (it.x + 4).toFixed(2), y: y + 14, text: label }));
    frag.appendChild(g);
  }
  svg.appendChild(frag);
}

function arcPath(cx, cy, r0, r1, a0, a1) {
  const full = a1 - a0 >= Math.PI * 2 - 1e-6;
  if (full) {
    // A ring (or disk): two half circles each way.
    const o = (r, sweep) => 'M' + (cx + r) + ',' + cy + 'A' + r + ',' + r + ' 0 1,' + sweep + ' ' + (cx - r) + ',' + cy +
      'A' + r + ',' + r + ' 0 1,' + sweep + ' ' + (cx + r) + ',' + cy + 'Z';
    return r0 > 0 ? o(r1, 1) + o(r0, 0) : o(r1, 1);
  }
  const p = (r, a) => (cx + r * Math.sin(a)).toFixed(2) + ',' + (cy - r * Math.cos(a)).toFixed(2);
  const large = a1 - a0 > Math.PI ? 1 : 0;
  let d = 'M' + p(r1, a0) + 'A' + r1 + ',' + r1 + ' 0 ' + large + ',1 ' + p(r1, a1);
  if (r0 > 0) d += 'L' + p(r0, a1) + 'A' + r0 + ',' + r0 + ' 0 ' + large + ',0 ' + p(r0, a0) + 'Z';
  else d += 'L' + cx + ',' + cy + 'Z';
  return d;
}

// arcLabel returns the label of a sunburst arc, along the ring if it fits
// there, else along the radius, or null if it does not fit at all.
function arcLabel(cx, cy, r0, r1, a0, a1, text) {
  const rm = (r0 + r1) / 2, am = (a0 + a1) / 2;
  const span = a1 - a0;
  const chord = span >= Math.PI ? 2 * rm : 2 * rm * Math.sin(span / 2);
  const px = cx + rm * Math.sin(am), py = cy - rm * Math.cos(am);
  let deg, label;
  const along = fitText(text, chord - 8);
  if (along.length >= Math.min(4, text.length) && along) {
    label = along;
    deg = am * 180 / Math.PI;
    if (am > Math.PI / 2 && am < Math.PI * 3 / 2) deg += 180;
  } else if (span * rm >= 13) {
    label = fitText(text, r1 - r0 - 8);
    if (!label) return null;
    deg = am * 180 / Math.PI - 90;
    if (am > Math.PI) deg += 180;
  } else {
    return null;
  }
  return svgEl('text', {
    class: 'arc-label', x: px.toFixed(1), y: py.toFixed(1), 'text-anchor': 'middle', 'dominant-baseline': 'central',
    transform: 'rotate(' + deg.toFixed(2) + ' ' + px.toFixed(1) + ' ' + py.toFixed(1) + ')', text: label,
  });
}

function drawSunburst(svg) {
  const W = Math.max(svg.parentNode.clientWidth, 300);
  const size = Math.min(W, 680);
  const cx = W / 2, cy = size / 2 + 2;
  const R = size / 2 - 6;
  const z = fl.zoom || fl.root;
  let levels = 0;
  const depthOf = (n) => { for (const c of n.children) depthOf(c); levels = Math.max(levels, n.depth - z.depth); };
  depthOf(z);
  const ring = R / (levels + 1);
  svg.setAttribute('width', String(W));
  svg.setAttribute('height', String(size + 4));
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + (size + 4));
  const frag = document.createDocumentFragment();
  const labels = [];
  const add = (n, a0, a1) => {
    const d = n.depth - z.depth;
    const r0 = d === 0 ? 0 : d * ring, r1 = (d + 1) * ring;
    if ((a1 - a0) * r1 < 0.6) return;
    let cls = n.omitted ? 'arc arc-omitted' : 'arc';
    if (fl.selected === n) cls += ' selected';
    const g = svgEl('path', Object.assign(frameAttrs(n, cls), { d: arcPath(cx, cy, r0, r1, a0, a1), fill: frameColor(n) }));
    g.appendChild(svgTitle(nodeTitle(n)));
    frag.appendChild(g);
    if (d > 0 && ring >= 14) labels.push(arcLabel(cx, cy, r0, r1, a0, a1, nodeLabel(n)));
    if (!n.cost) return;
    let a = a0;
    for (const c of n.children) {
      const span = c.cost / n.cost * (a1 - a0);
      add(c, a, a + span);
      a += span;
    }
  };
  add(z, 0, Math.PI * 2);
  for (const l of labels) if (l) frag.appendChild(l);
  svg.appendChild(frag);
  const label = fitText(nodeLabel(z), ring * 2 - 10);
  if (label) {
    svg.appendChild(svgEl('text', { x: cx, y: cy - 2, class: 'center-label', text: label }));
    svg.appendChild(svgEl('text', { x: cx, y: cy + 14, class: 'center-label muted', text: fmtCostShort(fl.cost, z.cost) }));
  }
}

function applyFlameSearch() {
  const q = $('#flame-search').value.trim().toLowerCase();
  const info = $('#flame-search-info');
  for (const e of $$('#flame .frame, #flame .arc')) {
    const fn = (e.getAttribute('data-function') || '').toLowerCase();
    e.classList.toggle('match', q !== '' && fn.includes(q) && !e.classList.contains('arc-omitted'));
  }
  if (!q || !fl.root) { info.textContent = ''; return; }
  // How much of the total the matching functions hold (a match under a
  // match counts once).
  let matched = 0, names = new Set();
  const walk = (n) => {
    if (!n.isRoot && !n.omitted && n.fn.toLowerCase().includes(q)) {
      matched += n.cost;
      names.add(n.fn);
      const inner = (m) => { for (const c of m.children) { if (!c.omitted && c.fn.toLowerCase().includes(q)) names.add(c.fn); inner(c); } };
      inner(n);
      return;
    }
    for (const c of n.children) walk(c);
  };
  walk(fl.root);
  info.textContent = names.size === 0 ? 'no match' :
    plural(names.size, 'function') + ' match: ' + fmtPercent(matched, fl.root.cost) + ' of the total';
}

function renderFlameSelected() {
  const box = clear($('#flame-selected'));
  const n = fl.selected;
  if (!n || !fl.root) {
    box.appendChild(el('p', { class: 'muted', text: 'Click a frame to zoom into it and see it here; double-click it to open its source.' }));
    return;
  }
  const total = fl.root.cost;
  const inverted = $('#flame-inverted').checked;
  const head = el('div', { class: 'sel-head' }, el('span', { class: 'fn', text: nodeLabel(n) }));
  if (n.file) {
    head.appendChild(document.createTextNode(' '));
    head.appendChild(el('a', {
      class: 'frame-link button-like', href: '#', 'data-file': n.file, 'data-line': String(n.line || 0),
      title: 'open ' + n.file + (n.line ? ':' + n.line : ''), text: 'source: ' + frameWhere(n, false),
    }));
  } else if (n.object) {
    head.appendChild(el('span', { class: 'where', text: ' in ' + n.object }));
  }
  box.appendChild(head);
  const dl = el('dl', { class: 'kv' });
  const kv = (k, v) => dl.appendChild(el('div', null, el('dt', { text: k }), el('dd', { text: v })));
  kv(COST_LABELS[fl.cost] || fl.cost, fmtCost(fl.cost, n.cost) + ' (' + fmtPercent(n.cost, total) + ' of total)');
  if (!n.isRoot && !n.omitted) {
    kv(inverted ? 'of the stacks that start here' : 'its own (allocated right there)', fmtCost(fl.cost, n.self) + ' (' + fmtPercent(n.self, total) + ')');
    if (n.file) kv('file', frameWhere(n, true));
    if (n.object) kv('object', n.object);
  }
  box.appendChild(dl);
  // The path from the root, each step zooms.
  const path = [];
  for (let m = n; m; m = m.parent) path.unshift(m);
  if (path.length > 1) {
    const ol = el('ol', { class: 'crumbs' });
    for (const m of path) {
      ol.appendChild(el('li', null, el('a', {
        href: '#', class: 'crumb', 'data-node': String(m.id), title: nodeTitle(m), text: nodeLabel(m),
      })));
    }
    box.appendChild(el('div', { class: 'crumbs-wrap' }, el('span', { class: 'muted', text: inverted ? 'allocating function first: ' : 'from the root: ' }), ol));
  }
}

function zoomTo(n) {
  fl.zoom = n;
  fl.zoomPath = pathOf(n);
  fl.selected = n.isRoot ? null : n;
  drawFlame();
  renderFlameSelected();
}

function setupFlameEvents() {
  const svg = $('#flame');
  svg.addEventListener('click', (ev) => {
    const t = ev.target.closest ? ev.target.closest('[data-node]') : null;
    if (!t) return;
    const n = fl.nodes[Number(t.getAttribute('data-node'))];
    if (!n || n.omitted) return;
    if ($('#flame-sunburst').checked && n === fl.zoom && n.parent) zoomTo(n.parent);
    else zoomTo(n);
  });
  // From the keyboard: Enter or Space zooms into the frame that has the
  // focus, O opens its source; the frame keeps the focus after a zoom.
  svg.addEventListener('keydown', (ev) => {
    const t = ev.target.closest ? ev.target.closest('[data-node]') : null;
    const n = t ? fl.nodes[Number(t.getAttribute('data-node'))] : null;
    if (!n || n.omitted) return;
    if (ev.key === 'Enter' || ev.key === ' ') {
      ev.preventDefault();
      t.dispatchEvent(new MouseEvent('click', { bubbles: true }));
      const again = svg.querySelector('[data-node="' + n.id + '"]');
      if (again) again.focus();
    } else if ((ev.key === 'o' || ev.key === 'O') && n.file) {
      ev.preventDefault();
      openSource(n.file, n.line || 0);
    }
  });
  // A double click on a frame opens its source.
  svg.addEventListener('dblclick', (ev) => {
    const t = ev.target.closest ? ev.target.closest('[data-node]') : null;
    const n = t ? fl.nodes[Number(t.getAttribute('data-node'))] : null;
    if (n && n.file) openSource(n.file, n.line || 0);
  });
  $('#flame-selected').addEventListener('click', (ev) => {
    const a = ev.target.closest ? ev.target.closest('a.crumb') : null;
    if (!a) return;
    ev.preventDefault();
    const n = fl.nodes[Number(a.getAttribute('data-node'))];
    if (n) zoomTo(n);
  });
  $('#flame-reset').addEventListener('click', () => { if (fl.root) zoomTo(fl.root); });
  $('#flame-cost').addEventListener('change', () => { loadedKey.flame = windowKey(); loadFlame(); });
  $('#flame-inverted').addEventListener('change', () => { fl.zoomPath = null; loadedKey.flame = windowKey(); loadFlame(); });
  $('#flame-sunburst').addEventListener('change', () => { drawFlame(); });
  $('#flame-search').addEventListener('input', applyFlameSearch);
}

// ---------------------------------------------------------------------------
// Leaks

async function loadLeaks() {
  const tok = nextToken('leaks');
  setStatus('leaks-status', 'loading', 'Loading…');
  const [s, l] = await Promise.allSettled([
    api(viewURL('summary', common({ top: 50 }))),
    api(viewURL('leaks', common())),
  ]);
  if (!isCurrent('leaks', tok)) return;
  setStatus('leaks-status', '', '');
  const stacks = clear($('#leaks-stacks'));
  const problems = clear($('#leaks-problems'));
  const table = clear($('#leaks-table'));
  if (s.status === 'fulfilled') {
    try {
      renderLeakStacks(stacks, s.value);
      renderProblems(problems, s.value);
    } catch (e) {
      stacks.appendChild(el('p', { class: 'error', text: errorMessage(e) }));
    }
  } else {
    stacks.appendChild(el('h2', { text: 'Still in use at exit' }));
    stacks.appendChild(el('p', { class: 'error', text: errorMessage(s.reason) }));
  }
  if (l.status === 'fulfilled') {
    try {
      renderLeakTable(table, l.value);
    } catch (e) {
      table.appendChild(el('p', { class: 'error', text: errorMessage(e) }));
    }
  } else {
    table.appendChild(el('h2', { text: 'Leak table (mprof)' }));
    table.appendChild(el('p', { class: 'error', text: errorMessage(l.reason) }));
  }
}

function endOfWindowText() {
  if (state.to === null) return 'at exit';
  const rt = state.summary && state.summary.summary ? state.summary.summary.run_time_ns : 0;
  return state.to >= rt ? 'at exit' : 'at ' + fmtDuration(state.to);
}

// renderLostChains shows, when the process was scanned at its exit
// (memtrail run, unless -leak-check=false), its blocks by memcheck's classes and the
// definitely lost ones by call stack with what hangs from them.
function renderLostChains(box, r) {
  const s = r.summary || {};
  if (s.leak_scan !== 'done') {
    if (s.leak_scan && !s.leak_scan.startsWith('not scanned')) box.appendChild(el('p', { class: 'muted', text: 'Leak classes: ' + s.leak_scan + '.' }));
    return;
  }
  box.appendChild(el('h2', { text: 'Why it leaked' }));
  const classes = el('dl', { id: 'leak-classes', class: 'kv' });
  for (const [name, key, bad] of [['definitely lost', 'definitely_lost', true], ['indirectly lost', 'indirectly_lost', true],
    ['possibly lost', 'possibly_lost', true], ['still reachable', 'still_reachable', false]]) {
    const bytes = s[key + '_bytes'] || 0;
    classes.appendChild(el('div', { class: bad && bytes > 0 ? 'bad' : '' }, el('dt', { text: name }),
      el('dd', { text: fmtBytesExact(bytes) + ' in ' + plural(s[key + '_blocks'] || 0, 'block') })));
  }
  box.appendChild(classes);
  const chains = Array.isArray(r.lost_chains) ? r.lost_chains : [];
  if (chains.length === 0) return;
  box.appendChild(el('p', { class: 'lead', text: 'The definitely lost blocks by the call stack that allocated them, with the blocks that hang from them:' }));
  chains.forEach((c, i) => {
    const card = el('div', { class: 'leak card lost-chain' },
      el('div', { class: 'leak-head' }, el('span', { class: 'rank', text: '#' + (i + 1) }), el('strong', { text: fmtSize(c.bytes) }),
        ' in ' + plural(c.blocks, 'block') + ': a free of ' + (c.leads === 1 ? 'the block' : 'each of the ' + fmtCount(c.leads) + ' blocks') +
        ' from here would have released ' + (c.blocks === 1 ? 'it' : 'them')),
      stackList(c.stack));
    for (const h of c.hanging || []) {
      card.appendChild(el('div', { class: 'stack-label', text: 'hanging from it: ' + fmtSize(h.bytes) + ' in ' + plural(h.blocks, 'block') + ', from' }));
      card.appendChild(stackList(h.stack));
    }
    // Where the leak was made (memtrail run -leak-origins): null when
    // the trace did not look.
    if (Array.isArray(c.origins)) {
      let blocks = 0, bytes = 0;
      for (const o of c.origins) {
        card.appendChild(el('div', { class: 'stack-label origin', text: 'made unreachable by a free of the block that pointed to it: ' +
          fmtSize(o.bytes) + ' in ' + plural(o.blocks, 'block') + ', freed from' }));
        card.appendChild(stackList(o.stack));
        blocks += o.blocks;
        bytes += o.bytes;
      }
      if (blocks < c.blocks) {
        card.appendChild(el('div', { class: 'stack-label', text: fmtSize(c.bytes - bytes) + ' in ' + plural(c.blocks - blocks, 'block') +
          ' lost their last pointer other than by a free (overwritten, or out of scope)' }));
      }
    }
    box.appendChild(card);
  });
}

// renderPossiblyLost lists the possibly lost blocks by the call stack
// that allocated them: only pointers into their interiors lead to them.
function renderPossiblyLost(box, r) {
  const parts = Array.isArray(r.possibly_lost) ? r.possibly_lost : [];
  if (parts.length === 0) return;
  const card = el('div', { class: 'leak card possibly-lost' },
    el('div', { class: 'leak-head' }, el('strong', { text: 'Possibly lost' }), ': only pointers into their interiors lead to these blocks'));
  for (const h of parts) {
    card.appendChild(el('div', { class: 'stack-label', text: fmtSize(h.bytes) + ' in ' + plural(h.blocks, 'block') + ', from' }));
    card.appendChild(stackList(h.stack));
  }
  box.appendChild(card);
}

function renderLeakStacks(box, r) {
  renderLostChains(box, r);
  renderPossiblyLost(box, r);
  const s = r.summary || {};
  const list = Array.isArray(r.in_use_at_exit) ? r.in_use_at_exit : [];
  const when = endOfWindowText();
  box.appendChild(el('h2', { text: 'Still in use ' + when }));
  const intro = fmtBytesExact(s.in_use_at_exit_bytes || 0) + ' in ' + plural(s.in_use_at_exit_blocks || 0, 'block');
  box.appendChild(el('p', { class: 'lead', text: list.length === 0 ? 'Nothing: every block was freed.' :
    intro + (list.length >= 50 ? ', the 50 call stacks that hold most of it:' : ', from ' + plural(list.length, 'call stack') + ':') }));
  list.forEach((site, i) => {
    const head = el('div', { class: 'leak-head' },
      el('span', { class: 'rank', text: '#' + (i + 1) }),
      el('strong', { text: fmtSize(site.in_use_at_exit_bytes) }),
      ' in ' + plural(site.in_use_at_exit_blocks, 'block'),
      el('span', { class: 'muted', text: ' · ' + fmtPercent(site.in_use_at_exit_bytes, s.in_use_at_exit_bytes) + ' of it · ' +
        plural(site.allocations, 'allocation') + ', ' + plural(site.frees, 'free') + ' from this stack' }));
    if (site.inherited) head.appendChild(el('span', { class: 'tag', text: 'inherited at fork' }));
    box.appendChild(el('div', { class: 'leak card' }, head, stackList(site.stack)));
  });
}

const PROBLEM_KINDS = [
  ['invalid_frees', 'Invalid frees', 'frees of addresses that were not allocated'],
  ['double_frees', 'Double frees', 'blocks freed twice'],
  ['mismatched_frees', 'Mismatched frees', 'blocks freed by a function that does not match their allocator'],
  ['invalid_reallocs', 'Invalid reallocs', 'reallocs of addresses that were not allocated'],
];

function renderProblems(box, r) {
  const probs = r.problems || {};
  const any = PROBLEM_KINDS.some(([k]) => (probs[k] || []).length > 0);
  if (!any) return;
  box.appendChild(el('h2', { text: 'Problems' }));
  for (const [k, title, what] of PROBLEM_KINDS) {
    const list = probs[k] || [];
    if (!list.length) continue;
    box.appendChild(el('h3', { text: title + ': ' + what }));
    for (const p of list) {
      const card = el('div', { class: 'card problem' });
      let headline = plural(p.count, 'time');
      if (p.size) headline += ', ' + fmtSize(p.size);
      headline += ', first ' + fmtDuration(p.first_time_ns) + ' after start';
      const known = (a) => a && a !== 'unknown';
      const apis = [known(p.alloc_api) && 'allocated by ' + p.alloc_api, known(p.free_api) && 'freed by ' + p.free_api].filter(Boolean);
      if (apis.length) headline += ' (' + apis.join(', ') + ')';
      card.appendChild(el('div', { class: 'leak-head', text: headline }));
      for (const [key, label] of [['free_stack', 'freed at'], ['first_free_stack', 'first freed at'], ['alloc_stack', 'allocated at']]) {
        if (p[key] && p[key].length) {
          card.appendChild(el('div', { class: 'stack-label', text: label }));
          card.appendChild(stackList(p[key]));
        }
      }
      box.appendChild(card);
    }
  }
}

function renderLeakTable(box, r) {
  const d = r.data || {};
  const chains = Array.isArray(d.chains) ? d.chains : [];
  box.appendChild(el('h2', { text: 'Leak table (mprof)' }));
  box.appendChild(el('p', { class: 'lead', text: chains.length === 0 ? 'No leaks.' :
    'Partial call chains (up to ' + (d.chain_length || '?') + ' callers) of the ' +
    fmtBytesExact(d.kept_bytes || 0) + ' in ' + plural(d.kept_blocks || 0, 'block') + ' kept:' }));
  if (!chains.length) return;
  const table = el('table', { class: 'data' });
  table.appendChild(el('thead', null, el('tr', null,
    el('th', { class: 'num', text: 'kept bytes' }), el('th', { class: 'num', text: '%' }),
    el('th', { class: 'num', text: 'kept blocks' }), el('th', { class: 'num', text: 'allocations' }),
    el('th', { class: 'num', text: 'bytes allocated' }), el('th', { class: 'num', text: 'frees' }),
    el('th', { text: 'call chain' }))));
  const tb = el('tbody');
  for (const c of chains) {
    const chain = el('td', { class: 'chain' });
    if (c.truncated) chain.appendChild(el('span', { class: 'muted', text: '… → ' }));
    (c.functions || []).forEach((fn, i) => {
      if (i > 0) chain.appendChild(el('span', { class: 'muted', text: ' → ' }));
      chain.appendChild(el('span', { class: 'fn', text: fn || '??' }));
    });
    tb.appendChild(el('tr', null,
      el('td', { class: 'num', text: fmtSize(c.kept_bytes), title: fmtCount(c.kept_bytes) + ' bytes' }),
      el('td', { class: 'num', text: fmtPercent(c.kept_bytes, d.kept_bytes) }),
      el('td', { class: 'num', text: fmtCount(c.kept_blocks) }),
      el('td', { class: 'num', text: fmtCount(c.allocations) }),
      el('td', { class: 'num', text: fmtSize(c.bytes), title: fmtCount(c.bytes) + ' bytes' }),
      el('td', { class: 'num', text: fmtCount(c.frees) }),
      chain));
  }
  table.appendChild(tb);
  box.appendChild(el('div', { class: 'table-wrap' }, table));
}

// ---------------------------------------------------------------------------
// A sortable, filterable table whose rows may be a tree

// columns: [{label, num, value(row) for sorting, cell(row) -> Node|string, title}]
// rows: [{children: [...], data, cls}]
function DataTable(table, opts) {
  this.table = table;
  this.columns = opts.columns;
  this.rows = opts.rows;
  this.foot = opts.foot || null;
  this.onRow = opts.onRow || null;
  this.sortCol = -1;
  this.sortDir = 0;
  this.collapsed = new Set();
  this.filter = '';
  this.tree = opts.rows.some((r) => r.children && r.children.length);
  if (this.tree) {
    let count = 0;
    const walk = (rs, depth) => { for (const r of rs) { count++; if (r.children) walk(r.children, depth + 1); } };
    walk(this.rows, 0);
    // A big tree starts folded below its third level.
    if (count > 1500) {
      const fold = (rs, depth) => { for (const r of rs) { if (depth >= 2 && r.children && r.children.length) this.collapsed.add(r); if (r.children) fold(r.children, depth + 1); } };
      fold(this.rows, 0);
    }
  }
  this.render();
}

DataTable.prototype.sorted = function (rows) {
  if (this.sortCol < 0) return rows;
  const col = this.columns[this.sortCol];
  const dir = this.sortDir;
  const key = col.value || ((r) => String(col.cell(r)));
  return rows.slice().sort((a, b) => {
    if (a.pinned !== b.pinned) return a.pinned ? 1 : -1; // "smaller ones" stay last
    const x = key(a), y = key(b);
    if (typeof x === 'number' && typeof y === 'number') return (x - y) * dir;
    return String(x).localeCompare(String(y)) * dir;
  });
};

DataTable.prototype.render = function () {
  const t = clear(this.table);
  const head = el('tr');
  this.columns.forEach((c, i) => {
    const th = el('th', { class: (c.num ? 'num ' : '') + 'sortable', scope: 'col', title: c.title || 'sort by ' + c.label, tabindex: '0' }, c.label);
    if (i === this.sortCol) th.classList.add(this.sortDir > 0 ? 'sorted-asc' : 'sorted-desc');
    const go = () => this.sortBy(i);
    th.addEventListener('click', go);
    th.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); go(); } });
    head.appendChild(th);
  });
  t.appendChild(el('thead', null, head));
  const body = el('tbody');
  const add = (rows, depth, parentTr) => {
    for (const r of this.sorted(rows)) {
      const tr = el('tr', r.cls ? { class: r.cls } : null);
      tr._row = r;
      tr._depth = depth;
      tr._parent = parentTr;
      this.columns.forEach((c, i) => {
        const v = c.cell(r);
        const td = el('td', c.num || c.cls ? { class: [c.num ? 'num' : '', c.cls || ''].join(' ').trim() } : null);
        if (i === 0 && this.tree) {
          td.classList.add('tree-cell');
          td.style.paddingLeft = (4 + depth * 16) + 'px';
          if (r.children && r.children.length) {
            const open = !this.collapsed.has(r);
            td.appendChild(el('button', {
              type: 'button', class: 'twisty', 'aria-expanded': open ? 'true' : 'false', title: open ? 'fold' : 'unfold',
              text: open ? '▾' : '▸',
              onclick: (e) => { e.stopPropagation(); this.toggle(r); },
            }));
          } else {
            td.appendChild(el('span', { class: 'twisty-space' }));
          }
        }
        if (c.cellTitle) { const tt = c.cellTitle(r); if (tt) td.setAttribute('title', tt); }
        if (v instanceof Node) td.appendChild(v); else td.appendChild(document.createTextNode(v === undefined || v === null ? '' : String(v)));
        tr.appendChild(td);
      });
      if (this.onRow) tr.addEventListener('click', (e) => { if (!e.target.closest('a, button')) this.onRow(r, tr); });
      body.appendChild(tr);
      if (r.children && r.children.length) add(r.children, depth + 1, tr);
    }
  };
  add(this.rows, 0, null);
  t.appendChild(body);
  if (this.foot) {
    const tr = el('tr');
    this.columns.forEach((c) => {
      const v = this.foot[c.key];
      tr.appendChild(el('td', c.num ? { class: 'num' } : null, v === undefined ? '' : v));
    });
    t.appendChild(el('tfoot', null, tr));
  }
  this.applyVisibility();
};

DataTable.prototype.sortBy = function (i) {
  if (this.sortCol === i) this.sortDir = -this.sortDir;
  else { this.sortCol = i; this.sortDir = this.columns[i].num ? -1 : 1; }
  this.render();
};

DataTable.prototype.toggle = function (r) {
  if (this.collapsed.has(r)) this.collapsed.delete(r); else this.collapsed.add(r);
  this.render();
};

DataTable.prototype.setFilter = function (f) {
  this.filter = (f || '').trim().toLowerCase();
  this.applyVisibility();
};

DataTable.prototype.applyVisibility = function () {
  let shown = 0, total = 0;
  for (const tr of this.table.tBodies[0] ? Array.from(this.table.tBodies[0].rows) : []) {
    total++;
    let folded = false;
    for (let p = tr._parent; p; p = p._parent) if (this.collapsed.has(p._row)) { folded = true; break; }
    const matches = !this.filter || tr.textContent.toLowerCase().includes(this.filter);
    tr.hidden = folded || !matches;
    if (!tr.hidden) shown++;
  }
  this.shown = shown;
  this.total = total;
  if (this.onVisibility) this.onVisibility(shown, total);
};

// ---------------------------------------------------------------------------
// Tables

let currentTable = null;

function fnCell(f, omittedText) {
  if (omittedText) return el('span', { class: 'muted', text: omittedText });
  return el('span', { class: 'fn', text: frameName(f) });
}

function locCell(f) {
  if (!f) return '';
  if (f.file) return frameLink(f, frameWhere(f, false));
  if (f.object) return el('span', { class: 'where', title: f.object, text: 'in ' + basename(f.object) });
  return '';
}

function bytesCol(label, get, extra) {
  return Object.assign({ label, num: true, value: get, cell: (r) => fmtSize(get(r)), cellTitle: (r) => fmtCount(get(r)) + ' bytes' }, extra || {});
}

function countCol(label, get, extra) {
  return Object.assign({ label, num: true, value: get, cell: (r) => fmtCount(get(r)) }, extra || {});
}

function shareList(list, cost) {
  const span = el('span', { class: 'shares' });
  for (const c of list || []) {
    const line = el('span', { class: 'share' }, el('span', { class: 'fn', text: c.function || c.name || '??' }));
    const v = c.cost !== undefined ? c.cost : c.bytes;
    if (v !== undefined) line.appendChild(el('span', { class: 'muted', text: ' ' + (cost ? fmtCostShort(cost, v) : fmtSize(v)) }));
    if (c.calls !== undefined) line.appendChild(el('span', { class: 'muted', text: ' ×' + fmtCount(c.calls) }));
    span.appendChild(line);
  }
  return span;
}

async function loadTable() {
  const tok = nextToken('tables');
  const kind = $('#table-kind').value;
  const treeKind = kind === 'top-down' || kind === 'bottom-up' || kind === 'callers';
  $('#table-cost-label').hidden = !treeKind;
  const cost = treeKind ? $('#table-cost').value : null;
  setStatus('tables-status', 'loading', 'Loading…');
  const tableEl = $('#table-view');
  try {
    const r = await api(viewURL(kind, common({ cost })));
    if (!isCurrent('tables', tok)) return;
    setStatus('tables-status', '', '');
    const spec = tableSpec(kind, r.data || {}, cost);
    currentTable = new DataTable(tableEl, spec);
    currentTable.onVisibility = (shown, total) => {
      $('#table-info').textContent = total === 0 ? '' : shown === total ? plural(total, 'row') : fmtCount(shown) + ' of ' + plural(total, 'row');
    };
    currentTable.setFilter($('#table-filter').value);
    if (spec.note) setStatus('tables-status', '', spec.note);
  } catch (e) {
    if (!isCurrent('tables', tok)) return;
    currentTable = null;
    clear(tableEl);
    $('#table-info').textContent = '';
    setStatus('tables-status', 'error', errorMessage(e));
  }
}

function treeRows(children, omittedChildren, omittedCost) {
  const rows = (children || []).map((c) => ({ data: c, children: treeRows(c.children, c.omitted_children, c.omitted_cost) }));
  if (omittedChildren > 0) rows.push({ data: { omitted: omittedChildren, cost: omittedCost, self: 0 }, children: [], cls: 'omitted', pinned: true });
  return rows;
}

function tableSpec(kind, d, cost) {
  const SIZES = [['small', 'small (≤32 B)'], ['medium', 'medium (≤256 B)'], ['large', 'large (≤2 KiB)'], ['extra_large', 'extra large']];
  switch (kind) {
    case 'top-down':
    case 'bottom-up': {
      const total = d.total || 0;
      const c = d.cost || cost;
      const costCol = (label, get) => costIsCount(c) ? countCol(label, get) : bytesCol(label, get);
      return {
        columns: [
          { label: 'function', cls: 'fcol', value: (r) => r.data.omitted ? '' : frameName(r.data),
            cell: (r) => fnCell(r.data, r.data.omitted ? plural(r.data.omitted, 'smaller one') + ' (under 0.1% each)' : null) },
          costCol(COST_LABELS[c] || c, (r) => r.data.cost),
          { label: '%', num: true, value: (r) => r.data.cost, cell: (r) => fmtPercent(r.data.cost, total) },
          costCol(kind === 'top-down' ? 'self' : 'self (no caller)', (r) => r.data.self),
          { label: 'location', value: (r) => r.data.omitted ? '' : frameWhere(r.data, false), cell: (r) => r.data.omitted ? '' : locCell(r.data) },
        ],
        rows: treeRows(d.children, d.omitted_children, d.omitted_cost),
        note: total === 0 ? 'Nothing to show: no ' + (COST_LABELS[c] || c) + ' in this window.' : '',
      };
    }
    case 'callers': {
      const total = d.total || 0;
      const c = d.cost || cost;
      const costCol = (label, get) => costIsCount(c) ? countCol(label, get) : bytesCol(label, get);
      return {
        columns: [
          { label: 'function', cls: 'fcol', value: (r) => frameName(r.data), cell: (r) => fnCell(r.data) },
          costCol('inclusive', (r) => r.data.inclusive),
          { label: '%', num: true, value: (r) => r.data.inclusive, cell: (r) => fmtPercent(r.data.inclusive, total) },
          costCol('self', (r) => r.data.self),
          { label: 'called from', cls: 'lcol', value: (r) => (r.data.callers || []).length, cell: (r) => shareList(r.data.callers, c) },
          { label: 'calls', cls: 'lcol', value: (r) => (r.data.callees || []).length, cell: (r) => shareList(r.data.callees, c) },
          { label: 'location', value: (r) => frameWhere(r.data, false), cell: (r) => locCell(r.data) },
        ],
        rows: (d.functions || []).map((f) => ({ data: f })),
      };
    }
    case 'bins': {
      const t = d.total || {};
      return {
        columns: [
          { key: 'size', label: 'size', num: true, value: (r) => r.data.size, cell: (r) => (r.data.larger ? '> ' : '') + fmtCount(r.data.size) + ' B' },
          countCol('allocations', (r) => r.data.allocations, { key: 'allocations' }),
          bytesCol('bytes', (r) => r.data.bytes, { key: 'bytes' }),
          countCol('frees', (r) => r.data.frees, { key: 'frees' }),
          bytesCol('kept bytes', (r) => r.data.kept_bytes, { key: 'kept_bytes' }),
          countCol('kept blocks', (r) => r.data.kept_blocks, { key: 'kept_blocks' }),
          { key: 'types', label: 'types of that size', value: (r) => (r.data.types || []).join(', '), cell: (r) => (r.data.types || []).join(', ') },
        ],
        rows: (d.bins || []).map((b) => ({ data: b })),
        foot: { size: 'total', allocations: fmtCount(t.allocations), bytes: fmtSize(t.bytes), frees: fmtCount(t.frees),
          kept_bytes: fmtSize(t.kept_bytes), kept_blocks: fmtCount(t.kept_blocks), types: '' },
        note: d.filtered ? 'Only the blocks of the call stacks kept by the filters.' : '',
      };
    }
    case 'direct': {
      const t = d.total || {};
      const sizeCols = SIZES.map(([k, label]) => bytesCol(label, (r) => ((r.data.by_size || {})[k] || {}).bytes || 0, { key: k }));
      const foot = { function: 'total', object: '', allocations: fmtCount(t.allocations), bytes: fmtSize(t.bytes),
        kept_bytes: fmtSize(t.kept_bytes), kept_blocks: fmtCount(t.kept_blocks) };
      for (const [k] of SIZES) foot[k] = fmtSize(((t.by_size || {})[k] || {}).bytes || 0);
      return {
        columns: [
          { key: 'function', label: 'function', cls: 'fcol', value: (r) => frameName(r.data), cell: (r) => fnCell(r.data) },
          { key: 'object', label: 'object', value: (r) => basename(r.data.object), cell: (r) => basename(r.data.object), cellTitle: (r) => r.data.object },
          countCol('calls', (r) => r.data.allocations, { key: 'allocations' }),
          bytesCol('bytes', (r) => r.data.bytes, { key: 'bytes' }),
          bytesCol('kept bytes', (r) => r.data.kept_bytes, { key: 'kept_bytes' }),
          countCol('kept blocks', (r) => r.data.kept_blocks, { key: 'kept_blocks' }),
          ...sizeCols,
        ],
        rows: (d.functions || []).map((f) => ({ data: f })),
        foot,
      };
    }
    case 'callgraph': {
      return {
        columns: [
          countCol('#', (r) => r.data.index),
          { label: 'function', cls: 'fcol', value: (r) => r.data.name || r.data.function || '', cell: (r) => {
            const s = el('span', null, el('span', { class: 'fn', text: r.data.name || r.data.function || '??' }));
            if (r.data.members && r.data.members.length) {
              s.appendChild(el('span', { class: 'muted', text: ' (cycle of ' + r.data.members.map((m) => (typeof m === 'object' ? m.name || m.function : m)).join(', ') + ')' }));
            }
            return s;
          }, cellTitle: (r) => r.data.object },
          bytesCol('self', (r) => r.data.self_bytes),
          bytesCol('self and callees', (r) => r.data.total_bytes),
          { label: '%', num: true, value: (r) => r.data.total_bytes, cell: (r) => fmtPercent(r.data.total_bytes, d.bytes) },
          countCol('called', (r) => r.data.called),
          countCol('recursive', (r) => r.data.recursive_calls),
          { label: 'parents', cls: 'lcol', value: (r) => (r.data.parents || []).length, cell: (r) => shareList(r.data.parents) },
          { label: 'children', cls: 'lcol', value: (r) => (r.data.children || []).length, cell: (r) => shareList(r.data.children) },
        ],
        rows: (d.nodes || []).map((n) => ({ data: n })),
      };
    }
  }
  throw new Error('unknown table ' + kind);
}

function setupTableEvents() {
  $('#table-kind').addEventListener('change', () => { loadedKey.tables = windowKey(); loadTable(); });
  $('#table-cost').addEventListener('change', () => { loadedKey.tables = windowKey(); loadTable(); });
  $('#table-filter').addEventListener('input', () => { if (currentTable) currentTable.setFilter($('#table-filter').value); });
}

// ---------------------------------------------------------------------------
// Objects

let objectsTable = null;

// The object list shows OBJECTS_PAGE objects more each time it is asked
// for more, up to objectsMax: the server's bound of a list (report's
// -top), once /api/status says it (see loadServerInfo).
const OBJECTS_PAGE = 100;
let objectsMax = OBJECTS_PAGE;
let objectsShown = OBJECTS_PAGE;

async function loadObjects() {
  const tok = nextToken('objects');
  const sort = $('#objects-sort').value;
  setStatus('objects-status', 'loading', 'Loading…');
  const tableEl = $('#objects-table');
  const detail = $('#object-detail');
  const more = $('#objects-more');
  more.hidden = true;
  try {
    await serverInfoRead;
    const r = await api(viewURL('objects', common({ sort, top: objectsShown })));
    if (!isCurrent('objects', tok)) return;
    const list = ((r.data && r.data.objects) || []).slice(0, objectsShown);
    const total = Math.max(Number(r.data && r.data.total) || 0, list.length);
    setStatus('objects-status', '', list.length === 0 ? 'No objects ' + (sort === 'lifetime' ? 'freed' : 'live') + ' in this window.' : '');
    $('#objects-info').textContent = list.length === 0 ? '' : list.length === total ? plural(total, 'object') :
      'the first ' + fmtCount(list.length) + ' of ' + plural(total, 'object');
    if (list.length < total && objectsShown < objectsMax) {
      more.hidden = false;
      more.textContent = 'show ' + fmtCount(Math.min(OBJECTS_PAGE, total - list.length, objectsMax - objectsShown)) + ' more';
    }
    clear(detail).appendChild(el('p', { class: 'muted', text: 'Select an object to see where it was allocated.' }));
    setSelectedObject(null);
    const rows = list.map((o, i) => ({ data: o, i }));
    drawObjectArcs(rows, r.window || {});
    objectsTable = new DataTable(tableEl, {
      columns: [
        countCol('#', (r) => r.i + 1),
        { label: 'address', value: (r) => r.data.address, cell: (r) => el('code', { text: r.data.address }) },
        bytesCol('size', (r) => r.data.size),
        { label: 'type?', value: (r) => (r.data.types || []).join(' or '), cell: (r) => (r.data.types || []).join(' or '),
          title: "the program's types of that size: a guess at what it is" },
        { label: 'allocated at', num: true, value: (r) => r.data.allocated_ns, cell: (r) => fmtDuration(r.data.allocated_ns) },
        { label: 'freed at', num: true, value: (r) => r.data.live ? Infinity : r.data.freed_ns, cell: (r) => r.data.live ? 'live' : fmtDuration(r.data.freed_ns) },
        { label: 'age', num: true, value: (r) => r.data.age_ns, cell: (r) => fmtDuration(r.data.age_ns) },
        { label: 'thread', num: true, value: (r) => r.data.thread, cell: (r) => r.data.thread ? String(r.data.thread) : 'parent' },
        countCol('reallocs', (r) => r.data.reallocs),
        { label: 'by', value: (r) => r.data.api || '', cell: (r) => r.data.api || '', cls: 'nowrap' },
        { label: 'allocated in', cls: 'fcol', value: (r) => siteTop(r.data), cell: (r) => el('span', { class: 'fn', text: siteTop(r.data) }),
          cellTitle: (r) => (r.data.stack || []).map(frameName).join('\n') },
      ],
      rows,
      onRow: (row, tr) => selectObject(row, tr),
    });
  } catch (e) {
    if (!isCurrent('objects', tok)) return;
    objectsTable = null;
    clear($('#object-arcs'));
    clear(tableEl);
    clear(detail);
    setSelectedObject(null);
    $('#objects-info').textContent = '';
    setStatus('objects-status', 'error', errorMessage(e));
  }
}

// drawObjectArcs draws each object of the list as an arc over the time
// axis of the window, from its allocation to its free (or to the end of
// the window, dashed, if it is live), as mVizion draws lifetimes: the
// longer it lived, the higher its arc. A click on an arc selects its
// object.
function drawObjectArcs(rows, win) {
  const svg = clear($('#object-arcs'));
  if (rows.length === 0) return;
  const W = svg.clientWidth || 1000, H = 150, M = { left: 16, right: 16, bottom: 22 };
  svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  const from = Number(win.from_ns) || 0;
  const to = Math.max(Number(win.to_ns) || 0, from + 1);
  const x = (t) => M.left + (Math.min(Math.max(t, from), to) - from) / (to - from) * (W - M.left - M.right);
  const base = H - M.bottom;
  svg.appendChild(svgEl('line', { x1: M.left, x2: W - M.right, y1: base, y2: base, class: 'axis' }));
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const t = from + f * (to - from);
    svg.appendChild(svgEl('text', { x: x(t), y: H - 6, class: 'tick', 'text-anchor': f === 0 ? 'start' : f === 1 ? 'end' : 'middle',
      text: fmtDuration(t) }));
  }
  for (const r of rows) {
    const o = r.data;
    const x0 = x(Number(o.allocated_ns) || 0);
    const x1 = o.live ? x(to) : x(Number(o.freed_ns) || 0);
    const rx = Math.max((x1 - x0) / 2, 1);
    const ry = Math.min(rx, base - 8);
    const path = svgEl('path', {
      d: 'M ' + x0 + ' ' + base + ' A ' + rx + ' ' + ry + ' 0 0 1 ' + (x0 + 2 * rx) + ' ' + base,
      class: 'arc-life' + (o.live ? ' live' : ''), 'data-index': String(r.i),
    });
    path.appendChild(svgEl('title', { text: fmtSize(o.size) + ' at ' + o.address + ': allocated ' + fmtDuration(o.allocated_ns) +
      (o.live ? ', live, ' : ', freed ' + fmtDuration(o.freed_ns) + ', after ') + fmtDuration(o.age_ns) }));
    path.addEventListener('click', () => {
      const tr = [...$$('#objects-table tbody tr')].find((t) => t._row && t._row.i === r.i);
      if (tr) { tr.click(); tr.scrollIntoView({ block: 'nearest' }); }
    });
    svg.appendChild(path);
  }
}

// markObjectArc marks the arc of the object of row i (-1: none).
function markObjectArc(i) {
  for (const p of $$('#object-arcs .arc-life')) {
    const on = Number(p.getAttribute('data-index')) === i;
    p.classList.toggle('selected', on);
    if (on) p.parentNode.appendChild(p); // drawn last: over the others
  }
}

function siteTop(o) {
  const s = o.stack || [];
  return s.length ? frameName(s[0]) : '??';
}

function selectObject(row, tr) {
  for (const t of $$('#objects-table tr.selected')) t.classList.remove('selected');
  tr.classList.add('selected');
  markObjectArc(row.i);
  const o = row.data;
  const box = clear($('#object-detail'));
  let title = fmtSize(o.size) + ' at ' + o.address;
  if (o.types && o.types.length) title += ' (' + o.types.join(' or ') + '?)';
  box.appendChild(el('h3', { text: title }));
  box.appendChild(el('button', {
    type: 'button', id: 'object-in-heap', class: 'small',
    title: 'the heap map ' + endOfWindowText() + ', with the cell of this object marked',
    text: 'show in heap map', onclick: () => showObjectInHeap(o),
  }));
  const story = el('ul', { class: 'story' });
  story.appendChild(el('li', { text: 'allocated by ' + (o.api || 'the allocator') + ' ' + fmtDuration(o.allocated_ns) + ' after start' +
    (o.thread ? ', by thread ' + o.thread : ', by the parent process before the fork') }));
  if (o.reallocs) story.appendChild(el('li', { text: 'moved or resized by realloc ' + (o.reallocs === 1 ? 'once' : fmtCount(o.reallocs) + ' times') }));
  if (o.live) story.appendChild(el('li', { text: 'still live ' + endOfWindowText() + ', ' + fmtDuration(o.age_ns) + ' old' }));
  else story.appendChild(el('li', { text: 'freed ' + fmtDuration(o.freed_ns) + ' after start, after living ' + fmtDuration(o.age_ns) }));
  box.appendChild(story);
  box.appendChild(el('div', { class: 'stack-label', text: 'allocated at' }));
  box.appendChild(stackList(o.stack));
  if (!o.live && o.free_stack && o.free_stack.length) {
    box.appendChild(el('div', { class: 'stack-label', text: 'freed at' }));
    box.appendChild(stackList(o.free_stack));
  }
  setSelectedObject(o);
  // Below the table when the page is narrow: bring it into view.
  if (box.getBoundingClientRect().top > window.innerHeight) box.scrollIntoView({ block: 'nearest' });
}

// ---------------------------------------------------------------------------
// Heap map: the address space of the blocks live at a moment, in cells

// HEAP_WIDTH is how many cells a row of the map has.
const HEAP_WIDTH = 64;
// HEAP_KEPT is how many heap maps (big answers) api() keeps.
const HEAP_KEPT = 12;

const hm = {
  data: null,       // the heapmap view shown
  cells: [],        // its cells
  cellBytes: 0,
  regions: [],      // its regions: {start, end (BigInt), startText, endText, first, last (cells)}
  els: [],          // the element of each cell
  shownTime: null,  // the time of the map shown: ns after start; null: at exit
  time: null,       // the time asked for (the scrubber's)
  run: 0,           // the process's run time: the scrubber's span
  pinned: null,     // the index of the cell clicked
  hover: null,      // the index of the cell under the pointer
  object: null,     // the object of the Objects tab to find in the map
  objectCell: -1,   // the index of its cell, if it is in the map
  focusObject: false, // pin and scroll to the object's cell when the map is drawn
  note: null,       // what the tooltip says about the object when it is not in the map
  timer: 0,
  kept: [],         // the paths of the heap maps kept among api()'s answers
  gen: 0,           // counts the changes of the map and its marks: the tooltip is redrawn only for them
  tipKey: '',       // what the tooltip shows
};

function toBig(s) {
  try { return typeof s === 'string' && s !== '' ? BigInt(s) : null; } catch (e) { return null; }
}

function hexAddr(b) { return '0x' + b.toString(16); }

// heapLevel is a cell's shade: 0 only if empty, 9 only if full, as the
// text heap map of memtrail report.
function heapLevel(used, size) {
  used = Number(used) || 0;
  if (used <= 0 || !size) return 0;
  if (used >= size) return 9;
  return 1 + Math.floor(used * 8 / size);
}

// heapTime returns the time to ask the map at: null at exit (or past it),
// else at least 1 ns after start.
function heapTime(t) {
  if (t === null || t === undefined || !Number.isFinite(Number(t))) return null;
  if (hm.run > 0 && t >= hm.run) return null;
  return Math.max(1, Math.round(t));
}

function heapWhen(t) { return t === null ? 'at exit' : 'at ' + fmtDuration(t); }

// keepHeapPath keeps only the latest heap maps among api()'s answers: a
// scrubbed time each would add up.
function keepHeapPath(path) {
  hm.kept = hm.kept.filter((p) => p !== path);
  hm.kept.push(path);
  while (hm.kept.length > HEAP_KEPT) responses.delete(hm.kept.shift());
}

// setupHeapScrubber spans the scrubber over the run of the process: its
// steps are the timeline's, if they cut the run fine enough, else about a
// 200th of it; the far right is the exit.
function setupHeapScrubber(sum, move) {
  const input = $('#heap-time');
  const run = sum && sum.summary ? Number(sum.summary.run_time_ns) || 0 : 0;
  hm.run = run;
  if (!(run > 0)) {
    input.disabled = true;
    return;
  }
  let step = 0;
  const t = tl.data && tl.data.data;
  if (t && sum && tl.data.pid === sum.pid) step = Number(t.step_ns) || 0;
  if (!(step > 0 && run / step >= 100 && run / step <= 2000)) step = niceStep(run, 200);
  step = Math.max(1, Math.round(step));
  const max = Math.ceil(run / step) * step;
  input.min = '0';
  input.max = String(max);
  input.step = String(step);
  input.disabled = false;
  if (move) input.value = String(hm.time === null ? max : Math.min(hm.time, max));
}

// sliderTime returns the time the scrubber is at.
function sliderTime() {
  const input = $('#heap-time');
  const v = Number(input.value);
  if (!(hm.run > 0) || v >= hm.run) return null;
  return Math.max(1, v);
}

function updateHeapTimeLabel() {
  const label = $('#heap-time-label');
  label.textContent = heapWhen(hm.time);
  label.setAttribute('title', hm.time === null ? 'the blocks still live when the process ended' :
    'the blocks live ' + fmtDuration(hm.time) + ' after start');
  const end = $('#heap-time-end');
  const winEnd = heapTime(state.to);
  end.textContent = winEnd === null ? 'back to the exit' : 'back to the window’s end';
  end.disabled = hm.time === winEnd;
}

async function loadHeap(moveScrubber) {
  const tok = nextToken('heap');
  clearTimeout(hm.timer);
  hm.timer = 0;
  const pid = state.pid;
  let sum = null;
  try { sum = await api(viewURL('summary', { pid, top: 50 })); } catch (e) { sum = null; }
  if (!isCurrent('heap', tok)) return;
  setupHeapScrubber(sum, moveScrubber);
  const t = heapTime(hm.time);
  hm.time = t;
  updateHeapTimeLabel();
  setStatus('heap-status', 'loading', 'Loading the heap map ' + heapWhen(t) + '…');
  $('#heapmap').classList.add('stale');
  const path = viewURL('heapmap', { pid, to: t });
  try {
    const r = await api(path);
    keepHeapPath(path);
    if (!isCurrent('heap', tok)) return;
    setStatus('heap-status', '', '');
    hm.data = r;
    hm.shownTime = t;
    renderHeap();
  } catch (e) {
    if (!isCurrent('heap', tok)) return;
    hm.data = null;
    hm.cells = [];
    hm.regions = [];
    hm.els = [];
    hm.pinned = null;
    hm.hover = null;
    hm.objectCell = -1;
    hm.gen++;
    hm.tipKey = '';
    const box = clear($('#heapmap'));
    box.classList.remove('stale');
    box.removeAttribute('data-time');
    clear($('#heap-tooltip'));
    $('#heap-info').textContent = '';
    setStatus('heap-status', 'error', errorMessage(e));
  }
}

function renderHeap() {
  const box = clear($('#heapmap'));
  box.classList.remove('stale');
  box.setAttribute('data-time', hm.shownTime === null ? 'exit' : String(hm.shownTime));
  const d = (hm.data && hm.data.data) || {};
  const cells = Array.isArray(d.cells) ? d.cells : [];
  const cb = Number(d.cell_bytes) || 0;
  const regions = Array.isArray(d.regions) ? d.regions : [];
  hm.cells = cells;
  hm.cellBytes = cb;
  hm.regions = regions.map((r, i) => ({
    index: i, start: toBig(r.start), end: toBig(r.end), startText: String(r.start), endText: String(r.end),
    first: Number(r.first_cell) || 0,
    last: i + 1 < regions.length ? Number(regions[i + 1].first_cell) || 0 : cells.length,
  }));
  hm.els = new Array(cells.length);
  hm.hover = null;
  if (hm.pinned !== null && hm.pinned >= cells.length) hm.pinned = null;

  let used = 0, blocks = 0;
  for (const c of cells) { used += Number(c.used) || 0; blocks += Number(c.blocks) || 0; }
  const info = $('#heap-info');
  if (cells.length === 0 || !cb) {
    info.textContent = '';
    box.appendChild(el('p', { class: 'muted heap-empty', text: 'No block is live ' + heapWhen(hm.shownTime) + '.' }));
  } else {
    info.textContent = plural(hm.regions.length, 'region') + ', ' + plural(cells.length, 'cell') + ' of ' + fmtSize(cb) +
      ' · ' + fmtSize(used) + ' live in ' + plural(blocks, 'block') + ' (' + fmtPercent(used, cells.length * cb) + ' of the cells)';
    info.setAttribute('title', 'a row is ' + HEAP_WIDTH + ' cells, ' + fmtSize(HEAP_WIDTH * cb) + ' of address space');
  }

  const frag = document.createDocumentFragment();
  for (const reg of hm.regions) {
    let rUsed = 0, rBlocks = 0;
    for (let i = reg.first; i < reg.last; i++) {
      rUsed += Number((cells[i] || {}).used) || 0;
      rBlocks += Number((cells[i] || {}).blocks) || 0;
    }
    const size = reg.start !== null && reg.end !== null && reg.end > reg.start ? Number(reg.end - reg.start) : 0;
    const head = el('div', { class: 'region-head', title: reg.startText + ' – ' + reg.endText + ': ' + fmtBytesExact(size) },
      el('code', { class: 'region-start', text: reg.startText }),
      el('span', { class: 'region-size', text: fmtSize(size) }),
      el('span', { class: 'muted', text: plural(reg.last - reg.first, 'cell') + ' · ' + fmtSize(rUsed) + ' live in ' +
        plural(rBlocks, 'block') + ' · up to ' + reg.endText }));
    const grid = el('div', { class: 'region-cells' });
    grid.style.gridTemplateColumns = 'repeat(' + HEAP_WIDTH + ', minmax(0, 1fr))';
    for (let i = reg.first; i < reg.last; i++) {
      const e = document.createElement('div');
      e.className = 'cell l' + heapLevel((cells[i] || {}).used, cb);
      e.setAttribute('data-index', String(i));
      hm.els[i] = e;
      grid.appendChild(e);
    }
    frag.appendChild(el('div', { class: 'region', 'data-region': String(reg.index) }, head, grid));
  }
  box.appendChild(frag);
  markHeapObject();
  markPinned();
  showHeapCell(hm.pinned);
}

// regionOf returns the region of cell i.
function regionOf(i) {
  for (const r of hm.regions) if (i >= r.first && i < r.last) return r;
  return null;
}

// cellStart returns the address of the first byte of cell i (BigInt).
function cellStart(r, i) {
  return r.start + BigInt(i - r.first) * BigInt(hm.cellBytes);
}

// cellOf returns the index of the cell that holds address a (BigInt), or -1.
function cellOf(a) {
  if (a === null || !hm.cellBytes) return -1;
  for (const r of hm.regions) {
    if (r.start === null || r.end === null) continue;
    if (r.start <= a && a < r.end) {
      const i = r.first + Number((a - r.start) / BigInt(hm.cellBytes));
      return i < r.last ? i : -1;
    }
  }
  return -1;
}

function objectText(o) {
  return fmtSize(o.size) + ' at ' + o.address + (o.types && o.types.length ? ' (' + o.types.join(' or ') + '?)' : '');
}

// markHeapObject marks the cell of the object the Objects tab asked for,
// or says why it is not in the map.
function markHeapObject() {
  hm.gen++;
  for (const e of $$('#heapmap .cell.highlight, #heapmap .cell.object-span')) e.classList.remove('highlight', 'object-span');
  hm.note = null;
  hm.objectCell = -1;
  const o = hm.object;
  if (!o || !hm.data) return;
  const addr = toBig(o.address);
  const at = hm.shownTime === null ? Infinity : hm.shownTime;
  const allocated = Number(o.allocated_ns) || 0;
  let why = '';
  let idx = -1;
  if (addr === null) why = 'its address cannot be read';
  else if (allocated > at) why = 'it was allocated later, ' + fmtDuration(allocated) + ' after start';
  else if (!o.live && Number(o.freed_ns) <= at) why = 'it was freed before then, ' + fmtDuration(o.freed_ns) + ' after start';
  else {
    idx = cellOf(addr);
    if (idx < 0) why = 'its address is outside every region of the map: it was freed or moved by then';
    else if (!(Number(hm.cells[idx].used) > 0)) { why = 'its cell is empty: it was freed or moved by then'; idx = -1; }
  }
  if (why) {
    let text = 'The selected object, ' + objectText(o) + ', is not in the heap map ' + heapWhen(hm.shownTime) + ': ' + why + '.';
    if (!o.live && Number(o.freed_ns) > allocated) {
      text += ' It was live from ' + fmtDuration(allocated) + ' to ' + fmtDuration(o.freed_ns) + ' after start: move the time there to see it.';
    }
    // A time the object was live at: just before it was freed.
    hm.note = { text, liveAt: !o.live && Number(o.freed_ns) > allocated ? Math.max(1, Number(o.freed_ns) - 1) : null };
    hm.focusObject = false;
    return;
  }
  hm.objectCell = idx;
  const cellEl = hm.els[idx];
  if (cellEl) cellEl.classList.add('highlight');
  // The cells the rest of the object covers.
  const r = regionOf(idx);
  const end = addr + BigInt(Math.max(Number(o.size) || 0, 1));
  for (let j = idx + 1; r && j < r.last && j < idx + 8192 && cellStart(r, j) < end; j++) {
    if (hm.els[j]) hm.els[j].classList.add('object-span');
  }
  if (hm.focusObject) {
    hm.focusObject = false;
    hm.pinned = idx;
    if (cellEl) {
      requestAnimationFrame(() => {
        if (cellEl.isConnected) cellEl.scrollIntoView({ block: 'center', inline: 'nearest' });
      });
    }
  }
}

// focusHeapCell keeps cell i in the tooltip and brings it into view.
function focusHeapCell(i) {
  hm.pinned = i;
  markPinned();
  showHeapCell(i);
  if (hm.els[i]) hm.els[i].scrollIntoView({ block: 'center', inline: 'nearest' });
}

function markPinned() {
  for (const e of $$('#heapmap .cell.pinned')) e.classList.remove('pinned');
  if (hm.pinned !== null && hm.els[hm.pinned]) hm.els[hm.pinned].classList.add('pinned');
}

// coveringBlock returns the block that covers cell i though it starts in
// an earlier cell, as {cell, block}, or null. Live blocks do not overlap:
// only the nearest earlier cell where blocks start can hold it, and the
// biggest block of a cell ends the latest.
function coveringBlock(r, i) {
  const start = cellStart(r, i);
  for (let j = i - 1; j >= r.first; j--) {
    const c = hm.cells[j];
    if (!c || !(Number(c.blocks) > 0)) continue;
    const b = c.biggest;
    const a = b ? toBig(b.address) : null;
    if (a !== null && a + BigInt(Number(b.size) || 0) > start) return { cell: j, block: b };
    return null;
  }
  return null;
}

function blockDetails(box, b, stacks) {
  const dl = el('dl', { class: 'kv heap-kv' });
  const kv = (k, v) => dl.appendChild(el('div', null, el('dt', { text: k }), el('dd', null, v)));
  kv('address', el('code', { text: b.address || '?' }));
  kv('size', fmtBytesExact(Number(b.size) || 0));
  kv('type?', b.types && b.types.length ? b.types.join(' or ') : 'no type of the program has that size');
  kv('allocated', fmtDuration(b.allocated_ns) + ' after start');
  box.appendChild(dl);
  box.appendChild(el('div', { class: 'stack-label', text: 'allocated at' }));
  box.appendChild(stackList((stacks || {})[String(b.site)]));
}

// showHeapCell shows cell i in the tooltip, or a hint if i is null. It
// leaves the tooltip alone if it shows that already: a click on a link in
// it must find the link it pressed.
function showHeapCell(i) {
  const key = hm.gen + '|' + i + '|' + (i !== null && i === hm.pinned);
  if (key === hm.tipKey) return;
  hm.tipKey = key;
  const box = clear($('#heap-tooltip'));
  if (!hm.data) return;
  if (hm.note) {
    const note = el('div', { class: 'heap-note' }, el('p', { text: hm.note.text }));
    const t = hm.note.liveAt;
    if (t !== null) {
      note.appendChild(el('button', {
        type: 'button', class: 'small', text: 'show the map ' + heapWhen(t),
        onclick: () => { hm.time = t; hm.focusObject = true; loadHeap(true); },
      }));
    }
    box.appendChild(note);
  }
  const c = i !== null ? hm.cells[i] : null;
  const r = c ? regionOf(i) : null;
  if (!c || !r || r.start === null) {
    if (hm.objectCell >= 0 && hm.object) {
      const k = hm.objectCell;
      box.appendChild(el('p', { class: 'heap-object-here' }, 'The selected object, ' + objectText(hm.object) + ', is in cell ' + fmtCount(k) + ' ',
        el('button', { type: 'button', class: 'small', text: 'show it', onclick: () => focusHeapCell(k) })));
    }
    if (hm.cells.length) box.appendChild(el('p', { class: 'muted', text: 'Hover over a cell to see what it holds; click it to keep it here.' }));
    return;
  }
  const d = hm.data.data || {};
  const cb = hm.cellBytes;
  const start = cellStart(r, i);
  let end = start + BigInt(cb);
  if (r.end !== null && end > r.end) end = r.end;
  const head = el('h3', { class: 'heap-cell-title' }, 'Cell ' + fmtCount(i) + ' ',
    el('code', { text: hexAddr(start) + ' – ' + hexAddr(end) }));
  if (i === hm.pinned) head.appendChild(el('span', { class: 'tag', text: 'kept (click it again to let go)' }));
  box.appendChild(head);
  if (i === hm.objectCell && hm.object) {
    box.appendChild(el('p', { class: 'heap-object-here', text: 'The selected object, ' + objectText(hm.object) + ', starts in this cell.' }));
  }
  const used = Number(c.used) || 0;
  const blocks = Number(c.blocks) || 0;
  const dl = el('dl', { class: 'kv heap-kv' });
  const kv = (k, v) => dl.appendChild(el('div', null, el('dt', { text: k }), el('dd', { text: v })));
  kv('used', fmtCount(used) + ' of ' + fmtCount(cb) + ' bytes (' + fmtPercent(used, cb) + ')');
  kv('blocks that start in it', fmtCount(blocks));
  kv('region', '#' + (r.index + 1) + ' of ' + hm.regions.length + ', from ' + r.startText);
  box.appendChild(dl);
  if (c.biggest) {
    box.appendChild(el('h3', { text: blocks > 1 ? 'The biggest block that starts in it' : 'The block that starts in it' }));
    blockDetails(box, c.biggest, d.stacks);
  } else if (used > 0) {
    const cover = coveringBlock(r, i);
    if (cover) {
      box.appendChild(el('h3', { text: 'Part of a block that starts ' + plural(i - cover.cell, 'cell') + ' before' }));
      blockDetails(box, cover.block, d.stacks);
    } else {
      box.appendChild(el('p', { class: 'muted', text: 'Part of a block that starts in an earlier cell.' }));
    }
  } else {
    box.appendChild(el('p', { class: 'muted', text: 'Nothing live in it ' + heapWhen(hm.shownTime) + '.' }));
  }
}

// showObjectInHeap shows the heap map at the end of the window with the
// cell of object o marked.
function showObjectInHeap(o) {
  hm.object = o;
  hm.focusObject = true;
  hm.time = state.to;
  loadedKey.heap = windowKey();
  showTab('heap');
  loadHeap(true);
}

// setSelectedObject records the object selected in the Objects tab (null:
// none): the timeline marks when it was allocated.
function setSelectedObject(o) {
  state.object = o || null;
  if (hm.object && hm.object !== state.object) {
    hm.object = null;
    if (hm.data) {
      markHeapObject();
      showHeapCell(hm.hover !== null ? hm.hover : hm.pinned);
    }
  }
  updateObjectMarker();
}

// updateObjectMarker draws #timeline-object-marker at the allocation of
// the selected object, or takes it away.
function updateObjectMarker() {
  const old = document.getElementById('timeline-object-marker');
  if (old) old.remove();
  const o = state.object;
  const g = tl.g;
  if (!o || !g || !tl.data || !g.hover.isConnected) return;
  const t = Number(o.allocated_ns) || 0;
  const before = t < g.t0, after = t > g.t1;
  const xx = g.x(Math.min(Math.max(t, g.t0), g.t1));
  let title = 'the selected object, ' + objectText(o) + ': allocated ' + fmtDuration(t) + ' after start';
  if (before) title += ', before this window';
  if (after) title += ', after this window';
  if (!o.live && o.freed_ns) title += '; freed ' + fmtDuration(o.freed_ns) + ' after start';
  const y0 = g.yTop1 - 8;
  const m = svgEl('g', { id: 'timeline-object-marker', class: 'marker object' + (before || after ? ' outside' : '') },
    svgTitle(title),
    svgEl('line', { x1: xx, x2: xx, y1: y0, y2: g.yBase3, class: 'object-line' }),
    svgEl('line', { x1: xx, x2: xx, y1: y0, y2: g.yBase3, class: 'object-hit' }),
    svgEl('path', { d: 'M' + (xx - 5) + ',' + (y0 - 6) + 'h10l-5,7Z' }),
    svgEl('text', { x: xx > g.W - g.M.right - 90 ? xx - 8 : xx + 8, y: y0, class: xx > g.W - g.M.right - 90 ? 'end' : '', text: 'selected object' }));
  g.hover.parentNode.insertBefore(m, g.hover);
}

function setupHeapEvents() {
  const map = $('#heapmap');
  const cellIndex = (ev) => {
    const c = ev.target.closest ? ev.target.closest('.cell') : null;
    return c ? Number(c.getAttribute('data-index')) : null;
  };
  map.addEventListener('mouseover', (ev) => {
    const i = cellIndex(ev);
    if (i === null || i === hm.hover) return;
    hm.hover = i;
    showHeapCell(i);
  });
  map.addEventListener('mouseleave', () => {
    hm.hover = null;
    showHeapCell(hm.pinned);
  });
  map.addEventListener('click', (ev) => {
    const i = cellIndex(ev);
    if (i === null) return;
    hm.pinned = hm.pinned === i ? null : i;
    markPinned();
    showHeapCell(i);
  });
  const input = $('#heap-time');
  input.addEventListener('input', () => {
    hm.time = sliderTime();
    updateHeapTimeLabel();
    clearTimeout(hm.timer);
    hm.timer = setTimeout(() => loadHeap(false), 150);
  });
  $('#heap-time-end').addEventListener('click', () => {
    hm.time = state.to;
    loadHeap(true);
  });
}

// ---------------------------------------------------------------------------
// Source

let sourceToken = 0;

async function openSource(file, line) {
  const drawer = $('#source');
  const title = $('#source-title');
  const err = $('#source-error');
  const lines = clear($('#source-lines'));
  drawer.hidden = false;
  document.body.classList.add('source-open');
  clear(title).appendChild(el('span', { dir: 'ltr', text: file + (line > 0 ? ':' + line : '') }));
  title.setAttribute('title', title.textContent);
  err.hidden = true;
  err.textContent = '';
  lines.appendChild(el('div', { class: 'muted loading', text: 'Loading…' }));
  const tok = ++sourceToken;
  try {
    const r = await api(sourceURL(file));
    if (tok !== sourceToken) return;
    clear(lines);
    const text = Array.isArray(r.lines) ? r.lines : [];
    const frag = document.createDocumentFragment();
    let target = null;
    const width = String(text.length).length;
    text.forEach((t, i) => {
      const n = i + 1;
      const row = el('div', { class: 'source-line' + (n === line ? ' highlight' : ''), 'data-line': String(n) },
        el('span', { class: 'lineno', text: String(n).padStart(width, ' ') }),
        el('span', { class: 'code', text: String(t) }));
      if (n === line) target = row;
      frag.appendChild(row);
    });
    lines.appendChild(frag);
    if (text.length === 0) lines.appendChild(el('div', { class: 'muted', text: '(empty file)' }));
    if (r.cut) {
      err.hidden = false;
      err.textContent = 'the file is longer than ' + fmtSize(r.cut) + ': only its first ' + plural(text.length, 'line') + ' are shown';
    } else if (line > text.length && text.length > 0) {
      err.hidden = false;
      err.textContent = 'line ' + line + ' is past the end of the file (' + plural(text.length, 'line') + '): it may have changed since the trace';
    }
    requestAnimationFrame(() => {
      if (target) target.scrollIntoView({ block: 'center' });
      else lines.scrollTop = 0;
    });
  } catch (e) {
    if (tok !== sourceToken) return;
    clear(lines);
    err.hidden = false;
    err.textContent = errorMessage(e);
  }
}

function closeSource() {
  $('#source').hidden = true;
  document.body.classList.remove('source-open');
  sourceToken++;
}

// ---------------------------------------------------------------------------
// Start

// fillCostSelects gives every cost menu the costs, the default first.
function fillCostSelects() {
  for (const sel of document.querySelectorAll('select.cost-select')) {
    for (const [value, label] of Object.entries(COST_LABELS)) {
      sel.appendChild(el('option', { value: value, text: label }));
    }
  }
}

function setup() {
  fillCostSelects();
  readStaticData();
  if (STATIC) {
    document.body.classList.add('static');
    $('#static-badge').hidden = false;
    if (staticError) {
      const e = $('#summary-error');
      e.hidden = false;
      e.textContent = staticError;
    }
  }
  readHash();
  if (STATIC && state.pid === null && !Object.prototype.hasOwnProperty.call(STATIC, viewURL('summary', { top: 50 }))) {
    // A page saved for one process of the trace, not its program: its
    // answers are those of that pid.
    for (const k of Object.keys(STATIC)) {
      const m = /^\/api\/view\?view=summary&pid=(\d+(?:\.\d+)?)&top=50$/.exec(k);
      if (m) { state.pid = m[1]; break; }
    }
  }

  for (const b of $$('button[data-tab]')) b.addEventListener('click', () => showTab(b.getAttribute('data-tab')));
  showFilters();
  $('#filter-bar').classList.toggle('on', !!(state.thread || state.module));
  $('#filter-bar').hidden = !!STATIC;
  $('#downloads').hidden = !!STATIC;
  loadServerInfo();
  $('#flame-cost').addEventListener('change', updateDownloads);
  for (const id of ['#filter-thread', '#filter-module', '#filter-below-main']) $(id).addEventListener('change', setFilters);
  window.addEventListener('popstate', followHash);
  window.addEventListener('hashchange', followHash);
  $('#process').addEventListener('change', (e) => setProcess(e.target.value));
  $('#window-reset').addEventListener('click', () => { tl.selected = null; setWindow(null, null); });
  $('#window-earlier').addEventListener('click', () => moveWindow(-0.5, false));
  $('#window-later').addEventListener('click', () => moveWindow(0.5, false));
  $('#window-wider').addEventListener('click', () => moveWindow(0, true));
  $('#objects-sort').addEventListener('change', () => { loadedKey.objects = windowKey(); objectsShown = OBJECTS_PAGE; loadObjects(); });
  $('#objects-more').addEventListener('click', () => { objectsShown = Math.min(objectsShown + OBJECTS_PAGE, objectsMax); loadObjects(); });
  $('#source-close').addEventListener('click', closeSource);
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && !$('#source').hidden) closeSource();
  });
  // Every frame link, wherever it is, opens the source.
  document.addEventListener('click', (e) => {
    const a = e.target.closest ? e.target.closest('.frame-link') : null;
    if (!a) return;
    e.preventDefault();
    const file = a.getAttribute('data-file');
    if (file) openSource(file, Number(a.getAttribute('data-line')) || 0);
  });
  setupTimelineEvents();
  setupFlameEvents();
  setupTableEvents();
  setupHeapEvents();
  setupDiffEvents();

  let resizeTimer = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      if (state.tab === 'timeline') redrawTimelineIfResized();
      if (state.tab === 'flame') redrawFlameIfResized();
    }, 120);
  });
  // Whatever escapes the views still shows, rather than a silent page.
  window.addEventListener('unhandledrejection', (e) => {
    e.preventDefault();
    const box = $('#summary-error');
    box.hidden = false;
    box.textContent = errorMessage(e.reason);
  });

  updateWindowLabel();
  loadSummary().then((ok) => {
    if (state.pid === null) return;
    if (!ok) {
      // The address named a process this trace does not have: show the
      // program instead (the error stays above until then).
      state.pid = null;
      state.from = null;
      state.to = null;
      writeHash();
      updateWindowLabel();
      loadSummary();
      reloadViews();
    } else if (state.pid === state.defaultPid) {
      state.pid = null; // the default process is no pid
      writeHash();
    }
  });
  showTab(state.tab);
  showDiffTab();
}

// ---------------------------------------------------------------------------
// Changes: the comparison with an older run (memtrail view -compare)

const DIFF_COSTS = { peak: 'peak heap', allocated: 'bytes allocated', allocations: 'allocations', leaked: 'in use at exit' };

function fmtChange(cost, d) {
  if (d === 0) return '0';
  return (d > 0 ? '+' : '−') + fmtCost(cost, Math.abs(d));
}

function changeCell(cost, d) {
  return el('span', { class: d > 0 ? 'grew' : d < 0 ? 'shrank' : 'muted', text: fmtChange(cost, d) });
}

// showDiffTab shows the Changes tab if the server compares two traces.
async function showDiffTab() {
  if (STATIC) return;
  try {
    const st = await api('/api/status');
    if (st.compare) {
      $('.tabs button[data-tab="diff"]').hidden = false;
      $('#diff-base').textContent = 'since ' + st.compare;
      if (state.tab === 'diff') ensureTab('diff');
    }
  } catch (e) { /* no comparison */ }
}

async function loadDiff() {
  const tok = nextToken('diff');
  const cost = $('#diff-cost').value;
  setStatus('diff-status', 'loading', 'Loading…');
  try {
    let u = '/api/diff';
    if (state.pid !== null) u += '?pid=' + encodeURIComponent(state.pid);
    const d = await api(u);
    if (!isCurrent('diff', tok)) return;
    setStatus('diff-status', '', '');
    const totals = clear($('#diff-totals'));
    totals.appendChild(el('tr', {}, el('th', { text: '' }), el('th', { class: 'num', text: 'old' }), el('th', { class: 'num', text: 'new' }), el('th', { class: 'num', text: 'change' })));
    for (const t of d.totals || []) {
      totals.appendChild(el('tr', { class: t.cost === cost ? 'selected' : '' },
        el('td', { text: DIFF_COSTS[t.cost] || t.cost }), el('td', { class: 'num', text: fmtCost(t.cost, t.old) }),
        el('td', { class: 'num', text: fmtCost(t.cost, t.new) }), el('td', { class: 'num' }, changeCell(t.cost, t.change))));
    }
    const of = (r) => (r.changes || []).find((c) => c.cost === cost) || { old: 0, new: 0, change: 0 };
    const rows = (d.stacks || []).filter((s) => of(s).change !== 0).map((s) => ({ data: s }));
    rows.sort((a, b) => Math.abs(of(b.data).change) - Math.abs(of(a.data).change));
    const table = new DataTable($('#diff-table'), {
      columns: [
        { label: 'function', cell: (r) => fnCell((r.data.stack || [])[0] || {}) },
        { label: 'where', cell: (r) => locCell((r.data.stack || [])[0]) },
        { label: 'old', num: true, value: (r) => of(r.data).old, cell: (r) => fmtCost(cost, of(r.data).old) },
        { label: 'new', num: true, value: (r) => of(r.data).new, cell: (r) => fmtCost(cost, of(r.data).new) },
        { label: 'change', num: true, value: (r) => of(r.data).change, cell: (r) => changeCell(cost, of(r.data).change) },
      ],
      rows,
      onRow: (row, tr) => selectDiffStack(row, tr),
    });
    table.onVisibility = (shown, total) => {
      $('#diff-info').textContent = total === 0 ? 'no call stack changed by this measure' : shown === total ? plural(total, 'call stack') : fmtCount(shown) + ' of ' + plural(total, 'call stack');
    };
    table.setFilter($('#diff-filter').value);
    diffTable = table;
  } catch (e) {
    if (!isCurrent('diff', tok)) return;
    diffTable = null;
    clear($('#diff-table'));
    setStatus('diff-status', 'error', errorMessage(e));
  }
}

let diffTable = null;

function selectDiffStack(row, tr) {
  for (const t of $$('#diff-table tr.selected')) t.classList.remove('selected');
  tr.classList.add('selected');
  const box = clear($('#diff-detail'));
  box.appendChild(el('h3', { text: frameName((row.data.stack || [])[0] || {}) }));
  const list = el('ul', { class: 'story' });
  for (const c of row.data.changes || []) {
    list.appendChild(el('li', {}, DIFF_COSTS[c.cost] + ': ' + fmtCost(c.cost, c.old) + ' → ' + fmtCost(c.cost, c.new) + ' (', changeCell(c.cost, c.change), ')'));
  }
  box.appendChild(list);
  box.appendChild(el('div', { class: 'stack-label', text: 'call stack' }));
  box.appendChild(stackList(row.data.stack));
}

function setupDiffEvents() {
  $('#diff-cost').addEventListener('change', () => { loadedKey.diff = null; ensureTab('diff'); });
  $('#diff-filter').addEventListener('input', () => { if (diffTable) diffTable.setFilter($('#diff-filter').value); });
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', setup);
else setup();

})();
