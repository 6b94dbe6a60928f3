#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Instructions per 16x16 tile in the register-direct kernel's stream loop
(and the k-major kernel's, kmajor_gemm.cuh), from the SASS of a
compiled unit (cuobjdump -sass), for every kernel in it.

  scripts/sass-loop.py build/src/CMakeFiles/trellis_objects.dir/cuda/direct_u6.cu.o

The loop is the backward branch that holds the most MMAs. Its rare regions
(forward branches over code with I2FP, BAR or STS and no MMA: the int8
slice conversion, a round's end) are left out, so "hot" is what one group
of 8 tiles issues on its common path; per tile = hot / (8 x groups in the
loop), with 2 MMAs per tile (1 for the affine form), times the k-major
kernel's 8-row sub-blocks."""
import collections
import re
import subprocess
import sys

NAME = re.compile(r'_ZN3trl(?:6direct13direct_kernel|6kmajor13kmajor_kernel)'
                  r'ILi(\d+)ELi(\d+)ELi(\d+)E(?:Li(\d+)E)?EEvNS0_(?:6Params|7KParams)E')
FORMS = {'0': 'halves', '1': 'affine', '2': 'int8'}
CODEBOOKS = {'0': '3inst', '1': 'mcg', '2': 'mul1'}


def instructions(text):
    out = []
    for line in text.split('\n'):
        m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
        if m:
            out.append((int(m.group(1), 16), m.group(2).strip()))
    return out


def stream_loop(ins):
    at = {a: i for i, (a, _) in enumerate(ins)}
    best = None
    for i, (a, t) in enumerate(ins):
        m = re.search(r'BRA (?:!?U?P\w+, )?0x([0-9a-f]+)$', t)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in at:
            j = at[int(m.group(1), 16)]
            mmas = sum('MMA' in x for _, x in ins[j:i + 1])
            if best is None or mmas > best[2]:
                best = (j, i, mmas)
    return best


def main():
    sass = subprocess.run(['cuobjdump', '-sass', sys.argv[1]], capture_output=True,
                          text=True, check=True).stdout
    for func in re.split(r'\n\s*Function : ', sass)[1:]:
        name = func.split('\n')[0].strip()
        m = NAME.match(name)
        if not m:
            continue
        ins = instructions(func)
        loop = stream_loop(ins)
        if loop is None:
            continue
        j, i, mmas = loop
        body = ins[j:i + 1]
        rare = set()
        for a, t in body:
            b = re.search(r'^@!?P\w+ BRA (?:!?P\w+, )?0x([0-9a-f]+)$', t)
            if b and int(b.group(1), 16) > a:
                seg = [x for x in body if a < x[0] < int(b.group(1), 16)]
                if seg and any(re.search(r'I2FP|I2F|BAR|STS', x) for _, x in seg) \
                        and not any('MMA' in x for _, x in seg):
                    rare.update(x for x, _ in seg)
        hot = [t for a, t in body if a not in rare]
        # a k-major kernel of NB 8-row sub-blocks multiplies each tile NB times
        nb = int(m.group(4) or 1)
        per_tile_mma = (1 if m.group(3) == '1' else 2) * nb
        tiles = mmas / per_tile_mma
        ops = collections.Counter(re.sub(r'^@!?U?P\w+\s+', '', t).split()[0].split('.')[0]
                                  for t in hot)
        kind = f'kmajor x{nb} ' if 'kmajor' in name else ''
        print(f'{kind}H {m.group(1):>2} {CODEBOOKS[m.group(2)]:5} {FORMS[m.group(3)]:6} '
              f'hot {len(hot):4}  per tile {len(hot) / tiles:5.1f}  '
              + ' '.join(f'{k} {v}' for k, v in ops.most_common(8)))


if __name__ == '__main__':
    main()
