"""``python -m arena.tournament --exact`` (issue #34): exact payoff matrices and the ratings fitted to them,
no games sampled; a game that is not an enumerable OpenSpiel game is one line and exit 2."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pyspiel
import pytest
from open_spiel.python import policy as os_policy

from arena.core.errors import ConfigError
from arena.games.openspiel.exact import cfr_policy, head_to_head
from arena.rank.tournament import exact_fit, main
from arena.stats.ratings import ELO_SCALE
from tolerance import approx32, approx64, within

ROOT = Path(__file__).resolve().parents[1]
KUHN = str(ROOT / "arena/games/openspiel/kuhn.yaml")


def test_exact_tournament_of_bots_is_openspiels_values_and_fits_ratings(tmp_path: Path, capsys) -> None:
    out = tmp_path / "t.json"
    assert main([KUHN, "--exact", "--players", "uniform=scripted:random", "cfr=scripted:cfr", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    game = pyspiel.load_game("kuhn_poker")
    returns, results = head_to_head(game, [os_policy.UniformRandomPolicy(game), cfr_policy("kuhn_poker()")])
    assert data["exact"] is True and data["players"] == ["uniform", "cfr"]
    assert data["returns"][0][1] == approx64(returns[0, 1]) and data["returns"][0][1] < -0.1
    assert data["payoff"][0][1] == approx64(results[0, 1]) and data["payoff"][0][0] is None
    # two players: the BT maximum likelihood gap is log(w_cfr / w_uniform) on the Elo scale
    gap = ELO_SCALE * math.log(results[1, 0] / results[0, 1])
    assert data["ratings"]["uniform"]["rating"] == pytest.approx(1000.0)
    assert data["ratings"]["cfr"]["rating"] == within(1000.0 + gap, 1e-3, "the Bradley-Terry fit stops at a tolerance")
    printed = capsys.readouterr().out
    assert "no games sampled" in printed and (tmp_path / "t.png").is_file()


def test_exact_fit_orders_three_players_by_their_results() -> None:
    results = [[math.nan, 0.7, 0.9], [0.3, math.nan, 0.6], [0.1, 0.4, math.nan]]
    ratings = exact_fit(results, ["a", "b", "c"], "b")
    assert ratings["b"] == pytest.approx(1000.0) and ratings["a"] > ratings["b"] > ratings["c"]


@pytest.mark.parametrize(("args", "says"), [
    ([KUHN, "--set", "game.game=tic_tac_toe"], "--exact: tic_tac_toe() has more than 20000 information states"),
    ([str(ROOT / "arena/games/spy/spy.yaml")], "--exact: exact head-to-head values are for games small enough to "
     "enumerate (an arena.exact.ExactGame: game.name: openspiel, e.g. kuhn_poker, leduc_poker); 'spy' is not one"),
])
def test_a_game_that_cannot_be_enumerated_is_one_line(args: list[str], says: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        main([*args, "--exact", "--players", "scripted:random", "scripted:default", "--json", str(tmp_path / "t.json")])
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_cli_exits_2_with_one_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "arena.tournament", KUHN, "--exact", "--set", "game.game=tic_tac_toe",
                          "--players", "scripted:random", "scripted:cfr", "--json", str(tmp_path / "t.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, env=os.environ | {"OMP_NUM_THREADS": "1"})
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "tic_tac_toe() has more than 20000 information states" in out.stderr


def test_tiny_model_player_is_scored_by_its_exact_action_probabilities(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A model player's table is its teacher-forced action distribution at its sampling temperature."""
    from arena.games.openspiel.exact import tabular_policy
    from arena.loop.config import load_config
    from arena.loop.exact import model_action_probs
    from arena.policies.base import SamplingParams
    from arena.policies.hf import HFPolicy

    out = tmp_path / "t.json"
    sets = ["--set", "policies.learner.sampling.temperature=0.5"]
    assert main([KUHN, "--exact", "--players", "scripted:random", f"tiny={tiny_model_dir}", "--json", str(out), *sets]) == 0
    data = json.loads(out.read_text())
    cfg = load_config(KUHN, ["policies.learner.sampling.temperature=0.5"])
    policy = HFPolicy(str(tiny_model_dir), dtype="float32")
    params = SamplingParams(temperature=0.5, max_new_tokens=6)
    model_table = tabular_policy(cfg.game.settings, lambda qs: [model_action_probs(policy, q, params) for q in qs])
    game = pyspiel.load_game("kuhn_poker")
    returns, results = head_to_head(game, [os_policy.UniformRandomPolicy(game), model_table])
    assert data["returns"][1][0] == approx32(returns[1, 0], scale=2.0)  # sums of payoffs up to 2
    assert data["payoff"][1][0] == approx32(results[1, 0], scale=1.0)  # sums of win shares up to 1
