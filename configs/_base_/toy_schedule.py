# The toy (CPU) configs' schedule, written once: a helper, not a config. A toy base names this file as a second _base_
# and takes it out, `_base_.pop('toy')` (what is left in `_base_` is merged into the config), then unpacks its
# variables: train_cfg, optim_wrapper, param_scheduler, auto_scale_lr, default_hooks, log_processor.


def schedule(max_iters, lr, batch, warmup=20, eta_min=1e-6, validate=True):
    """`max_iters` iterations of `batch` images at AdamW `lr`: a linear warm-up of `warmup` iterations from 1 % then
    cosine decay to `eta_min`; one checkpoint (and validation, if `validate`) at the end; logs every 10 iterations."""
    train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=max_iters)
    if validate:
        train_cfg.update(val_interval=max_iters)
    param_scheduler = [
        dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=warmup),
        dict(
            type='CosineAnnealingLR',
            T_max=max_iters - warmup,
            eta_min=eta_min,
            by_epoch=False,
            begin=warmup,
            end=max_iters,
        ),
    ]
    default_hooks = dict(
        logger=dict(type='LoggerHook', interval=10),
        checkpoint=dict(type='AtomicCheckpointHook', by_epoch=False, interval=max_iters, max_keep_ckpts=1),
    )
    optim_wrapper, auto_scale_lr = dict(optimizer=dict(lr=lr)), dict(base_batch_size=batch)
    return train_cfg, optim_wrapper, param_scheduler, auto_scale_lr, default_hooks, dict(by_epoch=False)


toy = dict(schedule=schedule)
