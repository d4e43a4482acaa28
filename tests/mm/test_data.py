"""Bad data (issue 19) in the COCO and ADE20K layouts: toy sets from the generator, then one fault each,
then the toy configs' train (and for the images, val) datasets built by mmdet's/mmseg's registries and
every sample drawn through the pipeline. What happens for each fault, and why, is in mmrecvit/mm/data.py.
"""

import json
import logging
import os
import os.path as osp
import shutil

import cv2
import numpy as np
import pytest
from helpers import REPO
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.registry import init_default_scope

from mmrecvit.datasets import TOY_ADE_DIR, TOY_COCO_DIR, toy_data_cfg

DET = osp.join(REPO, 'configs/det/mask-rcnn_plainvit-ti_fpn_1xb2-800it_toy-coco.py')
SEG = osp.join(REPO, 'configs/seg/upernet_plainvit-ti_1xb4-150it_toy-ade20k-256x256.py')

pytestmark = pytest.mark.usefixtures('one_thread')


def build(task, root, split='train'):
    cfg = Config.fromfile(DET if task == 'det' else SEG)
    cfg.merge_from_dict(toy_data_cfg(task, root))
    init_default_scope(cfg.default_scope)
    import importlib

    for module in cfg.custom_imports['imports']:
        importlib.import_module(module)
    registry = importlib.import_module(f'{cfg.default_scope}.registry')
    return registry.DATASETS.build(cfg[f'{split}_dataloader'].dataset)


def draw_all(dataset):
    return [dataset[i] for i in range(len(dataset))]


@pytest.fixture
def warnings():
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: records.append(record.getMessage())
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


@pytest.fixture
def coco(toy_root, tmp_path):
    shutil.copytree(toy_root / TOY_COCO_DIR, tmp_path / TOY_COCO_DIR)
    ann = tmp_path / TOY_COCO_DIR / 'annotations' / 'instances_train2017.json'
    data = json.loads(ann.read_text())
    image = data['images'][0]
    first = next(a for a in data['annotations'] if a['image_id'] == image['id'])
    return tmp_path, ann, data, image, first


@pytest.mark.parametrize(
    'fault, expected',
    [
        ('zero-width', 'a box of zero width or height'),
        ('empty-mask', 'an empty mask'),
        ('bad-category', 'category id 99 is not one of the 5 classes'),
    ],
)
def test_coco_bad_annotation_is_dropped_with_a_warning_naming_the_file(coco, warnings, fault, expected):
    root, ann, data, image, first = coco
    n = sum(a['image_id'] == image['id'] for a in data['annotations'])
    if fault == 'zero-width':
        first['bbox'][2] = 0
    elif fault == 'empty-mask':
        first['segmentation'] = []
    else:
        first['category_id'] = 99
    ann.write_text(json.dumps(data))
    samples = draw_all(build('det', root))
    assert any(f'{image["file_name"]}: dropped annotation {first["id"]} ({expected}' in w for w in warnings), warnings
    sample = next(s for s in samples if s['data_samples'].img_path.endswith(image['file_name']))
    assert len(sample['data_samples'].gt_instances) == n - 1


def test_coco_missing_image_is_dropped_in_training_and_an_error_in_evaluation(coco, warnings):
    root, ann, data, image, _ = coco
    path = root / TOY_COCO_DIR / 'train2017' / image['file_name']
    os.remove(path)
    dataset = build('det', root)
    assert len(dataset) == len(data['images']) - 1
    assert any(f'{path}: image file missing, its sample is dropped' in w for w in warnings), warnings
    draw_all(dataset)
    val_image = root / TOY_COCO_DIR / 'val2017' / sorted(os.listdir(root / TOY_COCO_DIR / 'val2017'))[0]
    os.remove(val_image)
    with pytest.raises(FileNotFoundError, match=f'1 image.*are missing: .*{val_image.name}'):
        build('det', root, 'val')


def test_coco_unreadable_image_is_a_clear_error_naming_it(coco):
    root, _, _, image, _ = coco
    path = root / TOY_COCO_DIR / 'train2017' / image['file_name']
    path.write_bytes(b'not a jpeg')
    dataset = build('det', root)
    with pytest.raises(AssertionError, match=f'failed to load image: .*{image["file_name"]}'):
        draw_all(dataset)


@pytest.fixture
def ade(toy_root, tmp_path):
    shutil.copytree(toy_root / TOY_ADE_DIR, tmp_path / TOY_ADE_DIR)
    images = tmp_path / TOY_ADE_DIR / 'images' / 'training'
    name = sorted(os.listdir(images))[0]
    return tmp_path, images / name, tmp_path / TOY_ADE_DIR / 'annotations' / 'training' / name.replace('.jpg', '.png')


def test_ade_labels_outside_the_classes_are_ignored_with_a_warning(ade, warnings):
    root, _, seg = ade
    m = cv2.imread(str(seg), cv2.IMREAD_UNCHANGED)
    m[:10, :10] = 200  # 199 after reduce_zero_label: not one of the 150 classes, not ignore_index
    cv2.imwrite(str(seg), m)
    for sample in draw_all(build('seg', root)):
        labels = np.unique(sample['data_samples'].gt_sem_seg.data.numpy())
        assert ((labels < 150) | (labels == 255)).all(), labels
    assert any(
        f'{seg}: 100 pixels with labels [199] outside the 150 classes: set to ignore_index=255' in w for w in warnings
    ), warnings


def test_ade_seg_map_of_another_size_is_a_clear_error(ade):
    root, image, seg = ade
    m = cv2.imread(str(seg), cv2.IMREAD_UNCHANGED)
    cv2.imwrite(str(seg), m[: m.shape[0] // 2])
    with pytest.raises(
        ValueError,
        match=f"segmentation map '{seg}' is {m.shape[0] // 2}x{m.shape[1]}, its image "
        f"'{image}' is {m.shape[0]}x{m.shape[1]}",
    ):
        draw_all(build('seg', root))


def test_ade_missing_image_is_not_listed(ade):
    root, image, _ = ade
    n = len(build('seg', root))
    os.remove(image)
    assert len(build('seg', root)) == n - 1  # mmseg lists the image folder; the lone label map is unused
