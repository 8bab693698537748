// steps.js: the step list (paged, filtered) and one step's detail, built only when shown.

const PAGE = 50;
const FILTER = {branch: '', task: '', text: ''};

function stepRows(r) {
  const t = FILTER.text.toLowerCase();
  return r.steps.filter((st) => (!FILTER.branch || st.branch === FILTER.branch) && (!FILTER.task || st.task === FILTER.task) &&
    (!t || (st.id || '').toLowerCase().includes(t) || (st.input || '').toLowerCase().includes(t)));
}

function renderSteps(root, r) {
  if (!r.steps.length) { root.append(h('p', {class: 'note'}, 'No step in this log yet.')); return; }
  const rows = stepRows(r);
  let page = NAV.page;
  if (NAV.step !== null && NAV.step !== undefined) {
    const k = rows.findIndex((st) => st.step === NAV.step);
    if (k >= 0 && (page === null || Math.floor(k / PAGE) !== page)) page = Math.floor(k / PAGE);
  }
  page = Math.max(0, Math.min(page || 0, Math.floor((rows.length - 1) / PAGE)));
  const tasks = [...new Set(r.steps.map((st) => st.task).filter((x) => x))].sort();
  const select = (key, values, all) => h('select', {onchange: (ev) => { FILTER[key] = ev.target.value; go({page: 0}); }},
    h('option', {value: ''}, all), values.map((v) => { const o = h('option', {value: v}, v); o.selected = FILTER[key] === v; return o; }));
  const search = h('input', {type: 'search', placeholder: 'id or input contains…', value: FILTER.text});
  search.addEventListener('change', () => { FILTER.text = search.value; go({page: 0}); });
  const jump = h('input', {type: 'number', min: 0, placeholder: 'step #', class: 'jump', 'data-testid': 'step-jump'});
  jump.addEventListener('change', () => { if (jump.value !== '') go({step: Number(jump.value), page: null}); });
  root.append(h('div', {class: 'toolbar'}, select('branch', r.branches.map((b) => b.id), 'all branches'), select('task', tasks, 'all tasks'), search,
    'go to ', jump, h('span', {class: 'meta'}, ` ${rows.length} of ${r.steps.length} steps`)));
  const body = h('tbody', {});
  for (const st of rows.slice(page * PAGE, (page + 1) * PAGE)) {
    const tr = h('tr', {class: st.step === NAV.step ? 'on' : '', 'data-testid': 'step-row', 'data-step': st.step, onclick: () => go({step: st.step, page})},
      h('td', {class: 'num'}, st.step), h('td', {}, st.id), h('td', {}, st.task || '–'), h('td', {}, st.branch || '–'),
      h('td', {class: 'num'}, st.verdict ? h('span', {class: 'reward', style: 'color:' + rewardColor(st.verdict.reward)}, fmt(st.verdict.reward)) : (st.expired ? 'expired' : st.context_only ? 'context' : 'pending')),
      h('td', {class: 'num'}, st.prompt ? st.prompt.tokens : '–'),
      h('td', {class: 'clip'}, (st.input || '').slice(0, 90)));
    body.append(tr);
  }
  const pages = Math.ceil(rows.length / PAGE);
  const pager = h('div', {class: 'pager'},
    h('button', {disabled: page === 0 ? '' : null, onclick: () => go({page: page - 1, step: null})}, '‹ prev'),
    ` page ${page + 1} of ${pages} `,
    h('button', {disabled: page + 1 >= pages ? '' : null, onclick: () => go({page: page + 1, step: null})}, 'next ›'));
  const list = h('div', {class: 'steplist'}, h('table', {class: 'grid-table steps', 'data-testid': 'step-list'},
    h('thead', {}, h('tr', {}, ['step', 'id', 'task', 'branch', 'reward', 'prompt tok', 'input'].map((c) => h('th', {}, c)))), body), pager);
  const i = NAV.step === null || NAV.step === undefined ? null : stepIndex(r, NAV.step);
  root.append(h('div', {class: 'split'}, list, i === null ? h('div', {class: 'detail note'}, 'Choose a step to see its input, route, prompt, answer, verdict and what it changed.') : stepDetail(r.steps[i], r)));
}

function routePart(st, r) {
  const kids = [];
  const lab = [chip('label ' + st.label, 'k-label')];
  if (st.judge && st.judge.fallback && !st.judge.raw) lab.push(' label ' + st.judge.function + '/' + st.judge.application + ' ' + (r.fallback_label || DATA.fallback_label));
  else if (st.judge) lab.push(' judge proposed ' + st.judge.function + '/' + st.judge.application + (st.judge.fallback ? ' (fallback label)' : '') + (st.judge.repaired ? ' (repaired)' : ''));
  else if (st.declared) lab.push(' declared by the caller: ' + st.declared);
  else if (!st.context_only) lab.push(' no judge call (the route was confident)');
  if (st.snapped) lab.push(' · snapped ' + st.snapped[0] + ' → ' + st.snapped[1] + ' by ' + st.snapped[2] + ' (' + fmt(st.snapped[3]) + ')');
  kids.push(h('p', {}, lab));
  kids.push(h('p', {}, 'Routed to ', branchLink(st.branch), st.spawned ? ' (spawned by this step)' : '', ' · score ' + fmt(st.score),
    st.tenant ? ' · tenant ' + st.tenant : ''));
  if (st.cands && st.cands.length) {
    const rows = st.cands.map((c) => h('tr', {class: c[0] === st.branch && !st.spawned ? 'on' : ''}, h('td', {}, branchLink(c[0])),
      h('td', {}, (branchOf(r, c[0]) || {}).label || '–'), h('td', {class: 'num'}, fmt(c[1])), h('td', {class: 'num'}, fmt(c[2]))));
    kids.push(h('table', {class: 'grid-table cands', 'data-testid': 'candidates'},
      h('thead', {}, h('tr', {}, ['candidate', 'label', 'anchor cosine', 'route score'].map((c) => h('th', {}, c)))), h('tbody', {}, rows)));
    if (st.cands.every((c) => c[2] === null)) kids.push(h('p', {class: 'meta'}, 'No route score: the input had no label of its own (or a learned router chose), so the nearest anchor decided.'));
  } else if (!st.context_only) {
    kids.push(h('p', {class: 'meta'}, 'No branch to choose from: the bank had no compatible branch.'));
  }
  return section('Route', kids);
}

function changesPart(st, r) {
  if (!st.changes || !st.changes.length) return section('What it changed', h('p', {class: 'meta'}, 'Nothing written, quarantined or retired.'));
  const lis = st.changes.map(([text, item, branch]) => h('li', {},
    text, item !== null && item !== undefined ? [' ', itemRef(r, item, '→ the item')] : '', branch ? [' ', branchLink(branch, '→ branch ' + branch)] : ''));
  return section('What it changed', h('ul', {class: 'changes', 'data-testid': 'changes'}, lis));
}

function answerPart(st) {
  const kids = [];
  if (st.answer) {
    kids.push(h('p', {}, 'Extracted answer: ', h('code', {'data-testid': 'answer'}, st.answer.extracted ?? '(none)'), st.answer.parsed ? '' : ' (not parsed to the expected shape)'));
    kids.push(h('details', {}, h('summary', {}, 'Model reply as received'), pre(st.answer.raw)));
    if (st.answer.reasoning) kids.push(h('details', {}, h('summary', {}, 'Reasoning (never reaches the answer)'), pre(st.answer.reasoning)));
  }
  if (st.verdict) kids.push(h('p', {'data-testid': 'verdict'}, 'Verdict: reward ', h('b', {style: 'color:' + rewardColor(st.verdict.reward)}, fmt(st.verdict.reward)),
    ' by ' + st.verdict.verifier + (st.verdict.parsed ? '' : ' (answer had no shape)') + (st.verdict_at !== undefined ? ` · folded after step ${st.verdict_at}` : '')));
  else if (st.expired) kids.push(h('p', {class: 'warn'}, 'Expired before a verdict came: ' + st.expired));
  else if (!st.context_only) kids.push(h('p', {class: 'meta'}, 'No verdict in the log yet (a live session folds it when it arrives).'));
  return section('Answer and verdict', kids);
}

function stepDetail(st, r) {
  const i = stepIndex(r, st.step);
  const nav = h('span', {class: 'stepnav'}, i > 0 ? stepLink(r.steps[i - 1].step, '‹ previous') : '', ' ', i + 1 < r.steps.length ? stepLink(r.steps[i + 1].step, 'next ›') : '');
  const input = st.input === null || st.input === undefined ? [h('p', {class: 'note'}, 'This log keeps no input text (a peer\'s log).')] : [pre(st.input, 'text input')];
  if (st.instruction) input.unshift(h('p', {class: 'meta'}, 'Instruction:'), pre(st.instruction), h('p', {class: 'meta'}, 'Input:'));
  if (st.evidence) input.push(h('details', {}, h('summary', {}, 'Evidence'), pre(st.evidence)));
  const facts = [st.shape ? 'shape ' + st.shape : '', st.scope ? 'scope ' + st.scope : '', st.time ? 'time ' + st.time : '', st.calls !== undefined ? st.calls + ' model call(s)' : ''].filter((x) => x);
  const parts = [h('h2', {}, `Step ${st.step} · ${st.id}` + (st.task ? ' · task ' + st.task : ''), ' ', nav),
    h('p', {class: 'meta'}, facts.join(' · ')), section('Input', input)];
  if (r.kind !== 'peer') parts.push(routePart(st, r));
  parts.push(section('Prompt', renderPrompt(st, r)));
  parts.push(answerPart(st));
  if (st.episode) parts.push(section('Episode', pre(st.episode.join('\n'))));
  if (r.kind !== 'peer') parts.push(changesPart(st, r));
  return h('div', {class: 'detail', 'data-testid': 'step-detail', 'data-step': st.step}, parts);
}

RENDER.steps = renderSteps;
