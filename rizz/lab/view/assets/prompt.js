// prompt.js: a step's compiled prompt, block by block, each item with its kind and source.

const KIND_NAME = {episode: 'episode', rule: 'rule', anti_pattern: 'anti-pattern', context: 'scoped context', turn: 'working-memory turn', quarantine: 'quarantined'};

// The text an item shows in a prompt (the compiler's own wording, rizz/core/compiler.py).
function itemText(it) {
  switch (it.kind) {
    case 'episode': return 'Input: ' + it.input + '\nAnswer: ' + it.answer;
    case 'anti_pattern': return 'Input: ' + it.input + '\nWrong answer: ' + it.answer;
    case 'quarantine': return 'Input: ' + it.input + '\nAnswer: ' + it.answer;
    case 'context': return it.time ? '[' + it.time + '] ' + it.text : it.text;
    default: return it.text;
  }
}

function blockItemText(st, block, pi, r) {
  if (pi.t !== undefined) return pi.t;  // as an agent's prompt showed it (agents.example_values)
  if (pi.m !== undefined && pi.m !== null) return itemText(r.items[pi.m]);
  if (block === 'input') return st.input;
  if (block === 'instruction') return st.instruction;
  if (block === 'preamble') return DATA.preamble;
  return pi.text !== undefined ? pi.text : '';
}

function itemRef(r, i, label) {
  const it = r.items[i];
  const target = it.branch ? {tab: 'memory', branch: it.branch, item: i} : (it.written !== null ? {tab: 'steps', step: it.written} : null);
  return target ? link(label, target, {'data-item': i}) : h('span', {}, label);
}

// The source line of one prompt item: kind, key or rule id, branch, when written, counters, score.
function sourceLine(st, block, pi, r) {
  const bits = [];
  if (pi.m !== undefined && pi.m !== null) {
    const it = r.items[pi.m];
    bits.push(chip(KIND_NAME[it.kind] || it.kind, 'k-' + it.kind));
    if (it.kind === 'turn') {
      bits.push(' turn of ', it.written !== null ? stepLink(it.written) : '?');
    } else {
      bits.push(' ', itemRef(r, pi.m, it.kind === 'rule' ? 'rule ' + it.key : 'key ' + it.key.slice(0, 12)));
      bits.push(' from branch ', branchLink(pi.b));
      if (it.written !== null && it.written !== undefined) bits.push(' · written at ', stepLink(it.written));
      if (pi.c) bits.push(' · helpful ' + pi.c[0] + ' / harmful ' + pi.c[1] + ' (' + pi.c[2] + ')');
      if (it.reward !== undefined && it.reward !== null) bits.push(' · reward ' + fmt(it.reward));
    }
  } else {
    bits.push(chip(block, 'k-plain'));
    bits.push(block === 'input' || block === 'instruction' ? ' this element' : block === 'evidence' ? ' the element\'s evidence' : ' fixed text');
  }
  if (pi.s) bits.push(' · score ' + fmt(pi.s));
  return h('div', {class: 'source', 'data-testid': 'item-source'}, bits);
}

function renderPrompt(st, r) {
  const p = st.prompt;
  if (!p) {
    if (st.context_only) return h('p', {class: 'note'}, 'Context only: no prompt was compiled; the input was stored as scoped context.');
    if (st.overflow) return h('p', {class: 'note warn'}, 'The input alone exceeds the prompt budget: nothing was sent to the model (reward 0).');
    if (st.episode) return h('div', {}, h('p', {class: 'note'}, 'A tool-using episode: its turns and calls are below.'));
    return h('p', {class: 'note'}, 'No prompt recorded for this step.');
  }
  const out = h('div', {class: 'prompt', 'data-testid': 'prompt'});
  const head = [`${p.tokens} of ${p.budget ?? '?'} tokens`];
  if (p.rendering) head.push(`, rendered as ${p.rendering}`);
  out.append(h('p', {class: 'meta'}, head.join(''), ' ',
    p.exact === true ? chip('rebuilt = logged prompt (sha256)', 'ok', {'data-testid': 'prompt-exact', title: 'The blocks below were rebuilt from the refolded state and give exactly the logged prompt text'}) :
    p.exact === false ? chip('rebuild differs from the logged prompt', 'warn', {'data-testid': 'prompt-exact'}) : ''));
  if (p.episode) {
    out.append(h('p', {class: 'meta'}, 'A tool-using episode: its longest prompt as sent, then the memory its agent prompts showed, block by block (the examples as the policy\'s agents settings showed them, those the log names); its turns and calls are further down.'));
    if (p.text !== undefined && p.text !== null) out.append(pre(p.text, 'text logged'));
  }
  if (p.exact === null && p.text && !p.episode) out.append(h('p', {class: 'meta'}, 'The answer prompt as the peer sent it (calls.jsonl); a peer\'s memory has no rizz blocks.'), pre(p.text, 'text logged'));
  if (p.exact === false) {
    out.append(h('p', {class: 'note warn'}, 'The refold could not rebuild this prompt exactly (an older log or another policy); the logged text follows, and the blocks below are the rebuild\'s.'));
    if (p.text !== undefined && p.text !== null) out.append(pre(p.text, 'text logged'));
  }
  for (const [block, items] of p.sections) {
    const box = h('div', {class: 'block b-' + block, 'data-testid': 'prompt-block', 'data-block': block});
    box.append(h('div', {class: 'block-head'}, chip(block, 'k-block'), ' ', h('span', {class: 'hdr'}, DATA.headers[block] || ''),
      items.length > 1 ? h('span', {class: 'count'}, ` ${items.length} items`) : ''));
    for (const pi of items) {
      box.append(h('div', {class: 'item', 'data-testid': 'prompt-item', 'data-id': pi.m !== undefined ? r.items[pi.m].key : pi.id}, sourceLine(st, block, pi, r), pre(blockItemText(st, block, pi, r))));
    }
    out.append(box);
  }
  if (p.dropped.length) {
    const rows = p.dropped.map((d) => h('tr', {}, h('td', {}, d[0]), h('td', {}, d[4] !== null && d[4] !== undefined ? itemRef(r, d[4], d[1]) : d[1]),
      h('td', {class: 'num'}, d[2]), h('td', {}, d[3] === 'budget' ? 'over the token budget (dropped in the policy\'s drop order, lowest score first)' : d[3] === 'item-too-long' ? 'item longer than the per-item cap' : d[3])));
    out.append(h('div', {class: 'dropped', 'data-testid': 'dropped'}, h('h4', {}, `Dropped by the compiler (${p.dropped.length})`),
      h('table', {class: 'grid-table'}, h('thead', {}, h('tr', {}, ['block', 'item', 'tokens', 'why'].map((c) => h('th', {}, c)))), h('tbody', {}, rows))));
  } else {
    out.append(h('p', {class: 'meta'}, 'Nothing dropped by the budget.'));
  }
  return out;
}
