"""Check: cv_fusion.py's own figures (fusion AND evaluation on own_ids, 30 reshuffles) from this replica,
to compare with `python scripts/eval/cv_fusion.py /tmp/e5eval.json` (R@1 143.0 R@5 155.1 para 21.4)."""
import sys; sys.path.insert(0,'/tmp/usefuse')
import numpy as np, cvfuse as C
v=[([x[0] for x in r['dense']], r['dense_other']) for r in C.RANKED]
grid=[(w,0,k) for w in C.W for k in C.K]
pos=C.positions(v,'own_ids',grid); sc=C.cvf_obj(pos)
a=[]
for s in range(30):
    p,_=C.cv(pos,sc,C.resh_folds(s)); a.append(((p==0).sum(),(p<5).sum(),((p<5)&(C.KIND_OF=='en-paraphrase')).sum()))
print('replica: R@1 %.1f R@5 %.1f para %.1f'%tuple(np.mean(a,0)))
