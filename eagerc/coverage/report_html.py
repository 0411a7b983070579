"""report.html: one self-contained page (inline CSS and JS, no network): summary
numbers, a chart of status by op family (SVG drawn by the page's script), and a table
filterable by status and dtype and searchable by name.

The filter is also read from the address: ``report.html#status=mismatch&q=linalg``
(what the page writes there when the filter changes, so a filtered view can be linked).
"""
from __future__ import annotations

import json

from eagerc.coverage.classify import ORDER
from eagerc.coverage.report_json import rows

COLORS = {
    "pass": "#2e9d4f", "extern": "#6cbf5a", "aliased": "#a6d96a", "host": "#d9ef8b", "composite": "#c7e9a0", "runtime": "#4a90d9",
    "random": "#7fb8e6", "mismatch": "#d7191c", "error": "#f46d43", "compile_error": "#fdae61",
    "unsupported_arg": "#e9c46a", "no_kernel": "#b15928", "not_served": "#bbbbbb",
    "decomposed": "#dddddd", "no_sample": "#999999", "crash": "#6a0dad", "timeout": "#9e4a9e",
}

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:1.5em}
.cards{display:flex;flex-wrap:wrap;gap:.5em}
.card{border:1px solid #ccc;border-radius:6px;padding:.4em .7em;min-width:6em}
.card b{display:block;font-size:1.3em}
.sw{display:inline-block;width:.8em;height:.8em;margin-right:.3em;vertical-align:middle}
table{border-collapse:collapse;width:100%;font-size:.9em}
td,th{border-bottom:1px solid #eee;padding:.2em .4em;text-align:left;vertical-align:top}
td.detail{font-family:monospace;font-size:.85em;word-break:break-word}
td.status{white-space:nowrap}
.controls{margin:.8em 0;display:flex;gap:.8em;align-items:center}
#chart rect.seg{cursor:pointer}
#legend span{margin-right:1em;font-size:.85em;cursor:pointer}
"""

_JS = r"""
const DATA = JSON.parse(document.getElementById('coverage-data').textContent);
const COLORS = DATA.colors, ORDER = DATA.order, MAX_BARS = DATA.max_bars, SVG = 'http://www.w3.org/2000/svg';
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}
function summary() {
  const box = document.getElementById('summary');
  for (const [dtype, s] of Object.entries(DATA.summary)) {
    const cards = el('div', {class: 'cards', 'data-dtype': dtype});
    cards.appendChild(el('div', {class: 'card'}, dtype));
    const pct = el('div', {class: 'card'}); pct.appendChild(el('b', {}, (s.working_pct ?? '-') + '%'));
    pct.appendChild(document.createTextNode('working of ' + s.tested + ' tested')); cards.appendChild(pct);
    const o = (DATA.opinfo_summary || {})[dtype];
    if (o) {
      const oc = el('div', {class: 'card', id: 'opinfo-' + dtype}); oc.appendChild(el('b', {}, (o.working_pct ?? '-') + '%'));
      oc.appendChild(document.createTextNode('of ' + o.entries + ' OpInfo entries work')); cards.appendChild(oc);
    }
    for (const st of ORDER) {
      if (!s.by_status[st]) continue;
      const c = el('div', {class: 'card', 'data-status': st});
      c.appendChild(el('b', {}, s.by_status[st]));
      const sw = el('span', {class: 'sw'}); sw.style.background = COLORS[st];
      c.appendChild(sw); c.appendChild(document.createTextNode(st)); cards.appendChild(c);
    }
    box.appendChild(cards);
  }
}
function chart() {
  const counts = {};
  for (const r of DATA.rows) {
    const f = counts[r[1]] = counts[r[1]] || {total: 0};
    f.total++; f[r[3]] = (f[r[3]] || 0) + 1;
  }
  let fams = Object.keys(counts).sort((a, b) => counts[b].total - counts[a].total);
  if (fams.length > MAX_BARS) {
    const other = {total: 0};
    for (const f of fams.slice(MAX_BARS - 1)) for (const k in counts[f]) other[k] = (other[k] || 0) + counts[f][k];
    fams = fams.slice(0, MAX_BARS - 1); counts['(other)'] = other; fams.push('(other)');
  }
  const rowH = 18, left = 110, width = 640;
  const s = svg('svg', {width: left + width + 60, height: fams.length * rowH + 10, id: 'chart-svg'});
  fams.forEach((f, i) => {
    const label = svg('text', {x: left - 6, y: i * rowH + 13, 'text-anchor': 'end', 'font-size': 12});
    label.textContent = f; s.appendChild(label);
    let x = left;
    for (const st of ORDER) {
      const n = counts[f][st] || 0;
      if (!n) continue;
      const w = n / counts[f].total * width;  // each bar is its family's 100%
      const r = svg('rect', {x: x, y: i * rowH + 2, width: w, height: rowH - 4, fill: COLORS[st],
                             class: 'seg', 'data-family': f, 'data-status': st});
      const t = svg('title', {}); t.textContent = f + ': ' + n + ' ' + st; r.appendChild(t);
      r.addEventListener('click', () => { state.status = st; state.q = f === '(other)' ? '' : f; apply(); });
      s.appendChild(r); x += w;
    }
    const total = svg('text', {x: x + 4, y: i * rowH + 13, 'font-size': 11});
    total.textContent = counts[f].total; s.appendChild(total);
  });
  document.getElementById('chart').appendChild(s);
  const legend = document.getElementById('legend');
  for (const st of ORDER) {
    const item = el('span', {'data-status': st});
    const sw = el('span', {class: 'sw'}); sw.style.background = COLORS[st];
    item.appendChild(sw); item.appendChild(document.createTextNode(st));
    item.addEventListener('click', () => { state.status = st; apply(); });
    legend.appendChild(item);
  }
}
const state = {status: '', q: '', dtype: ''};
function readHash() {
  const p = new URLSearchParams(location.hash.replace(/^#/, '') || location.search.replace(/^\?/, ''));
  state.status = p.get('status') || ''; state.q = p.get('q') || ''; state.dtype = p.get('dtype') || '';
}
function apply() {
  document.getElementById('status').value = state.status;
  document.getElementById('search').value = state.q;
  document.getElementById('dtype').value = state.dtype;
  const q = state.q.toLowerCase(), body = document.getElementById('rows');
  body.replaceChildren();
  let shown = 0;
  for (const r of DATA.rows) {
    if (state.status && r[3] !== state.status) continue;
    if (state.dtype && r[2] !== state.dtype) continue;
    if (q && !r[0].toLowerCase().includes(q) && !r[1].toLowerCase().includes(q)) continue;
    shown++;
    if (shown > 3000) continue;  // the count stays right; the page stays quick
    const tr = el('tr', {class: 'row', 'data-status': r[3], 'data-op': r[0]});
    tr.appendChild(el('td', {}, r[0])); tr.appendChild(el('td', {}, r[1]));
    tr.appendChild(el('td', {}, r[2]));
    const st = el('td', {class: 'status'}); const sw = el('span', {class: 'sw'}); sw.style.background = COLORS[r[3]];
    st.appendChild(sw); st.appendChild(document.createTextNode(r[3])); tr.appendChild(st);
    tr.appendChild(el('td', {class: 'detail'}, r[4]));
    body.appendChild(tr);
  }
  document.getElementById('shown').textContent = shown + ' of ' + DATA.rows.length + ' shown';
  const params = new URLSearchParams();
  for (const k of ['status', 'q', 'dtype']) if (state[k]) params.set(k, state[k]);
  const hash = params.toString();
  if (location.hash.replace(/^#/, '') !== hash) history.replaceState(null, '', hash ? '#' + hash : location.pathname);
}
function controls() {
  const status = document.getElementById('status');
  status.appendChild(el('option', {value: ''}, 'all statuses'));
  for (const st of ORDER) status.appendChild(el('option', {value: st}, st));
  const dtype = document.getElementById('dtype');
  dtype.appendChild(el('option', {value: ''}, 'all dtypes'));
  for (const d of DATA.dtypes) dtype.appendChild(el('option', {value: d}, d));
  status.addEventListener('change', () => { state.status = status.value; apply(); });
  dtype.addEventListener('change', () => { state.dtype = dtype.value; apply(); });
  document.getElementById('search').addEventListener('input', e => { state.q = e.target.value; apply(); });
  window.addEventListener('hashchange', () => { readHash(); apply(); });
}
summary(); chart(); controls(); readHash(); apply();
document.body.setAttribute('data-ready', 'yes');
"""


# The chart's bars: past this many families, the smallest share one "(other)" bar.
MAX_BARS = 40


def chart_caption(families: int) -> str:
    """What the family chart shows, in the numbers of this report."""
    if families > MAX_BARS:
        return (f"the {MAX_BARS - 1} largest of {families} families, then the other "
                f"{families - MAX_BARS + 1} in one bar")
    return f"all {families} {'family' if families == 1 else 'families'}"


def render(report: dict) -> str:
    data = {
        "order": list(ORDER), "colors": COLORS, "max_bars": MAX_BARS, "dtypes": report["dtypes"], "summary": report["summary"],
        "opinfo_summary": report.get("opinfo_summary", {}),
        "rows": [[op, fam, dtype, r["status"], (r.get("detail") or "")[:400]]
                 for op, fam, dtype, r in rows(report)],
    }
    payload = json.dumps(data).replace("</", "<\\/")
    caption = chart_caption(len({row[1] for row in data["rows"]}))
    title = f"eagerc op coverage: {report['device']}"
    meanings = "".join(f"<li><b>{s}</b>: {report['statuses'].get(s, '')}</li>" for s in ORDER)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{_CSS}</style></head>
<body>
<h1>{title}</h1>
<p>torch {report['torch_version']}, eagerc {report['eagerc_version']}; dtypes {', '.join(report['dtypes'])}
{'(with backward samples)' if report['grad'] else ''}; {report['created']}</p>
<h2>Summary (per ATen overload)</h2><div id="summary"></div>
<h2>Status by op family</h2><p>Each bar is one family's overloads (100%), the number its size; {caption}.</p><div id="legend"></div><div id="chart"></div>
<h2>Ops</h2>
<div class="controls"><select id="status"></select><select id="dtype"></select>
<input id="search" type="search" placeholder="search op or family"><span id="shown"></span></div>
<table><thead><tr><th>op</th><th>family</th><th>dtype</th><th>status</th><th>detail</th></tr></thead>
<tbody id="rows"></tbody></table>
<h2>Statuses</h2><ul>{meanings}</ul>
<script type="application/json" id="coverage-data">{payload}</script>
<script>{_JS}</script>
</body></html>
"""
