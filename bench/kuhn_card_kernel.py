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

A cosine near 1 means that any update moves the Jack's and the King's policy alike: a card-blind step.
The gradients are kept in bfloat16 (12 x 135M numbers); the cosines are computed in float64.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import torch


def gaps_gradients(model_dir: Path, view: str = "card_first") -> tuple[list[str], list[torch.Tensor], list[float]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from arena.games.openspiel.tree import exact_tree
    from arena.games.openspiel.types import OpenSpielConfig
    from arena.policies.choices import action_ids
    from arena.policies.hf import chat_prompt_ids

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    _, queries, _ = exact_tree(OpenSpielConfig(game="kuhn_poker", view=view)).info_states()
    names, grads, gaps = [], [], []
    for q in queries:
        prompt = chat_prompt_ids(tokenizer, q.messages)
        ls = []
        for a in q.actions:  # ('Pass', 'Bet')
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
    p.add_argument("--view", nargs="+", default=["card_first"], choices=["card_first", "card_last", "card_in_question"],
                   help="where the prompt puts the card (game.view); each is measured in turn")
    args = p.parse_args()
    for model_dir, view in itertools.product(args.models, args.view):
        names, grads, gaps = gaps_gradients(model_dir, view)
        history = {}
        for i, n in enumerate(names):  # "player:card+history" -> group by player and history
            player, state = n.split(":")
            history.setdefault((player, state[1:]), []).append(i)
        print(f"\n{model_dir}, view {view}")
        print("| player, betting | cards | gap Bet - Pass (nats) | cos J-Q | cos J-K | cos Q-K |")
        print("|---|---|---|---|---|---|")
        every = []
        for (player, hist), rows in sorted(history.items()):
            pairs = {f"{names[i].split(':')[1][0]}{names[j].split(':')[1][0]}": cosine(grads[i], grads[j])
                     for i, j in itertools.combinations(sorted(rows, key=lambda r: names[r]), 2)}
            every += list(pairs.values())
            print(f"| {player}, '{hist or '-'}' | {len(rows)} | " + ", ".join(f"{gaps[i]:+.2f}" for i in sorted(rows, key=lambda r: names[r]))
                  + " | " + " | ".join(f"{v:.3f}" for v in pairs.values()) + " |")
        print(f"mean cosine between states that differ only in the card: {sum(every) / len(every):.3f} "
              f"({len(every)} pairs); cards: 0 Jack, 1 Queen, 2 King")


if __name__ == "__main__":
    main()
