"""Generate the project's demo dataset from public facts (country capitals, arithmetic).

Written for auditlang so the README's first command runs on a machine without ../shared.
Deterministic: `python make_demo.py` rewrites demo_capitals.jsonl and demo_arithmetic.jsonl
byte-for-byte identically.
"""

import json
import random
from pathlib import Path

CAPITALS = [
    ("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Portugal", "Lisbon"),
    ("Japan", "Tokyo"), ("China", "Beijing"), ("India", "New Delhi"), ("Russia", "Moscow"), ("Canada", "Ottawa"),
    ("Australia", "Canberra"), ("Brazil", "Brasília"), ("Argentina", "Buenos Aires"), ("Mexico", "Mexico City"),
    ("Egypt", "Cairo"), ("Kenya", "Nairobi"), ("Nigeria", "Abuja"), ("South Africa", "Pretoria"), ("Greece", "Athens"),
    ("Turkey", "Ankara"), ("Poland", "Warsaw"), ("Austria", "Vienna"), ("Hungary", "Budapest"), ("Sweden", "Stockholm"),
    ("Norway", "Oslo"), ("Finland", "Helsinki"), ("Denmark", "Copenhagen"), ("Ireland", "Dublin"), ("Belgium", "Brussels"),
    ("Netherlands", "Amsterdam"), ("Switzerland", "Bern"), ("Czechia", "Prague"), ("Romania", "Bucharest"),
    ("Bulgaria", "Sofia"), ("Serbia", "Belgrade"), ("Croatia", "Zagreb"), ("Ukraine", "Kyiv"), ("Iran", "Tehran"),
    ("Iraq", "Baghdad"), ("Saudi Arabia", "Riyadh"), ("Israel", "Jerusalem"), ("Pakistan", "Islamabad"),
    ("Bangladesh", "Dhaka"), ("Thailand", "Bangkok"), ("Vietnam", "Hanoi"), ("Indonesia", "Jakarta"),
    ("Philippines", "Manila"), ("South Korea", "Seoul"), ("Peru", "Lima"), ("Chile", "Santiago"), ("Colombia", "Bogotá"),
    ("Venezuela", "Caracas"), ("Cuba", "Havana"), ("Morocco", "Rabat"), ("Ethiopia", "Addis Ababa"), ("Ghana", "Accra"),
    ("New Zealand", "Wellington"), ("Iceland", "Reykjavík"), ("Afghanistan", "Kabul"), ("Nepal", "Kathmandu"),
]


def capitals(rng: random.Random) -> list[dict]:
    rows = []
    caps = [c for _, c in CAPITALS]
    for i, (country, cap) in enumerate(CAPITALS):
        wrong = rng.sample([c for c in caps if c != cap], 3)
        choices = wrong + [cap]
        rng.shuffle(choices)
        rows.append({"id": f"capitals_{i}", "question": f"What is the capital of {country}?", "choices": choices,
                     "answer": cap, "answer_index": choices.index(cap), "aliases": [cap], "subject": "geography"})
    return rows


def arithmetic(rng: random.Random, n: int = 140) -> list[dict]:
    rows = []
    for i in range(n):
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        op = rng.choice(["+", "-", "*"])
        val = a + b if op == "+" else a - b if op == "-" else a * b
        wrong = set()
        while len(wrong) < 3:
            d = rng.choice([-10, -2, -1, 1, 2, 10, 5, -5])
            if val + d != val:
                wrong.add(val + d)
        choices = [str(x) for x in sorted(wrong | {val})]
        rows.append({"id": f"arith_{i}", "question": f"What is {a} {op} {b}?", "choices": choices, "answer": str(val),
                     "answer_index": choices.index(str(val)), "aliases": [str(val)], "subject": "arithmetic"})
    return rows


def main() -> None:
    here = Path(__file__).parent
    for name, rows in (("demo_capitals.jsonl", capitals(random.Random(42))), ("demo_arithmetic.jsonl", arithmetic(random.Random(7)))):
        with (here / name).open("w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
