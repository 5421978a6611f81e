#!/usr/bin/env bash
# Seeds the decode_frame corpus with every frame of the hostile-frame corpus.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p corpus/decode_frame
python3 - <<'PY'
import json, glob, os
for path in sorted(glob.glob('../fixtures/bad-frames/*.json')):
    case = json.load(open(path))
    for i, item in enumerate(case['send']):
        data = json.dumps(item['frame']) if 'frame' in item else item.get('text')
        if data is not None:
            open(f"corpus/decode_frame/{os.path.basename(path)}.{i}", 'w').write(data)
PY
echo "seeded $(ls corpus/decode_frame | wc -l) inputs"
