"""`ViTBackbone`: what every backbone shares, and the contract a method fulfils (docs/methods/README.md).

Data flow: image -> `embedding.embed` -> the method's loop over its own structure (`forward_layers`, each block
application through `run_block`) -> the states of the requested layers -> `forward_intermediates` (timm's
formats) -> maps for a neck, or the pooled final state for a classifier. Beside the loop, cached, the method's
`plan`: what a forward at a setting computes, which the FLOP model and the compute knob read.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from . import arguments as args
from . import embedding, token_adaptive
from . import layer_decay as decay
from .checks import check_bool, check_choice, check_float, check_int, checked_keywords
from .compute import check_compute, largest_within
from .features import TimmFeatures
from .flops import OpWork, conv_work, total_flops
from .layers import Block, Mlp
from .load_rules import watch_loads
from .numerics import NONFINITE_MODES, tracing
from .plan import Forward, Plan, PlanCache, Step, step_work
from .start import load_start
from .stats import ForwardStats
from .windows import Global, Windows


class ViTBackbone(TimmFeatures, nn.Module, metaclass=abc.ABCMeta):
    """Base class of every backbone: embeddings, the forward path, checkpointing, pretrained loading, and timm's
    feature API with the framework `forward` on top (`features.TimmFeatures`).

    **Vocabulary** (the glossary: docs/methods/README.md): a **layer** is a position 0..L-1 of the stack, `depth`
    = L; `out_indices` are layers. A **block** is one unique set of parameters (`blocks.{i}`). A **step** is one
    block application, t = 0..`num_steps`-1 (stochastic depth, `global_steps` and checkpointing follow steps); a
    **recursion** is one more pass of a recursion unit's blocks.

    **The subclass contract.** `__init__` calls `super().__init__(embed_dim=..., num_heads=..., depth=L, **kwargs)`
    and builds `blocks` (an `nn.ModuleList` of its unique blocks, `make_block`) and its other modules; a missing
    `blocks` is an error when the model is built. A subclass overrides at most three methods:

    1. `convert_timm_state_dict(state_dict)`: a timm/DeiT state dict -> its keys (every method);
    2. `forward_layers(x, fwd)`: the forward, a plain loop over the method's own structure calling `run_block`
       for every block application; it picks its setting (the compute knob: `within`), keeps the requested
       layers' states (`fwd.keep`) and reports its setting and statistics in `fwd`;
    3. `plan(setting, grid)`: the `plan.Plan` of a forward at `setting` (None: full depth) on a `grid` input,
       which the FLOP model and the compute knob read (cached: `cached_plan`).

    The base class's own forward and plan are those of a model that runs one block per layer over every token,
    `layer_blocks[t]` at layer t (PlainViT and NaiveRecursiveViT set `layer_blocks` and override only 1); the
    other methods override all three. Everything else is data the subclass sets in `__init__` (`global_layers`,
    a default `out_indices` passed up) or is read from the full plan (`num_steps`, `schedule`, layer positions).

    Args:
        embed_dim, num_heads, mlp_ratio, qkv_bias, init_values: block sizes (see `layers.Block`).
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
            the module and step; 'warn' skips them (`numerics.py`). A plain attribute.
        compute: the test-time compute knob's default (`compute.py`): None the forward as configured, or a
            fraction in (0, 1] of the full-depth backbone FLOPs at the input's size. `forward(x, compute=...)`
            takes one per call; eval mode only.
    """

    # An argument that acts only in some modes of another is refused in the others (checks.check_modes).
    mode_arguments = {'global_steps': ('window_size', (0,))}  # window_size 0: every step attends globally

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
        self._plans = PlanCache()  # plans, layouts, FLOPs by (setting, grid): cleared when a public attribute is set
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
        self._out_indices, self._global_steps = out_indices, global_steps
        self.with_cp = check_bool('with_cp', with_cp)
        self.init_cfg = args.resolve_init_cfg(pretrained, init_cfg)
        self.nonfinite = check_choice('nonfinite', nonfinite, NONFINITE_MODES)
        self.compute = check_compute(compute)
        self.out_type, final_norm = args.check_outputs(out_type, final_norm, with_cls_token)
        self.amp_dtype = check_choice('amp_dtype', amp_dtype, list(args.AMP_DTYPES))
        self.window_size = check_int('window_size', window_size, 0)
        self.use_rel_pos = check_bool('use_rel_pos', use_rel_pos)
        self.global_layers = args.stage_ends(self._depth)  # ViTDet's global blocks (SR-ViT sets its own)
        self.layer_blocks: tuple[int, ...] | None = None  # the base's own method: block of each layer

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
        default = args.stage_ends(self.depth)
        out = default if self._out_indices is None else self._out_indices
        self.out_indices = args.check_out_indices(out, self.depth)
        self.global_steps = None  # the full schedule counted first, then the steps checked against it
        self.global_steps = args.check_global_steps(self._global_steps, self.num_steps)
        self.drop_path_rates = torch.linspace(0, self.drop_path_rate, self.num_steps, device='cpu').tolist()

    def __setattr__(self, name: str, value: Any) -> None:
        """nn.Module's; a public attribute set (a knob, the training mode) also clears the cached plans."""
        super().__setattr__(name, value)
        if not name.startswith('_') and '_plans' in self.__dict__:
            self._plans.clear()

    # ---- structure ----------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """L, the number of layers."""
        return self._depth

    @property
    def num_steps(self) -> int:
        """Block applications of the full forward (= `depth` but in SR-ViT), read from its plan."""
        return len(self.cached_plan(None, self.pretrain_grid).steps)

    @property
    def num_blocks(self) -> int:
        """The number of unique blocks (`blocks.{i}`)."""
        return len(self.blocks)

    @property
    def mlp_hidden(self) -> int:
        return int(self.embed_dim * self.mlp_ratio)

    def make_block(self, mlp_layer: Any = Mlp) -> Block:
        grid = self.pretrain_grid if self.use_rel_pos else None
        return Block(self.embed_dim, self.num_heads, self.mlp_ratio, self.qkv_bias, self.init_values, mlp_layer, grid)

    @property
    def schedule(self) -> list[int]:
        """The block of every step of the full forward (a view of its plan)."""
        return [step.block for step in self.cached_plan(None, self.pretrain_grid).steps]

    def block_name(self, index: int) -> str:
        """The module name of unique block `index` (for the layer-decay positions)."""
        return next(name for name, m in self.named_modules() if m is self.blocks[index])

    def windows(
        self, step: int, grid: tuple[int, int], layer: int | None = None, global_layers: Sequence[int] | None = None
    ) -> Windows | Global | None:
        """The attention layout of application `step` (running `layer`, default `step`) on a `grid` input: its
        windows, or for global attention a `Global` with relative position biases and None without. Global:
        the `global_steps` when set, else the steps whose layer is one of `global_layers` (default the model's)."""
        if self.global_steps is not None:
            windowed = step not in self.global_steps
        else:
            layers = self.global_layers if global_layers is None else global_layers
            windowed = (step if layer is None else layer) not in layers
        if self.window_size and windowed:
            return Windows(grid, self.window_size, self.num_prefix_tokens)
        return Global(grid, self.num_prefix_tokens) if self.use_rel_pos else None

    # ---- the plan and the compute knob ----------------------------------------------------------
    def plan(self, setting: int | None, grid: tuple[int, int]) -> Plan:
        """The first `setting` layers (None: all), layer t running block `layer_blocks[t]` on every token."""
        if self.layer_blocks is None:
            raise NotImplementedError(f'{type(self).__name__} must define plan() (the ViTBackbone contract)')
        tokens = grid[0] * grid[1] + self.num_prefix_tokens
        blocks = self.layer_blocks[: self.depth if setting is None else setting]
        return Plan(
            tuple(
                Step(t, t, b, step_work(self.blocks[b], tokens, w := self.windows(t, grid)), w)
                for t, b in enumerate(blocks)
            )
        )

    def cached_plan(self, setting: Any, grid: tuple[int, int], through: int | None = None) -> Plan:
        """`plan(setting, grid)` (up to the last application of layer `through`), built once and kept until a
        public attribute of the model changes (`_cached`)."""
        if through is None:
            return self._plans.get(('plan', setting, grid), lambda: self.plan(setting, grid))
        return self._plans.get(
            ('plan', setting, grid, through), lambda: self.cached_plan(setting, grid).through(through)
        )

    def plan_flops(self, setting: Any, grid: tuple[int, int]) -> float:
        """FLOPs per image of the forward at `setting` (None: full depth): its plan and the patch embedding."""
        return self._plans.get(
            ('flops', setting, grid),
            lambda: self.embed_work(grid).flops + total_flops(self.cached_plan(setting, grid).work()),
        )

    def embed_work(self, grid: tuple[int, int]) -> OpWork:
        """The patch embedding's work on a `grid` input (cached)."""
        return self._plans.get(('embed', grid), lambda: conv_work('patch_embed', self.patch_embed.proj, grid))

    def within(self, fraction: float, grid: tuple[int, int], candidates: Sequence[Any]) -> Any:
        """The compute knob: the largest of `candidates` (smallest first) whose plan's FLOPs are <= `fraction` x the
        full-depth plan's, or the smallest (`compute.py`)."""
        flops = lambda i: self.plan_flops(candidates[i], grid)  # noqa: E731
        return candidates[largest_within(fraction, self.plan_flops(None, grid), flops, len(candidates))]

    def layer_positions(self) -> dict[str, list[int]]:
        """Module name -> the layer position (1-based) of every step of the full plan that runs it (`layer_decay`)."""
        steps = self.cached_plan(None, self.pretrain_grid).steps
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

    def run_block(self, block: nn.Module, x: Tensor, step: int, fwd: Forward, active: Any = None, **kw: Any) -> Tensor:
        """The one block execution: `block` applied as step `step` of this forward, with the step's attention
        layout on the forward's grid and stochastic-depth rate, checkpointed in training with `with_cp`; on every
        token, or on the `active` ones only (a `token_adaptive.TokenSubset`; `kw`: `run_subset`'s). Other `kw` go
        to `Block.forward` (an attention mask, reViT's merged FFN)."""
        layout, rate = fwd.layouts[step], self.drop_path_rates[step] if self.training else 0.0
        if active is None:
            fn, args = block, (x, rate, layout)
        else:
            fn, args, kw = token_adaptive.run_subset, (block, x, active), dict(kw, drop_path_rate=rate, windows=layout)
        if self.with_cp and self.training and torch.is_grad_enabled():
            return checkpoint(fn, *args, use_reentrant=False, **kw)
        return fn(*args, **kw)

    def forward_layers(self, x: Tensor, fwd: Forward) -> Tensor:
        """The forward of one block per layer over every token (`layer_blocks`: PlainViT, NaiveRecursiveViT);
        the compute knob runs the first K layers, whose outputs are read at the rescaled layers. Tokens (B, N, D)
        -> the final state; the requested layers' states go to `fwd.keep`."""
        L = self.depth
        K = L if fwd.compute is None else self.within(fwd.compute, fwd.grid, range(1, L + 1))
        reads, fwd.stop = fwd.reads(K, L)
        blocks, layer_blocks, states = self.blocks, self.layer_blocks, fwd.states
        for t in range(fwd.stop + 1):
            x = self.run_block(blocks[layer_blocks[t]], x, t, fwd)
            if t in reads:
                for i in reads[t]:
                    states[i] = x
        fwd.setting = K
        return x

    def _intermediate_states(
        self, x: Tensor, layers: Sequence[int], compute: float | None
    ) -> tuple[list[Tensor], Tensor, ForwardStats]:
        """Image -> (states (B, N, D) of `layers`, the final state, this forward's statistics)."""
        fraction = None if compute is None and self.compute is None else check_compute(compute or self.compute)
        if fraction is not None and self.training:
            raise RuntimeError(
                f'compute={fraction} is a test-time knob (eval mode only); call model.eval() or set compute=None '
                'to train'
            )
        if self.nonfinite not in NONFINITE_MODES:  # a plain attribute: may be set later
            check_choice('nonfinite', self.nonfinite, NONFINITE_MODES)
        grid = self.patch_grid(x)
        # One sync at the end resolves every router/aux-loss check (none while tracing: it would be baked in).
        fwd = Forward(grid, layers, fraction, None if tracing() else (type(self).__name__, self.nonfinite))
        fwd.layouts, embed_work = self._plans.get(('grid', grid), lambda: self.grid_work(grid))
        final = self.forward_layers(self.embed(x, grid), fwd)  # no local name keeps the tokens alive (as timm)
        stats = fwd.stats
        if stats.aux_losses:
            where = 'the end of the forward'
            stats.aux_losses = {k: fwd.finite(f'auxiliary loss {k}', where, v) for k, v in stats.aux_losses.items()}
        if fwd.guard is not None:
            fwd.guard.finish()
        if not torch.compiler.is_compiling():  # the FLOP model's objects stay out of a compiled graph's outputs
            stats.plan = self.cached_plan(fwd.setting, grid, fwd.stop)
            stats.extra.insert(0, embed_work)
        if stats.token_maps:
            stats.token_maps = {k: m.reshape(*m.shape[:-1], *grid) for k, m in stats.token_maps.items()}
        return list(map(fwd.states.__getitem__, layers)), final, stats

    def grid_work(self, grid: tuple[int, int]) -> tuple[tuple[Windows | Global | None, ...], OpWork]:
        """What a forward on `grid` reads once (cached): every step's attention layout, the patch embedding's work."""
        return self.cached_plan(None, grid).layouts, self.embed_work(grid)
