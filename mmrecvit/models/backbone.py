"""`ViTBackbone`: what every backbone shares, and the contract a method fulfils (docs/methods/README.md).

Data flow: image -> `embedding.embed` -> the method's generator over its own structure (`iter_layers`, yielding
each layer's state) -> the states of the requested layers (`forward_states`, the one forward) -> timm's formats
(`forward_intermediates`) or maps for a neck, the pooled final state for a classifier (`forward`). Beside it,
cached, the schedule of the forward (`schedule.py`): its steps, from which the FLOP count is derived when read.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from . import arguments as args
from . import embedding, fx
from . import layer_decay as decay
from .checks import check_bool, check_choice, check_float, check_int, checked_keywords
from .compute import check_compute
from .features import TimmFeatures
from .layers import Block, Mlp
from .load_rules import watch_loads
from .numerics import NONFINITE_MODES, DeferredChecks, FiniteGuard, active_guard, finite, tracing
from .pruning import prune_unread
from .schedule import ScheduleCache, Schedules, Step
from .start import load_start
from .stats import ForwardStats


class ViTBackbone(TimmFeatures, Schedules, nn.Module, metaclass=abc.ABCMeta):
    """Base class of every backbone: embeddings, the forward path, checkpointing, pretrained loading, and timm's
    feature API with the framework `forward` on top (`features.TimmFeatures`).

    **Vocabulary** (the glossary: docs/methods/README.md): a **layer** is a position 0..L-1 of the stack, `depth`
    = L; `out_indices` are layers. A **block** is one unique set of parameters (`blocks.{i}`). A **step** is one
    block application, t = 0..`num_steps`-1 (stochastic depth, `global_steps` and checkpointing follow steps); a
    **recursion** is one more pass of a recursion unit's blocks.

    **The subclass contract.** `__init__` calls `super().__init__(embed_dim=..., num_heads=..., depth=L, **kwargs)`
    and builds `blocks` (an `nn.ModuleList` of its unique blocks, `make_block`), `layer_blocks` (the block of each
    layer) and its other modules; a missing one is an error when the model is built. A subclass overrides:

    1. `convert_timm_state_dict(state_dict)`: a timm/DeiT state dict -> its keys (every method);
    2. `iter_layers(x, steps, setting, stats)`: its forward, a generator over its own structure that runs the
       given `steps` and yields (layer, state) after each layer, adding its own numbers to `stats`;
    3. `work(steps, setting, grid)`: what a forward that ran those steps computed (the FLOP model).

    This class alone picks the setting (the compute knob), ends the steps after the last layer needed, reads the
    requested layers and finishes the statistics (`forward_states`). Its own `iter_layers` and `work` are those of a
    model that runs one block per layer over every token (PlainViT, NaiveRecursiveViT: only 1). A method whose
    settings are not the first K layers says which they are (`own_setting`, `compute_settings`, `step_layers`:
    `schedule.Schedules`); one whose token sets or schedule depend on the data says why fx cannot trace it
    (`fx_untraceable`, `fx.py`); one whose own modules (routers, step transforms) serve later steps only says how to
    drop them when pruned (`drop_unreached`, `pruning.py`). Everything else is data the subclass sets in `__init__`
    (`global_layers`, a default `out_indices` passed up) or is read from the full schedule (`num_steps`, `schedule`,
    layer positions).

    Args:
        embed_dim, num_heads, mlp_ratio, qkv_bias, init_values: block sizes (see `layers.Block`). A method takes
            `embed_dim` and `num_heads` as overrides of its `arch`'s row (`arguments.resolve_sizes`).
        depth: L, the number of layers.
        out_indices: layers whose maps `forward` returns (default: the ends of 4 equal stages, (2, 5, 8, 11) for
            12 layers).
        patch_size: patch (and output stride) of the patch embedding.
        img_size: pretraining image size; `pos_embed` is stored for its grid and resampled to each input's.
        in_channels: image channels.
        with_cls_token: prepend a CLS token (DeiT). It takes part in attention but not in the maps.
        drop_path_rate: stochastic depth of the last step; rates grow linearly over the steps (STYLE 3).
        with_cp: activation checkpointing per step in training (same outputs, less memory).
        pretrained: a checkpoint path, the same as `init_cfg=dict(type='Pretrained', ...)` (mmseg passes it).
        init_cfg: `dict(type='Pretrained', checkpoint=PATH, prefix=None)`; loaded strictly by `init_weights()`
            through the model's checkpoint filter (`checkpoint.py`).
        out_type: what `forward` returns (mmpretrain's names): 'featmap' the maps of `out_indices`;
            'cls_token' a 1-tuple with the CLS token of the final state after the final norm (DeiT's
            classifier input); 'avg_featmap' the mean of the final normalised patch tokens.
        final_norm: timm's final LayerNorm `norm` on the final state. None (default): only for the
            classification outputs (a dense backbone's maps stay un-normalised, as mmseg's ViT).
        window_size: window attention (ViTDet, `windows.py`) at every step but the global ones (0: global).
        global_steps: the steps with global attention when windowed; default (None) the steps that run one of
            `global_layers` (ViTDet's: the ends of the four stages; SR-ViT: its global layers in every recursion).
        use_rel_pos: ViTDet's decomposed relative position biases (`rel_pos.py`): one zero-initialised pair of
            tables per unique block, sized for `img_size`'s grid, shared by all its steps (windowed and global,
            every recursion) and resized to each step's window or global grid.
        amp_dtype: None, 'bf16' or 'fp16': the forward runs under autocast and returns fp32 outputs, so the
            rest of a detector (mmcv's RoIAlign and nms have no bf16 kernels) stays in fp32. Routers still
            decide in fp32 (`full_precision`). A plain attribute (`tools/train.py --amp-dtype bf16`).
        nonfinite: 'raise' (default) a `NonFiniteError` when router logits or an aux loss hold NaN/inf, naming
            the module and step, read after the forward without a host sync (by the training hooks once per
            iteration, the next forward, or `numerics.check_finite`); 'warn' skips them (one sync per check);
            'off' checks nothing (`numerics.py`). A plain attribute.
        compute: the test-time compute knob's default (`compute.py`): None the forward as configured, or a
            fraction in (0, 1] of the full-depth backbone FLOPs at the input's size. `forward(x, compute=...)`
            takes one per call; eval mode only.
    """

    # An argument that acts only in some modes of another is refused in the others (checks.check_modes).
    mode_arguments = {'global_steps': ('window_size', (0,))}  # window_size 0: every step attends globally
    in_place_reads = False  # True: without autograd the method writes later states into earlier ones' memory

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Wrap each subclass's `__init__` so that the contract is checked once the whole model is built (when
        the outermost `__init__` returns, whichever class defines it)."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get('__init__')
        if init is None:
            return
        init = checked_keywords(init)  # a misspelt or ineffective argument: one line naming why (checks.py)

        @functools.wraps(init)
        def checked_init(self: ViTBackbone, *a: Any, **k: Any) -> None:
            level = self.__dict__.get('_init_level', 0)
            object.__setattr__(self, '_init_level', level + 1)
            try:
                init(self, *a, **k)
            finally:
                object.__setattr__(self, '_init_level', level)
            if level == 0:
                self._finish_construction()

        cls.__init__ = checked_init

    @checked_keywords  # the end of the chain: what subclasses pass on with **kwargs is checked here
    def __init__(
        self,
        *,
        embed_dim: int,
        num_heads: int,
        depth: int,
        out_indices: Sequence[int] | None = None,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        init_values: float | None = None,
        patch_size: int = 16,
        img_size: int | Sequence[int] = 224,
        in_channels: int = 3,
        with_cls_token: bool = True,
        drop_path_rate: float = 0.0,
        with_cp: bool = False,
        pretrained: str | None = None,
        init_cfg: dict | None = None,
        out_type: str = 'featmap',
        final_norm: bool | None = None,
        window_size: int = 0,
        global_steps: Sequence[int] | None = None,
        use_rel_pos: bool = False,
        amp_dtype: str | None = None,
        nonfinite: str = 'raise',
        compute: float | None = None,
    ) -> None:
        super().__init__()
        self._schedules = ScheduleCache()  # steps, reads, FLOP plans by key (`schedule.py`)
        sizes = args.check_sizes(embed_dim, num_heads, mlp_ratio, patch_size, img_size)
        self.embed_dim, self.num_heads, self.mlp_ratio, self.patch_size, self.pretrain_grid = sizes
        self.qkv_bias = check_bool('qkv_bias', qkv_bias)
        if init_values is not None:
            init_values = check_float('init_values', init_values, 0.0, float('inf'), low_open=True)
        self.init_values = init_values
        check_int('in_channels', in_channels, 1)
        self.with_cls_token = check_bool('with_cls_token', with_cls_token)
        self.num_prefix_tokens = int(with_cls_token)
        self.drop_path_rate = check_float('drop_path_rate', drop_path_rate, 0.0, 1.0, high_open=True)
        self._depth = check_int('depth (the number of layers)', depth, 1)
        self._kept_layers: int | None = None  # set when pruned at build (`pruning.py`)
        self.pruned_keys: frozenset[str] = frozenset()  # the state-dict keys pruning removed (a load drops them)
        self.pruned_after = ''  # why it was pruned at build, for messages
        self._out_indices, self._global_steps = out_indices, global_steps
        self.with_cp = check_bool('with_cp', with_cp)
        self.init_cfg = args.resolve_init_cfg(pretrained, init_cfg)
        self.nonfinite = check_choice('nonfinite', nonfinite, NONFINITE_MODES)
        self.finite_checks = DeferredChecks()  # 'raise': the flags of forwards not read yet
        self.compute = check_compute(compute)
        self.out_type, final_norm = args.check_outputs(out_type, final_norm, with_cls_token)
        self.amp_dtype = check_choice('amp_dtype', amp_dtype, list(args.AMP_DTYPES))
        self.window_size = check_int('window_size', window_size, 0)
        self.use_rel_pos = check_bool('use_rel_pos', use_rel_pos)
        self.global_layers = args.stage_ends(self._depth)  # ViTDet's global blocks (SR-ViT sets its own)

        self.patch_embed = embedding.patch_embed(in_channels, self.embed_dim, self.patch_size, self.pretrain_grid)
        self.cls_token, self.pos_embed = embedding.init_tokens(
            self.embed_dim, self.pretrain_grid[0] * self.pretrain_grid[1] + self.num_prefix_tokens, with_cls_token
        )
        self.norm = nn.LayerNorm(self.embed_dim, eps=1e-6) if final_norm else nn.Identity()
        watch_loads(self)  # every load_state_dict resamples pos_embed, adapts in_channels (load_rules.py)

    def _finish_construction(self) -> None:
        """The contract (class docstring), then what needs the subclass's structure: outputs, steps."""
        if not isinstance(getattr(self, 'blocks', None), (nn.ModuleList, list, tuple)) or not self.blocks:
            raise TypeError(
                f'{type(self).__name__} must set `blocks` (its unique blocks, an nn.ModuleList) in __init__ '
                '(the ViTBackbone contract)'
            )
        if len(getattr(self, 'layer_blocks', None) or ()) != self.depth:
            raise TypeError(
                f'{type(self).__name__} must set `layer_blocks` (the block of each of its {self.depth} layers) in '
                '__init__ (the ViTBackbone contract)'
            )
        default = args.stage_ends(self.depth)
        out = default if self._out_indices is None else self._out_indices
        self.out_indices = args.check_out_indices(out, self.depth)
        self.global_steps = None  # the full schedule counted first, then the steps checked against it
        self.global_steps = args.check_global_steps(self._global_steps, self.num_steps)
        self.drop_path_rates = torch.linspace(0, self.drop_path_rate, self.num_steps, device='cpu').tolist()
        prune_unread(self)  # out_indices that stop early: the layers no step reaches are not owned (DDP)

    # ---- structure ----------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """L, the number of layers."""
        return self._depth

    @property
    def kept_layers(self) -> int:
        """The layers this model can run: `depth`, or fewer when its `out_indices` stop early and the layers after
        them were pruned at build (`pruning.py`; the feature API counts these layers, as timm's after pruning)."""
        return self._depth if self._kept_layers is None else self._kept_layers

    def drop_unreached(self, steps: Sequence[tuple[int, int]]) -> None:
        """Pruning at build (`pruning.py`): delete the method's own modules (routers, step transforms) that no step
        of `steps` ((step, layer) of the kept training schedule) reaches, trailing entries only. The base: none."""

    @property
    def num_steps(self) -> int:
        """Block applications of the full forward (= `depth` but in SR-ViT)."""
        return len(self.step_layers(None))

    @property
    def num_blocks(self) -> int:
        """The number of unique blocks (`blocks.{i}`)."""
        return len(self.blocks)

    @property
    def mlp_hidden(self) -> int:
        return int(self.embed_dim * self.mlp_ratio)

    def make_block(self, mlp_layer: Any = Mlp, block: type[Block] = Block) -> Block:
        grid = self.pretrain_grid if self.use_rel_pos else None
        return block(self.embed_dim, self.num_heads, self.mlp_ratio, self.qkv_bias, self.init_values, mlp_layer, grid)

    @property
    def schedule(self) -> list[int]:
        """The block of every step of the full forward (a view of its steps)."""
        index = {id(block): i for i, block in enumerate(self.blocks)}
        return [index[id(step.block)] for step in self.steps(None, self.pretrain_grid)]

    @property
    def prunable(self) -> bool:
        """Whether the layers after a requested one can be cut (`prune_intermediate_layers`): a model that runs one
        block per layer over every token (the base class's own `iter_layers`), whose later layers compute nothing
        the earlier ones need."""
        return type(self).iter_layers is ViTBackbone.iter_layers

    def fx_untraceable(self) -> str | None:
        """Why torch.fx cannot trace this forward (None: it can, at the model's own grid, `fx.py`): a method whose
        token sets or schedule depend on the data overrides it with its reason."""
        return None

    def block_name(self, block: int | nn.Module) -> str:
        """The module name of a unique block (its index in `blocks`, or the module; for the layer-decay positions)."""
        block = self.blocks[block] if isinstance(block, int) else block
        return next(name for name, m in self.named_modules() if m is block)

    def layer_positions(self) -> dict[str, list[int]]:
        """Module name -> the layer position (1-based) of every step of the full forward that runs it
        (`layer_decay`)."""
        steps = self.steps(None, self.pretrain_grid)
        return decay.positions([(self.block_name(s.block), s.layer) for s in steps])

    @property
    def num_layers(self) -> int:
        """L, the layers, as detectron2 and mmpretrain count them: `lr_scale = rate ** (num_layers + 1 - depth)`."""
        return decay.num_layers(self.layer_positions())

    def layer_depth(self, param_name: str) -> float:
        """Layer depth in [0, `num_layers` + 1] of a parameter (a name of `named_parameters()`; `layer_decay.py`)."""
        return decay.parameter_depth(self, param_name, self.layer_positions())

    # ---- weights ------------------------------------------------------------------------------
    def init_weights(self) -> None:
        """Load `init_cfg`'s checkpoint strictly (called by mmengine's Runner; no-op without one). Modules
        initialise themselves at construction (timm's scheme; routers zero)."""
        if self.init_cfg is not None:  # strict; a missing file or an unrepresentable start is said (start.py)
            load_start(self, self.init_cfg)
        self.is_init = True  # mmengine's BaseModule convention: do not initialise twice

    @abc.abstractmethod
    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """Map a timm/DeiT state dict (already split of its classifier) to this model's keys."""

    # ---- forward ------------------------------------------------------------------------------
    def patch_grid(self, x: Tensor) -> tuple[int, int]:
        return embedding.patch_grid(x, self.patch_size)

    def embed(self, x: Tensor, grid: tuple[int, int] | None = None) -> Tensor:
        """(B, C, H, W) image -> (B, N, D) tokens, CLS first (`embedding.embed`; `grid`: `patch_grid(x)`)."""
        grid = self.patch_grid(x) if grid is None else grid
        return embedding.embed(x, grid, self.patch_embed, self.cls_token, self.pos_embed, self.pretrain_grid)

    def block_runner(self) -> Callable[..., Tensor]:
        """`run(fn, *args, **kwargs)` for every block application of a forward: `fn(*args, **kwargs)`, or with
        `with_cp` in training its activation checkpoint (the same outputs, less memory), as timm's loop does."""
        if self.with_cp and self.training and torch.is_grad_enabled():
            return functools.partial(checkpoint, use_reentrant=False)
        return _call if torch.compiler.is_compiling() else call  # dynamo traces Python calls, not operator.call

    def iter_layers(self, x: Tensor, steps: tuple[Step, ...], setting: Any, stats: ForwardStats) -> Iterator:
        """The forward of one block per layer over every token, `layer_blocks[t]` at layer t (PlainViT,
        NaiveRecursiveViT): tokens (B, N, D) -> yields (layer, state) after every step of `steps`."""
        run = self.block_runner()
        for step in steps:
            x = run(step.block, x, drop_path_rate=step.drop_path_rate, layout=step.layout)
            yield step.layer, x

    def forward_states(
        self, x: Tensor, layers: tuple[int, ...], compute: float | None = None
    ) -> tuple[list[Tensor], Tensor, ForwardStats]:
        """Image (B, C, H, W) -> (the states (B, N, D) of `layers` (sorted), the final state, this forward's
        statistics): the forward every feature API runs (`features.py`). It alone picks the setting (the compute
        knob), hands the method's `iter_layers` the steps up to the last layer it reads, reads the requested
        layers from what it yields, and finishes the statistics (finiteness, maps on the grid, the FLOP count)."""
        grid = None
        if fx.traced(x):  # a graph at the model's own grid and compute=None, each checked when it runs (fx.py)
            x, compute, grid = fx.specialise(self, x, compute)
        if compute is not None or self.compute is not None:
            compute = check_compute(self.compute if compute is None else compute)
            if self.training:
                raise RuntimeError(
                    f'compute={compute} is a test-time knob (eval mode only); call model.eval() or set compute=None '
                    'to train'
                )
        if self.nonfinite not in NONFINITE_MODES or self.amp_dtype not in args.AMP_DTYPES:  # plain attributes
            check_choice('nonfinite', self.nonfinite, NONFINITE_MODES)
            check_choice('amp_dtype', self.amp_dtype, list(args.AMP_DTYPES))
        grid = self.patch_grid(x) if grid is None else grid
        setting = self.own_setting if compute is None else self.setting_within(compute, grid)
        steps, reads = self.layer_reads(setting, grid, layers)
        stats = ForwardStats({}, {}, {}, {}, grid, setting, [])  # not default factories: torch.compile traces this
        states, last, dtype = {}, steps[-1].layer, args.AMP_DTYPES[self.amp_dtype]
        copy = self.in_place_reads and not torch.is_grad_enabled()  # later steps would write into a read state
        # The router/aux-loss checks, read after the forward without a sync (none while tracing: no graph holds them)
        guard = None if tracing() else FiniteGuard(type(self).__name__, self.nonfinite)
        if guard is not None:
            self.finite_checks.poll()  # earlier forwards' flags that have reached the host (no wait)
        token = None if guard is None else active_guard.set(guard)  # the routers' `numerics.finite` reads it
        try:
            with torch.autocast(x.device.type, dtype=dtype) if dtype else contextlib.nullcontext():
                for layer, state in self.iter_layers(self.embed(x, grid), steps, setting, stats):
                    for i in reads.get(layer, ()):
                        states[i] = state.clone() if copy and layer != last else state
            if stats.aux_losses:
                where = 'the end of the forward'
                stats.aux_losses = {k: finite(f'auxiliary loss {k}', where, v) for k, v in stats.aux_losses.items()}
        finally:
            if token is not None:
                active_guard.reset(token)
        pending = None if guard is None else guard.finish()
        if pending is not None:
            self.finite_checks.pending.append(pending)
        if not torch.compiler.is_compiling():  # the FLOP model's objects stay out of a compiled graph's outputs
            stats.count = functools.partial(self.counted, steps, stats.setting, grid)
        if stats.token_maps:
            stats.token_maps = {
                k: m.unflatten(-1, grid) for k, m in stats.token_maps.items()
            }  # (..., h*w) -> (..., h, w)
        if dtype:
            return [states[i].float() for i in layers], state.float(), stats
        return [states[i] for i in layers], state, stats


def _call(fn: Callable[..., Tensor], /, *args: Any, **kwargs: Any) -> Tensor:
    return fn(*args, **kwargs)


# `fn(*args, **kwargs)`: operator.call (Python 3.11+) adds no Python frame between a forward's loop and its blocks.
call = getattr(operator, 'call', _call)
