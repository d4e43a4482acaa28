"""tests/cpu_times.py: the opt-in record of each test's wall and CPU time, and its summary."""

import json
import sys

from cpu_times import summary
from helpers import REPO, SUBPROCESS_ENV, run


def test_each_test_gets_a_line_with_its_wall_and_cpu_time_and_the_summary_adds_them_up(tmp_path):
    (tmp_path / 'test_two.py').write_text(
        'import time\n\ndef test_busy():\n    end = time.process_time() + 0.3\n    while time.process_time() < end:\n'
        '        pass\n\ndef test_sleeps():\n    time.sleep(0.3)\n'
    )
    env = {k: v for k, v in SUBPROCESS_ENV.items() if not k.startswith('PYTEST_')}  # not an xdist worker: one file
    env |= {'MMRECVIT_CPU_TIMES': str(tmp_path / 'times'), 'PYTHONPATH': f'{REPO}/tests'}
    res = run(
        [
            sys.executable,
            '-m',
            'pytest',
            '-q',
            '-p',
            'cpu_times',
            '-p',
            'no:cacheprovider',
            str(tmp_path / 'test_two.py'),
        ],
        cwd=tmp_path,
        env=env,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    busy, sleeps = [json.loads(line) for line in (tmp_path / 'times' / 'main.jsonl').read_text().splitlines()]
    assert busy['test'].endswith('::test_busy') and sleeps['test'].endswith('::test_sleeps')
    assert busy['cpu'] >= 0.3 and busy['wall'] >= 0.3  # busy: CPU as long as the wall
    assert sleeps['wall'] >= 0.3 and sleeps['cpu'] < 0.2  # asleep: wall time without CPU
    text = summary(str(tmp_path / 'times'))
    assert text.splitlines()[1].split()[0] == 'main' and text.splitlines()[1].split()[-1] == '2'
    assert text.splitlines()[-1].endswith('test_two.py')
