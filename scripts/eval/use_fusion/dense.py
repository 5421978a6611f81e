"""Dense rankings over the 2,700 records for the 200 questions of /tmp/e5eval.json.
Scores: raw cosine or standardised within each record's language group (the project's calibration,
embeddings.rs dense_rankings). Combined e5+USE: sum of each model's standardised scores."""
import json, numpy as np
EV='/tmp/modelhunt/ev'
recs=[json.loads(l) for l in open('/work/main/fixtures/collection/exhibits.jsonl')]
IDS=np.array([r['id'] for r in recs])
LANG=np.array([r.get('language') or '' for r in recs])
GROUPS=[LANG==g for g in sorted(set(LANG))]
def norm(X): return X/np.linalg.norm(X,axis=1,keepdims=True)
def cos(model):
    P=norm(np.load({'e5':'/tmp/usefuse/P_e5_project.npy','use':'/tmp/usefuse/P_use_tidy.npy'}[model]).astype(np.float64))
    Q=norm(np.load(f'/tmp/usefuse/Q_{model}.npy').astype(np.float64))
    return Q@P.T
def z_all(S): return (S-S.mean(1,keepdims=True))/S.std(1,keepdims=True)
def z_lang(S):
    Z=np.empty_like(S)
    for g in GROUPS:
        x=S[:,g]; Z[:,g]=(x-x.mean(1,keepdims=True))/np.maximum(x.std(1,keepdims=True),1e-6)
    return Z
def own_group(S):
    """index into GROUPS of the question's own language: the group with the highest mean cosine"""
    return np.stack([S[:,g].mean(1) for g in GROUPS],1).argmax(1)
def ranking(Z, n=50):
    """best-first id lists (ties by record order, as the project's pk order)"""
    o=np.argsort(-Z,axis=1,kind='stable')[:,:n]
    return [list(IDS[row]) for row in o]
def other_lists(Z, S_for_group, n=50):
    """for each question, the nearest records of each language group other than its own"""
    own=own_group(S_for_group); out=[]
    for i in range(Z.shape[0]):
        L=[]
        for gi,g in enumerate(GROUPS):
            if gi==own[i]: continue
            idx=np.where(g)[0]; o=idx[np.argsort(-Z[i,idx],kind='stable')[:n]]
            L.append(list(IDS[o]))
        out.append(L)
    return out
