"""Cross-validated fusion of the lexical ranking with several dense rankings (e5 = baseline, USE,
e5+USE), replicating `museum-agent eval` (src/retrieval/eval.rs: choose_fusion, cross_validate,
folds, decide) and scripts/eval/cv_fusion.py.

Two replicas of the per-fold fusion choice:
  EVAL  (the program): lexical list = `ids` (the ranking the system returns), grid weight x
        other-language weight x k, objective R@1 + R@5 + MRR over the whole fused list, ties to
        the first in grid order (a later one must beat it by 1e-9);
  CVF   (cv_fusion.py exactly): lexical list = `own_ids`, grid weight x k (other weight 0),
        objective R@5 + 0.5 R@1 (top 5).
Folds: DET = the program's (i-th question of a kind in file order -> fold i mod 5);
       RESH = cv_fusion.py's 30 reshuffled assignments (seeds 0-29).
Outcome figures are always computed on the returned ranking (fusion of `ids`), as `eval` does.
Abstention: a question refused in outcomes_cross_validated of /tmp/e5eval.json (the lexical
no-answer model, which reads the own-word ranking only and so does not depend on the dense list)
is a miss.

    /tmp/modelhunt/venv/bin/python /tmp/usefuse/cvfuse.py
"""
import os, sys, json, random
for v in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ[v] = '1'
import numpy as np
sys.path.insert(0, '/tmp/usefuse')
import dense as D

W = [0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0]
O = [0, 0.25, 0.5, 0.75, 1.0]
K = [1, 3, 10, 20, 60, 120]
KINDS = ['zh-simplified', 'zh-traditional', 'en-fact', 'en', 'en-paraphrase', 'cross-lingual']

ev = json.load(open('/tmp/e5eval.json'))
RANKED = ev['ranked']
OUT = ev['outcomes_cross_validated']
assert all(o['query']['query'] == r['query']['query'] for o, r in zip(OUT, RANKED))
ANS = [i for i, r in enumerate(RANKED) if r['query']['relevant_ids']]
REFUSED = {i for i in ANS if not OUT[i]['returned']}


def fuse(lists, k):
    """embeddings::fuse_lists: sum of w/(k+rank), ties by first appearance (earlier lists first)."""
    s = {}
    for lst, w in lists:
        for r, x in enumerate(lst):
            s[x] = s.get(x, 0.0) + w / (k + r + 1)
    return sorted(s, key=lambda x: -s[x])  # stable: dict order = first appearance


def first_pos(ranking, rel):
    for p, x in enumerate(ranking):
        if x in rel:
            return p
    return None


def positions(variant, lexkey, grid):
    """pos[g, j]: 0-based rank of the first relevant record in the fused list for grid point g,
    answerable question j (None -> large)."""
    pos = np.full((len(grid), len(ANS)), 10**6)
    for j, i in enumerate(ANS):
        r = RANKED[i]; rel = set(r['query']['relevant_ids'])
        lex = r[lexkey]; den, oth = variant[i]
        for g, (w, o, k) in enumerate(grid):
            lists = [(lex, 1.0), (den, w)] + [(l, o) for l in oth]
            p = first_pos(fuse(lists, k), rel)
            if p is not None:
                pos[g, j] = p
    return pos


def eval_obj(pos):
    return (pos == 0) + (pos < 5) + np.where(pos < 10**6, 1.0 / (pos + 1.0), 0.0)


def cvf_obj(pos):
    return (pos < 5) + 0.5 * (pos == 0)


def choose(score_rows, train):
    """first grid point whose summed training score beats the best so far by > 1e-9"""
    tot = score_rows[:, train].sum(1)
    best = None
    for g, t in enumerate(tot):
        if best is None or t > tot[best] + 1e-9:
            best = g
    return best


def det_folds():
    seen = {}; f = []
    for r in RANKED:
        k = r['query']['kind']; c = seen.get(k, 0); f.append(c % 5); seen[k] = c + 1
    return np.array([f[i] for i in ANS])


def resh_folds(seed):
    by = {}
    for j, i in enumerate(ANS):
        by.setdefault(RANKED[i]['query']['kind'], []).append(j)
    fo = [0] * len(ANS); rng = random.Random(seed)
    for ix in by.values():
        ix = list(ix); rng.shuffle(ix)
        for t, j in enumerate(ix):
            fo[j] = t % 5
    return np.array(fo)


KIND_OF = np.array([RANKED[i]['query']['kind'] for i in ANS])
REF = np.array([i in REFUSED for i in ANS])


def cv(pos_ret, score, folds):
    """per-question test position under the fold's chosen grid point; and the choices"""
    p = np.empty(len(ANS), int); ch = []
    for f in range(5):
        te = folds == f
        g = choose(score, ~te); ch.append(g)
        p[te] = pos_ret[g, te]
    return p, ch


def figures(p, abst):
    h1 = (p == 0); h5 = (p < 5)
    if abst:
        h1 = h1 & ~REF; h5 = h5 & ~REF
    out = {k: (h1[KIND_OF == k].mean(), h5[KIND_OF == k].mean()) for k in KINDS}
    out['all'] = (h1.mean(), h5.mean())
    return out


def run(name, variant, out):
    grid_e = [(w, o, k) for w in W for o in O for k in K]
    grid_c = [(w, 0, k) for w in W for k in K]
    pos_ids = positions(variant, 'ids', grid_e)               # returned ranking (all grid points)
    pos_own = positions(variant, 'own_ids', grid_c)           # cv_fusion.py's selection input
    ge = {g: n for n, g in enumerate(grid_e)}
    pos_ids_c = pos_ids[[ge[g] for g in grid_c]]
    sel = {'EVAL': (pos_ids, eval_obj(pos_ids), grid_e),
           'CVF': (pos_ids_c, cvf_obj(pos_own), grid_c)}
    res = {}
    for sname, (pret, score, grid) in sel.items():
        p, ch = cv(pret, score, det_folds())
        res[sname + '-DET'] = {'rank': figures(p, False), 'abst': figures(p, True),
                               'chosen': [grid[g] for g in ch]}
        acc = {'rank': [], 'abst': []}; chosen = {}
        for seed in range(30):
            p, ch = cv(pret, score, resh_folds(seed))
            acc['rank'].append(figures(p, False)); acc['abst'].append(figures(p, True))
            for g in ch:
                chosen[grid[g]] = chosen.get(grid[g], 0) + 1
        res[sname + '-RESH'] = {m: {k: tuple(np.mean([a[k][t] for a in acc[m]]) for t in (0, 1))
                                    for k in acc[m][0]} for m in acc}
        res[sname + '-RESH']['min_max_all_R5_abst'] = (min(a['all'][1] for a in acc['abst']),
                                                       max(a['all'][1] for a in acc['abst']))
        res[sname + '-RESH']['chosen'] = sorted(chosen.items(), key=lambda x: -x[1])[:5]
        g_all = choose(score, np.ones(len(ANS), bool))
        res[sname + '-RESH']['on_all'] = grid[g_all]
    # dense alone (no lexical), top 5, for reference
    dal = {k: np.mean([bool(set(variant[i][0][:5]) & set(RANKED[i]['query']['relevant_ids']))
                       for i in ANS if RANKED[i]['query']['kind'] == k]) for k in KINDS}
    res['dense_only_R5'] = dal
    out[name] = res
    return res


def fmt(name, res, key):
    r = res[key]
    line = lambda m: ' '.join('%.3f' % r[m][k][1] for k in KINDS) + ' | %.3f %.3f' % r[m]['all']
    return [f'{name:14s} {key:9s} rank  {line("rank")}', f'{"":14s} {"":9s} abst  {line("abst")}']


if __name__ == '__main__':
    S_e = D.cos('e5'); S_u = D.cos('use')
    Ze, Zu = D.z_lang(S_e), D.z_lang(S_u)
    own_src = S_e  # the question's own language: group with the highest mean e5 cosine

    def variant_from(Z, with_other=True):
        R = D.ranking(Z, 50); Ol = D.other_lists(Z, own_src, 50) if with_other else [[]] * len(R)
        return list(zip(R, Ol))

    variants = {
        'e5 (project)': [([x[0] for x in r['dense']], r['dense_other']) for r in RANKED],
        'e5 (recomp)': variant_from(Ze),
        'USE lang-z': variant_from(Zu),
        'USE raw': variant_from(S_u),
        'e5+USE lang-z': variant_from(Ze + Zu),
        'e5+USE z-all': variant_from(D.z_all(S_e) + D.z_all(S_u)),
    }
    only = sys.argv[1:]
    out = {}
    hdr = f'{"variant":14s} {"replica":9s}       ' + ' '.join(k[:5] for k in KINDS) + ' | R@1   R@5'
    for name, v in variants.items():
        if only and name not in only:
            continue
        res = run(name, v, out)
        print(hdr)
        for key in ('EVAL-DET', 'EVAL-RESH', 'CVF-DET', 'CVF-RESH'):
            print('\n'.join(fmt(name, res, key)))
        print('  chosen EVAL-DET', res['EVAL-DET']['chosen'], '; CVF-DET', res['CVF-DET']['chosen'])
        print('  on all 200: EVAL', res['EVAL-RESH']['on_all'], 'CVF', res['CVF-RESH']['on_all'],
              '; most chosen over reshuffles EVAL', res['EVAL-RESH']['chosen'][:3])
        print('  R@5 abst min/max over reshuffles EVAL', res['EVAL-RESH']['min_max_all_R5_abst'],
              'CVF', res['CVF-RESH']['min_max_all_R5_abst'])
        print('  dense alone R@5', {k: round(x, 3) for k, x in res['dense_only_R5'].items()}, flush=True)
    json.dump(out, open('/tmp/usefuse/results.json', 'w'), default=str, indent=1)
