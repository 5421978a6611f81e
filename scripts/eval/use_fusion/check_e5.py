import json,numpy as np,sys
sys.path.insert(0,'/tmp/usefuse')
from dense import *
d=json.load(open('/tmp/e5eval.json'))
S=cos('e5'); Z=z_lang(S); R=ranking(Z)
ov=[];same=0;rank_eq=0
for i,r in enumerate(d['ranked']):
    ref=[x[0] for x in r['dense']]
    ov.append(len(set(ref)&set(R[i]))/50); same+= ref[:5]==R[i][:5]; rank_eq+= ref==R[i]
print('top50 overlap mean %.4f min %.2f; top5 identical %d/200; full list identical %d/200'%(np.mean(ov),min(ov),same,rank_eq))
# score agreement
err=[]
for i,r in enumerate(d['ranked']):
    m={x:j for j,x in enumerate(IDS)}
    for x,s in r['dense'][:10]: err.append(abs(Z[i,m[x]]-s))
print('calibrated score abs diff: mean %.4f max %.4f'%(np.mean(err),max(err)))
O=other_lists(Z,S)
print('other list top10 identical', sum(O[i][0][:10]==r['dense_other'][0][:10] for i,r in enumerate(d['ranked'])))
