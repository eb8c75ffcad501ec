"""A person plays in the browser: a seat served by a web form, through the same runner as training.

A :class:`PlaySession` runs one game in a thread: the person's seat is a
:class:`BrowserSeat` policy whose ``generate`` publishes the request and waits
for the reply the play page posts; the other seats are whatever the config can
name (its model policies, a run's checkpoint, ``scripted:<bot>``). Whatever the
person types is the completion, exactly like a model's: the game parses it and
applies its invalid-output rule. The finished episode is appended to
``<run_dir>/play/episodes.jsonl`` in the runner's episode format.

Each session holds a thread, so at most ``max_sessions`` games are live at once
(:class:`SessionCap` beyond, which the app answers with 429), and a game whose
person sends no reply for ``idle_s`` seconds ends (status ``error``, "no reply
within ...") and frees its thread. Finished sessions are kept for their pages,
the oldest dropped past :data:`KEEP_FINISHED`.
"""

from __future__ import annotations

import queue
import threading
import traceback
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.view.files import Refused
from arena.policies.base import Completion, Request

PERSON = "person"
MAX_SESSIONS = 4  # live games at once (each holds a thread)
IDLE_S = 600.0  # a game whose person sends no reply for this long ends
KEEP_FINISHED = 100  # finished games kept for their pages
LIVE = ("starting", "model", "you")


class SessionCap(Exception):
    """Too many live games: the app answers 429."""


class IdleTimeout(Exception):
    """The person sent no reply in time: the game ends and its thread with it."""


class BrowserSeat:
    """A :class:`~arena.policies.base.Policy` answered through the play page, one request at a time."""

    def __init__(self, session: PlaySession):
        self.name = PERSON
        self.session = session

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        return [Completion(text=self.session.ask(req)) for req in requests]


@dataclass
class PlaySession:
    """One game in progress: its status, the person's pending request and what they sent."""

    config_name: str
    seat: str
    opponent: str
    seed: int
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    status: str = "starting"  # starting | model | you | done | error
    request: Request | None = None
    history: list[tuple[str, str]] = field(default_factory=list)  # (what you saw last, what you sent)
    episode_key: str | None = None
    error: str | None = None
    result: dict[str, Any] | None = None
    idle_s: float = IDLE_S
    _replies: queue.Queue[str] = field(default_factory=queue.Queue, repr=False)

    def ask(self, req: Request) -> str:
        self.request, self.status = req, "you"
        try:
            text = self._replies.get(timeout=self.idle_s)
        except queue.Empty:
            self.request = None
            raise IdleTimeout(f"no reply within {self.idle_s:g} s") from None
        self.history.append((req.messages[-1]["content"] if req.messages else "", text))
        self.request, self.status = None, "model"
        return text

    def reply(self, text: str) -> bool:
        """Hand the person's text to the waiting seat; False when no turn is waiting."""
        if self.status != "you":
            return False
        self._replies.put(text)
        self.status = "model"
        return True


class PlayHost:
    """Starts play sessions and keeps opponent policies loaded between games."""

    def __init__(self, run_dir: Path, run_config: dict[str, Any], max_sessions: int = MAX_SESSIONS,
                 idle_s: float = IDLE_S):
        self.run_dir = run_dir
        self.run_config = run_config
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self.sessions: dict[str, PlaySession] = {}
        self._policies: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()  # not _lock: that one is held while a model loads

    # ----------------------------------------------------------------- choices
    def config_names(self) -> list[str]:
        from arena.core.registry import registered_games

        return (["run"] if self.run_config else []) + sorted(registered_games())

    def load(self, name: str) -> Any:
        """'run' -> the run's config.json; a registered game name -> its default config."""
        from arena.loop.config import load_config, parse_config

        if name == "run":
            # config.json's "code" (arena's version, the git commit: arena/loop/loggers.py) is no config key
            return parse_config({k: v for k, v in self.run_config.items() if k != "code"}, "config.json")
        return load_config(name)

    def checkpoints(self) -> list[Path]:
        return sorted(p / "model" for p in (self.run_dir / "checkpoints").glob("step_*") if (p / "model").is_dir())

    def opponents(self, cfg: Any, config_name: str = "run") -> list[str]:
        """Policy names the config can name: its policies, this run's checkpoints (with the run's
        own config), the game's bots."""
        from arena.policies.config import ModelPolicySpec
        from arena.policies.scripted import available_bots

        names = [n for n, s in cfg.policies.items() if not getattr(s, "kind", "") == "human"]
        if config_name == "run" and any(isinstance(s, ModelPolicySpec) for s in cfg.policies.values()):
            names += [f"checkpoint:{p.parent.name}" for p in self.checkpoints()]
        return names + [f"scripted:{b}" for b in sorted(available_bots(cfg.game.cls))]

    def seats(self, cfg: Any) -> list[str]:
        return list(cfg.game.make_env().possible_agents)

    # ----------------------------------------------------------------- playing
    def _policy(self, cfg: Any, config_name: str, opponent: str) -> Any:
        from arena.loop.build import build_policies
        from arena.policies.config import ModelPolicySpec

        key = (config_name, opponent)
        with self._lock:
            if key not in self._policies:
                if opponent.startswith("checkpoint:"):
                    base = next(s for s in cfg.policies.values() if isinstance(s, ModelPolicySpec))
                    path = self.run_dir / "checkpoints" / opponent.split(":", 1)[1] / "model"
                    spec = base.model_copy(update={"model": str(path), "trainable": False})
                    cfg = cfg.model_copy(update={"policies": {**cfg.policies, opponent: spec}})
                self._policies[key] = build_policies(cfg, names=[opponent])[opponent]
            return self._policies[key]

    def live(self) -> int:
        return sum(s.status in LIVE for s in list(self.sessions.values()))

    def start(self, config_name: str, seat: str, opponent: str, seed: int) -> PlaySession:
        """A new game in its own thread; :class:`SessionCap` when ``max_sessions`` are live."""
        with self._start_lock:
            if self.live() >= self.max_sessions:
                raise SessionCap(f"{self.max_sessions} games are being played already (--max-games); "
                                 f"finish one, or wait for an idle one to end ({self.idle_s:g} s)")
            finished = [k for k, s in self.sessions.items() if s.status not in LIVE]
            for k in finished[: max(0, len(finished) - KEEP_FINISHED + 1)]:
                del self.sessions[k]
            session = PlaySession(config_name=config_name, seat=seat, opponent=opponent, seed=seed, idle_s=self.idle_s)
            self.sessions[session.id] = session
        threading.Thread(target=self._run, args=(session,), daemon=True, name=f"play-{session.id}").start()
        return session

    def _run(self, session: PlaySession) -> None:
        from arena.loop.build import sampling_table
        from arena.runner import Runner, SeatMap
        from arena.view.files import Skips, append_line, json_lines

        try:
            cfg = self.load(session.config_name)
            policies = {PERSON: BrowserSeat(session), session.opponent: self._policy(cfg, session.config_name, session.opponent)}
            session.status = "model"
            runner = Runner(
                cfg.game.make_env, policies, SeatMap({session.seat: PERSON, "*": session.opponent}),
                sampling_table(cfg), num_envs=1, progress=False, state=cfg.game.make_env().make_state(),
            )
            (episode,) = runner.play([session.seed])
            out = self.run_dir / "play" / "episodes.jsonl"
            out.parent.mkdir(parents=True, exist_ok=True)
            with self._lock:  # read and written as the viewer reads: a link or FIFO put there is refused
                lines = sum(1 for _ in json_lines(out, self.run_dir, Skips())) if out.exists() else 0
                append_line(out, self.run_dir, episode.model_dump_json())
            session.episode_key = f"play/episodes.jsonl/{lines}"  # its key in the list (arena/view/store.py)
            session.result = {"rewards": episode.rewards, "roles": episode.roles,
                              "outcome": {s: o.model_dump() for s, o in episode.outcome.items()}}
            session.status = "done"
        except IdleTimeout as e:
            session.error = f"the game ended: {e}"
            session.status = "error"
        except Refused as e:
            session.error = f"the game could not be saved to play/episodes.jsonl: {e}"
            session.status = "error"
        except Exception as e:  # noqa: BLE001 - shown on the play page; the server keeps running
            session.error = f"{type(e).__name__}: {e}"
            traceback.print_exc()
            session.status = "error"
