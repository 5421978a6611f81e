"""The project's passage text (semantic::passage_text over Exhibit::tidied), and the project's own
e5 record vectors read from a copy of /tmp/e5/vec.db (keyed by SHA-256 of that text)."""
import json, hashlib, sqlite3, re
import numpy as np
PAIRS=[('(',')'),('（','）'),('[',']'),('【','】')]
def without_empty_brackets(s):
    if not any(c==p[0] for c in s for p in PAIRS): return s
    out=''; i=0; changed=False
    while i<len(s):
        p=[q for q in PAIRS if q[0]==s[i]]
        if p:
            j=i+1
            while j<len(s) and s[j].isspace(): j+=1
            if j<len(s) and s[j]==p[0][1]:
                out=out.rstrip(); changed=True; i=j+1; continue
        out+=s[i]; i+=1
    return out.strip() if changed else s
def clip(s,n): return s if len(s)<=n else s[:n]+'…'
def passage_text(e,n=512):
    f=[without_empty_brackets(e.get(k,'') or '') for k in ('title','artist_or_maker','date','culture_or_period','medium')]
    head='; '.join(x for x in f if x)
    return clip(f"{head}\n{e.get('description','')}",n)
def recs(): return [json.loads(l) for l in open('/work/main/fixtures/collection/exhibits.jsonl')]
if __name__=='__main__':
    R=recs()
    c=sqlite3.connect('file:/tmp/usefuse/vec_copy.db?mode=ro',uri=True)
    rows={h:np.frombuffer(v,dtype='<f4') for h,v in c.execute('select text_hash,vector from embedding_vectors')}
    T=[passage_text(r) for r in R]
    H=[hashlib.sha256(t.encode()).hexdigest() for t in T]
    print('found', sum(h in rows for h in H), 'of', len(H))
    np.save('/tmp/usefuse/P_e5_project.npy', np.vstack([rows[h] for h in H]))
    json.dump(T, open('/tmp/usefuse/passage_texts.json','w'), ensure_ascii=False)
