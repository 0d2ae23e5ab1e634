"""malloc_py.py: an allocation-heavy Python program for the `python3`
malloc-mode case (run with PYTHONMALLOC=malloc, so that every Python
object comes from the preloaded malloc rather than Python's own pools).

    python3 malloc_py.py [ROUNDS]

Builds and discards dicts, lists, tuples, strings and sets, sorts, joins
and parses JSON, and prints a digest of what it computed: the same output
under every allocator.
"""
import hashlib
import json
import sys


def round_(r):
    words = [f"w{(i * 7919 + r) % 5003}" for i in range(6000)]
    index = {}
    for pos, w in enumerate(words):
        index.setdefault(w, []).append(pos)
    pairs = sorted(((len(v), k) for k, v in index.items()), reverse=True)
    text = " ".join(w.upper() for w in words[:3000])
    table = [{"k": k, "n": n, "sq": [n * i for i in range(n % 7)]}
             for n, k in pairs[:800]]
    blob = json.dumps(table)
    back = json.loads(blob)
    s = set(text.split()) ^ set(words[::3])
    return (len(blob), sum(d["n"] for d in back), len(s), pairs[0])


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    h = hashlib.sha256()
    for r in range(rounds):
        h.update(repr(round_(r)).encode())
    print(rounds, h.hexdigest())


main()
