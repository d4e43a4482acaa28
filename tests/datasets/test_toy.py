"""The embedded toy COCO / ADE20K / classification generator (issue 3, "Embedded toy datasets").

Small sets are written once per session into a temporary folder; every test reads those.
The mmdet / mmseg / mmpretrain tests run whenever those packages are installed (skipped only when absent).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from mmrecvit.datasets import toy
from mmrecvit.datasets.toy import (
    MANIFEST_NAME,
    TOY_ADE_DIR,
    TOY_ADE_LABELS,
    TOY_ADE_MMSEG_INDICES,
    TOY_CLS_CLASSES,
    TOY_CLS_DIR,
    TOY_COCO_CLASSES,
    TOY_COCO_DIR,
    TOY_COCO_PALETTE,
    make_toy_ade20k,
    make_toy_cls,
    make_toy_coco,
    make_toy_data,
    render_cls_image,
    render_coco_image,
)
from mmrecvit.datasets.toy.draw import rng_for

REPO = Path(__file__).resolve().parents[2]
SIZE = 256
COUNTS = dict(coco_train=10, coco_val=6, ade_train=8, ade_val=4, cls_train=15, cls_val=10)
MIN_INSTANCES = 2  # make_toy_coco's default
# ADE20K's first 21 class names (objectInfo150 order; value v in a label PNG is class v - 1 here).
ADE20K_FIRST_CLASSES = (
    'wall',
    'building',
    'sky',
    'floor',
    'tree',
    'ceiling',
    'road',
    'bed',
    'windowpane',
    'grass',
    'cabinet',
    'sidewalk',
    'person',
    'earth',
    'door',
    'table',
    'mountain',
    'plant',
    'curtain',
    'chair',
    'car',
)


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob('*'))
        if p.is_file()
    }


@pytest.fixture(scope='session')
def toy_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp('toy_data')
    make_toy_data(root, seed=0, size=SIZE, progress=False, **COUNTS)
    return root


@pytest.fixture(scope='session')
def coco_root(toy_root) -> Path:
    return toy_root / TOY_COCO_DIR


@pytest.fixture(scope='session')
def ade_root(toy_root) -> Path:
    return toy_root / TOY_ADE_DIR


@pytest.fixture(scope='session')
def cls_root(toy_root) -> Path:
    return toy_root / TOY_CLS_DIR


# --------------------------------------------------------------------------------------------- both
def test_same_seed_gives_identical_bytes(tmp_path, toy_root):
    small = dict(coco_train=3, coco_val=2, ade_train=3, ade_val=2, cls_train=6, cls_val=5)
    make_toy_data(tmp_path / 'a', seed=0, size=SIZE, progress=False, **small)
    make_toy_data(tmp_path / 'b', seed=0, size=SIZE, progress=False, **small)
    make_toy_data(tmp_path / 'c', seed=1, size=SIZE, progress=False, **small)
    a, b, c = (tree_hashes(tmp_path / n) for n in 'abc')
    # COCO: 2 json + 5 jpg + manifest; ADE20K: 5 (jpg + png) + manifest; cls: 11 jpg + manifest
    assert a == b and len(a) == (2 + 5 + 1) + (2 * 5 + 1) + (11 + 1)
    images = [k for k in a if k.endswith(('.jpg', '.png'))]
    assert all(a[k] != c[k] for k in images), 'another seed must give other images'
    # an image depends only on (seed, split, index), not on how many images the split has
    full = tree_hashes(toy_root)
    assert all(full[k] == a[k] for k in images)


def test_layouts_and_manifest(toy_root, coco_root, ade_root, cls_root):
    assert coco_root == toy_root / 'toy_coco' and ade_root == toy_root / 'toy_ade' / 'ADEChallengeData2016'
    assert cls_root == toy_root / 'toy_cls'
    for split, n in (('train2017', COUNTS['coco_train']), ('val2017', COUNTS['coco_val'])):
        assert (coco_root / 'annotations' / f'instances_{split}.json').is_file()
        assert len(list((coco_root / split).glob('*.jpg'))) == n
    for split, n in (('training', COUNTS['ade_train']), ('validation', COUNTS['ade_val'])):
        assert len(list((ade_root / 'images' / split).glob('*.jpg'))) == n
        assert len(list((ade_root / 'annotations' / split).glob('*.png'))) == n
    for split in ('train', 'val'):  # ImageNet's folder layout: one folder per class
        assert sorted(p.name for p in (cls_root / split).iterdir()) == list(TOY_CLS_CLASSES)
        assert len(list((cls_root / split).glob('*/*.jpg'))) == COUNTS[f'cls_{split}']
    for root, kind in ((coco_root, 'coco'), (cls_root, 'cls')):
        manifest = json.loads((root / MANIFEST_NAME).read_text())
        assert manifest['complete'] is True and manifest['version'] == toy.TOY_DATA_VERSION
        assert manifest['kind'] == kind and manifest['args']['seed'] == 0
        assert manifest['args']['num_train'] == COUNTS[f'{kind}_train']


def test_second_call_skips_and_changed_args_regenerate(tmp_path):
    root = tmp_path / 'coco'
    first = make_toy_coco(root, num_train=3, num_val=2, progress=False)
    before = {p: p.stat().st_mtime_ns for p in root.rglob('*') if p.is_file()}
    again = make_toy_coco(root, num_train=3, num_val=2, progress=False)
    assert not first.skipped and again.skipped
    assert {p: p.stat().st_mtime_ns for p in root.rglob('*') if p.is_file()} == before
    # fewer images: regenerated, and the stale third image is gone
    fewer = make_toy_coco(root, num_train=2, num_val=2, progress=False)
    assert not fewer.skipped and len(list((root / 'train2017').glob('*.jpg'))) == 2
    # a missing file makes the set incomplete
    next((root / 'val2017').glob('*.jpg')).unlink()
    assert not make_toy_coco(root, num_train=2, num_val=2, progress=False).skipped
    # an interrupted run (manifest says incomplete) is redone
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    (root / MANIFEST_NAME).write_text(json.dumps({**manifest, 'complete': False}))
    assert not make_toy_coco(root, num_train=2, num_val=2, progress=False).skipped
    assert make_toy_coco(root, num_train=2, num_val=2, progress=False).skipped
    assert not make_toy_coco(root, num_train=2, num_val=2, progress=False, force=True).skipped


def test_make_toy_data_leaves_each_sets_defaults_to_the_set(tmp_path, monkeypatch):
    """A count or side not given reaches no writer: each set's default is stated once, in its own signature (the
    CLI shows it from there); what is given is passed on by name, with the shared seed and flags."""
    from mmrecvit.datasets.toy import layout

    calls = {}
    for kind, name in (('coco', 'make_toy_coco'), ('ade', 'make_toy_ade20k'), ('cls', 'make_toy_cls')):
        monkeypatch.setattr(layout, name, lambda root, _kind=kind, **kw: calls.setdefault(_kind, (root, kw)))
    layout.make_toy_data(tmp_path, seed=3, coco_val=4, cls_size=32, progress=False)
    shared = dict(seed=3, force=False, progress=False)
    assert calls == {
        'coco': (tmp_path / toy.TOY_COCO_DIR, dict(shared, num_val=4)),
        'ade': (tmp_path / toy.TOY_ADE_DIR, shared),
        'cls': (tmp_path / toy.TOY_CLS_DIR, dict(shared, size=32)),
    }
    script = REPO / 'tools' / 'misc' / 'make_toy_data.py'
    help_text = subprocess.run([sys.executable, str(script), '--help'], capture_output=True, text=True).stdout
    assert '(default: its own, 1000)' in ' '.join(help_text.split())  # make_toy_cls's num_train


def test_refuses_to_overwrite_a_foreign_folder(tmp_path):
    (tmp_path / 'train2017').mkdir()
    (tmp_path / 'train2017' / 'real.jpg').write_bytes(b'not ours')
    with pytest.raises(FileExistsError, match='force'):
        make_toy_coco(tmp_path, num_train=1, num_val=1, progress=False)
    assert (tmp_path / 'train2017' / 'real.jpg').exists()
    make_toy_coco(tmp_path, num_train=1, num_val=1, progress=False, force=True)
    assert not (tmp_path / 'train2017' / 'real.jpg').exists()


@pytest.mark.parametrize(
    'kwargs, name',
    [
        (dict(num_train=-1), 'num_train'),
        (dict(size=16), 'size'),
        (dict(seed=-3), 'seed'),
        (dict(min_instances=4, max_instances=3), 'min_instances'),
        (dict(radius_range=(0.3, 0.1)), 'radius_range'),
    ],
)
def test_bad_arguments_name_the_argument(tmp_path, kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_toy_coco(tmp_path, progress=False, **kwargs)


@pytest.mark.subprocess
def test_cli_writes_skips_and_needs_no_torch(tmp_path):
    """The CLI end to end in a fresh interpreter: it must not import torch, mmdet or mmseg."""
    script = REPO / 'tools' / 'misc' / 'make_toy_data.py'
    code = (
        f'import sys; sys.argv = ["make_toy_data.py"] + sys.argv[1:]; import runpy; '
        f'runpy.run_path({str(script)!r}, run_name="__main__"); '
        'bad = [m for m in ("torch", "mmdet", "mmseg", "mmrecvit") if m in sys.modules]; '
        'assert not bad, bad'
    )
    args = [
        '--out',
        str(tmp_path),
        '--coco-train',
        '2',
        '--coco-val',
        '1',
        '--ade-train',
        '2',
        '--ade-val',
        '1',
        '--cls-train',
        '5',
        '--cls-val',
        '5',
        '--size',
        '96',
        '--no-progress',
    ]
    env = {**os.environ, 'PYTHONPATH': ''}
    first = subprocess.run([sys.executable, '-c', code, *args], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert 'written in' in first.stdout and str(tmp_path / 'toy_coco') in first.stdout
    assert str(tmp_path / 'toy_ade' / 'ADEChallengeData2016') in first.stdout
    assert str(tmp_path / 'toy_cls') in first.stdout
    second = subprocess.run(
        [sys.executable, '-c', code, *args, '--which', 'ade'], capture_output=True, text=True, env=env
    )
    assert second.returncode == 0, second.stderr
    assert 'skipped' in second.stdout and 'toy COCO' not in second.stdout
    img = cv2.imread(str(tmp_path / 'toy_coco' / 'val2017' / '000001000001.jpg'))
    assert img.shape == (96, 96, 3)
    assert cv2.imread(str(tmp_path / 'toy_cls' / 'val' / 'circle' / 'val_000000.jpg')).shape == (64, 64, 3)


# --------------------------------------------------------------------------------------------- COCO
def test_coco_json_reads_with_pycocotools(coco_root):
    for split, n in (('train2017', COUNTS['coco_train']), ('val2017', COUNTS['coco_val'])):
        coco = COCO(str(coco_root / 'annotations' / f'instances_{split}.json'))
        cats = coco.loadCats(coco.getCatIds())
        assert [(c['id'], c['name']) for c in cats] == [(i + 1, n) for i, n in enumerate(TOY_COCO_CLASSES)]
        assert len(coco.getImgIds()) == n
        seen = set()
        for img_id in coco.getImgIds():
            info = coco.loadImgs(img_id)[0]
            img = cv2.imread(str(coco_root / split / info['file_name']))
            assert img.shape == (info['height'], info['width'], 3) == (SIZE, SIZE, 3)
            anns = coco.loadAnns(coco.getAnnIds(imgIds=img_id))
            assert len(anns) >= MIN_INSTANCES
            union = np.zeros((SIZE, SIZE), np.int32)
            for ann in anns:
                m = coco.annToMask(ann)
                assert m.shape == (SIZE, SIZE) and ann['iscrowd'] == 0
                ys, xs = np.nonzero(m)
                assert ann['area'] == m.sum() > 0
                assert ann['bbox'] == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
                union += m
                seen.add(ann['category_id'])
            assert union.max() == 1, 'visible masks of one image must not overlap'
        assert seen == set(range(1, len(TOY_COCO_CLASSES) + 1))
    assert len(TOY_COCO_PALETTE) == len(TOY_COCO_CLASSES)


def test_coco_annotations_are_the_visible_masks_and_occlusion_happens(coco_root):
    """Re-render each image: annotations = the visible masks; some instances are partly covered."""
    coco = COCO(str(coco_root / 'annotations' / 'instances_train2017.json'))
    occluded = 0
    for i, img_id in enumerate(sorted(coco.getImgIds())):
        sample = render_coco_image(rng_for(0, 'coco', 'train', i), SIZE)
        anns = coco.loadAnns(coco.getAnnIds(imgIds=img_id))
        assert [a['category_id'] - 1 for a in anns] == sample.labels
        for k, (ann, full, vis) in enumerate(zip(anns, sample.full_masks, sample.visible_masks)):
            assert np.array_equal(coco.annToMask(ann).astype(bool), vis)
            later = np.any(sample.full_masks[k + 1 :], axis=0) if k + 1 < len(anns) else np.zeros_like(full)
            assert np.array_equal(vis, full & ~later)
            assert vis.sum() >= toy.MIN_VISIBLE_FRACTION * full.sum()
            occluded += int(vis.sum() < full.sum())
    assert occluded >= 3, f'only {occluded} occluded instances in {COUNTS["coco_train"]} images'


def test_coco_instances_have_their_class_colour(coco_root):
    """Each instance is painted in its class's palette colour: the nearest palette colour to an
    instance's mean visible colour is its own class's (for nearly all instances: shading and noise)."""
    coco = COCO(str(coco_root / 'annotations' / 'instances_train2017.json'))
    palette = np.asarray(TOY_COCO_PALETTE, float)
    hits = total = 0
    for img_id in coco.getImgIds():
        info = coco.imgs[img_id]
        img = cv2.imread(str(coco_root / 'train2017' / info['file_name']))[..., ::-1].astype(float)
        for ann in coco.loadAnns(coco.getAnnIds(imgIds=img_id)):
            mean = img[coco.annToMask(ann).astype(bool)].mean(0)
            hits += int(np.abs(palette - mean).sum(1).argmin() == ann['category_id'] - 1)
            total += 1
    assert total >= 20 and hits >= 0.9 * total, f'{hits} of {total} instances nearest their class colour'


def test_coco_ground_truth_scores_perfectly_in_cocoeval(coco_root):
    """pycocotools' evaluator reads the set; the ground truth as detections gives AP 1."""
    coco = COCO(str(coco_root / 'annotations' / 'instances_val2017.json'))
    dets = [
        {
            'image_id': a['image_id'],
            'category_id': a['category_id'],
            'segmentation': a['segmentation'],
            'bbox': a['bbox'],
            'score': 1.0,
        }
        for a in coco.loadAnns(coco.getAnnIds())
    ]
    for iou_type in ('bbox', 'segm'):
        ev = COCOeval(coco, coco.loadRes(dets), iou_type)
        ev.params.areaRng, ev.params.areaRngLbl = [[0, 1e10]], ['all']
        ev.evaluate()
        ev.accumulate()
        precision = ev.eval['precision'][:, :, :, 0, -1]  # (iou, recall, class) at area 'all', maxDets 100
        assert np.allclose(precision[precision > -1], 1.0)


# --------------------------------------------------------------------------------------------- ADE20K
def test_ade_layout_pairs_and_label_values(ade_root):
    allowed = {0, *TOY_ADE_LABELS.values()}
    seen: set[int] = set()
    for split, prefix in (('training', 'ADE_train_'), ('validation', 'ADE_val_')):
        imgs = sorted(p.stem for p in (ade_root / 'images' / split).iterdir())
        anns = sorted(p.stem for p in (ade_root / 'annotations' / split).iterdir())
        assert imgs == anns and all(re.fullmatch(prefix + r'\d{8}', s) for s in imgs)
        assert all(p.suffix == '.jpg' for p in (ade_root / 'images' / split).iterdir())
        for stem in imgs:
            img = cv2.imread(str(ade_root / 'images' / split / f'{stem}.jpg'), cv2.IMREAD_UNCHANGED)
            lab = cv2.imread(str(ade_root / 'annotations' / split / f'{stem}.png'), cv2.IMREAD_UNCHANGED)
            assert img.shape == (SIZE, SIZE, 3) and lab.shape == (SIZE, SIZE) and lab.dtype == np.uint8
            values = set(np.unique(lab).tolist())
            assert values <= allowed, values - allowed
            assert len(values - {0}) >= 3, f'{stem}: a scene should hold several classes'
            seen |= values
    assert seen == allowed, f'classes never drawn: {allowed - seen}'


def test_ade_class_names_are_ade20k_indices():
    for name, value in TOY_ADE_LABELS.items():
        assert ADE20K_FIRST_CLASSES[value - 1] == name
    assert TOY_ADE_MMSEG_INDICES == tuple(v - 1 for v in TOY_ADE_LABELS.values())


def test_ade_images_follow_their_labels(ade_root):
    """Each class's pixels have their own look: the mean colour per class differs between classes."""
    img = cv2.imread(str(ade_root / 'images' / 'training' / 'ADE_train_00000001.jpg'))[..., ::-1].astype(float)
    lab = cv2.imread(str(ade_root / 'annotations' / 'training' / 'ADE_train_00000001.png'), cv2.IMREAD_UNCHANGED)
    means = {v: img[lab == v].mean(0) for v in np.unique(lab) if v and (lab == v).sum() > 200}
    assert len(means) >= 3
    vals = list(means.values())
    assert min(np.abs(a - b).sum() for i, a in enumerate(vals) for b in vals[i + 1 :]) > 10


def test_ade20k_default_size_arguments(tmp_path):
    r = make_toy_ade20k(tmp_path / 'ADEChallengeData2016', num_train=1, num_val=1, size=100, seed=5, progress=False)
    lab = cv2.imread(str(r.root / 'annotations' / 'validation' / 'ADE_val_00000001.png'), cv2.IMREAD_UNCHANGED)
    assert lab.shape == (100, 100) and not r.skipped and r.root.name == 'ADEChallengeData2016'


# --------------------------------------------------------------------------------------------- classification
def test_cls_classes_are_toy_cocos_in_sorted_folder_order():
    assert TOY_CLS_CLASSES == tuple(sorted(TOY_COCO_CLASSES))


def test_cls_images_are_one_whole_shape_in_its_class_colour(cls_root):
    """Image i of a split is class i % 5 (balanced); its shape lies inside the frame and is painted in
    its class's toy COCO palette colour: the nearest palette colour to the shape's mean colour."""
    palette = np.asarray(TOY_COCO_PALETTE, float)
    for split in ('train', 'val'):
        paths = sorted((cls_root / split).glob('*/*.jpg'), key=lambda p: p.name)
        assert [p.name for p in paths] == [f'{split}_{i:06d}.jpg' for i in range(COUNTS[f'cls_{split}'])]
        for i, path in enumerate(paths):
            label = i % len(TOY_CLS_CLASSES)
            assert path.parent.name == TOY_CLS_CLASSES[label]
            img, mask = render_cls_image(rng_for(0, 'cls', split, i), label)
            on_disk = cv2.imread(str(path))[..., ::-1]
            assert on_disk.shape == img.shape == (64, 64, 3) and mask.shape == (64, 64)
            assert np.abs(on_disk.astype(int) - img).mean() < 8  # the JPEG of the rendered image (less its noise)
            assert 0.05 < mask.mean() < 0.6
            assert not (mask[0].any() or mask[-1].any() or mask[:, 0].any() or mask[:, -1].any())
            nearest = np.abs(palette - on_disk[mask].mean(0)).sum(1).argmin()
            assert TOY_COCO_CLASSES[nearest] == TOY_CLS_CLASSES[label], path


def test_cls_skips_a_complete_set_and_checks_its_arguments(tmp_path):
    first = make_toy_cls(tmp_path, num_train=5, num_val=5, progress=False)
    again = make_toy_cls(tmp_path, num_train=5, num_val=5, progress=False)
    assert not first.skipped and again.skipped and again.files['val'] == tmp_path / 'val'
    assert not make_toy_cls(tmp_path, num_train=5, num_val=5, size=72, progress=False).skipped
    assert cv2.imread(str(tmp_path / 'train' / 'circle' / 'train_000000.jpg')).shape == (72, 72, 3)
    with pytest.raises(ValueError, match='num_val must be >= 5'):
        make_toy_cls(tmp_path, num_train=5, num_val=4, progress=False)
    with pytest.raises(ValueError, match='which: unknown'):
        make_toy_data(tmp_path, which=('imagenet',))


# --------------------------------------------------------------------------------------------- frameworks
@pytest.mark.skipif(importlib.util.find_spec('mmdet') is None, reason='mmdet is not installed')
def test_mmdet_coco_dataset_loads_toy_coco(coco_root):
    from mmcv.transforms import LoadImageFromFile
    from mmdet.datasets import CocoDataset
    from mmdet.datasets.transforms import LoadAnnotations

    ds = CocoDataset(
        data_root=str(coco_root),
        ann_file='annotations/instances_val2017.json',
        data_prefix=dict(img='val2017/'),
        metainfo=dict(classes=TOY_COCO_CLASSES, palette=TOY_COCO_PALETTE),
        pipeline=[LoadImageFromFile(), LoadAnnotations(with_bbox=True, with_mask=True)],
    )
    assert len(ds) == COUNTS['coco_val'] and ds.metainfo['classes'] == TOY_COCO_CLASSES
    coco = COCO(str(coco_root / 'annotations' / 'instances_val2017.json'))
    for i in range(len(ds)):
        out = ds[i]
        anns = coco.loadAnns(coco.getAnnIds(imgIds=out['img_id']))
        assert out['img'].shape == (SIZE, SIZE, 3)
        assert out['gt_bboxes_labels'].tolist() == [a['category_id'] - 1 for a in anns]
        xywh = np.array([a['bbox'] for a in anns])
        np.testing.assert_allclose(out['gt_bboxes'].numpy(), np.c_[xywh[:, :2], xywh[:, :2] + xywh[:, 2:]])
        masks = out['gt_masks'].to_ndarray()
        assert masks.shape == (len(anns), SIZE, SIZE)
        assert masks.sum((1, 2)).tolist() == [a['area'] for a in anns]


@pytest.mark.skipif(importlib.util.find_spec('mmseg') is None, reason='mmseg is not installed')
def test_mmseg_ade20k_dataset_loads_toy_ade(ade_root):
    from mmcv.transforms import LoadImageFromFile
    from mmseg.datasets import ADE20KDataset
    from mmseg.datasets.transforms import LoadAnnotations

    for split, n in (('training', COUNTS['ade_train']), ('validation', COUNTS['ade_val'])):
        ds = ADE20KDataset(
            data_root=str(ade_root),
            data_prefix=dict(img_path=f'images/{split}', seg_map_path=f'annotations/{split}'),
            pipeline=[LoadImageFromFile(), LoadAnnotations()],
        )
        assert len(ds) == n
        classes = ds.metainfo['classes']
        assert [classes[i].strip() for i in TOY_ADE_MMSEG_INDICES] == list(TOY_ADE_LABELS)
        for i in range(len(ds)):
            out = ds[i]
            raw = cv2.imread(out['seg_map_path'], cv2.IMREAD_UNCHANGED)
            seg = out['gt_seg_map']
            assert out['img'].shape == (SIZE, SIZE, 3) and seg.shape == (SIZE, SIZE)
            assert set(np.unique(seg).tolist()) <= {255, *TOY_ADE_MMSEG_INDICES}
            # reduce_zero_label: 0 -> 255 (ignored), v -> v - 1
            np.testing.assert_array_equal(seg, np.where(raw == 0, 255, raw.astype(np.int64) - 1))


@pytest.mark.skipif(importlib.util.find_spec('mmpretrain') is None, reason='mmpretrain is not installed')
def test_mmpretrain_imagenet_and_custom_dataset_load_toy_cls(cls_root):
    from mmpretrain.datasets import CustomDataset, ImageNet

    for split in ('train', 'val'):
        imagenet = ImageNet(data_root=str(cls_root), split=split, metainfo=dict(classes=TOY_CLS_CLASSES))
        custom = CustomDataset(data_root=str(cls_root), data_prefix=split)  # classes from the folders
        for ds in (imagenet, custom):
            assert len(ds) == COUNTS[f'cls_{split}'] and tuple(ds.metainfo['classes']) == TOY_CLS_CLASSES
            for i in range(len(ds)):
                info = ds.get_data_info(i)
                assert TOY_CLS_CLASSES[info['gt_label']] == Path(info['img_path']).parent.name
