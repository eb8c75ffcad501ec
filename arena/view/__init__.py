"""``python -m arena.view RUN_DIR``: a local web app to look at a run.

Pages: episodes (filter by step, game, role, phase, outcome, text; one episode
shows each seat's private view, prompts, completions, parsed actions, validity,
rewards, advantages, tokens coloured by log-probability or AUSO weight),
curves (every metric of ``metrics.jsonl``, refreshed while the run goes on),
tournaments (ratings, payoff heatmap, cycles, from a tournament JSON), and play
(a person takes a seat against any policy the config can name; the only page
that writes). It binds 127.0.0.1 unless ``--host`` says otherwise.

``arena.view.record`` (what training saves) imports nothing heavy; the web app
(FastAPI, Jinja2, uvicorn) is imported only by ``arena.view.app``.
"""
