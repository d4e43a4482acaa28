"""Training hooks, one file per hook (as mmdet's `engine/hooks/`): our backbones' losses and statistics in
the loss dict, exact resume, TF32, a temperature schedule and kill-safe checkpoints.

* `recursion_hook.py`: `RecursionHook`, every mmrecvit backbone's aux losses and statistics added to
  the model's loss dict (read from each forward's result: `mmrecvit.adapters.StatsCollector`);
* `rng_state_hook.py`: `RNGStateHook`, exact resume (`get_rng_states` / `set_rng_states`);
* `tf32_hook.py`: `TF32Hook`, TensorFloat-32 in fp32 matmuls and convolutions;
* `temperature_schedule_hook.py`: `TemperatureScheduleHook`, Edge-RecViT's `gumbel_tau` annealed;
* `atomic_checkpoint_hook.py`: `AtomicCheckpointHook`, `CheckpointHook` whose checkpoints survive a
  kill at any moment (`replace_atomically`, `write_text_atomically`);
* `start_meta_hook.py`: `StartMetaHook`, the measured top-1 in the last checkpoint's meta (`mm/start_meta.py`).

The hooks register nothing themselves: `mmrecvit.mm.registry.register_all` registers `HOOK_CLASSES`
into each framework's `HOOKS` once, on `import mmrecvit.mm`.
"""

from .atomic_checkpoint_hook import AtomicCheckpointHook, replace_atomically, write_text_atomically
from .recursion_hook import RecursionHook
from .rng_state_hook import RNGStateHook, get_rng_states, set_rng_states
from .start_meta_hook import StartMetaHook
from .temperature_schedule_hook import TemperatureScheduleHook
from .tf32_hook import TF32Hook

HOOK_CLASSES = {
    'RecursionHook': RecursionHook,
    'RNGStateHook': RNGStateHook,
    'TemperatureScheduleHook': TemperatureScheduleHook,
    'TF32Hook': TF32Hook,
    'AtomicCheckpointHook': AtomicCheckpointHook,
    'StartMetaHook': StartMetaHook,
}

__all__ = [
    'HOOK_CLASSES',
    'AtomicCheckpointHook',
    'RNGStateHook',
    'RecursionHook',
    'StartMetaHook',
    'TF32Hook',
    'TemperatureScheduleHook',
    'get_rng_states',
    'replace_atomically',
    'set_rng_states',
    'write_text_atomically',
]
