// main.js: the header (run selector, summary), the tabs, and the first drawing.

const TABS = [['branches', 'Branch tree'], ['steps', 'Steps'], ['memory', 'Memory'], ['compare', 'Compare runs']];

function header() {
  const bar = document.getElementById('runbar');
  bar.replaceChildren();
  if (DATA.runs.length > 1) {
    const sel = h('select', {id: 'run-select', 'data-testid': 'run-select', onchange: (ev) => go({run: Number(ev.target.value)})},
      DATA.runs.map((r, i) => h('option', {value: i}, `${r.name} (${r.kind})`)));
    bar.append(h('label', {}, DATA.kind === 'tenants' ? 'tenant ' : DATA.kind === 'bench' ? 'policy ' : 'run ', sel));
  }
  const info = h('span', {id: 'summary', class: 'meta'});
  bar.append(info);
  const paint = () => {
    const r = run(), sm = r.summary || {};
    const bits = [DATA.kind === r.kind ? r.kind : `${DATA.kind} · ${r.kind}`, `policy ${r.policy || r.name}`, r.model ? `model ${r.model}` : '', `${sm.steps ?? r.steps.length} steps`,
      `answered ${sm.answered ?? '–'}`, `mean reward ${fmt(sm.mean_reward)}`,
      sm.branches ? `branches ${sm.branches.total}/${sm.branches.active} active` : ''];
    info.replaceChildren(bits.filter((x) => x).join(' · '), ' ',
      r.digest_ok === true && r.summary_stale ? chip(r.summary_stale, 'ok', {title: 'up to where summary.json ends, the log refolds to the digest it recorded; the rest came after it (a resume that did not finish, or a live session); rizz replay rewrites it'}) :
      r.digest_ok === true ? chip('refold digest = summary.json', 'ok', {title: sm.state_digest}) :
      r.digest_ok === false && r.summary_stale ? chip(`refold digest differs from summary.json where it ends (${r.summary_stale})`, 'warn', {title: sm.state_digest}) :
      r.digest_ok === false ? chip('refold digest differs from summary.json', 'warn', {title: sm.state_digest}) : '');
  };
  paint();
  return paint;
}

function init() {
  readHash();
  const paint = header();
  const nav = document.getElementById('tabs');
  for (const [key, name] of TABS) {
    if (key === 'compare' && DATA.runs.length < 2) continue;
    nav.append(h('button', {'data-tab': key, 'data-testid': 'tab-button-' + key, onclick: () => go({tab: key})}, name));
  }
  const inner = show;
  window.addEventListener('hashchange', () => { readHash(); paint(); inner(); });
  const sel = document.getElementById('run-select');
  if (sel) sel.addEventListener('change', paint);
  show();
  document.body.dataset.ready = '1';
}

init();
