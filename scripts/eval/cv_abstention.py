"""A replica of the no-answer fit (`src/retrieval/abstain.rs` `fit`) and of `eval`'s 5-fold
cross-validation, over the signal vectors of `museum-agent eval --json`, to compare threshold
rules and feature sets over many fold assignments (issue 17: one question decides the reported
split, so each variant is also averaged over 30 reshuffled assignments, seeds 0-29). Needs numpy
(the interop venv has it: `$(scripts/interop/setup.sh --print)/venv/bin/python`).

    target/release/museum-agent eval --json > /tmp/eval.json     # in a copy of the repository
    python scripts/eval/cv_abstention.py /tmp/eval.json [feature,feature,...]

Prints, per threshold rule (`group`: a budget (`MAXF`, 1 % as shipped) per script group; `joint`: one
budget shared by both groups), the no-answer questions refused, the answerable ones refused
and those answered with their exhibit in the top 5, in the reported split and as the mean over
the 30 reshuffles. The rules of `abstain.rs` are applied as it applies them: `work_missing`
and `names_unmet` refuse, `who_found` and `maker_found` answer, whatever the model says (a signal vector of an
older build without one of them reads it as 0).
"""
import json, sys, random
import numpy as np
S=['top_score','top_coverage','margin','unknown_share','entity_coverage','cjk','terms','names_missing','names_missing_share','maker_missing','maker_named','title_coverage','lang_mismatch','bridged','coverage_margin','near_ties','mean_idf','translated','who_found','work_missing','names_unmet','maker_found','keyword_found','rest_coverage','named_work_missing']
FEATURES=['top_score','top_coverage','margin','unknown_share','entity_coverage','cjk','terms','names_missing','maker_missing','title_coverage','bridged']
MAXF=0.01; L2=0.01; IT=3000; STEP=0.5

def load(path):
    d=json.load(open(path))
    rows=[]
    for r in d['ranked']:
        q=r['query']; rel=q['relevant_ids']
        kind=q.get('kind') or ('no-answer' if not rel else q['language'])
        pos=None
        for i,x in enumerate(r['ids']):
            if x in rel: pos=i; break
        f=list(r['features'])+[0.0]*(len(S)-len(r['features']))
        rows.append(dict(q=q['query'],kind=kind,rel=bool(rel),pos=pos,f=np.array(f+r.get('extra',[])),names=S+r.get('extra_names',[])))
    return rows

def fit(rows, feats, rule):
    idx=[rows[0]['names'].index(n) for n in feats]
    ex=[(r['f'][idx], True) if r['rel'] else (r['f'][idx],False) for r in rows if (not r['rel']) or (r['pos'] is not None and r['pos']<5)]
    X=np.array([e[0] for e in ex]); y=np.array([1.0 if e[1] else 0.0 for e in ex])
    mean=X.mean(0); sc=X.std(0); sc[sc<=1e-9]=1.0
    Z=(X-mean)/sc
    pos=max(y.sum(),1); neg=max((1-y).sum(),1)
    cw=np.where(y==1,0.5/pos,0.5/neg); tot=cw.sum()
    w=np.zeros(len(idx)); b=0.0
    for _ in range(IT):
        z=b+Z@w; p=1/(1+np.exp(-z)); err=(p-y)*cw
        gw=Z.T@err; gb=err.sum()
        w-=STEP*(gw/tot+L2*w); b-=STEP*gb/tot
    prob=lambda f: 1/(1+np.exp(-(b+((f[idx]-mean)/sc)@w)))
    li=rows[0]['names'].index('lang_mismatch')
    P=[(prob(r['f']), r['f'][li]>0, r['rel']) for r in rows if (not r['rel']) or (r['pos'] is not None and r['pos']<5)]
    th=rule(P)
    return prob, th, li

def thr_of(p):
    p=sorted(p); a=int(np.floor(MAXF*len(p)+1e-12))
    if a>=len(p): return None
    at=p[a]; below=0.0 if a==0 else p[a-1]
    return (at+below)/2

def rule_group(P):
    same=[p for p,o,y in P if y and not o]; other=[p for p,o,y in P if y and o]
    if len(same)>=5 and len(other)>=5: return (thr_of(same), thr_of(other))
    t=thr_of(same+other); return (t,t)

def cut(p,k):
    p=sorted(p)
    if k>=len(p): return p[-1]+1e-9
    return (p[k]+(0.0 if k==0 else p[k-1]))/2

def rule_joint(P, maxf=None):
    maxf=MAXF if maxf is None else maxf
    same=[p for p,o,y in P if y and not o]; other=[p for p,o,y in P if y and o]
    ns=[p for p,o,y in P if not y and not o]; no=[p for p,o,y in P if not y and o]
    budget=int(np.floor(maxf*(len(same)+len(other))+1e-12))
    best=None
    for ko in range(0,min(budget,len(other))+1):
        ks=budget-ko
        ts=cut(same,ks); to=cut(other,ko)
        refused=sum(p<ts for p in ns)+sum(p<to for p in no)
        key=(refused, -abs(ko-budget*len(other)/max(1,len(same)+len(other))))
        if best is None or key>best[0]: best=(key,(ts,to))
    return best[1]

def run(rows, feats, rule, folds):
    out=[None]*len(rows)
    for f in range(5):
        tr=[r for r,g in zip(rows,folds) if g!=f]
        prob,th,li=fit(tr,feats,rule)
        for i,(r,g) in enumerate(zip(rows,folds)):
            if g==f:
                t=th[1] if r['f'][li]>0 else th[0]
                flag=lambda n: r['f'][S.index(n)]>0
                out[i]=(not flag('work_missing') and not flag('names_unmet') and not flag('named_work_missing')
                        and (flag('who_found') or flag('maker_found') or prob(r['f'])>=t))
    return out

def folds_of(rows, seed=None):
    by={}
    for i,r in enumerate(rows): by.setdefault(r['kind'],[]).append(i)
    fo=[0]*len(rows)
    rng=random.Random(seed)
    for k,ix in by.items():
        ix=list(ix)
        if seed is not None: rng.shuffle(ix)
        for j,i in enumerate(ix): fo[i]=j%5
    return fo

def score(rows,ans):
    neg=[a for r,a in zip(rows,ans) if not r['rel']]
    posr=[a for r,a in zip(rows,ans) if r['rel']]
    r5=sum(1 for r,a in zip(rows,ans) if r['rel'] and a and r['pos'] is not None and r['pos']<5)
    return sum(not a for a in neg), len(neg), sum(not a for a in posr), len(posr), r5

if __name__=='__main__':
    rows=load(sys.argv[1])
    variants={'group':rule_group,'joint':rule_joint}
    feats=FEATURES
    if len(sys.argv)>2: feats=sys.argv[2].split(',')
    for name,rule in variants.items():
        a=run(rows,feats,rule,folds_of(rows))
        s=score(rows,a)
        res=[score(rows,run(rows,feats,rule,folds_of(rows,seed))) for seed in range(30)]
        m=np.mean([x[0] for x in res]); fa=np.mean([x[2] for x in res]); r5=np.mean([x[4] for x in res])
        print(f"{name:8s} split: refused {s[0]}/{s[1]} false {s[2]}/{s[3]} R5ans {s[4]} | 30 reshuffles: refused {m:.1f} false {fa:.1f} r5 {r5:.1f}")
