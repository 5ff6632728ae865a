"""Generates passwords of every kind zxcvbn detects and scores them with the reference
`zxcvbn` package (PyPI). Prints JSON: [{"password", "user_inputs", "score", "guesses_log10"}].
Deterministic (seeded), so a disagreement can be reproduced."""
import json
import random
import sys

from zxcvbn import zxcvbn
from zxcvbn.frequency_lists import FREQUENCY_LISTS
from zxcvbn.adjacency_graphs import ADJACENCY_GRAPHS

count = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
rng = random.Random(20261121)
words = {name: lst for name, lst in FREQUENCY_LISTS.items()}
L33T = {'a': '4@', 'e': '3', 'i': '1!|', 'o': '0', 's': '$5', 't': '+7', 'l': '1|7', 'g': '69', 'b': '8', 'z': '2', 'x': '%', 'c': '({[<'}


def word():
    name = rng.choice(list(words))
    lst = words[name]
    # favour common words, but reach deep into the lists too
    return lst[min(int(rng.expovariate(1 / 2000)), len(lst) - 1)]


def capitalise(w):
    k = rng.randrange(5)
    if k == 0:
        return w.capitalize()
    if k == 1:
        return w.upper()
    if k == 2:
        return w[:-1] + w[-1:].upper()
    if k == 3:
        return ''.join(c.upper() if rng.random() < 0.3 else c for c in w)
    return w


def leet(w):
    return ''.join(rng.choice(L33T[c]) if c in L33T and rng.random() < 0.6 else c for c in w)


def spatial():
    graph = ADJACENCY_GRAPHS[rng.choice(['qwerty', 'dvorak', 'keypad', 'mac_keypad'])]
    key = rng.choice(list(graph))
    out = key
    for _ in range(rng.randrange(2, 10)):
        neighbours = [n for n in graph.get(out[-1], []) if n]
        if not neighbours:
            break
        n = rng.choice(neighbours)
        out += n[1] if (len(n) > 1 and rng.random() < 0.2) else n[0]
    return out


def sequence():
    start = rng.choice('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')
    step = rng.choice([1, 1, 1, -1, 2, -2, 3, 5])
    n = rng.randrange(3, 9)
    return ''.join(chr(max(33, min(126, ord(start) + step * k))) for k in range(n))


def repeat():
    base = rng.choice([rng.choice('ab1!xZ'), word()[:3], sequence()[:3], str(rng.randrange(100))])
    return base * rng.randrange(2, 5)


def year():
    return str(rng.randrange(1900, 2030))


def date():
    d, m, y = rng.randrange(1, 32), rng.randrange(1, 13), rng.randrange(1930, 2030)
    sep = rng.choice(['', '', '/', '-', '.', '_', ' '])
    yy = str(y) if rng.random() < 0.5 else str(y)[2:]
    parts = [str(d).zfill(rng.choice([1, 2])), str(m).zfill(rng.choice([1, 2])), yy]
    if rng.random() < 0.3:
        parts = [yy, parts[1], parts[0]]
    return sep.join(parts)


def bruteforce():
    alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!@#$%^&*()-_=+[]{};:,.<>/?'
    return ''.join(rng.choice(alphabet) for _ in range(rng.randrange(4, 20)))


def reversed_word():
    return word()[::-1]


def accented():
    return capitalise(word()) + rng.choice(['é', 'ü', 'ñ', 'ø', 'ç']) + str(rng.randrange(100))


kinds = [
    lambda: capitalise(word()),
    lambda: leet(word()),
    reversed_word,
    spatial,
    sequence,
    repeat,
    year,
    date,
    bruteforce,
    accented,
    lambda: capitalise(word()) + rng.choice([year(), date(), str(rng.randrange(1000)), '!', spatial()]),
    lambda: leet(capitalise(word())) + rng.choice(['', '!', '123', sequence()]),
    lambda: word() + word() + rng.choice(['', str(rng.randrange(100)), '!']),
    lambda: ''.join(rng.choice([word, spatial, sequence, repeat, year, date, bruteforce])() for _ in range(rng.randrange(2, 4))),
]

out = []
for k in range(count):
    password = kinds[k % len(kinds)]()[:72]
    if not password:
        password = 'x'
    user_inputs = [] if k % 7 else [word(), 'player@example.com', 'quiz']
    if k % 23 == 0 and user_inputs:
        password = capitalise(user_inputs[0]) + str(rng.randrange(100))
    r = zxcvbn(password, user_inputs=user_inputs)
    out.append({'password': password, 'user_inputs': user_inputs, 'score': r['score'],
                'guesses_log10': float(r['guesses_log10'])})
json.dump(out, sys.stdout, ensure_ascii=False)
