#!/usr/bin/env python3
# strace_phases.py TRACE... : for servers whose error log has one-second timestamps
# (MariaDB), the median gap (ms) before each error-log line across runs, from the
# microsecond timestamps of strace's write(2, …) records. Record a run with
#   WRAP="strace -f --seccomp-bpf -ttt -s 200 -e trace=execve,write -o F" ./startone …
# (the server's error log is its stderr until it opens log-error; startone points
# log-error at a file, so the lines are the writes to that file's descriptor).
import re, statistics, sys, collections

def lines_of(path):
    t0 = None
    out = []
    for l in open(path, errors="replace"):
        m = re.match(r'\d+ (\d+\.\d+) (\w+)\((\d+)?,? ?"(.*)"', l)
        if not m:
            continue
        t, call, fd, text = float(m.group(1)), m.group(2), m.group(3), m.group(4)
        if call == "execve" and t0 is None:
            t0 = t
        if call != "write" or t0 is None:
            continue
        m2 = re.match(r'\d{4}-\d\d-\d\d +\d+:\d\d:\d\d \d+ \[(\w+)\] (.*)', text)
        if m2:
            out.append((t - t0, m2.group(1) + " " + m2.group(2)))
    return out

gaps = collections.defaultdict(list)
order, totals = [], []
for path in sys.argv[1:]:
    prev, seen = 0.0, collections.Counter()
    ls = lines_of(path)
    for t, msg in ls:
        code = re.sub(r"\d+", "#", msg)[:70]
        seen[code] += 1
        key = (code, seen[code])
        if key not in order:
            order.append(key)
        gaps[key].append((t - prev) * 1000)
        prev = t
        if "ready for connections" in msg:
            totals.append(t * 1000)
            break
print(f"runs={len(totals)} exec to 'ready for connections' median={statistics.median(totals):.0f} ms")
for k in order:
    g = statistics.median(gaps[k])
    if g >= 2:
        print(f"  {g:6.1f}  {k[0][:100]}")
