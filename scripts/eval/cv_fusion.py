"""Recall of the fused lexical + embeddings ranking with no no-answer decision, the fusion
weight and constant chosen per fold from a grid as `eval` does (an approximation of its
objective: recall@5 plus half recall@1), averaged over 30 reshuffled 5-fold assignments
(seeds 0-29), over the rankings of `museum-agent eval --json` run with embeddings (its
`own_ids` and `dense` lists). Used to compare embedding variants (passage length) beyond
one fold assignment. Needs numpy (the interop venv: see cv_abstention.py).

    MUSEUM_AGENT__SRS__EMBEDDINGS_URL=file://…/e5-small-q4.bin \
    MUSEUM_AGENT__SRS__EMBEDDINGS_PASSAGE_CHARS=256 MUSEUM_AGENT__DATABASE__PATH=/tmp/v256.db \
      target/release/museum-agent eval --json > /tmp/p256.json
    python scripts/eval/cv_fusion.py /tmp/p256.json /tmp/p512.json ...
"""
import json,sys,random
import numpy as np
W=[0,0.25,0.5,0.75,1.0,1.5,2.0,3.0]; K=[1,3,10,20,60,120]
def load(f):
    d=json.load(open(f)); rows=[]
    for r in d['ranked']:
        q=r['query']; rel=set(q['relevant_ids'])
        if not rel: continue
        lex=r['own_ids']; den=[x[0] for x in r['dense']]
        rows.append((q.get('kind') or q['language'],rel,lex,den))
    return rows
def fuse(lex,den,w,k):
    s={}
    for i,x in enumerate(lex): s[x]=s.get(x,0)+1/(k+i+1)
    for i,x in enumerate(den): s[x]=s.get(x,0)+w/(k+i+1)
    return sorted(s,key=lambda x:-s[x])[:5]
def hits(rows,w,k,at=5):
    return [1 if set(fuse(l,d,w,k)[:at])&rel else 0 for _,rel,l,d in rows]
def obj(rows,w,k): return sum(hits(rows,w,k,5))+0.5*sum(hits(rows,w,k,1))
def cv(rows,seed):
    by={}
    for i,r in enumerate(rows): by.setdefault(r[0],[]).append(i)
    fo=[0]*len(rows); rng=random.Random(seed)
    for ix in by.values():
        ix=list(ix); rng.shuffle(ix)
        for j,i in enumerate(ix): fo[i]=j%5
    r5=r1=0; par=0
    for f in range(5):
        tr=[r for r,g in zip(rows,fo) if g!=f]; te=[r for r,g in zip(rows,fo) if g==f]
        w,k=max(((w,k) for w in W for k in K), key=lambda p: obj(tr,*p))
        r5+=sum(hits(te,w,k,5)); r1+=sum(hits(te,w,k,1))
        par+=sum(h for h,r in zip(hits(te,w,k,5),te) if r[0]=='en-paraphrase')
    return r1,r5,par
for f in sys.argv[1:]:
    rows=load(f); res=[cv(rows,s) for s in range(30)]
    a=np.array(res,float)
    print(f, len(rows), 'R@1 %.1f R@5 %.1f para R@5 %.1f (of 30), over 30 reshuffles'%tuple(a.mean(0)), 'min/max R5', a[:,1].min(), a[:,1].max())
