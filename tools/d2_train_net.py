#!/usr/bin/env python
"""Train or evaluate a detectron2 LazyConfig with an mmrecvit backbone (configs/d2/), as detectron2's
`tools/lazyconfig_train_net.py` does (the loop: `mmrecvit/d2/train.py`).

    python tools/d2_train_net.py --config-file configs/d2/toy/mask_rcnn_plainvit_ti_toy_coco.py
    python tools/d2_train_net.py --config-file configs/d2/mask_rcnn_srvit_s_100ep.py --num-gpus 8
    python tools/d2_train_net.py --config-file CONFIG --eval-only train.init_checkpoint=OUT/model_final.pth
    python tools/d2_train_net.py --config-file CONFIG train.max_iter=100 train.output_dir=work_dirs/d2

Overrides are detectron2's `key=value` (after the options). `--num-gpus N` starts N processes with
detectron2's `launch` (NCCL, one GPU each); on a CPU machine run one process (`train.device=cpu`, the
toy configs' setting). The last evaluation goes to `<train.output_dir>/eval.json`.
"""

from detectron2.engine import default_argument_parser, launch

from mmrecvit.d2.train import main
from mmrecvit.inputs import bad_input, config_file


def invoke_main() -> None:
    args = default_argument_parser().parse_args()
    with bad_input('d2_train_net.py'):  # a missing or non-config file: one line
        config_file(args.config_file, '--config-file')
    launch(
        main,
        args.num_gpus,
        num_machines=args.num_machines,
        machine_rank=args.machine_rank,
        dist_url=args.dist_url,
        args=(args,),
    )


if __name__ == '__main__':
    invoke_main()
