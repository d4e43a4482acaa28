"""The tools' Runner construction (mmrecvit/mm/cli.py)."""

import os.path as osp
import sys

import pytest
from helpers import REPO, toy_cfg_options

sys.path.insert(0, osp.join(REPO, 'tools'))
import demo as demo_tool  # noqa: E402  (tools/demo.py)
import train as train_tool  # noqa: E402  (tools/train.py)

pytestmark = pytest.mark.slow

DET = osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')


def test_each_runner_draws_with_its_own_visualizer(toy_root, tmp_path):
    """A det run after a det and a cls run in one process draws with a det visualizer (the hooks take the
    current instance; the det one's reused name used to leave the cls one current)."""
    from mmdet.visualization import DetLocalVisualizer
    from mmengine.visualization import Visualizer

    from mmrecvit.mm import cli

    for i, (task, config) in enumerate([('det', DET), ('cls', demo_tool.toy_config('cls', 'plainvit')), ('det', DET)]):
        args = train_tool.parse_args([config, *toy_cfg_options(task, toy_root, tmp_path / str(i))])
        runner = cli.build_runner(cli.load_config(args), 'none', tool='test')
        assert Visualizer.get_current_instance() is runner.visualizer
    assert isinstance(runner.visualizer, DetLocalVisualizer)


def test_two_runners_of_one_config_within_one_second_log_and_draw_into_their_own_folders(
    toy_root, tmp_path, monkeypatch
):
    """mmengine's names (experiment name + timestamp in seconds) are taken per process: a second Runner of the same
    config in the same second got the first one's logger and visualizer and wrote into its work dir."""
    import time

    from mmrecvit.mm import cli

    strftime = time.strftime  # both Runners in one second, whatever the machine's speed
    monkeypatch.setattr(time, 'strftime', lambda f, *t: '20261206_120000' if f == '%Y%m%d_%H%M%S' else strftime(f, *t))
    first, second = (
        cli.build_runner(
            cli.load_config(train_tool.parse_args([DET, *toy_cfg_options('det', toy_root, tmp_path / str(i))])),
            'none',
            tool='test',
        )
        for i in range(2)
    )
    assert first.timestamp == second.timestamp and first.experiment_name != second.experiment_name
    assert second.logger is not first.logger and second.visualizer is not first.visualizer
    for i, runner in enumerate((first, second)):
        (log,) = [h.baseFilename for h in runner.logger.handlers if hasattr(h, 'baseFilename')]
        assert log.startswith(str(tmp_path / str(i))), log
        assert runner.visualizer.get_backend('LocalVisBackend')._save_dir.startswith(str(tmp_path / str(i)))


def test_release_workers_stops_a_finished_runners_persistent_workers(toy_root, tmp_path):
    """`cli.release_workers`: the test loader's persistent worker (alive after `test()`, until the loader is
    garbage-collected) stops on its own, now (exit status 0, not terminated), and the loader forgets it."""
    from mmrecvit.mm import cli

    options = [*toy_cfg_options('det', toy_root, tmp_path)]
    options += ['test_dataloader.num_workers=1', 'test_dataloader.persistent_workers=True']
    runner = cli.build_runner(cli.load_config(train_tool.parse_args([DET, *options])), 'none', tool='test')
    runner.test()
    loader = runner.test_loop.dataloader
    workers = loader._iterator._workers
    assert workers and all(w.is_alive() for w in workers)
    cli.release_workers(runner)
    assert loader._iterator is None and [w.exitcode for w in workers] == [0] * len(workers)
    cli.release_workers(runner)  # nothing left to stop
