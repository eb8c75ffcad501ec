// Line charts of metrics.jsonl in plain SVG: one chart per numeric metric, polled every 2 s.
// Hover shows the nearest step's value; drag selects a step range to zoom; double-click resets.
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const rows = [];
  let next = 0, skipped = 0;  // skipped: lines of metrics.jsonl the server could not read (not UTF-8, not JSON)
  const charts = {};  // metric -> {div, svg, tip, zoom}
  const box = document.getElementById("charts");
  const filter = document.getElementById("metric-filter");
  const status = document.getElementById("status");

  function el(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function metrics() {
    const keys = new Set();
    for (const r of rows) for (const k in r) if (k !== "step" && typeof r[k] === "number") keys.add(k);
    return [...keys].sort();
  }
  function points(key) {
    const out = [];
    rows.forEach((r, i) => { if (typeof r[key] === "number" && isFinite(r[key])) out.push([typeof r.step === "number" ? r.step : i + 1, r[key]]); });
    return out;
  }
  function fmt(v) { return Math.abs(v) >= 1000 || (Math.abs(v) < 0.001 && v !== 0) ? v.toExponential(2) : (+v.toFixed(4)).toString(); }

  function draw(key) {
    let c = charts[key];
    if (!c) {
      const div = document.createElement("div");
      div.className = "chart"; div.dataset.metric = key;
      const h = document.createElement("h3"); h.textContent = key; div.appendChild(h);
      const svg = el("svg", {viewBox: "0 0 400 180", preserveAspectRatio: "none"}, div);
      const tip = document.createElement("div"); tip.className = "tip"; div.appendChild(tip);
      box.appendChild(div);
      c = charts[key] = {div, svg, tip, zoom: null};
      let dragFrom = null;
      svg.addEventListener("mousemove", (ev) => hover(key, ev));
      svg.addEventListener("mouseleave", () => { c.tip.style.display = "none"; });
      svg.addEventListener("mousedown", (ev) => { dragFrom = stepAt(key, ev); });
      svg.addEventListener("mouseup", (ev) => {
        const to = stepAt(key, ev);
        if (dragFrom !== null && to !== null && to !== dragFrom) { c.zoom = [Math.min(dragFrom, to), Math.max(dragFrom, to)]; draw(key); }
        dragFrom = null;
      });
      svg.addEventListener("dblclick", () => { c.zoom = null; draw(key); });
    }
    const svg = c.svg;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    let pts = points(key);
    if (c.zoom) pts = pts.filter(([x]) => x >= c.zoom[0] && x <= c.zoom[1]);
    c.pts = pts;
    if (!pts.length) return;
    const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]);
    let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    if (y0 === y1) { y0 -= 1; y1 += 1; }
    const L = 44, R = 392, T = 8, B = 164;
    c.scale = {x0, x1, y0, y1, L, R, T, B};
    const sx = x => L + (x - x0) / (x1 - x0) * (R - L), sy = y => B - (y - y0) / (y1 - y0) * (B - T);
    el("line", {x1: L, y1: B, x2: R, y2: B, stroke: "#999"}, svg);
    el("line", {x1: L, y1: T, x2: L, y2: B, stroke: "#999"}, svg);
    for (const [v, y] of [[y1, T], [y0, B]]) { const t = el("text", {x: 2, y: y + 4, "font-size": 10, fill: "#666"}, svg); t.textContent = fmt(v); }
    for (const [v, x] of [[x0, L], [x1, R]]) { const t = el("text", {x: x - 8, y: 177, "font-size": 10, fill: "#666"}, svg); t.textContent = fmt(v); }
    el("polyline", {points: pts.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" "), fill: "none", stroke: "#36c", "stroke-width": 1.5}, svg);
    if (pts.length <= 60) for (const [x, y] of pts) el("circle", {cx: sx(x), cy: sy(y), r: 2, fill: "#36c"}, svg);
    c.dot = el("circle", {r: 4, fill: "none", stroke: "#c33", visibility: "hidden"}, svg);
  }
  function stepAt(key, ev) {
    const c = charts[key];
    if (!c.scale || !c.pts.length) return null;
    const rect = c.svg.getBoundingClientRect(), s = c.scale;
    const vx = (ev.clientX - rect.left) / rect.width * 400;
    const x = s.x0 + (vx - s.L) / (s.R - s.L) * (s.x1 - s.x0);
    let best = c.pts[0];
    for (const p of c.pts) if (Math.abs(p[0] - x) < Math.abs(best[0] - x)) best = p;
    return best[0];
  }
  function hover(key, ev) {
    const c = charts[key], x = stepAt(key, ev);
    if (x === null) return;
    const p = c.pts.find(q => q[0] === x), s = c.scale;
    c.dot.setAttribute("cx", s.L + (p[0] - s.x0) / (s.x1 - s.x0) * (s.R - s.L));
    c.dot.setAttribute("cy", s.B - (p[1] - s.y0) / (s.y1 - s.y0) * (s.B - s.T));
    c.dot.setAttribute("visibility", "visible");
    c.tip.textContent = `step ${p[0]}: ${fmt(p[1])}`;
    c.tip.style.display = "block";
    c.tip.style.left = (ev.offsetX + 12) + "px"; c.tip.style.top = (ev.offsetY + 20) + "px";
  }
  function applyFilter() {
    const f = filter.value.toLowerCase();
    for (const k in charts) charts[k].div.style.display = k.toLowerCase().includes(f) ? "" : "none";
  }
  let more = false;
  async function poll() {
    try {
      const r = await fetch(`/api/metrics?since=${next}`);
      const data = await r.json();
      more = !!data.more;
      if (data.next < next) { rows.length = 0; next = 0; skipped = 0; }  // the file was rewritten (resume)
      else if (data.rows.length) { rows.push(...data.rows); next = data.next; skipped += data.skipped || 0; for (const k of metrics()) draw(k); applyFilter(); }
      else { next = data.next; skipped += data.skipped || 0; }
      status.textContent = `${rows.length} steps · ${Object.keys(charts).length} metrics` + (skipped ? ` · ${skipped} unreadable lines skipped` : "");
      box.dataset.skipped = skipped;
      box.dataset.steps = rows.length;
    } catch (e) { more = false; status.textContent = "waiting for the server"; }
    setTimeout(poll, more ? 0 : 2000);  // more: the server sends metrics.jsonl a bounded piece at a time
  }
  filter.addEventListener("input", applyFilter);
  poll();
})();
