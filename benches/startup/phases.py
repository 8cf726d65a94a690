#!/usr/bin/env python3
# phases.py LABELPREFIX... : median gap (ms) before each message code across runs, for lines up to "ready for connections"
import sys, glob, re, datetime, statistics, collections
def ts(s):
    s=s.rstrip('Z'); d,f=s.split('.'); 
    return datetime.datetime.strptime(d,'%Y-%m-%dT%H:%M:%S').replace(tzinfo=datetime.timezone.utc).timestamp()+float('0.'+f)
for prefix in sys.argv[1:]:
    gaps=collections.defaultdict(list); order=[]; totals=[]; text={}
    for d in sorted(glob.glob(f'/run/exp/{prefix}-*')):
        try: t0=int(open(d+'/t0').read())/1e9
        except: continue
        prev=t0; lines=open(d+'/error.log').read().splitlines()
        seen=collections.Counter()
        for l in lines:
            m=re.match(r'(\S+Z) \S+ \[\w+\] \[(MY-\d+|Note|Warning|System|ERROR)\] (.*)',l)
            if not m:
                m2=re.match(r'(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: (\d+))? \[(\w+)\] (.*)',l)
                if not m2: continue
                t=datetime.datetime.strptime(m2.group(1),'%Y-%m-%d %H:%M:%S').replace(tzinfo=datetime.timezone.utc).timestamp()
                msg=m2.group(4); code=re.sub(r'\d+','#',msg)[:40]
            else:
                t=ts(m.group(1)); msg=m.group(3); code=(m.group(2)+' '+re.sub(r'\d+','#',msg.split(']',1)[-1]))[:60]
            seen[code]+=1; key=(code,seen[code])
            if key not in gaps and key not in order: order.append(key)
            gaps[key].append((t-prev)*1000); text[key]=msg[:90]; prev=t
            if 'ready for connections' in msg: totals.append((t-t0)*1000); break
    print(f'== {prefix}: runs={len(totals)} total median={statistics.median(totals) if totals else 0:.0f} ms')
    for k in order:
        g=statistics.median(gaps[k]) if gaps[k] else 0
        if g>=4: print(f'  {g:6.0f}  {text[k]}')
