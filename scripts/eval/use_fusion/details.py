"""Per-question differences, baseline (project e5 lists) vs e5+USE (language-standardised sum), under
the program's fold assignment and fusion choice (EVAL-DET); and sensitivity to the USE share."""
import sys; sys.path.insert(0,'/tmp/usefuse')
import numpy as np, cvfuse as C, dense as D
grid=[(w,o,k) for w in C.W for o in C.O for k in C.K]
def det(v):
    pos=C.positions(v,'ids',grid); p,ch=C.cv(pos,C.eval_obj(pos),C.det_folds()); return p,[grid[g] for g in ch]
S_e=D.cos('e5'); S_u=D.cos('use'); Ze,Zu=D.z_lang(S_e),D.z_lang(S_u)
def var(Z): return list(zip(D.ranking(Z,50), D.other_lists(Z,S_e,50)))
base=[([x[0] for x in r['dense']], r['dense_other']) for r in C.RANKED]
pb,_=det(base); pc,_=det(var(Ze+Zu))
print('questions whose rank changed (1-based; >50 = not found; R = refused by the lexical model):')
for j,i in enumerate(C.ANS):
    if pb[j]!=pc[j] or (C.RANKED[i]['query']['kind']=='en-paraphrase' and pc[j]>=5):
        f=lambda p: str(p+1) if p<10**6 else '-'
        print(f"  {C.RANKED[i]['query']['kind']:14s} {'R' if C.REF[j] else ' '} base {f(pb[j]):>3s} -> e5+USE {f(pc[j]):>3s}  {C.RANKED[i]['query']['query'][:90]}")
print('\nsensitivity: e5 z + a*USE z (EVAL-DET, with abstention): a, en-para R@5, all R@1, all R@5, chosen')
for a in (0.5,0.75,1.0,1.25,1.5,2.0):
    p,ch=det(var(Ze+a*Zu)); F=C.figures(p,True); Fr=C.figures(p,False)
    print(f"  a={a:4.2f} para {F['en-paraphrase'][1]:.3f} (rank-only {Fr['en-paraphrase'][1]:.3f})  R@1 {F['all'][0]:.3f}  R@5 {F['all'][1]:.3f} (rank-only {Fr['all'][1]:.3f})  cross R@5 {F['cross-lingual'][1]:.3f}  {ch}")
