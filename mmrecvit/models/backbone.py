"""`ViTBackbone`: what every backbone shares, and the contract a method fulfils (SPEC §5).

Data flow: image -> `embedding.embed` -> the method's plan, run step by step -> the states of the
requested layers -> `to_maps` (B, D, h, w) for a neck, or the pooled final state for a classifier.
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
from . import embedding
from . import layer_decay as decay
from .checks import check_bool, check_choice, check_float, check_int, check_sequence
from .compute import check_compute, largest_within
from .flops import conv_work
from .layers import Block, Mlp
from .numerics import NONFINITE_MODES, FiniteGuard, tracing
from .plan import Forward, Plan, Step, rescaled_layers, step_work
from .start import load_start
from .stats import ForwardStats
from .windows import Global, Windows


class ViTBackbone(nn.Module, metaclass=abc.ABCMeta):
    """Base class of every backbone: embeddings, the forward path, outputs, checkpointing, pretrained loading.

    **Vocabulary** (the same in every backbone, config and tool):

    * **layer**: a position of the stack, 0..L-1, and **depth** = L their number: what a plain ViT of the
      same depth calls block i. `out_indices` are layers (negatives count from the end), the same for all
      six backbones, so a config that swaps only `type=` reads the same levels; a forward that runs K of
      the L layers (the compute knob, reViT at another depth) reads layer i at `plan.rescaled_layers`.
      (Issue 27 corrects SPEC's notation, where L / depth counts block applications: those are `num_steps`.)
    * **block**: one unique set of block parameters (`blocks.{i}`); `num_blocks` counts them.
    * **step** (application): one run of a block, numbered t = 0..`num_steps`-1 in execution order.
      Stochastic depth, window layout (`global_steps`) and activation checkpointing follow steps. A layer
      is one step in every method but SR-ViT, whose unit runs its layers `num_recursions` times in place.
    * **recursion**: one pass of a recursion unit (a group of consecutive blocks applied again);
      `num_recursions` counts the passes (SR-ViT's T per unit, MoR-ViT's N_r).
    * a token's **depth** (Edge-RecViT's token map) is the number of layers it ran; MoR-ViT's token map
      `recursions` the number of recursions it took part in.

    **The subclass contract** (checked when a model is built; a missing piece is an error naming it):

    1. `__init__` calls `super().__init__(embed_dim=..., num_heads=..., depth=L, **kwargs)` and builds
       `blocks` (an `nn.ModuleList` of the unique blocks, `make_block`) and the method's other modules;
    2. `plan(setting, grid, layers)` returns the `plan.Plan` of a forward at `setting` on a `grid` input
       that returns `layers`: the one description of what the forward does, which `run` executes, the FLOP
       model counts and the compute knob compares;
    3. `convert_timm_state_dict(state_dict)` maps a timm/DeiT state dict to the model's keys.

    It may override `default_setting()` (what a forward runs: the layers L), `settings(grid)` (the compute
    knob's candidates, smallest first, ending at the default), `full_setting()` (the knob's full-depth
    reference), `run(x, plan, fwd)` (default: each step's block on every token), `forward_states` (for
    settings only known during the forward: Edge-RecViT's depths), `num_steps`, `default_out_indices()`,
    `default_global_steps()` and `block_name(i)`.

    Args:
        embed_dim, num_heads, mlp_ratio, qkv_bias, init_values: block sizes (see `layers.Block`).
        depth: L, the number of layers.
        out_indices: layers whose maps `forward` returns (default: `default_out_indices()`, the ends of 4
            equal stages, (2, 5, 8, 11) for 12 layers).
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
        window_size: window attention (ViTDet, `windows.py`) at every step but `global_steps` (0: global).
        global_steps: the steps with global attention when windowed (default `default_global_steps()`: the
            ends of the four stages; SR-ViT: the units' last steps).
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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Wrap each subclass's `__init__` so that the contract is checked once the whole model is built (when
        the outermost `__init__` returns, whichever class defines it)."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get('__init__')
        if init is None:
            return

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

    def __init__(self, *, embed_dim: int, num_heads: int, depth: int, out_indices: Sequence[int] | None = None,
                 mlp_ratio: float = 4.0, qkv_bias: bool = True, init_values: float | None = None,
                 patch_size: int = 16, img_size: int | Sequence[int] = 224, in_channels: int = 3,
                 with_cls_token: bool = True, drop_path_rate: float = 0.0, with_cp: bool = False,
                 pretrained: str | None = None, init_cfg: dict | None = None, out_type: str = 'featmap',
                 final_norm: bool | None = None, window_size: int = 0, global_steps: Sequence[int] | None = None,
                 use_rel_pos: bool = False, amp_dtype: str | None = None, nonfinite: str = 'raise',
                 compute: float | None = None) -> None:
        super().__init__()
        (self.embed_dim, self.num_heads, self.mlp_ratio, self.patch_size,
         self.pretrain_grid) = args.check_sizes(embed_dim, num_heads, mlp_ratio, patch_size, img_size)
        self.qkv_bias = check_bool('qkv_bias', qkv_bias)
        self.init_values = None if init_values is None else check_float('init_values', init_values, 0.0,
                                                                         float('inf'), low_open=True)
        check_int('in_channels', in_channels, 1)
        self.with_cls_token = check_bool('with_cls_token', with_cls_token)
        self.num_prefix_tokens = int(with_cls_token)
        self.drop_path_rate = check_float('drop_path_rate', drop_path_rate, 0.0, 1.0, high_open=True)
        self._depth = check_int('depth (the number of layers)', depth, 1)
        self._out_indices = out_indices
        self.with_cp = check_bool('with_cp', with_cp)
        self.init_cfg = args.resolve_init_cfg(pretrained, init_cfg)
        self.nonfinite = check_choice('nonfinite', nonfinite, NONFINITE_MODES)
        self.compute = check_compute(compute)
        self.out_type, final_norm = args.check_outputs(out_type, final_norm, with_cls_token)
        self.amp_dtype = check_choice('amp_dtype', amp_dtype, list(args.AMP_DTYPES))
        self.window_size = check_int('window_size', window_size, 0)
        self._global_steps = global_steps
        self.use_rel_pos = check_bool('use_rel_pos', use_rel_pos)
        self.stats: ForwardStats | None = None  # the last forward's (each forward builds its own)

        self.patch_embed = embedding.PatchEmbed(in_channels, self.embed_dim, self.patch_size)
        self.cls_token, self.pos_embed = embedding.init_tokens(
            self.embed_dim, self.pretrain_grid[0] * self.pretrain_grid[1] + self.num_prefix_tokens, with_cls_token)
        self.norm = nn.LayerNorm(self.embed_dim, eps=1e-6) if final_norm else nn.Identity()

    def _finish_construction(self) -> None:
        """The contract (class docstring), then what needs the subclass's structure: outputs, global steps."""
        blocks = getattr(self, 'blocks', None)
        if not isinstance(blocks, (nn.ModuleList, list, tuple)) or not blocks:
            raise TypeError(f'{type(self).__name__} must set `blocks` (its unique blocks, an nn.ModuleList) in '
                            '__init__ (the ViTBackbone contract)')
        self.out_indices = args.check_out_indices(
            self.default_out_indices() if self._out_indices is None else self._out_indices, self.depth)
        self.global_steps = None if self._global_steps is None else tuple(
            check_int('global_steps entry (an application step)', s, 0, self.num_steps - 1)
            for s in check_sequence('global_steps', self._global_steps, min_len=0))
        self.drop_path_rates = torch.linspace(0, self.drop_path_rate, self.num_steps, device='cpu').tolist()

    # ---- structure ----------------------------------------------------------------------------
    @property
    def depth(self) -> int:
        """L, the number of layers."""
        return self._depth

    @property
    def num_steps(self) -> int:
        """Block applications of the full forward (= `depth` but in SR-ViT)."""
        return self.depth

    @property
    def num_blocks(self) -> int:
        """The number of unique blocks (`blocks.{i}`)."""
        return len(self.blocks)

    @property
    def mlp_hidden(self) -> int:
        return int(self.embed_dim * self.mlp_ratio)

    def make_block(self, mlp_layer: Any = Mlp) -> Block:
        return Block(self.embed_dim, self.num_heads, self.mlp_ratio, self.qkv_bias, self.init_values, mlp_layer,
                     self.pretrain_grid if self.use_rel_pos else None)

    @property
    def schedule(self) -> list[int]:
        """The block of every step of the full forward (a view of its plan)."""
        return [step.block for step in self.plan(self.full_setting(), self.pretrain_grid, [self.depth - 1]).steps]

    def block_name(self, index: int) -> str:
        """The module name of unique block `index` (for the layer-decay positions)."""
        return f'blocks.{index}'

    def default_out_indices(self) -> tuple[int, ...]:
        return args.stage_ends(self.depth)

    def default_global_steps(self) -> tuple[int, ...]:
        """The steps with global attention when `global_steps` is None: the ends of 4 equal stages."""
        return args.stage_ends(self.num_steps)

    def windows(self, step: int, grid: tuple[int, int],
                global_steps: Sequence[int] | None = None) -> Windows | Global | None:
        """The attention layout of `step` on a `grid` input: its windows, or for global attention a `Global`
        with relative position biases and None without. `global_steps`: default the model's."""
        if global_steps is None:
            global_steps = self.default_global_steps() if self.global_steps is None else self.global_steps
        if self.window_size and step not in global_steps:
            return Windows(grid, self.window_size, self.num_prefix_tokens)
        return Global(grid, self.num_prefix_tokens) if self.use_rel_pos else None

    # ---- the plan -----------------------------------------------------------------------------
    @abc.abstractmethod
    def plan(self, setting: Any, grid: tuple[int, int], layers: Sequence[int]) -> Plan:
        """The forward at `setting` on a `grid` input that returns the states of `layers` (class docstring)."""

    def default_setting(self) -> Any:
        """What a forward runs without the compute knob (here: all L layers)."""
        return self.depth

    def full_setting(self) -> Any:
        """The compute knob's reference: the full-depth forward (every step over every token)."""
        return self.depth

    def settings(self, grid: tuple[int, int]) -> list[Any]:
        """The compute knob's candidates, smallest first, ending at `default_setting()` (here: the first K of
        the L layers, K = 1..L)."""
        return list(range(1, self.depth + 1))

    def setting_within(self, fraction: float, grid: tuple[int, int]) -> Any:
        """The largest of `settings(grid)` whose plan's FLOPs are <= fraction x those of `full_setting()` (at
        least the smallest): the compute knob (`compute.py`)."""
        candidates = self.settings(grid)
        full = self.plan_flops(self.full_setting(), grid)
        return candidates[largest_within(fraction, full, lambda i: self.plan_flops(candidates[i], grid),
                                         len(candidates))]

    def plan_flops(self, setting: Any, grid: tuple[int, int]) -> float:
        """FLOPs per image of the forward at `setting` (its plan and the patch embedding)."""
        plan = self.plan(setting, grid, [self.depth - 1])
        return conv_work('patch_embed', self.patch_embed.proj, grid).flops + sum(w.flops for w in plan.work())

    def dense_plan(self, blocks: Sequence[int], grid: tuple[int, int], layers: Sequence[int]) -> Plan:
        """The plan of one block per layer over every token: step t (layer t) runs `blocks[t]`; `layers` of the
        L-layer model are read at their rescaled layers among the len(blocks) run."""
        tokens = grid[0] * grid[1] + self.num_prefix_tokens
        steps = tuple(Step(t, t, b, step_work(self.blocks[b], tokens, w := self.windows(t, grid)), w,
                           self.drop_path_rates[t] if t < len(self.drop_path_rates) else 0.0)
                      for t, b in enumerate(blocks))
        return Plan(steps, rescaled_layers(layers, self.depth, len(blocks)), final=len(blocks) - 1)

    def layer_positions(self) -> dict[str, list[int]]:
        """Module name -> the layer position (1-based) of every step of the full plan that runs it: what the
        layer-wise learning-rate decay reads (`layer_decay.py`)."""
        positions: dict[str, list[int]] = {}
        for step in self.plan(self.full_setting(), self.pretrain_grid, [self.depth - 1]).steps:
            positions.setdefault(self.block_name(step.block), []).append(step.layer + 1)
        return positions

    @property
    def num_layers(self) -> int:
        """Length of the layer scale (L + 1): `lr_scale = rate ** (num_layers - layer_depth(name))`."""
        return decay.num_layers(self.layer_positions())

    def layer_depth(self, param_name: str) -> float:
        """Layer depth in [0, `num_layers`] of a parameter (a name of `named_parameters()`; `layer_decay.py`)."""
        names = dict(self.named_parameters())
        if param_name not in names:
            raise KeyError(f'{param_name!r} is not a parameter of {type(self).__name__}; pass a name from '
                           f'named_parameters(), e.g. {next(iter(names))!r}')
        return decay.layer_depth(param_name, self.layer_positions())

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

    def embed(self, x: Tensor) -> Tensor:
        """(B, C, H, W) image -> (B, N, D) tokens, CLS first (`embedding.embed`)."""
        return embedding.embed(x, self.patch_embed, self.cls_token, self.pos_embed, self.pretrain_grid)

    def apply_block(self, block: nn.Module, x: Tensor, step: Step, **kwargs: Any) -> Tensor:
        """Apply `block` as `step` (its drop-path rate and attention layout; checkpointed if asked); `kwargs`
        go to `Block.forward` (an attention mask, an MLP's merged weights)."""
        if step.windows is not None:
            kwargs['rows'] = step.windows
        if self.with_cp and self.training and torch.is_grad_enabled():
            return checkpoint(block, x, step.drop_path_rate, use_reentrant=False, **kwargs)
        return block(x, step.drop_path_rate, **kwargs)

    def run(self, x: Tensor, plan: Plan, fwd: Forward) -> list[Tensor]:
        """Execute `plan` on tokens x (B, N, D): the states after its output steps, in their order. This default
        runs each step's block on every token (PlainViT, NaiveRecursiveViT)."""
        states: list[Tensor | None] = [None] * len(plan.outputs)
        for i, step in enumerate(plan.steps):
            x = self.apply_block(self.blocks[step.block], x, step)
            for j in plan.reads(i):
                states[j] = x
        return states

    def forward_states(self, x: Tensor, layers: Sequence[int], fwd: Forward) -> list[Tensor]:
        """Tokens (B, N, D) -> the states of `layers`: the plan at the setting in force, run (`fwd.plan` holds it)."""
        setting = self.default_setting() if fwd.compute is None else self.setting_within(fwd.compute, fwd.grid)
        fwd.plan = self.plan(setting, fwd.grid, layers).until_outputs()
        return self.run(x, fwd.plan, fwd)

    def forward_tokens(self, x: Tensor, layers: Sequence[int], grid: tuple[int, int] | None = None) -> list[Tensor]:
        """Token states (B, N, D) -> the states of `layers`, without the embedding, the final norm or the
        finiteness checks (NaN/inf only replaced): for tests and tools that bring their own tokens. `grid`: their
        patch grid (default 1 x (N - prefix tokens), which is all a plan needs without windows). Sets `self.stats`."""
        if grid is None:
            if self.window_size or self.use_rel_pos:
                raise ValueError('window attention and relative position biases need the tokens\' patch grid: '
                                 'pass grid=(h, w)')
            grid = (1, x.shape[1] - self.num_prefix_tokens)
        fwd = Forward(tuple(grid))
        states = self.forward_states(x, args.check_out_indices(list(layers), self.depth, 'layers'), fwd)
        fwd.stats.work, fwd.stats.grid = fwd.plan.work(), fwd.grid
        self.stats = fwd.stats
        return states

    def get_intermediate_states(self, x: Tensor, layers: Sequence[int],
                                compute: float | None = None) -> tuple[list[Tensor], tuple[int, int]]:
        """Image -> (states (B, N, D) of `layers`, patch grid): the one way to get features (STYLE 7).

        compute: the knob for this call (None: the attribute's default). Sets `self.stats` to this forward's
        statistics, whose token maps are (B, ..., h, w).
        """
        fraction = check_compute(self.compute if compute is None else compute)
        if fraction is not None and self.training:
            raise RuntimeError(f'compute={fraction} is a test-time knob (eval mode only); call model.eval() '
                               'or set compute=None to train')
        layers = args.check_out_indices(list(layers), self.depth, 'layers')
        # One sync at the end resolves every router/aux-loss check (none while tracing: it would bake the flags
        # into the trace).
        mode = check_choice('nonfinite', self.nonfinite, NONFINITE_MODES)  # a plain attribute: may be set later
        fwd = Forward(self.patch_grid(x), fraction, None if tracing() else FiniteGuard(type(self).__name__, mode))
        # No local name keeps the embedded tokens alive while the blocks run (peak memory as timm).
        states = self.forward_states(self.embed(x), layers, fwd)
        plan, stats = fwd.plan, fwd.stats
        states = [self.norm(s) if p == plan.final else s for s, p in zip(states, plan.outputs)]
        stats.aux_losses = {k: fwd.finite(f'auxiliary loss {k}', 'the end of the forward', v)
                            for k, v in stats.aux_losses.items()}
        if fwd.guard is not None:
            fwd.guard.finish()
        stats.grid = fwd.grid
        stats.work = [conv_work('patch_embed', self.patch_embed.proj, fwd.grid), *plan.work()]
        stats.token_maps = {k: m.reshape(*m.shape[:-1], *fwd.grid) for k, m in stats.token_maps.items()}
        self.stats = stats
        return states, fwd.grid

    def forward(self, x: Tensor, compute: float | None = None) -> tuple[Tensor, ...]:
        """(B, C, H, W) -> `out_type`'s outputs: maps (B, D, ceil(H/p), ceil(W/p)), one per `out_indices`, or a
        1-tuple with the (B, D) classification feature. `compute`: the knob for this call."""
        dtype = args.AMP_DTYPES[check_choice('amp_dtype', self.amp_dtype, list(args.AMP_DTYPES))]
        if dtype is None:
            return self._outputs(x, compute)
        with torch.autocast(x.device.type, dtype=dtype):
            outputs = self._outputs(x, compute)
        return tuple(o.float() for o in outputs)

    def _outputs(self, x: Tensor, compute: float | None) -> tuple[Tensor, ...]:
        if self.out_type == 'featmap':
            states, grid = self.get_intermediate_states(x, self.out_indices, compute)
            return embedding.to_maps(states, grid, self.num_prefix_tokens)
        (final,), _ = self.get_intermediate_states(x, [self.depth - 1], compute)
        return (self.pool(final),)

    def to_maps(self, states: Sequence[Tensor], grid: tuple[int, int]) -> tuple[Tensor, ...]:
        """States (B, N, D) -> maps (B, D, h, w) without the prefix tokens (`embedding.to_maps`)."""
        return embedding.to_maps(list(states), grid, self.num_prefix_tokens)

    def pool(self, tokens: Tensor) -> Tensor:
        """(B, N, D) normalised final tokens -> (B, D): the CLS token, or the mean of the patch tokens."""
        return tokens[:, 0] if self.out_type == 'cls_token' else tokens[:, self.num_prefix_tokens:].mean(1)
