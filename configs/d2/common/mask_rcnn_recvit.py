# detectron2's ViTDet Mask R-CNN (model zoo `common/models/mask_rcnn_vitdet.py`: SimpleFeaturePyramid with LN,
# 2-conv RPN, 4conv1fc box head and mask head with LN, square padding to 1024) with an mmrecvit backbone:
# * `RecViTRCNN` adds the backbone's auxiliary losses to the loss dict and its statistics to the EventStorage;
# * `LayerFeaturePyramid` is detectron2's SimpleFeaturePyramid with level i (strides 4, 8, 16, 32) built from the
#   i-th layer map (the stage ends), as the mm recipes' SimplePyramid; ViTDet's builds all from the last;
# * the backbone (here PlainViT-S; per-method configs set `model.backbone.net` from configs/_base_/backbones/ with
#   `use_backbone`) as the mm ViTDet recipe's:
#   DeiT-S weights loaded strictly at construction, drop path 0.1, 14x14 windows with global attention at the
#   stage ends, activation checkpointing, ViTDet's relative position biases.
from detectron2 import model_zoo
from detectron2.config import LazyCall as L
from detectron2.modeling.backbone.fpn import LastLevelMaxPool

from mmrecvit.d2 import LayerFeaturePyramid, PlainViT, RecViTRCNN

model = model_zoo.get_config('common/models/mask_rcnn_vitdet.py').model
model._target_ = RecViTRCNN
model.backbone = L(LayerFeaturePyramid)(
    # use_rel_pos: ViTDet's decomposed relative position biases, zero at the DeiT start (mmrecvit/models/rel_pos.py)
    net=L(PlainViT)(
        arch='small',
        drop_path_rate=0.1,
        window_size=14,
        with_cp=True,
        use_rel_pos=True,
        pretrained='checkpoints/deit_small_patch16_224-cd65a155.pth',
    ),
    out_channels=256,
    scale_factors=(4.0, 2.0, 1.0, 0.5),
    top_block=L(LastLevelMaxPool)(),
    norm='LN',
    square_pad=1024,
)
