// tree.js: the branch tree over time (one lane per branch: spawn, traffic, snaps, merges,
// prunes) and the branch table. Traffic is drawn in bins, so 10^4 steps cost a few hundred rects.

const LANE = 24, LEFT = 250, RIGHT = 190, TOP = 28;

function laneBins(r, width) {
  const n = Math.max(1, r.steps.length ? r.steps[r.steps.length - 1].step + 1 : 1);
  const nb = Math.max(1, Math.min(n, Math.floor(width / 4)));
  const per = new Map();  // branch -> [{count, rewards, sum, first}]
  for (const st of r.steps) {
    if (!st.branch) continue;
    const k = Math.min(nb - 1, Math.floor(st.step * nb / n));
    if (!per.has(st.branch)) per.set(st.branch, new Map());
    const bins = per.get(st.branch);
    const b = bins.get(k) || {count: 0, answered: 0, sum: 0, first: st.step};
    b.count += 1;
    if (st.verdict) { b.answered += 1; b.sum += st.verdict.reward; }
    bins.set(k, b);
  }
  return {n, nb, per};
}

function renderTree(root, r) {
  if (!r.branches.length) {
    root.append(h('p', {class: 'note'}, r.kind === 'peer' ? 'A peer\'s run: no branches or memory were recorded (its answers and rewards are in Steps and Compare).' : 'No branch yet: no step has been folded.'));
    return;
  }
  const width = Math.max(900, Math.min(1600, (root.clientWidth || document.body.clientWidth || 1200) - 20));
  const plotW = width - LEFT - RIGHT;
  const {n, nb, per} = laneBins(r, plotW);
  const x = (step) => LEFT + plotW * (step + 0.5) / n;  // the middle of the step's slot, as the traffic bins slice the axis
  const row = new Map(r.branches.map((b, i) => [b.id, i]));
  const y = (id) => TOP + LANE * row.get(id) + LANE / 2;
  const height = TOP + LANE * r.branches.length + 30;
  const svg = s('svg', {width, height, viewBox: `0 0 ${width} ${height}`, class: 'tree', 'data-testid': 'branch-tree', role: 'img'});
  svg.append(tip('Branches over the steps: one lane per branch, from its spawn to its merge or prune; coloured cells are the steps routed to it (colour: mean reward; darker: more traffic)'));
  // axis
  for (const st of niceTicks(0, n - 1, 6, true)) {  // round steps, each once
    svg.append(s('line', {x1: x(st), x2: x(st), y1: TOP - 6, y2: height - 24, class: 'grid'}));
    svg.append(s('text', {x: x(st), y: height - 8, class: 'axis', 'text-anchor': 'middle'}, 'step ' + st));
  }
  svg.append(s('text', {x: LEFT - 8, y: 16, class: 'axis', 'text-anchor': 'end'}, 'branch · label'));
  svg.append(s('text', {x: width - RIGHT + 10, y: 16, class: 'axis'}, 'traffic · mean reward'));
  for (const b of r.branches) {
    const yy = y(b.id);
    const g = s('g', {class: 'lane' + (NAV.branch === b.id ? ' on' : ''), 'data-testid': 'branch-lane', 'data-branch': b.id});
    const start = b.spawned === null || b.spawned === undefined ? 0 : b.spawned;
    const end = b.end ? b.end.at : n - 1;
    g.append(s('line', {x1: x(start), x2: x(end), y1: yy, y2: yy, class: 'lane-line' + (b.active === false ? ' gone' : '')}));
    const bins = per.get(b.id);
    if (bins) {
      let max = 1;
      for (const c of bins.values()) max = Math.max(max, c.count);
      const cw = Math.max(2, plotW / nb);
      for (const [k, c] of bins) {
        const mean = c.answered ? c.sum / c.answered : null;
        const rect = s('rect', {x: LEFT + k * plotW / nb, y: yy - 7, width: cw, height: 14, fill: rewardColor(mean),
          'fill-opacity': 0.35 + 0.65 * c.count / max, class: 'cell', onclick: () => go({tab: 'steps', step: c.first})});
        rect.append(tip(`${b.id}: ${c.count} step(s) from step ${c.first}, mean reward ${fmt(mean)}; click for step ${c.first}`));
        g.append(rect);
      }
    }
    const spawn = s('circle', {cx: x(start), cy: yy, r: 4.5, class: 'spawn'});
    spawn.append(tip(`${b.id} spawned at step ${start} as ${b.label}`));
    g.append(spawn);
    for (const sn of b.snaps) {
      const d = s('rect', {x: x(sn[0]) - 4, y: yy - 4, width: 8, height: 8, class: 'snap', transform: `rotate(45 ${x(sn[0])} ${yy})`});
      d.append(tip(`step ${sn[0]}: label ${sn[1]} snapped to ${sn[2]} by ${sn[3]} (${fmt(sn[4])})`));
      g.append(d);
    }
    if (b.end && b.end.how === 'merged' && row.has(b.end.into)) {
      const y2 = y(b.end.into), xe = x(b.end.at);
      const path = s('path', {d: `M ${xe - 24} ${yy} C ${xe - 6} ${yy}, ${xe - 6} ${y2}, ${xe} ${y2}`, class: 'merge'});
      path.append(tip(`step ${b.end.at}: ${b.id} merged into ${b.end.into}`));
      g.append(path);
    } else if (b.end) {
      const t = s('text', {x: x(b.end.at), y: yy + 5, class: 'prune', 'text-anchor': 'middle'}, '✕');
      t.append(tip(`step ${b.end.at}: ${b.id} ${b.end.how} (${b.end.reason || ''})`));
      g.append(t);
    }
    const full = `${b.id} · ${b.label || '?'}`;
    const name = s('text', {x: LEFT - 8, y: yy + 4, class: 'lane-label', 'text-anchor': 'end', onclick: () => go({tab: 'memory', branch: b.id, item: null})},
      full.length > 36 ? full.slice(0, 35) + '…' : full);
    name.append(tip(`${b.id}: ${b.label} — click for its memory`));
    g.append(name);
    g.append(s('text', {x: width - RIGHT + 10, y: yy + 4, class: 'lane-stats'}, `${b.traffic ?? 0} · ${fmt(b.mean_reward)}`));
    svg.append(g);
  }
  root.append(h('div', {class: 'legend'},
    chip('● spawn', 'k-spawn'), chip('◆ label snapped', 'k-snap'), chip('⤵ merged into', 'k-merge'), chip('✕ pruned / deactivated', 'k-prune'),
    chip('cells: steps routed, colour = mean reward (red 0 → green 1)', '')));
  root.append(h('div', {class: 'scroll'}, svg));
  root.append(branchTable(r));
}

function branchTable(r) {
  const count = (b, kind) => b.items.filter((i) => r.items[i].kind === kind && r.items[i].branch === b.id && !r.items[i].retired).length;
  const head = ['branch', 'label', 'shape', 'state', 'spawned', 'end', 'traffic', 'answered', 'mean reward', 'episodes', 'rules', 'anti-patterns', 'context'];
  const rows = r.branches.map((b) => h('tr', {'data-branch': b.id},
    h('td', {}, branchLink(b.id)), h('td', {}, b.label || '–'), h('td', {}, b.shape || '–'),
    h('td', {}, b.active === false ? (b.end ? b.end.how : 'inactive') : 'active'),
    h('td', {}, b.spawned === null || b.spawned === undefined ? '–' : stepLink(b.spawned, String(b.spawned))),
    h('td', {}, b.end ? [b.end.how + ' at ', stepLink(b.end.at, String(b.end.at)), b.end.into ? [' into ', branchLink(b.end.into)] : ''] : '–'),
    h('td', {class: 'num'}, b.traffic ?? 0), h('td', {class: 'num'}, b.answered ?? 0), h('td', {class: 'num'}, fmt(b.mean_reward)),
    h('td', {class: 'num'}, count(b, 'episode')), h('td', {class: 'num'}, count(b, 'rule')),
    h('td', {class: 'num'}, count(b, 'anti_pattern')), h('td', {class: 'num'}, count(b, 'context'))));
  return h('table', {class: 'grid-table', 'data-testid': 'branch-table'}, h('thead', {}, h('tr', {}, head.map((c) => h('th', {}, c)))), h('tbody', {}, rows));
}

RENDER.branches = renderTree;
