"""mmseg's `IoUMetric` with a per-class table of the classes in use (issue 41.4).

mmseg prints a row for every class of the dataset's metainfo: 150 for ADE20K, of which the 8-class toy set leaves
142 `nan` (no pixel of the class in the ground truth or the prediction: IoU 0/0). `IoUMetricInUse` computes the same
metrics (mmseg's `total_area_to_metrics`; mIoU is mmseg's nanmean, so the left-out classes never counted) and prints
the rows of the classes in the ground truth or the prediction, then one line naming how many were left out.
`cli.build_runner` gives it to the configs that ask for mmseg's `IoUMetric`. Written by hand: mmseg's table has
no option to leave rows out.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from mmengine.logging import MMLogger, print_log
from mmseg.evaluation import IoUMetric
from prettytable import PrettyTable


class IoUMetricInUse(IoUMetric):
    """`IoUMetric` whose per-class table lists the classes with a pixel in the ground truth or the prediction."""

    def compute_metrics(self, results: list) -> dict[str, float]:
        if self.format_only:
            return super().compute_metrics(results)
        intersect, union, pred, label = (sum(r) for r in zip(*results))
        per_class = self.total_area_to_metrics(intersect, union, pred, label, self.metrics, self.nan_to_num, self.beta)
        metrics = {k if k == 'aAcc' else f'm{k}': np.round(np.nanmean(v) * 100, 2) for k, v in per_class.items()}
        per_class.pop('aAcc', None)
        in_use = np.flatnonzero(np.asarray(union) > 0)  # a pixel in the ground truth or the prediction
        table = PrettyTable()
        table.add_column('Class', [self.dataset_meta['classes'][i] for i in in_use])
        for name, values in OrderedDict(per_class).items():
            table.add_column(name, np.round(np.asarray(values)[in_use] * 100, 2))
        logger = MMLogger.get_current_instance()
        print_log('per class results (the classes in the ground truth or the prediction):', logger)
        print_log('\n' + table.get_string(), logger=logger)
        left_out = len(union) - len(in_use)
        if left_out:
            print_log(f'{left_out} classes of the dataset are in neither (IoU nan, not in mIoU): not listed', logger)
        return metrics
