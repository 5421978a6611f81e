#!/usr/bin/env python3
"""Measures LLM question rewriting for retrieval (issue 17: "the model may rewrite the visitor's
question for the search — measured, not assumed"). Standard library only.

    python3 scripts/eval/rewrite.py --llm http://127.0.0.1:PORT/v1 [--model NAME] \
        [--bin target/release/museum-agent] [--rewrites OUT.jsonl] [--reuse]

1. Asks an OpenAI-compatible chat server to turn each dev question (the `eval` defaults,
   fixtures/collection/dev_queries*.jsonl) into a catalogue search query (temperature 0,
   40 tokens), written to --rewrites with the original question beside it (--reuse reads that
   file instead of asking again).
2. Runs `museum-agent eval --json` on the original questions and on the rewrites (the same
   embedded search, run from the current directory: a copy of the repository's config.toml,
   fixtures and static).
3. Fuses each question's two rankings by weighted reciprocal rank, sum of w / (k + rank), with
   the original weighted 1 and the rewrite w, and prints recall@1 and recall@5 per kind of
   answerable question. The no-answer decision stays the original question's (cross-validated,
   from its own `eval`): a refused question counts as a miss whatever the rewrite finds.
"""
import argparse, collections, json, subprocess, sys, time, urllib.request

PROMPT = ("You turn a museum visitor's question into a short search query for the museum's "
          "catalogue. Use the words a catalogue record would use: object type, material, "
          "subject, names. Reply with the query only.")
QUERIES = ["fixtures/collection/dev_queries.jsonl", "fixtures/collection/dev_queries_v2.jsonl"]


def rewrite(llm, model, question):
    body = {"model": model, "temperature": 0, "max_tokens": 40,
            "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": question}]}
    req = urllib.request.Request(llm.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        text = json.load(r)["choices"][0]["message"].get("content") or ""
    return " ".join(text.split()) or question


def evaluate(binary, files):
    out = subprocess.run([binary, "eval", "--json", "--queries", *files], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def fuse(a, b, k, w):
    s = collections.defaultdict(float)
    for i, d in enumerate(a):
        s[d] += 1 / (k + i + 1)
    for i, d in enumerate(b):
        s[d] += w / (k + i + 1)
    return sorted(s, key=lambda d: -s[d])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llm", required=True)
    ap.add_argument("--model", default="local")
    ap.add_argument("--bin", default="target/release/museum-agent")
    ap.add_argument("--rewrites", default="rewrites.jsonl")
    ap.add_argument("--reuse", action="store_true")
    args = ap.parse_args()
    if not args.reuse:
        started, n = time.time(), 0
        with open(args.rewrites, "w", encoding="utf-8") as out:
            for f in QUERIES:
                for line in open(f, encoding="utf-8"):
                    q = json.loads(line)
                    q["original"] = q["query"]
                    q["query"] = rewrite(args.llm, args.model, q["original"])
                    out.write(json.dumps(q, ensure_ascii=False) + "\n")
                    n += 1
        print(f"{n} rewrites in {time.time() - started:.0f} s ({(time.time() - started) / n:.2f} s a question)")
    original = evaluate(args.bin, QUERIES)
    rewritten = evaluate(args.bin, [args.rewrites])
    rows = [json.loads(l) for l in open(args.rewrites, encoding="utf-8")]
    by_original = {q["original"]: r["ids"] for q, r in zip(rows, rewritten["ranked"])}
    refused = {o["query"]["query"]: not o["returned"] for o in original["outcomes_cross_validated"]}
    print("weights: original 1, rewrite w; k: the fusion constant")
    for k, w in [(1, 0.0), (1, 0.5), (1, 1.0), (10, 0.5), (10, 1.0), (60, 1.0), (1, 100.0)]:
        per = collections.defaultdict(lambda: [0, 0, 0])
        for r in original["ranked"]:
            q = r["query"]
            rel = set(q["relevant_ids"])
            if not rel:
                continue
            p = per[q.get("kind") or q["language"]]
            p[0] += 1
            if refused[q["query"]]:
                continue
            ids = fuse(r["ids"], by_original.get(q["query"], []), k, w)
            p[1] += ids[0] in rel
            p[2] += bool(rel & set(ids[:5]))
        n, r1, r5 = (sum(v[i] for v in per.values()) for i in range(3))
        kinds = " ".join(f"{kind} {v[2] / v[0]:.2f}" for kind, v in sorted(per.items()))
        label = "original only" if w == 0 else ("rewrite only" if w >= 100 else f"k {k}, w {w}")
        print(f"{label:14s} recall@1 {r1 / n:.3f} recall@5 {r5 / n:.3f} | recall@5 {kinds}")


if __name__ == "__main__":
    sys.exit(main())
