#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reads the register-direct kernel's timeline ($TRELLIS_TIMELINE_OUT of a
build with -DTRL_DIRECT_TIMELINE=1, bench/README.md "Timeline") and prints,
per layer shape, the median of each phase over the launches of a replay.

  scripts/timeline.py FILE [REPLAY|all]  (REPLAY: 1-based, default the last)

A launch is the set of records with one payload address. Phases, us, from
thread 0 of each CTA (median over the CTAs, then over the launches):
  start   first CTA's entry after the previous launch's last CTA ended
          (negative: it started early, a dependent launch)
  wait    griddepcontrol.wait returned, after the previous launch ended
  x       x staged and rotated, after the wait
  first   the first group's words in, after x (0: already there)
  stream  thread 0's warp done streaming (and its rounds' sums), after x
  meet    the cluster met, after the stream
  out     the reduction, rotation and store done, after the meeting
  period  this launch's end after the previous launch's end
  decoded the parked form: its tiles decoded (before its wait), after the
          previous launch ended
  sm2     SMs holding two or more CTAs of the launch"""
import collections
import statistics
import sys


def replays(path):
    out, cur = [], None
    for line in open(path):
        if line.startswith('# replay'):
            cur = []
            out.append((line.strip(), cur))
        elif line.startswith('#') or not line.strip():
            continue
        elif cur is not None:
            cur.append([int(v) for v in line.split()])
    return out


def launches(recs):
    by = collections.defaultdict(list)
    for r in recs:
        by[r[0]].append(r)
    ls = sorted(by.values(), key=lambda rs: min(r[3] for r in rs))
    return ls


def main():
    reps = replays(sys.argv[1])
    if not reps:
        sys.exit('no replay in ' + sys.argv[1])
    which = sys.argv[2] if len(sys.argv) > 2 else str(len(reps))
    for i in range(len(reps)) if which == 'all' else [int(which) - 1]:
        show(*reps[i])


def show(head, recs):
    print(head)
    if not recs:
        return
    ls = launches(recs)
    rows = collections.defaultdict(lambda: collections.defaultdict(list))
    prev_end = None
    med = statistics.median
    for rs in ls:
        k, n, m = rs[0][1] >> 32, rs[0][1] & 0xFFFFFFFF, rs[0][2] >> 48
        t = list(zip(*[r[3:10] for r in rs]))
        start, end = min(t[0]), max(t[6])
        key = '%dx%d m%d (%d CTAs)' % (k, n, m, len(rs))
        d = rows[key]
        per_sm = collections.Counter((r[2] >> 32) & 0xFFFF for r in rs)
        d['sm2'].append(sum(1 for v in per_sm.values() if v > 1))
        parked = any(a and a < b for a, b in zip(t[3], t[1]))
        if prev_end is not None:
            if parked:
                d['decoded'].append((med(t[3]) - prev_end) / 1e3)
            d['start'].append((start - prev_end) / 1e3)
            d['wait'].append((med(t[1]) - prev_end) / 1e3)
            d['period'].append((end - prev_end) / 1e3)
        d['x'].append((med(t[2]) - med(t[1])) / 1e3)
        d['first'].append(med([max(0, a - b) for a, b in zip(t[3], t[2]) if a]) / 1e3
                          if any(t[3]) and not parked else 0.0)
        d['stream'].append((med(t[4]) - med(t[2])) / 1e3)
        d['meet'].append((max(t[5]) - med(t[4])) / 1e3)
        d['out'].append((end - max(t[5])) / 1e3)
        d['whole'].append((end - start) / 1e3)
        prev_end = end
    cols = ['start', 'decoded', 'wait', 'x', 'first', 'stream', 'meet', 'out',
            'whole', 'period', 'sm2']
    print('%-28s %5s ' % ('layer', 'n') + ' '.join('%7s' % c for c in cols))
    for key, d in rows.items():
        print('%-28s %5d ' % (key, len(d['x'])) +
              ' '.join('%7.2f' % med(d[c]) if d[c] else '%7s' % '-' for c in cols))


if __name__ == '__main__':
    main()
