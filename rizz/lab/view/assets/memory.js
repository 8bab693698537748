// memory.js: the memory browser: each branch's episodes, rules, anti-patterns, scoped context
// and quarantine, when each was written and which later prompts used it.

const GROUPS = [['episode', 'Episodes (verified examples)'], ['rule', 'Procedural rules'], ['anti_pattern', 'Anti-patterns (mistakes to avoid)'],
  ['context', 'Scoped context'], ['quarantine', 'Quarantined (never retrieved)']];
const SHOW = 100, USES = 40;
const MORE = {};  // "branch/kind" -> items shown

function renderMemory(root, r) {
  if (!r.branches.length) { root.append(h('p', {class: 'note'}, r.kind === 'peer' ? 'A peer\'s run keeps its memory outside rizz; nothing to browse here.' : 'No memory yet.')); return; }
  let bid = NAV.branch;
  if (NAV.item !== null && NAV.item !== undefined && r.items[NAV.item] && r.items[NAV.item].branch) bid = bid || r.items[NAV.item].branch;
  if (!branchOf(r, bid)) bid = r.branches[0].id;
  const list = h('ul', {class: 'branchlist', 'data-testid': 'branch-list'}, r.branches.map((b) => h('li', {class: b.id === bid ? 'on' : ''},
    link(`${b.id} · ${b.label || '?'}`, {branch: b.id, item: null}, {'data-branch': b.id}),
    h('span', {class: 'meta'}, ` ${b.items.filter((i) => r.items[i].branch === b.id).length} items` + (b.active === false ? ' · ' + (b.end ? b.end.how : 'inactive') : '')))));
  root.append(h('div', {class: 'split mem'}, list, branchPanel(r, branchOf(r, bid))));
  if (NAV.item !== null && NAV.item !== undefined) {
    const el = root.querySelector(`[data-item-index="${Number(NAV.item)}"]`);
    if (el) { el.classList.add('on'); setTimeout(() => el.scrollIntoView({block: 'center'}), 0); }
  }
}

function branchPanel(r, b) {
  const head = [h('h2', {}, `Branch ${b.id} · ${b.label || '?'}`)];
  const facts = [`shape ${b.shape || '–'}`, b.spawned !== null && b.spawned !== undefined ? ['spawned at ', stepLink(b.spawned)] : 'spawn not in the log',
    `traffic ${b.traffic ?? 0}`, `answered ${b.answered ?? 0}`, `mean reward ${fmt(b.mean_reward)}`,
    b.end ? [`${b.end.how} at `, stepLink(b.end.at), b.end.into ? [' into ', branchLink(b.end.into)] : '', b.end.reason ? ` (${b.end.reason})` : ''] : (b.active === false ? 'inactive' : 'active')];
  head.push(h('p', {class: 'meta'}, facts.map((f, i) => [i ? ' · ' : '', f])));
  if (b.snaps.length) head.push(h('p', {class: 'meta'}, 'Labels snapped here: ', b.snaps.map((sn, i) => [i ? '; ' : '', stepLink(sn[0]), ` ${sn[1]} → ${sn[2]} (${sn[3]} ${fmt(sn[4])})`])));
  head.push(h('p', {}, h('a', {href: '#', class: 'link', onclick: (ev) => { ev.preventDefault(); FILTER.branch = b.id; go({tab: 'steps', step: null, page: 0}); }}, 'show this branch\'s steps'),
    ' · ', link('show it in the tree', {tab: 'branches', branch: b.id})));
  const panel = h('div', {class: 'detail', 'data-testid': 'branch-panel', 'data-branch': b.id}, head);
  const mine = b.items.filter((i) => r.items[i].branch === b.id);
  for (const [kind, title] of GROUPS) {
    const idx = mine.filter((i) => r.items[i].kind === kind);
    if (!idx.length) continue;
    const key = b.id + '/' + kind;
    const n = MORE[key] || SHOW;
    const retired = idx.filter((i) => r.items[i].retired).length;
    const box = h('div', {class: 'group', 'data-kind': kind}, h('h3', {}, `${title}: ${idx.length}` + (retired ? ` (${retired} retired)` : '')));
    for (const i of idx.slice(0, n)) box.append(itemCard(r, i));
    if (idx.length > n) box.append(h('button', {onclick: () => { MORE[key] = n + SHOW * 5; show(); }}, `show ${Math.min(SHOW * 5, idx.length - n)} more of ${idx.length - n}`));
    panel.append(box);
  }
  const moved = b.items.filter((i) => r.items[i].branch !== b.id).length;
  if (moved) panel.append(h('p', {class: 'meta'}, `${moved} item(s) written here now live in the branch that absorbed this one.`));
  if (!mine.length && !moved) panel.append(h('p', {class: 'meta'}, 'This branch holds no memory item.'));
  return panel;
}

function itemCard(r, i) {
  const it = r.items[i];
  const label = it.kind === 'rule' ? `rule ${it.key}` : `key ${it.key.slice(0, 16)}`;
  const facts = [chip(KIND_NAME[it.kind] || it.kind, 'k-' + it.kind), ' ', label];
  if (it.written !== null && it.written !== undefined) facts.push(' · written at ', stepLink(it.written));
  if (it.reward !== undefined && it.reward !== null) facts.push(' · reward ' + fmt(it.reward));
  if (it.scope) facts.push(' · scope ' + it.scope);
  if (it.kind === 'rule') facts.push(` · helpful ${it.helpful ?? 0} / harmful ${it.harmful ?? 0} · ${it.status || 'candidate'}` + (it.tier && it.tier !== 'branch' ? ` · ${it.tier} tier` : ''));
  if (it.reason) facts.push(' · ' + it.reason);
  const uses = it.uses || [];
  const later = h('div', {class: 'uses', 'data-testid': 'item-uses', 'data-count': uses.length},
    uses.length ? [`Used by ${uses.length} later prompt${uses.length === 1 ? '' : 's'}: `, uses.slice(0, USES).map((u, k) => [k ? ', ' : '', stepLink(u, String(u))]),
      uses.length > USES ? ` … and ${uses.length - USES} more` : ''] : (it.kind === 'quarantine' ? 'Never shown to a prompt (quarantined).' : 'Not used by any later prompt.'));
  const card = h('div', {class: 'card' + (it.retired ? ' retired' : ''), 'data-testid': 'memory-item', 'data-item-index': i, 'data-key': it.key},
    h('div', {class: 'source'}, facts), pre(itemText(it)), later);
  if (it.retired) card.append(h('p', {class: 'warn'}, 'Retired at ', stepLink(it.retired[0]), ': ' + it.retired[1]));
  return card;
}

RENDER.memory = renderMemory;
