#!/usr/bin/env python3
"""Same-run criterion comparison of two builds' bench binaries (issue 30's "not made slower").

Usage: scripts/bench-before-after.py ROUNDS KIND BEFORE_DIR AFTER_DIR [MORE_DIRS...]
  KIND: generators | segment | sharded; each DIR holds that bench's binary as KIND (copy
  target/release/deps/KIND-<hash> there after `cargo bench --bench KIND --no-run`, each
  commit built in a worktree of its own with its own CARGO_TARGET_DIR: cargo hashes members
  by their path inside the workspace, so one shared target directory mixes stale artifacts).
  FILTER (environment) narrows the generators bench (default `uidgen`).

The binaries run alternately, ROUNDS times each, every run from a fresh directory so criterion
compares nothing across binaries; prints a Markdown table: lowest and highest throughput of the
rounds and the ratio of the means to the first DIR. Run it on an idle machine.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

rounds, kind, dirs = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
args = ['--bench', '--noplot', '--warm-up-time', '1', '--measurement-time', '3']
if kind == 'generators':
    args.append(os.environ.get('FILTER', 'uidgen'))
unit = {'elem/s': 1, 'Kelem/s': 1e3, 'Melem/s': 1e6, 'Gelem/s': 1e9}
res = collections.defaultdict(lambda: collections.defaultdict(list))
for _ in range(rounds):
    for d in dirs:
        out = subprocess.run([os.path.join(d, kind)] + args, cwd=tempfile.mkdtemp(),
                             capture_output=True, text=True, check=True).stdout
        name = None
        for line in out.splitlines():
            s = line.strip()
            if s and not line.startswith(' ') and '/' in s.split()[0]:
                name = s.split()[0]
            m = re.match(r'thrpt:\s+\[\S+ \S+ (\S+) (\S+)', s)
            if m and name:  # the first thrpt after a name is the estimate, not a change
                res[name][d].append(float(m.group(1)) * unit[m.group(2)])
                name = None


def fmt(x):
    return (f'{x / 1e9:.2f} G/s' if x >= 1e9 else f'{x / 1e6:.1f} M/s' if x >= 1e6
            else f'{x / 1e3:.1f} K/s')


print('| bench | ' + ' | '.join(dirs) + ' | ' + ' | '.join(f'÷ {dirs[0]}' for _ in dirs[1:]) + ' |')
print('| --- |' + ' ---: |' * (2 * len(dirs) - 1))
for name, by in res.items():
    mean = {d: sum(v) / len(v) for d, v in by.items() if v}
    cells = [f'{fmt(min(by[d]))} – {fmt(max(by[d]))}' if by[d] else '-' for d in dirs]
    ratios = [f'{mean[d] / mean[dirs[0]]:.2f}×' if d in mean and dirs[0] in mean else '-'
              for d in dirs[1:]]
    print(f'| `{name}` | ' + ' | '.join(cells) + ' | ' + ' | '.join(ratios) + ' |')
