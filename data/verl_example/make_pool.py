"""Generate the example task pool (pool.jsonl): deterministic, small, fully crossed.

20 environments in 5 worlds (4 per world) and 150 tasks, every task runnable in every
environment: 3,000 task-environment cells in verl's vocabulary (prompt as a chat list,
``data_source`` containing a '/', ``reward_model`` = rule + ground truth, ``extra_info``).

* **Environments**: each carries its own structural signature (tools, state schema,
  transition, verifier). The four structures of a world (a direct evaluator, an audited one,
  a stack machine, a Python sandbox) have different tools, state, transitions and verifiers,
  and a world's tools carry its name, so ``bayesscale count`` finds 20 distinct environments
  among the 20 ids, in 5 worlds.
* **Tasks**: 150 different questions (15 topics of 10: word problems, number theory,
  geometry, counting, Python, strings, units, sequences, algebra, algorithms, puzzles,
  statistics, physics, programming, everyday quantities), each with its answer computed
  here. No two are templates of each other, so they stay 150 distinct tasks under the
  paper's rule (all-MiniLM-L6-v2, cosine distance <= 0.15, merged transitively):
  ``bayesscale count data/verl_example/pool.jsonl --model all-MiniLM-L6-v2``.
  Two data sources: ``synthetic/math`` and ``synthetic/code`` (the Python, algorithm and
  programming topics).

Run: ``.venv/bin/python data/verl_example/make_pool.py`` (rewrites pool.jsonl next to it).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

from bayesscale.atomic import write_atomically

WORLDS = ("calc", "ledger", "shop", "sheet", "units")
MATH, CODE = "synthetic/math", "synthetic/code"


def _answer(value: object) -> str:
    """The ground truth as verl's rule reward compares it: ``12``, ``36.8``, ``2/15``, ``yes``."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        value = round(value, 6)
        return str(int(value)) if value == int(value) else repr(value)
    return str(value)


def environments() -> list[dict]:
    """Four structures per world; every environment's signature is its own."""
    envs = []
    for world in WORLDS:
        structures = {
            "direct": {
                "tools": [{"name": f"{world}.eval", "args": {"expr": "str"}, "returns": "number"}],
                "state_schema": {"memory": "list[number]"},
                "transition": f"{world}: evaluate the expression, answer in one turn",
                "verifier": {"kind": "exact_match", "normalise": "strip"},
            },
            "audited": {
                "tools": [
                    {"name": f"{world}.eval", "args": {"expr": "str"}, "returns": "number"},
                    {"name": f"{world}.log", "args": {"note": "str"}, "returns": "none"},
                ],
                "state_schema": {"memory": "list[number]", "audit_log": "list[str]"},
                "transition": f"{world}: every evaluation appends to the audit log",
                "verifier": {"kind": "exact_match_with_audit", "min_log_entries": 1},
            },
            "stack": {
                "tools": [
                    {"name": f"{world}.push", "args": {"value": "number"}, "returns": "int"},
                    {"name": f"{world}.apply", "args": {"op": "str"}, "returns": "number"},
                    {"name": f"{world}.pop", "args": {}, "returns": "number"},
                ],
                "state_schema": {"stack": "list[number]", "steps": "int"},
                "transition": f"{world}: a stack machine, at most 32 steps",
                "verifier": {"kind": "numeric_tolerance", "relative": 1e-6},
            },
            "sandbox": {
                "tools": [
                    {"name": f"{world}.python", "args": {"code": "str"}, "returns": "stdout"},
                    {"name": f"{world}.submit", "args": {"answer": "str"}, "returns": "none"},
                ],
                "state_schema": {"files": "dict[str, str]", "time_limit_s": "int"},
                "transition": f"{world}: run code in a sandbox, then submit once",
                "verifier": {"kind": "normalised_string", "case": "fold"},
            },
        }
        for structure, signature in structures.items():
            envs.append({"env_id": f"{world}-{structure}", "world_id": world, **signature})
    return envs


def _collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def _edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def _bubble_swaps(values: list[int]) -> int:
    values, swaps = list(values), 0
    for end in range(len(values) - 1, 0, -1):
        for i in range(end):
            if values[i] > values[i + 1]:
                values[i], values[i + 1] = values[i + 1], values[i]
                swaps += 1
    return swaps


def _primes_up_to(n: int) -> list[int]:
    return [p for p in range(2, n + 1) if all(p % d for d in range(2, math.isqrt(p) + 1))]


def _divisors(n: int) -> int:
    return sum(1 for d in range(1, n + 1) if n % d == 0)


def _fib(n: int) -> int:
    a, b = 1, 1
    for _ in range(n - 1):
        a, b = b, a + b
    return a


def _is_palindrome(word: str) -> bool:
    return word == word[::-1]


FOX = "the quick brown fox jumps over the lazy dog"
HAMLET = "to be or not to be that is the question"
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# (topic, data source, [(question, answer), ...]): ten different questions per topic
TOPICS: list[tuple[str, str, list[tuple[str, object]]]] = [
    ("money", MATH, [
        ("A bakery sells muffins at 3 dollars each. A customer buys 14 of them and pays with a "
         "50 dollar bill. How much change is returned?", 50 - 3 * 14),
        ("Museum tickets cost 12 euros for adults and 7 euros for children. What does a family "
         "of two adults and three children pay?", 2 * 12 + 3 * 7),
        ("A jacket priced at 80 pounds is discounted by 25 percent. What is the sale price?",
         80 * 0.75),
        ("Maria saves 15 dollars every week. After how many weeks do her savings first exceed "
         "200 dollars?", 200 // 15 + 1),
        ("A phone plan charges 20 dollars a month plus 5 cents per text message. What is the "
         "bill for a month with 340 messages?", 20 + 0.05 * 340),
        ("Three friends split a restaurant bill of 96 dollars and add a 15 percent tip. How "
         "much does each friend pay?", 96 * 1.15 / 3),
        ("A farmer packs eggs in cartons of 12. How many full cartons can be filled from 250 "
         "eggs?", 250 // 12),
        ("An investment of 1000 dollars earns 10 percent interest compounded yearly. What is it "
         "worth after 3 years?", 1000 * 1.1**3),
        ("A taxi charges 4 dollars to start plus 2.50 dollars per kilometre. How many "
         "kilometres can you ride for 29 dollars?", (29 - 4) / 2.5),
        ("A shop buys notebooks for 2 dollars and sells them for 3.50 dollars. How many must it "
         "sell to make a profit of 90 dollars?", 90 / 1.5),
    ]),
    ("number theory", MATH, [
        ("What is the greatest common divisor of 84 and 126?", math.gcd(84, 126)),
        ("Find the least common multiple of 18 and 30.", math.lcm(18, 30)),
        ("How many prime numbers lie between 1 and 50?", len(_primes_up_to(50))),
        ("What remainder is left when 2 to the power 10 is divided by 7?", 2**10 % 7),
        ("How many positive divisors does 360 have?", _divisors(360)),
        ("What is the sum of the digits of 9 factorial?",
         sum(map(int, str(math.factorial(9))))),
        ("Which is the smallest prime number greater than 100?",
         min(p for p in _primes_up_to(200) if p > 100)),
        ("How many trailing zeros does 25 factorial end with?",
         len(str(math.factorial(25))) - len(str(math.factorial(25)).rstrip("0"))),
        ("221 is not prime. What is its smallest prime factor?",
         min(p for p in _primes_up_to(221) if 221 % p == 0)),
        ("What is the last digit of 7 raised to the 2023rd power?", pow(7, 2023, 10)),
    ]),
    ("geometry", MATH, [
        ("A rectangular room is 7 metres long and 9 metres wide. What is its floor area in "
         "square metres?", 7 * 9),
        ("A square garden has a perimeter of 48 metres. How long is one side?", 48 // 4),
        ("The legs of a right triangle measure 9 and 12. How long is the hypotenuse?",
         math.hypot(9, 12)),
        ("What is the sum of the interior angles of a hexagon, in degrees?", (6 - 2) * 180),
        ("A cube has edges of 4 centimetres. What is its volume in cubic centimetres?", 4**3),
        ("A circle has radius 10. What is its area, rounded to the nearest whole number?",
         round(math.pi * 10**2)),
        ("How many diagonals does a convex octagon have?", 8 * (8 - 3) // 2),
        ("A triangle has a base of 14 and a height of 5. What is its area?", 14 * 5 / 2),
        ("What is the distance between the points (1, 2) and (7, 10) in the plane?",
         math.dist((1, 2), (7, 10))),
        ("A cylindrical tank has radius 3 metres and height 5 metres. What is its volume in "
         "cubic metres, to one decimal place?", round(math.pi * 3**2 * 5, 1)),
    ]),
    ("counting", MATH, [
        ("In how many different orders can 5 books be arranged on a shelf?", math.factorial(5)),
        ("How many ways are there to choose a committee of 3 people from a group of 10?",
         math.comb(10, 3)),
        ("Two fair dice are rolled. What is the probability that their sum is 7, as a "
         "fraction?", Fraction(6, 36)),
        ("A coin is flipped 4 times. How many of the possible sequences contain exactly two "
         "heads?", math.comb(4, 2)),
        ("How many distinct arrangements of the letters of the word LEVEL are there?",
         math.factorial(5) // (math.factorial(2) * math.factorial(2))),
        ("A password is 3 digits followed by 2 uppercase letters. How many such passwords "
         "exist?", 10**3 * 26**2),
        ("From a standard 52-card deck, how many different five-card hands can be dealt?",
         math.comb(52, 5)),
        ("A bag holds 4 red and 6 blue marbles. Two are drawn without replacement. What is the "
         "probability that both are red, as a fraction?", Fraction(4, 10) * Fraction(3, 9)),
        ("At a party 12 people each shake hands with every other person once. How many "
         "handshakes are there?", math.comb(12, 2)),
        ("Moving only right or up on a grid, how many paths lead from a corner to the point 4 "
         "steps right and 3 steps up?", math.comb(7, 3)),
    ]),
    ("python", CODE, [
        ("What does the Python expression sorted('banana')[2] evaluate to?", sorted("banana")[2]),
        ("What is printed by print(len(set('mississippi')))?", len(set("mississippi"))),
        ("In Python, what is the value of sum(x * x for x in range(5))?",
         sum(x * x for x in range(5))),
        ("Which number is the last element of [i for i in range(20) if i % 3 == 0]?",
         [i for i in range(20) if i % 3 == 0][-1]),
        ("After d = {'a': 1, 'b': 2} and d.update(c=3), how many keys does the dictionary d "
         "have?", len({"a": 1, "b": 2} | {"c": 3})),
        ("How many lowercase o characters are in the result of 'hello world'.title()?",
         "hello world".title().count("o")),
        ("Compute int('101', 2) + int('ff', 16) as Python would.", int("101", 2) + int("ff", 16)),
        ("Give the string produced by the slice 'abcdefgh'[1:7:2].", "abcdefgh"[1:7:2]),
        ("How many pairs does zip([1, 2, 3], 'xy') yield?",
         len(list(zip([1, 2, 3], "xy", strict=False)))),
        ("A list a = [3, 1, 2] is sorted with reverse=True and then 0 is appended. What is "
         "a[1]?", [*sorted([3, 1, 2], reverse=True), 0][1]),
    ]),
    ("strings", MATH, [
        ("How many vowels are in the word encyclopedia?",
         sum(c in "aeiou" for c in "encyclopedia")),
        ("Spell the word stressed backwards. Which word do you get?", "stressed"[::-1]),
        (f"In the sentence '{FOX}', how many letters does the longest word have?",
         max(map(len, FOX.split()))),
        ("Is racecar a palindrome? Answer yes or no.", _is_palindrome("racecar")),
        (f"Count the words in '{HAMLET}'.", len(HAMLET.split())),
        ("Encrypt cat with a Caesar cipher that shifts each letter by 3.",
         "".join(chr((ord(c) - 97 + 3) % 26 + 97) for c in "cat")),
        ("How many times does the letter s occur in 'she sells sea shells'?",
         "she sells sea shells".count("s")),
        ("What is the ASCII code of the uppercase letter K?", ord("K")),
        ("Which letter of the English alphabet comes 10 places after F?",
         chr(ord("F") + 10)),
        ("Sort the letters of python alphabetically. What string results?",
         "".join(sorted("python"))),
    ]),
    ("units and time", MATH, [
        ("How many seconds are in 3 hours and 20 minutes?", 3 * 3600 + 20 * 60),
        ("A train leaves at 9:45 and arrives at 13:10. How many minutes does the journey "
         "take?", (13 * 60 + 10) - (9 * 60 + 45)),
        ("Convert 5 miles to feet.", 5 * 5280),
        ("In a leap year, how many days do February and March have together?", 29 + 31),
        ("Today is a Wednesday. Which day of the week is it 100 days from now?",
         WEEKDAYS[(WEEKDAYS.index("Wednesday") + 100) % 7]),
        ("Water boils at 100 degrees Celsius. What is that in degrees Fahrenheit?",
         100 * 9 / 5 + 32),
        ("How many millilitres are there in 3.5 litres?", 3.5 * 1000),
        ("A runner covers 10 kilometres in 50 minutes. What is her average speed in kilometres "
         "per hour?", 10 / (50 / 60)),
        ("How many hours make up two weeks?", 2 * 7 * 24),
        ("A bread recipe calls for 750 grams of flour. How many kilograms is that?", 750 / 1000),
    ]),
    ("sequences", MATH, [
        ("With F1 = F2 = 1, what is the 12th Fibonacci number?", _fib(12)),
        ("Find the sum of the first 100 positive integers.", sum(range(1, 101))),
        ("What number comes next in 2, 6, 12, 20, 30?", 6 * 7),
        ("An arithmetic progression starts at 7 and goes up by 4 each time. What is its 25th "
         "term?", 7 + 24 * 4),
        ("Add up the geometric series 1 + 2 + 4 + ... + 512.", sum(2**k for k in range(10))),
        ("Which number is the tenth triangular number?", 10 * 11 // 2),
        ("What is the sum of the squares of the integers from 1 to 10?",
         sum(k * k for k in range(1, 11))),
        ("The pattern 1, 4, 9, 16, 25 continues. What is its eighth term?", 8**2),
        ("How many terms of 3, 7, 11, 15, ... are smaller than 100?",
         sum(1 for t in range(3, 100, 4))),
        ("Starting the Collatz process at 6, how many steps does it take to reach 1?",
         _collatz_steps(6)),
    ]),
    ("algebra", MATH, [
        ("Solve for x: 3x + 7 = 31.", (31 - 7) // 3),
        ("If 2y - 5 = y + 9, what is y?", 9 + 5),
        ("What is the larger root of x^2 - 5x + 6 = 0?", 3),
        ("Two numbers add up to 50 and differ by 14. What is the larger one?", (50 + 14) // 2),
        ("If f(x) = 2x^2 + 3, what is f(4)?", 2 * 4**2 + 3),
        ("Multiply out (x + 3)(x - 3). What is the constant term?", 3 * -3),
        ("A number is tripled and then reduced by 8, giving 43. What was the number?",
         (43 + 8) // 3),
        ("What is the slope of the line through (2, 3) and (6, 11)?", (11 - 3) / (6 - 2)),
        ("In the expansion of (a + b)^3, what is the coefficient of a^2 b?", math.comb(3, 1)),
        ("For which k does the line y = kx + 1 pass through the point (3, 10)?", (10 - 1) // 3),
    ]),
    ("algorithms", CODE, [
        ("At most how many comparisons does binary search need to find an item in a sorted "
         "list of 1000 elements?", math.ceil(math.log2(1000 + 1))),
        ("A binary tree of height 4, with the root at height 0, holds at most how many nodes?",
         2 ** (4 + 1) - 1),
        ("Push 1, 2 and 3 onto an empty stack, then pop twice. Which value is on top?", 1),
        ("Enqueue A, B, C and D into a queue, then dequeue two items. Which item is at the "
         "front?", "C"),
        ("How many edges does a complete graph on 6 vertices have?", math.comb(6, 2)),
        ("What is the minimum number of moves that solves the Tower of Hanoi with 5 disks?",
         2**5 - 1),
        ("Bubble sort is run on [4, 3, 2, 1]. How many swaps does it make in total?",
         _bubble_swaps([4, 3, 2, 1])),
        ("A hash table with 8 buckets uses h(k) = k mod 8. Which bucket does key 45 land in?",
         45 % 8),
        ("What is the edit distance between kitten and sitting?",
         _edit_distance("kitten", "sitting")),
        ("In a heap stored as an array from index 0, what is the index of the left child of "
         "the node at index 5?", 2 * 5 + 1),
    ]),
    ("puzzles", MATH, [
        ("All bloops are razzies and all razzies are lazzies. Are all bloops lazzies? Answer "
         "yes or no.", True),
        ("A farmyard has chickens and cows with 30 heads and 74 legs in total. How many cows "
         "are there?", (74 - 2 * 30) // 2),
        ("Alice is older than Bob, and Bob is older than Carol. Who is the youngest?", "Carol"),
        ("A clock shows 3:00. What is the smaller angle between its hands in degrees?", 3 * 30),
        ("Writing down every integer from 1 to 100, how many times do you write the digit 9?",
         "".join(map(str, range(1, 101))).count("9")),
        ("A snail climbs 3 metres each day and slides back 2 metres each night. On which day "
         "does it get out of a 10 metre well?", (10 - 3) // (3 - 2) + 1),
        ("How many squares of any size are on an 8 by 8 chessboard?",
         sum(k * k for k in range(1, 9))),
        ("In a race you overtake the runner in second place. What place are you in now?", 2),
        ("A patch of lily pads doubles every day and covers the lake on day 48. On which day "
         "did it cover half the lake?", 48 - 1),
        ("If 5 machines make 5 widgets in 5 minutes, how many minutes do 100 machines need for "
         "100 widgets?", 5),
    ]),
    ("statistics", MATH, [
        ("What is the mean of 4, 8, 15, 16, 23 and 42?", sum((4, 8, 15, 16, 23, 42)) / 6),
        ("Find the median of the list 7, 1, 9, 3, 5, 11.", (5 + 7) / 2),
        ("Which value is the mode of 2, 3, 3, 5, 7, 7, 7, 9?", 7),
        ("What is the range of the data set 12, 45, 7, 33, 28?", 45 - 7),
        ("A class of 20 students averages 70 on a test and 5 new students average 90. What is "
         "the average of all 25?", (20 * 70 + 5 * 90) / 25),
        ("What is the population variance of 2, 4, 4, 4, 5, 5, 7, 9?",
         sum((v - 5) ** 2 for v in (2, 4, 4, 4, 5, 5, 7, 9)) / 8),
        ("A survey of 400 people finds that 30 percent prefer tea. How many people is that?",
         400 * 30 // 100),
        ("What is the weighted average of 80 with weight 3 and 60 with weight 1?",
         (80 * 3 + 60) / 4),
        ("A fair die is rolled 600 times. How many sixes do you expect?", 600 // 6),
        ("What is the standard deviation of the numbers 10, 10, 10, 10?", 0),
    ]),
    ("physics", MATH, [
        ("An object falls from rest for 3 seconds with g = 10 m/s^2. How many metres does it "
         "fall?", 10 * 3**2 / 2),
        ("What force in newtons accelerates a 12 kilogram cart at 3 m/s^2?", 12 * 3),
        ("A 60 watt bulb is left on for 5 hours. How many watt-hours of energy does it use?",
         60 * 5),
        ("A 9 volt battery drives current through a 3 ohm resistor. What is the current in "
         "amperes?", 9 / 3),
        ("A car travels at 72 kilometres per hour. What is its speed in metres per second?",
         72 * 1000 / 3600),
        ("Sunlight crosses 150 million kilometres at 300,000 km/s. How many whole minutes does "
         "the trip take, rounded?", round(150e6 / 3e5 / 60)),
        ("What is the kinetic energy in joules of a 2 kilogram ball moving at 5 m/s?",
         2 * 5**2 / 2),
        ("A spring with constant 200 N/m is stretched by 0.1 metres. What force does it exert "
         "in newtons?", 200 * 0.1),
        ("How many moles are in 36 grams of water, at 18 grams per mole?", 36 / 18),
        ("A wave has a frequency of 50 hertz and a wavelength of 4 metres. How fast does it "
         "travel in m/s?", 50 * 4),
    ]),
    ("programming", CODE, [
        ("How many times does the body of the loop for i in range(2, 20, 3) run?",
         len(range(2, 20, 3))),
        ("What does def f(n): return 1 if n <= 1 else n * f(n - 1) return for n = 5?",
         math.factorial(5)),
        ("Three nested loops each run n times. The running time is O(n^k): what is k?", 3),
        ("A JSON array holds 7 objects with 4 keys each. How many key-value pairs are there?",
         7 * 4),
        ("What does the bitwise AND 12 & 10 evaluate to?", 12 & 10),
        ("Write 0b1011 XOR 0b0110 in decimal.", 0b1011 ^ 0b0110),
        ("How many bytes are in 3 kibibytes?", 3 * 1024),
        ("A SQL table t has a column x holding 1, 2, 3, 4 and 5. What does SELECT COUNT(*) "
         "FROM t WHERE x > 2 return?", sum(1 for x in (1, 2, 3, 4, 5) if x > 2)),
        ("A Git repository has 20 shared commits plus 12, 7 and 5 commits on three separate "
         "branches. How many commits does it hold?", 20 + 12 + 7 + 5),
        ("What does the shell expression $(( (17 / 5) * 5 + 17 % 5 )) print?",
         (17 // 5) * 5 + 17 % 5),
    ]),
    ("everyday quantities", MATH, [
        ("A recipe for 4 servings uses 300 grams of rice. How much rice do 10 servings need, "
         "in grams?", 300 * 10 // 4),
        ("A car uses 6 litres of fuel per 100 kilometres. How many litres does a 450 kilometre "
         "trip need?", 6 * 450 / 100),
        ("A painter covers 15 square metres an hour. How many hours does a 120 square metre "
         "wall take?", 120 // 15),
        ("A library has 5 shelves of 42 books and lends out 37. How many books are left on the "
         "shelves?", 5 * 42 - 37),
        ("A garden hose fills a 600 litre pool at 25 litres a minute. How many minutes does it "
         "take?", 600 // 25),
        ("24 students sit at tables of 5. How many tables are needed so everyone has a seat?",
         math.ceil(24 / 5)),
        ("A marathon is 42.195 kilometres. How many metres long is a half marathon?",
         42195 / 2),
        ("A printer prints 18 pages a minute. How many pages does it print in a quarter of an "
         "hour?", 18 * 15),
        ("A bus seats 52 passengers. How many buses carry 300 people?", math.ceil(300 / 52)),
        ("A seedling is 10 centimetres tall and grows 2.5 centimetres a week. How tall is it "
         "after 6 weeks?", 10 + 2.5 * 6),
    ]),
]  # fmt: skip


def tasks() -> list[dict]:
    out = []
    for topic, source, questions in TOPICS:
        slug = topic.replace(" ", "-")
        for k, (question, answer) in enumerate(questions):
            out.append(
                {
                    "task_id": f"{slug}-{k:02d}",
                    "question": question,
                    "answer": _answer(answer),
                    "data_source": source,
                    "topic": topic,
                }
            )
    return out


def main() -> None:
    envs = environments()

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as fh:
            for task in tasks():
                for env in envs:
                    system = f"You act in environment {env['env_id']}. Tools: " + ", ".join(
                        t["name"] for t in env["tools"]
                    )
                    row = {
                        "task_id": task["task_id"],
                        "env_id": env["env_id"],
                        "world_id": env["world_id"],
                        "prompt": [
                            {"role": "system", "content": system},
                            {"role": "user", "content": task["question"]},
                        ],
                        "data_source": task["data_source"],
                        "reward_model": {"style": "rule", "ground_truth": task["answer"]},
                        "extra_info": {"question": task["question"], "topic": task["topic"]},
                        "tools": env["tools"],
                        "state_schema": env["state_schema"],
                        "transition": env["transition"],
                        "verifier": env["verifier"],
                    }
                    fh.write(json.dumps(row, sort_keys=True) + "\n")

    # the bundled pool is this script's output: rewritten whole, never half
    write_atomically(Path(__file__).with_name("pool.jsonl"), write, overwrite=True)


if __name__ == "__main__":
    main()
