#!/usr/bin/env python3
"""Per-chunk profile: the functions whose instruction counts grew between the two runs of
benches/relay-profile.sh (CHUNKS_A and CHUNKS_B), divided by the extra chunks relayed.
Usage: benches/callgrind-diff.py OUTDIR/callgrind-50 OUTDIR/callgrind-250 [TOP] [--inclusive]"""
import re, subprocess, sys

def table(d, inclusive):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", f"--inclusive={'yes' if inclusive else 'no'}",
                          f"{d}/callgrind.out"], capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([\s\d.]+%\)\s+(.*)$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        name = m.group(2)
        name = re.sub(r" \[[^\]]*\]$", "", name)
        name = name.split(":", 1)[1] if ":" in name and name.startswith(("/", ".", "?")) else name
        rows[name] = rows.get(name, 0) + int(m.group(1).replace(",", ""))
    return rows

def relayed(d):
    for line in open(f"{d}/load.txt"):
        if line.strip().startswith("chunks relayed"):
            return float(line.split()[2])

a, b = sys.argv[1], sys.argv[2]
top = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3].isdigit() else 25
inclusive = "--inclusive" in sys.argv
ra, rb = table(a, inclusive), table(b, inclusive)
chunks = relayed(b) - relayed(a)
delta = sorted(((rb.get(k, 0) - ra.get(k, 0)) / chunks, k) for k in set(ra) | set(rb))
delta.reverse()
total = sum(v for v, _ in delta if v > 0)
print(f"instructions per relayed chunk by function ({'inclusive' if inclusive else 'self'}), over {chunks:.0f} extra chunks")
for v, k in delta[:top]:
    print(f"{v:9.0f}  {k[:150]}")
