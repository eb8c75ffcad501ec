"""Can one gradient step tell Kuhn's cards apart? The model's kernel between information states.

For each of Kuhn's 12 information states ``I`` the policy's logit gap is ``g(I) = l_Bet(I) - l_Pass(I)``,
``l`` the model's summed log-probability of the action's name as the whole reply (its tokens, then end of
sequence: exactly what the exact evaluation and ``action_mode: score`` normalise). A small step ``d`` in
the weights moves every gap at once, by ``grad g(I) . d``; two states whose gradients point the same way
move together whatever the step. This prints the cosine of ``grad g(I)`` and ``grad g(I')`` for every pair
of states that differ only in the card (the same player and betting so far), and their mean, for each
model given:

    .venv/bin/python bench/kuhn_card_kernel.py                      # the built-in model
    .venv/bin/python bench/kuhn_card_kernel.py runs/x/checkpoints/step_000010/model
    .venv/bin/python bench/kuhn_card_kernel.py --view card_first card_last card_in_question   # the prompt's card
    .venv/bin/python bench/kuhn_card_kernel.py --game leduc_poker --view card_first openspiel

On Leduc poker it takes the first round's information states with an even private card (one suit of each
rank: the public card is not dealt yet, so these differ only in the rank), and the gap ``l_Raise - l_Call``
(``l_Call - l_Fold`` where Raise is not legal).

A cosine near 1 means that any update moves the Jack's and the King's policy alike: a card-blind step.
The gradients are kept in bfloat16 (12 x 135M numbers); the cosines are computed in float64.
"""

from __future__ import annotations

import argparse
import itertools
import re
from pathlib import Path

import torch
from card_dependence import card_group  # bench/, beside this script


def _gap_actions(actions: tuple[str, ...]) -> tuple[str, str]:
    """(the action whose log-probability is subtracted, the one it is subtracted from)."""
    if "Bet" in actions:
        return "Pass", "Bet"
    return ("Call", "Raise") if "Raise" in actions else ("Fold", "Call")


def _kept(game: str, info_state: str) -> bool:
    """Kuhn: every state. Leduc: the first round, one suit a rank (an even private card)."""
    m = re.search(r"\[Private: (\d+)\]\[Round (\d)\]", info_state)
    return game == "kuhn_poker" or (m is not None and int(m[1]) % 2 == 0 and m[2] == "1")


def gaps_gradients(model_dir: Path, view: str = "card_first",
                   game: str = "kuhn_poker") -> tuple[list[str], list[torch.Tensor], list[float]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from arena.games.openspiel.tree import exact_tree
    from arena.games.openspiel.types import OpenSpielConfig
    from arena.policies.choices import action_ids
    from arena.policies.hf import chat_prompt_ids

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    _, queries, _ = exact_tree(OpenSpielConfig(game=game, view=view)).info_states()
    names, grads, gaps = [], [], []
    for q in (q for q in queries if _kept(game, q.observation.info_state)):
        prompt = chat_prompt_ids(tokenizer, q.messages)
        ls = []
        for a in _gap_actions(q.actions):
            ids = action_ids(tokenizer, a)
            x = torch.tensor([prompt + ids])
            logp = torch.log_softmax(model(x).logits[0, len(prompt) - 1:-1].float(), -1)
            ls.append(logp.gather(-1, torch.tensor(ids)[:, None]).sum())
        gap = ls[1] - ls[0]
        model.zero_grad(set_to_none=True)
        gap.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).to(torch.bfloat16))
        names.append(f"{q.seat[-1]}:{q.observation.info_state}")
        gaps.append(float(gap.detach()))
    return names, grads, gaps


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    a64, b64 = a.double(), b.double()
    return float(a64 @ b64 / (a64.norm() * b64.norm()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="*", type=Path, default=[Path.home() / ".cache/arena/models/smollm2-135m"])
    p.add_argument("--game", default="kuhn_poker", choices=["kuhn_poker", "leduc_poker"])
    p.add_argument("--view", nargs="+", default=["card_first"],
                   choices=["card_first", "card_last", "card_in_question", "openspiel"],
                   help="how the prompt shows the card (game.view); each is measured in turn")
    args = p.parse_args()
    for model_dir, view in itertools.product(args.models, args.view):
        names, grads, gaps = gaps_gradients(model_dir, view, args.game)
        history = {}
        for i, n in enumerate(names):  # "player:info state" -> group by player and the state without its card
            player, state = n.split(":", 1)
            history.setdefault((player, card_group(args.game, state)), []).append(i)
        print(f"\n{model_dir}, {args.game}, view {view}")
        print("| player, betting | cards | gap (nats), low card to high | cosines between the cards' gradients |")
        print("|---|---|---|---|")
        every = []
        for (player, hist), rows in sorted(history.items()):
            rows = sorted(rows, key=lambda r: card_of(names[r]))
            pairs = [cosine(grads[i], grads[j]) for i, j in itertools.combinations(rows, 2)]
            every += pairs
            print(f"| {player}, '{hist or '-'}' | {len(rows)} | " + ", ".join(f"{gaps[i]:+.2f}" for i in rows)
                  + " | " + ", ".join(f"{v:.3f}" for v in pairs) + " |")
        print(f"mean cosine between states that differ only in the card: {sum(every) / len(every):.3f} "
              f"({len(every)} pairs)")


def card_of(name: str) -> int:
    m = re.search(r"\[Private: (\d+)\]", name)
    return int(m[1]) if m else int(name.split(":", 1)[1][0])


if __name__ == "__main__":
    main()
