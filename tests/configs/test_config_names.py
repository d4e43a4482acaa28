"""`mmrecvit::<folder>/<file>.py` names an installed config (mmrecvit/configs.py): for our tools and in a config's
`_base_` (mmrecvit.mm.compat fix 8), inherited like a local base file (no `_scope_` of its own)."""

import os.path as osp

import pytest
from helpers import REPO
from mmengine.config import Config

import mmrecvit.mm  # noqa: F401  (compat fix 8)
from mmrecvit.configs import config_path, configs_root
from mmrecvit.inputs import InputError, config_file
from mmrecvit.mm import cli

TOY = 'det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py'


def test_names_resolve_to_the_installed_configs():
    # an editable install (this checkout): the configs of the checkout pip recorded (direct_url.json)
    assert osp.samefile(configs_root(), osp.join(REPO, 'configs'))
    assert osp.samefile(config_path(f'mmrecvit::{TOY}'), osp.join(REPO, 'configs', TOY))
    assert config_path('configs/det/x.py') == 'configs/det/x.py'  # a path stays a path


def test_an_unknown_name_is_one_error_naming_the_closest():
    with pytest.raises(
        FileNotFoundError, match=r"'mmrecvit::det/mask-rcnn_plainvit-ti_fpn_toy.py'.*closest: mmrecvit::"
    ):
        config_path('mmrecvit::det/mask-rcnn_plainvit-ti_fpn_toy.py')


def test_a_base_named_with_the_scope_is_inherited_like_a_local_file(tmp_path):
    mine = tmp_path / 'mine.py'
    mine.write_text(f"_base_ = ['mmrecvit::{TOY}']\nmodel = dict(backbone=dict(depth=2))\n")
    cfg = Config.fromfile(str(mine))
    local = Config.fromfile(osp.join(REPO, 'configs', TOY))
    assert cfg.model.backbone.type == 'PlainViT' and cfg.model.backbone.depth == 2
    # the scopes the file's own bases set (its mmdet:: ones), none of 'mmrecvit'
    assert cfg.model.get('_scope_') == local.model.get('_scope_') != 'mmrecvit'
    assert cfg.default_scope == local.default_scope == 'mmdet'
    assert cfg.model.roi_head == local.model.roi_head


def test_the_tools_take_the_scoped_name():
    args = cli.tool_parser('t', {'config': 'c'}, work_dir_help='w').parse_args([f'mmrecvit::{TOY}'])
    args.launcher, args.cfg_options = 'none', None
    cfg = cli.load_config(args)
    assert cfg.filename == osp.realpath(osp.join(REPO, 'configs', TOY)) or osp.samefile(
        cfg.filename, osp.join(REPO, 'configs', TOY)
    )
    assert cfg.work_dir == osp.join('./work_dirs', osp.splitext(osp.basename(TOY))[0])


def test_every_tool_takes_the_scoped_name_and_refuses_an_unknown_one_naming_the_argument():
    # mmrecvit.inputs.config_file: what train/test and the analysis tools check their config argument with
    assert osp.samefile(config_file(f'mmrecvit::{TOY}'), osp.join(REPO, 'configs', TOY))
    typo = 'mmrecvit::det/mask-rcnn_plainvit-ti_fpn_toy.py'
    with pytest.raises(InputError, match=rf"^CONFIG '{typo}': no such config .*closest: mmrecvit::det/mask-rcnn"):
        config_file(typo)
