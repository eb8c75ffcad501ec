// Poll the game's status; reload the page when it is the person's turn or the game ended.
(function () {
  const el = document.getElementById("status");
  const sid = el.dataset.sid, turns = el.dataset.turns, shown = el.textContent;
  async function poll() {
    try {
      const r = await fetch(`/api/play/${sid}`);
      const s = await r.json();
      if (s.status !== shown || String(s.turns) !== turns) { location.reload(); return; }
    } catch (e) { /* the server restarts: keep trying */ }
    setTimeout(poll, 500);
  }
  setTimeout(poll, 300);
})();
