// dom.js: element helpers and the page's navigation state.
// Every text from the data goes into the page through text nodes (append of a string,
// textContent); no markup is ever built from data (no innerHTML anywhere).

const DATA = JSON.parse(document.getElementById('rizz-data').textContent);
const SVGNS = 'http://www.w3.org/2000/svg';

// h('div', {class: 'x', 'data-testid': 'y', onclick: fn}, child, 'text', ...)
function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  setAttrs(e, attrs);
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined || k === false) continue;
    e.append(k instanceof Node ? k : String(k));
  }
  return e;
}

function setAttrs(e, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.setAttribute('class', v);
    else e.setAttribute(k, String(v));
  }
}

function s(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  setAttrs(e, attrs);
  for (const k of kids.flat(Infinity)) {
    if (k === null || k === undefined) continue;
    e.append(k instanceof Node ? k : String(k));
  }
  return e;
}

// <title> of an SVG element: a tooltip, as text.
function tip(text) { return s('title', {}, text); }

function link(text, target, attrs) {
  return h('a', Object.assign({href: '#', class: 'link', onclick: (ev) => { ev.preventDefault(); go(target); }}, attrs || {}), text);
}

function fmt(x, d) {
  if (x === null || x === undefined) return '–';
  return typeof x === 'number' ? x.toFixed(d === undefined ? 3 : d) : String(x);
}

function rewardColor(r) {
  if (r === null || r === undefined) return '#9aa0a6';
  return 'hsl(' + Math.round(120 * Math.max(0, Math.min(1, r))) + ',62%,42%)';
}

// Round axis ticks from lo to hi, about `count` of them: multiples of a step of 1, 2 or 5 × 10^k
// (the "nice numbers" of Heckbert, Graphics Gems, 1990), so that a step axis reads 0, 10, 20, ...
// and not 0, 10, 20, 30, 39, 49. `integer`: no step below 1 (steps are whole numbers).
function niceTicks(lo, hi, count, integer) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, count);
  const mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
  let step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  if (integer) step = Math.max(1, step);
  const out = [];
  for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) out.push(Number((k * step).toPrecision(12)));
  return out;
}

function chip(text, cls, attrs) { return h('span', Object.assign({class: 'chip ' + (cls || '')}, attrs || {}), text); }

function pre(text, cls) { return h('pre', {class: cls || 'text'}, text === null || text === undefined ? '' : text); }

function section(title, ...kids) { return h('section', {class: 'part'}, h('h3', {}, title), ...kids); }

// -- navigation: the view's state lives in the URL hash (#run=0&tab=steps&step=57) --------
// The run shown when the hash names none: the first whose policy writes memory (a bench's first after frozen).
const FIRST_RUN = DATA.first_run || 0;
const NAV = {run: FIRST_RUN, tab: 'branches', step: null, branch: null, item: null, page: null, a: null, b: null};
const RENDER = {};  // tab name -> function(run) that fills its section

function run() { return DATA.runs[NAV.run]; }

function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  for (const k of Object.keys(NAV)) {
    if (!p.has(k)) continue;
    const v = p.get(k);
    NAV[k] = ['run', 'step', 'item', 'page', 'a', 'b'].includes(k) ? Number(v) : v;
  }
  if (!(NAV.run >= 0 && NAV.run < DATA.runs.length)) NAV.run = FIRST_RUN;
  if (!Object.hasOwn(RENDER, NAV.tab)) NAV.tab = 'branches';  // a hand-edited hash cannot name anything else
}

function writeHash() {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(NAV)) if (v !== null && v !== undefined && !(k === 'run' && v === FIRST_RUN)) p.set(k, v);
  history.replaceState(null, '', '#' + p.toString());
}

// go({tab: 'steps', step: 57}): change what is shown (a new run resets the selection).
function go(target) {
  if (target.run !== undefined && target.run !== NAV.run) Object.assign(NAV, {step: null, branch: null, item: null, page: null});
  Object.assign(NAV, target);
  writeHash();
  show();
}

function show() {
  for (const t of document.querySelectorAll('#tabs button')) t.classList.toggle('on', t.dataset.tab === NAV.tab);
  for (const sec of document.querySelectorAll('main > .tab')) {
    const on = sec.id === 'tab-' + NAV.tab;
    sec.hidden = !on;
    if (on) { sec.replaceChildren(); RENDER[NAV.tab](sec, run()); }
  }
  const sel = document.getElementById('run-select');
  if (sel) sel.value = String(NAV.run);
}

// Index of the step entry with log step number n in run r (steps are in answer order).
function stepIndex(r, n) {
  if (!r._byStep) { r._byStep = new Map(); r.steps.forEach((st, i) => r._byStep.set(st.step, i)); }
  const i = r._byStep.get(n);
  return i === undefined ? null : i;
}

function branchOf(r, id) {
  if (!r._branches) { r._branches = new Map(); r.branches.forEach((b) => r._branches.set(b.id, b)); }
  return r._branches.get(id) || null;
}

function stepLink(n, label) { return link(label || ('step ' + n), {tab: 'steps', step: n}, {'data-step': n}); }
function branchLink(id, label) { return link(label || id, {tab: 'memory', branch: id, item: null}, {'data-testid': 'branch-link', 'data-branch': id}); }
