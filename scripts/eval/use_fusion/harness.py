import json, time, sys, os
import numpy as np
COLL='/work/main/fixtures/collection/exhibits.jsonl'
QS='/work/shared/data/dev_queries_v2.jsonl'
def clip(s,n):
    return s if len(s)<=n else s[:n]+'…'
def passage_text(e,n=512):
    head='; '.join(x for x in [e.get('title',''),e.get('artist_or_maker',''),e.get('date',''),e.get('culture_or_period',''),e.get('medium','')] if x)
    return clip(f"{head}\n{e.get('description','')}",n)
def load():
    recs=[json.loads(l) for l in open(COLL)]
    qs=[json.loads(l) for l in open(QS)]
    return recs,qs
def evaluate(name, embed_q, embed_p, kinds=('en-paraphrase','cross-lingual','en-fact','zh-simplified','zh-traditional'), cache=None, batch=32):
    recs,qs=load()
    texts=[passage_text(r) for r in recs]
    ids=[r['id'] for r in recs]
    t0=time.time()
    if cache and os.path.exists(cache):
        P=np.load(cache); tp=None
    else:
        P=[]
        for i in range(0,len(texts),batch):
            P.append(embed_p(texts[i:i+batch]))
            if i==0: print(f"first batch {time.time()-t0:.1f}s",flush=True)
        P=np.vstack(P).astype(np.float32); tp=time.time()-t0
        if cache: np.save(cache,P)
    P/=np.linalg.norm(P,axis=1,keepdims=True)+1e-12
    qsel=[q for q in qs if q['kind'] in kinds and q['relevant_ids']]
    t1=time.time()
    Q=np.vstack([embed_q([q['query']]) for q in qsel]).astype(np.float32)
    tq=(time.time()-t1)/len(qsel)
    Q/=np.linalg.norm(Q,axis=1,keepdims=True)+1e-12
    S=Q@P.T
    order=np.argsort(-S,axis=1)
    res={}
    for k in kinds:
        idx=[i for i,q in enumerate(qsel) if q['kind']==k]
        h5=h50=0; mrr=0
        for i in idx:
            rel=set(qsel[i]['relevant_ids'])
            top=[ids[j] for j in order[i,:50]]
            if rel & set(top[:5]): h5+=1
            if rel & set(top): h50+=1
            for r,x in enumerate(top):
                if x in rel: mrr+=1/(r+1); break
        res[k]=(h5,h50,len(idx),mrr/len(idx))
    print(f"== {name}: passages {('%.0fs'%tp) if tp else 'cached'} ({P.shape}), query {tq*1000:.0f}ms")
    for k,(a,b,n,m) in res.items(): print(f"   {k:15s} hit@5 {a:2d}/{n}  hit@50 {b:2d}/{n}  mrr@50 {m:.3f}")
    return res
