"""Procedural grade-school math word problems with exact integer answers.

A fixed set like GSM8K runs out and leaks into pretraining data; a generator
gives an unbounded supply of fresh, checkable problems. Each family below draws
its numbers so the problem is well posed by construction (no negative stock, no
fractional shares, change is always owed) and computes the answer from those
numbers directly, never by parsing the text. Every sentence except the question
carries a quantity the solution needs, so masking words removes information.

``check_answer`` grades a model's reply by its last ``\\boxed{...}``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from arena.games.tasks.base import Source, TaskKind

__all__ = ["FAMILIES", "MathWordProblems", "check_answer"]

T = TypeVar("T")

#: (name, subject pronoun, possessive pronoun)
NAMES: tuple[tuple[str, str, str], ...] = tuple(
    [(n, "she", "her") for n in "Maya Lena Sofia Priya Zara Aiko Fatima Ingrid".split()]
    + [(n, "he", "his") for n in "Omar Kwame Hiro Mateo Tomasz Daniel Lucas Ravi".split()]
)
#: (singular, plural, lowest price, highest price) in whole dollars
SHOP_ITEMS: tuple[tuple[str, str, int, int], ...] = (
    ("notebook", "notebooks", 2, 6), ("pen", "pens", 1, 3), ("sandwich", "sandwiches", 4, 9),
    ("bag of apples", "bags of apples", 3, 7), ("paintbrush", "paintbrushes", 2, 8),
    ("bottle of juice", "bottles of juice", 2, 5), ("candle", "candles", 3, 12),
    ("plant pot", "plant pots", 4, 11), ("comic book", "comic books", 3, 10),
)
SALE_ITEMS = (("jacket", "jackets"), ("desk lamp", "desk lamps"), ("backpack", "backpacks"),
              ("pair of boots", "pairs of boots"), ("board game", "board games"))
STORES = ("market", "corner shop", "stationery store", "garden centre", "craft fair")
VEHICLES = ("delivery van", "tour bus", "cargo truck", "minibus", "camper van")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday")
STOCK = (("bookshop", "copies of a new novel"), ("hardware store", "tins of paint"),
         ("toy shop", "puzzles"), ("pharmacy", "bottles of sunscreen"), ("bakery", "jars of jam"))
#: (grams of flour per item, singular, plural)
BAKES = ((100, "bread roll", "bread rolls"), (125, "muffin", "muffins"),
         (200, "pizza base", "pizza bases"), (250, "baguette", "baguettes"),
         (500, "large loaf", "large loaves"))
#: (numerator, denominator, words)
FRACTIONS = ((1, 2, "Half"), (1, 3, "One third"), (1, 4, "One quarter"), (1, 5, "One fifth"),
             (2, 3, "Two thirds"), (3, 4, "Three quarters"), (2, 5, "Two fifths"))
JOBS = ("the library", "a cafe", "the animal shelter", "a bike repair shop", "the cinema")
GOALS = ("bicycle", "guitar", "tent", "telescope", "pair of skates", "drawing tablet")
PERCENTS = (5, 10, 15, 20, 25, 30, 40, 50)


class _Draw:
    """Wraps the RNG and records every draw, so a problem's id hashes its parameters."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self.params: list[int] = []

    def num(self, low: int, high: int) -> int:
        """A uniform integer in [low, high], inclusive."""
        value = int(self._rng.integers(low, high + 1))
        self.params.append(value)
        return value

    def pick(self, options: Sequence[T]) -> T:
        return options[self.num(0, len(options) - 1)]

    def distinct(self, options: Sequence[T], k: int) -> list[T]:
        indices = [int(i) for i in self._rng.choice(len(options), size=k, replace=False)]
        self.params.extend(indices)
        return [options[i] for i in indices]


Problem = tuple[list[str], int]  # sentences, answer


def _shopping(d: _Draw, steps: int) -> Problem:
    (name, subj, _), store = d.pick(NAMES), d.pick(STORES)
    lines: list[str] = []
    total = 0
    for i, (_one, many, low, high) in enumerate(d.distinct(SHOP_ITEMS, max(2, steps))):
        qty, price = d.num(2, 9), d.num(low, high)
        total += qty * price
        lead = f"{subj.capitalize()} {'buys' if i == 0 else 'also buys'}"
        lines.append(f"{lead} {qty} {many} that cost ${price} each.")
    bill = next(b for b in (20, 50, 100, 200, 500) if b > total)
    intro = f"{name} goes to the {store} with a single ${bill} bill."
    return [intro, *lines, f"How many dollars of change does {name} get back?"], bill - total


def _travel(d: _Draw, steps: int) -> Problem:
    (name, _, _), vehicle = d.pick(NAMES), d.pick(VEHICLES)
    lines: list[str] = []
    distance = 0
    for i in range(max(2, steps)):
        speed = 12 * d.num(3, 8)  # a multiple of 12 km/h, so any listed minutes give whole km
        if d.num(0, 1):
            hours = d.num(1, 4)
            span, distance = f"{hours} hour{'s' if hours > 1 else ''}", distance + speed * hours
        else:
            minutes = d.pick((15, 20, 30, 45))
            span, distance = f"{minutes} minutes", distance + speed * minutes // 60
        lead = f"{name} drives a {vehicle}" if i == 0 else "Next, the " + vehicle + " goes"
        lines.append(f"{lead} for {span} at {speed} kilometres per hour.")
    return [*lines, f"How many kilometres does the {vehicle} travel in total?"], distance


def _ages(d: _Draw, steps: int) -> Problem:
    people = d.distinct(NAMES, steps + 1)
    age = d.num(4, 12)
    lines = [f"{people[0][0]} is {age} years old."]
    for prev, (name, _, _) in zip(people, people[1:]):
        kind = d.num(0, 2)
        if kind == 0 and age <= 20:
            factor = d.num(2, 3)
            age *= factor
            times = "twice" if factor == 2 else "three times"
            lines.append(f"{name} is {times} as old as {prev[0]}.")
        elif kind == 1 and age > 3:
            gap = d.num(2, min(9, age - 2))
            age -= gap
            lines.append(f"{name} is {gap} years younger than {prev[0]}.")
        else:
            gap = d.num(2, 9)
            age += gap
            lines.append(f"{name} is {gap} years older than {prev[0]}.")
    later = d.num(2, 10)
    return [*lines, f"In {later} years, how old will {people[-1][0]} be?"], age + later


def _geometry(d: _Draw, steps: int) -> Problem:
    name, subj, _ = d.pick(NAMES)
    width = d.num(4, 20)
    length, cost = width + d.num(2, 20), d.num(3, 15)
    if d.num(0, 1):
        gate = d.num(1, 3)
        lines = [f"{name}'s rectangular garden is {length} metres long and {width} metres wide.",
                 f"{subj.capitalize()} fences all four sides except for a {gate}-metre gateway."]
        metres = 2 * (length + width) - gate
        if steps >= 3:
            lines.append(f"Another fence crosses the middle, parallel to the {width}-metre sides.")
            metres += width
        lines.append(f"Fencing costs ${cost} per metre.")
        return [*lines, "How many dollars does the fencing cost?"], metres * cost
    side = d.num(1, width - 2)
    return [f"{name} is carpeting a rectangular hall {length} metres long and {width} metres wide.",
            f"A {side}-metre by {side}-metre square of floor under a cupboard needs no carpet.",
            f"Carpet costs ${cost} per square metre.",
            "How many dollars does the carpet cost?"], (length * width - side * side) * cost


def _sharing(d: _Draw, steps: int) -> Problem:
    name, subj, poss = d.pick(NAMES)
    trays, per_tray, friends = d.num(2, 6), d.num(6, 16), d.num(3, 9)  # baked >= 12 > friends
    baked = trays * per_tray
    lines = [f"{name} bakes {trays} trays of cookies with {per_tray} cookies on each tray."]
    if d.num(0, 1):
        whole, remainder = divmod(baked, friends)  # whole >= 2 whenever remainder == 0
        low = 1 if remainder == 0 else 0
        kept = remainder + friends * d.num(low, max(low, (whole - 1) // 2))
        lines += [f"{subj.capitalize()} keeps {kept} cookies for {poss} family.",
                  f"{subj.capitalize()} shares the rest equally among {friends} friends."]
        return [*lines, "How many cookies does each friend get?"], (baked - kept) // friends
    eaten = d.num(1, per_tray - 1)
    box = d.num(3, min(12, baked - eaten))
    lines += [f"{subj.capitalize()} eats {eaten} of them while they cool.",
              f"{subj.capitalize()} packs the rest into boxes of exactly {box} cookies each."]
    return [*lines, "How many boxes can be filled completely?"], (baked - eaten) // box


def _discount(d: _Draw, steps: int) -> Problem:
    name, subj, _ = d.pick(NAMES)
    one, many = d.pick(SALE_ITEMS)
    price, percent = 20 * d.num(1, 15), d.pick(PERCENTS)
    qty = d.num(2, 5) if steps >= 3 else 1
    total = qty * (price - price * percent // 100)
    coupon = 5 * d.num(1, min(6, (total - 1) // 5)) if total > 5 else 0
    lines = [f"A {one} usually costs ${price}.", f"This week the shop takes {percent}% off."]
    if qty > 1:
        lines.append(f"{name} buys {qty} {many} at the sale price.")
    if coupon:
        who = subj if qty > 1 else name
        lines.append(f"At the till {who} also uses a coupon worth ${coupon} off the whole order.")
    return [*lines, f"How many dollars does {name} pay?"], total - coupon


def _units(d: _Draw, steps: int) -> Problem:
    grams, one, many = d.pick(BAKES)
    sack, sacks_per_day = d.pick((2, 5, 10)), d.num(1, 3)
    per_day = (1000 // grams) * sack * sacks_per_day  # a whole number of sacks every day
    days = d.num(2, 7)
    return [f"A bakery uses {grams} grams of flour for each {one}.",
            f"It bakes {per_day} {many} every day.",
            f"Flour comes in sacks that hold {sack} kilograms each.",
            f"How many sacks of flour does the bakery use in {days} days?"], sacks_per_day * days


def _wages(d: _Draw, steps: int) -> Problem:
    name, subj, _ = d.pick(NAMES)
    wage, hours, days, weeks = d.num(8, 20), d.num(2, 6), d.num(2, 5), d.num(2, 6)
    weekly = hours * days
    lines = [f"{name} earns ${wage} per hour working at {d.pick(JOBS)}.",
             f"{subj.capitalize()} works {hours} hours a day, {days} days a week."]
    if steps >= 3:
        extra = d.num(1, 5)
        weekly += extra
        lines.append(f"On top of that, {subj} works an extra {extra} hours every Saturday.")
    pay = wage * weekly * weeks
    if steps >= 4:
        fare = d.num(2, 3 * days)
        pay -= fare * weeks
        lines.append(f"{subj.capitalize()} spends ${fare} each week on bus fares to get there.")
        return [*lines, f"How many dollars does {name} have left after {weeks} weeks?"], pay
    return [*lines, f"How many dollars does {name} earn in {weeks} weeks?"], pay


def _inventory(d: _Draw, steps: int) -> Problem:
    shop, goods = d.pick(STOCK)
    stock = d.num(20, 90)
    lines = [f"A {shop} starts the week with {stock} {goods}."]
    for day in DAYS[: max(2, steps)]:
        move = d.num(0, 2)
        if move == 0 and stock > 0:
            sold = d.num(1, min(stock, 40))
            stock -= sold
            lines.append(f"On {day} it sells {sold} of them.")
        elif move == 1 and stock > 0 and stock % 2 == 0:
            stock //= 2
            lines.append(f"On {day} it sells exactly half of the {goods} it has left.")
        else:
            boxes, per_box = d.num(2, 6), d.num(6, 12)
            stock += boxes * per_box
            lines.append(f"On {day} a delivery brings {boxes} boxes of {per_box} {goods} each.")
    return [*lines, f"How many {goods} does the {shop} have at the end of {day}?"], stock


def _fractions(d: _Draw, steps: int) -> Problem:
    num, den, words = d.pick(FRACTIONS)
    students = den * 2 * d.num(3, 12)  # the remainder after the fraction is always even
    rest = students - students * num // den
    lines = [f"There are {students} students in a school year.", f"{words} of them walk to school."]
    if steps >= 3:
        lines.append("Half of the remaining students ride bicycles.")
        rest //= 2
    cars = d.num(2, rest - 1)
    others = "Of the others" if steps >= 3 else "Of the students who do not walk"
    lines.append(f"{others}, {cars} come by car and the rest take the bus.")
    return [*lines, "How many students take the bus?"], rest - cars


def _savings(d: _Draw, steps: int) -> Problem:
    name, subj, _ = d.pick(NAMES)
    goal = d.pick(GOALS)
    price, saved = 10 * d.num(8, 40), 5 * d.num(1, 10)
    earn = d.num(10, 30)
    spend = d.num(1, earn - 5)
    weeks = -(-(price - saved) // (earn - spend))  # ceiling division
    return [f"{name} wants to buy a {goal} that costs ${price}.",
            f"{subj.capitalize()} has already saved ${saved}.",
            f"Each week {subj} earns ${earn} and spends ${spend} of it.",
            f"What is the fewest whole weeks {name} must save to afford the {goal}?"], weeks


#: Problem families by name; each draws with the given ``_Draw`` and a step count.
FAMILIES: dict[str, Callable[[_Draw, int], Problem]] = {
    "shopping": _shopping, "travel": _travel, "ages": _ages, "geometry": _geometry,
    "sharing": _sharing, "discount": _discount, "units": _units, "wages": _wages,
    "inventory": _inventory, "fractions": _fractions, "savings": _savings,
}


class MathWordProblems:
    """A ``TaskSource`` of multi-step word problems with integer answers.

    ``min_steps`` and ``max_steps`` (1 to 4) bound how many quantities a problem
    chains together (items bought, legs driven, stock movements...), which keeps
    every problem between 3 and 6 sentences. Fixed-shape families ignore it.
    """

    kind: TaskKind = "math"

    def __init__(self, min_steps: int = 2, max_steps: int = 4) -> None:
        if not 1 <= min_steps <= max_steps <= 4:
            raise ValueError(f"need 1 <= min_steps <= max_steps <= 4, not {min_steps}, {max_steps}")
        self.min_steps, self.max_steps = min_steps, max_steps

    def sample(self, rng: np.random.Generator) -> Source:
        """Draw one problem; the id is a hash of every parameter drawn from ``rng``."""
        draw = _Draw(rng)
        family = draw.pick(list(FAMILIES))
        sentences, answer = FAMILIES[family](draw, draw.num(self.min_steps, self.max_steps))
        digest = hashlib.sha256(f"{family}:{draw.params}".encode()).hexdigest()[:12]
        return Source(id=f"math-{family}-{digest}", kind="math", text=" ".join(sentences),
                      answer=str(answer), title=f"{family} word problem",
                      origin="procedural:arena.math")


_BOXED = "\\boxed{"
_BRACE_STEP = {"{": 1, "}": -1}
_DECORATION = re.compile(r"\\(?:text|textbf|mathrm|mathbf)(?![a-zA-Z])|\\[$,!;: ]|[{}$\s]")
_INTEGER = re.compile(r"-?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.0*)?")


def _last_boxed(text: str) -> str | None:
    """Contents of the last ``\\boxed{...}`` whose braces close, or None."""
    end_limit, start = len(text), text.rfind(_BOXED)
    while start != -1:
        depth = 1
        for i in range(start + len(_BOXED), end_limit):
            depth += _BRACE_STEP.get(text[i], 0)
            if depth == 0:
                return text[start + len(_BOXED) : i]
        # Unclosed: an earlier \boxed{ can only close before this one starts.
        end_limit, start = start, text.rfind(_BOXED, 0, start)
    return None


def check_answer(source: Source, text: str) -> bool:
    """Whether the last ``\\boxed{...}`` in ``text`` equals ``source.answer`` as an integer.

    Accepts "1,200", "$1200", "\\$1200", "1200.0" and "\\text{1200}". Never raises.
    """
    if not isinstance(text, str) or source.answer is None:
        return False
    expected = source.answer.strip()
    if not re.fullmatch(r"-?[0-9]{1,100}", expected, flags=re.ASCII):
        return False
    boxed = _last_boxed(text)
    if boxed is None:
        return False
    candidate = _DECORATION.sub("", boxed)
    if len(candidate) > 200 or not _INTEGER.fullmatch(candidate):
        return False
    return int(candidate.split(".")[0].replace(",", "")) == int(expected)
