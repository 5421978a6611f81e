"""Check: the EVAL-DET replica with the project's e5 lists gives every question's first relevant rank
exactly as outcomes_cross_validated (answered questions; ranks within the 10 returned)."""
import sys; sys.path.insert(0,'/tmp/usefuse')
import numpy as np, cvfuse as C
v=[([x[0] for x in r['dense']], r['dense_other']) for r in C.RANKED]
grid=[(w,o,k) for w in C.W for o in C.O for k in C.K]
pos=C.positions(v,'ids',grid)
p,ch=C.cv(pos,C.eval_obj(pos),C.det_folds())
print('chosen',[grid[g] for g in ch], 'project', C.ev['cv_fusions'])
bad=0
for j,i in enumerate(C.ANS):
    o=C.OUT[i]
    if not o['returned']: continue
    mine=p[j]+1 if p[j]<len(o['returned']) else None
    if mine!=o['first_relevant']: bad+=1; print(i,mine,o['first_relevant'])
print('mismatches',bad,'of',len(C.ANS)-len(C.REFUSED))
