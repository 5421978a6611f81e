#!/usr/bin/env python3
"""Builds src/retrieval/wordnet/wordnet-3.0-synsets.txt.gz from Princeton WordNet 3.0's database
files (Debian package `wordnet-base`, /usr/share/wordnet). Run when the source changes:

    apt-get install wordnet-base && python3 scripts/wordnet/build.py

Output, one synset a line (nouns, then verbs, then adjectives, in the database's order):

    POS<TAB>lemma:rank|lemma:rank|...<TAB>hyponym line numbers (space separated, 0-based)

POS is n, v or a; `rank` is the synset's sense number (1 = the lemma's most frequent sense) in
the lemma's index entry for that part of speech. Lemmas are lower case with spaces for `_`; only
lemmas of ASCII letters, spaces, hyphens and apostrophes, of at most three words, are kept, and
a synset with none left is dropped (with its pointers). Hyponyms are `~` and `~i` pointers
(verbs: troponyms).
"""
import gzip, os, re, sys

SRC = "/usr/share/wordnet/"
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "src", "retrieval", "wordnet",
                   "wordnet-3.0-synsets.txt.gz")
POS = [("n", "noun"), ("v", "verb"), ("a", "adj")]
OK = re.compile(r"^[a-z][a-z' -]*$")

def clean(w):
    w = re.sub(r"\(.*\)$", "", w).replace("_", " ").lower()
    return w if OK.match(w) and len(w.split()) <= 3 else None

rank = {}  # (pos, offset, lemma) -> sense number
for pos, f in POS:
    for line in open(SRC + "index." + f, encoding="latin-1"):
        if line.startswith("  "):
            continue
        p = line.split()
        lemma = p[0].replace("_", " ")
        pcnt = int(p[3])
        offs = p[4 + pcnt + 2:]
        for n, o in enumerate(offs, 1):
            rank[(pos, o, lemma)] = n

synsets = []  # (pos, offset, [(lemma, rank)], [(pos, offset)])
for pos, f in POS:
    for line in open(SRC + "data." + f, encoding="latin-1"):
        if line.startswith("  "):
            continue
        p = line.split(" | ")[0].split()
        off, n = p[0], int(p[3], 16)
        words = []
        for i in range(n):
            w = clean(p[4 + 2 * i])
            if w and w not in [x for x, _ in words]:
                words.append((w, rank.get((pos, off, w), 99)))
        i = 4 + 2 * n
        pc = int(p[i]); i += 1
        hypo = []
        for _ in range(pc):
            sym, o, ps = p[i], p[i + 1], p[i + 2]
            i += 4
            if sym in ("~", "~i"):
                hypo.append(("a" if ps == "s" else ps, o))
        synsets.append((pos, off, words, hypo))

keep = [s for s in synsets if s[2]]
line_of = {(s[0], s[1]): n for n, s in enumerate(keep)}
os.makedirs(os.path.dirname(OUT), exist_ok=True)
with gzip.open(OUT, "wt", encoding="utf-8", compresslevel=9) as out:
    for pos, off, words, hypo in keep:
        hs = " ".join(str(line_of[h]) for h in hypo if h in line_of)
        out.write(f"{pos}\t{'|'.join(f'{w}:{r}' for w, r in words)}\t{hs}\n")
print(f"{len(keep)} synsets -> {OUT}", file=sys.stderr)
