# ViTDet's COCO data (projects/ViTDet/configs/common/coco_loader_lsj.py): large-scale jitter at 1024 on top of
# detectron2's model-zoo `common/data/coco.py` (flip, resize by 0.1-2.0, crop to 1024), RGB, batch 64;
# tested at 1024 (longer side). ViTDet's project configs are not in detectron2's wheel, so this is restated here.
import detectron2.data.transforms as T
from detectron2 import model_zoo
from detectron2.config import LazyCall as L

image_size = 1024
dataloader = model_zoo.get_config('common/data/coco.py').dataloader
dataloader.train.mapper.augmentations = [
    L(T.RandomFlip)(horizontal=True),  # flip first
    L(T.ResizeScale)(min_scale=0.1, max_scale=2.0, target_height=image_size, target_width=image_size),
    L(T.FixedSizeCrop)(crop_size=(image_size, image_size), pad=False),
]
dataloader.train.mapper.image_format = 'RGB'
dataloader.train.mapper.recompute_boxes = True  # the crop cuts boxes
dataloader.train.total_batch_size = 64
dataloader.test.mapper.augmentations = [L(T.ResizeShortestEdge)(short_edge_length=image_size, max_size=image_size)]
