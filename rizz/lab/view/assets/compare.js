// compare.js: the runs of a bench (or sweep, or serve tenants) side by side: reward and prompt
// tokens over steps, per-task reward, and two runs' prompts for the same step next to each other.

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22'];
const DASHES = [null, '7 4', '2 3', '9 3 2 3'];  // overlapping lines stay visible (as in the bench's PNG plots)
const WINDOW = 10;

function trailingMean(ys, w) {
  const out = [];
  let sum = 0;
  for (let i = 0; i < ys.length; i++) {
    sum += ys[i];
    if (i >= w) sum -= ys[i - w];
    out.push(sum / Math.min(i + 1, w));
  }
  return out;
}

// A line chart of series [{name, xs, ys, color}] as SVG; points thinned to ~2 per pixel.
function lineChart(series, opt) {
  const W = opt.width || 760, H = opt.height || 260, L = 56, R = 16, T = 14, B = 40;
  const xs = series.flatMap((q) => q.xs), ys = series.flatMap((q) => q.ys);
  const x0 = Math.min(0, ...xs.slice(0, 1)), x1 = Math.max(1, ...xs);
  const y0 = opt.ymin !== undefined ? opt.ymin : Math.min(0, ...ys), ytop = opt.ymax !== undefined ? opt.ymax : Math.max(1, ...ys);
  const yTicks = niceTicks(y0, ytop, 4, false), last = yTicks[yTicks.length - 1];
  if (opt.ymax === undefined && last < ytop) yTicks.push(Number((2 * last - yTicks[yTicks.length - 2]).toPrecision(12)));  // a free top: the next round tick
  const y1 = opt.ymax !== undefined ? opt.ymax : yTicks[yTicks.length - 1];
  const X = (v) => L + (W - L - R) * (v - x0) / Math.max(1e-9, x1 - x0), Y = (v) => H - B - (H - T - B) * (v - y0) / Math.max(1e-9, y1 - y0);
  const svg = s('svg', {width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: 'chart', 'data-testid': opt.testid || 'chart'});
  for (const v of yTicks) {
    svg.append(s('line', {x1: L, x2: W - R, y1: Y(v), y2: Y(v), class: 'grid'}));
    svg.append(s('text', {x: L - 6, y: Y(v) + 4, class: 'axis', 'text-anchor': 'end'}, opt.yfmt ? opt.yfmt(v) : fmt(v, 2)));
  }
  for (const v of niceTicks(x0, x1, 5, true)) {  // round steps
    svg.append(s('text', {x: X(v), y: H - B + 16, class: 'axis', 'text-anchor': 'middle', 'data-testid': 'x-tick'}, String(v)));
  }
  svg.append(s('text', {x: (L + W - R) / 2, y: H - 6, class: 'axis', 'text-anchor': 'middle'}, opt.xlabel || ''));
  svg.append(s('text', {x: 12, y: (T + H - B) / 2, class: 'axis', 'text-anchor': 'middle', transform: `rotate(-90 12 ${(T + H - B) / 2})`}, opt.ylabel || ''));
  series.forEach((q, k) => { q.dash = DASHES[k % DASHES.length]; });
  for (const q of series) {
    const step = Math.max(1, Math.floor(q.xs.length / (2 * (W - L - R))));
    const pts = [];
    for (let i = 0; i < q.xs.length; i += step) pts.push(X(q.xs[i]).toFixed(1) + ',' + Y(q.ys[i]).toFixed(1));
    const line = s('polyline', {points: pts.join(' '), fill: 'none', stroke: q.color, 'stroke-width': 1.8, 'stroke-dasharray': q.dash, 'data-run': q.name});
    line.append(tip(q.name));
    svg.append(line);
  }
  return h('figure', {class: 'fig'}, h('figcaption', {}, opt.title), svg,
    h('div', {class: 'legend'}, series.map((q) => chip(q.name + (q.note ? ' ' + q.note : ''), '', {style: 'border-color:' + q.color + ';color:' + q.color}))));
}

function perTaskTable(runs) {
  const tasks = [...new Set(runs.flatMap((r) => r.steps.map((st) => st.task || '-')))].sort();
  const cell = (r, t) => {
    const rw = r.steps.filter((st) => (st.task || '-') === t && st.verdict).map((st) => st.verdict.reward);
    return rw.length ? `${fmt(rw.reduce((a, b) => a + b, 0) / rw.length)} (n ${rw.length})` : '–';
  };
  const all = (r) => { const rw = r.steps.filter((st) => st.verdict).map((st) => st.verdict.reward); return rw.length ? fmt(rw.reduce((a, b) => a + b, 0) / rw.length) : '–'; };
  return h('table', {class: 'grid-table', 'data-testid': 'per-task'},
    h('thead', {}, h('tr', {}, h('th', {}, 'task'), runs.map((r) => h('th', {}, r.name)))),
    h('tbody', {}, tasks.map((t) => h('tr', {}, h('td', {}, t), runs.map((r) => h('td', {class: 'num'}, cell(r, t))))),
      h('tr', {class: 'total'}, h('td', {}, 'all'), runs.map((r) => h('td', {class: 'num'}, all(r))))));
}

function sideBySide(runs) {
  const a = NAV.a !== null && NAV.a < runs.length ? NAV.a : 0, b = NAV.b !== null && NAV.b < runs.length ? NAV.b : Math.min(1, runs.length - 1);
  const stepNos = runs[a].steps.map((st) => st.step);
  const n = NAV.step !== null && NAV.step !== undefined ? NAV.step : (stepNos.length ? stepNos[Math.min(stepNos.length - 1, 10)] : 0);
  const pick = (key, cur) => h('select', {'data-testid': 'compare-' + key, onchange: (ev) => go({[key]: Number(ev.target.value), step: n})},
    runs.map((r, i) => { const o = h('option', {value: i}, r.name); o.selected = i === cur; return o; }));
  const num = h('input', {type: 'number', min: 0, value: n, class: 'jump', 'data-testid': 'compare-step'});
  num.addEventListener('change', () => go({step: Number(num.value), a, b}));
  const col = (r, i) => {
    const k = stepIndex(r, n);
    if (k === null) return h('div', {class: 'col'}, h('h3', {}, r.name), h('p', {class: 'note'}, `No step ${n} in ${r.name}.`));
    const st = r.steps[k];
    return h('div', {class: 'col', 'data-testid': 'compare-col', 'data-run': r.name}, h('h3', {}, r.name, ' · ', link(`open step ${n}`, {run: i, tab: 'steps', step: n})),
      h('p', {class: 'meta'}, `${st.id} · branch ${st.branch || '–'} · answer `, h('code', {}, st.answer ? (st.answer.extracted ?? '(none)') : '–'),
        ' · reward ', st.verdict ? fmt(st.verdict.reward) : '–'),
      renderPrompt(st, r));
  };
  return h('div', {}, h('div', {class: 'toolbar'}, 'Prompts of step ', num, ' in ', pick('a', a), ' and ', pick('b', b)),
    h('div', {class: 'cols'}, col(runs[a], a), col(runs[b], b)));
}

let TASK = '';  // the task the charts show ('' for all)

function renderCompare(root) {
  const runs = DATA.runs;
  if (runs.length < 2) { root.append(h('p', {class: 'note'}, 'One run only: nothing to compare. Give rizz view a bench folder to see policies side by side.')); return; }
  const tasks = [...new Set(runs.flatMap((r) => r.steps.map((st) => st.task).filter((t) => t)))].sort();
  const ofTask = (st) => !TASK || st.task === TASK;
  root.append(h('div', {class: 'toolbar'}, 'Charts of ', h('select', {'data-testid': 'compare-task', onchange: (ev) => { TASK = ev.target.value; show(); }},
    h('option', {value: ''}, 'all tasks'), tasks.map((t) => { const o = h('option', {value: t}, 'task ' + t); o.selected = TASK === t; return o; }))));
  const rew = runs.map((r, i) => {
    const done = r.steps.filter((st) => st.verdict && ofTask(st));
    return {name: r.name, xs: done.map((st) => st.step), ys: trailingMean(done.map((st) => st.verdict.reward), WINDOW), color: COLORS[i % COLORS.length],
      note: `(mean ${fmt(done.length ? done.reduce((a, st) => a + st.verdict.reward, 0) / done.length : null)})`};
  });
  const tok = runs.map((r, i) => {
    const ps = r.steps.filter((st) => st.prompt && ofTask(st));
    return {name: r.name, xs: ps.map((st) => st.step), ys: ps.map((st) => st.prompt.tokens), color: COLORS[i % COLORS.length],
      note: `(max ${Math.max(0, ...ps.map((st) => st.prompt.tokens))})`};
  });
  root.append(h('div', {class: 'charts'},
    lineChart(rew, {title: `Reward over steps${TASK ? ', task ' + TASK : ''} (trailing mean of ${WINDOW} answered steps)`, ymin: 0, ymax: 1, xlabel: 'step', ylabel: 'reward', testid: 'chart-reward'}),
    lineChart(tok, {title: 'Answer prompt tokens per step' + (TASK ? ', task ' + TASK : ''), ymin: 0, xlabel: 'step', ylabel: 'tokens', yfmt: (v) => String(Math.round(v)), testid: 'chart-tokens'})));
  root.append(section('Reward per task', perTaskTable(runs)));
  root.append(section('Two runs, one step', sideBySide(runs)));
}

RENDER.compare = renderCompare;
