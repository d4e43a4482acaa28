"""`ViTBackbone`: what every backbone shares, and the contract a method fulfils (SPEC §5).

Data flow: image -> `embedding.embed` -> the method's plan, run step by step -> the states of the requested
layers -> `forward_intermediates` (timm's formats) -> maps for a neck, or the pooled final state for a classifier.
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
from . import embedding, features
from . import layer_decay as decay
from .checkpoint import load_pretrained
from .checks import check_bool, check_choice, check_float, check_int, check_sequence
from .compute import check_compute, largest_within
from .flops import conv_work
from .layers import Block, Mlp
from .numerics import NONFINITE_MODES, FiniteGuard, tracing
from .plan import Forward, Plan, Step, rescaled_layers, step_work
from .stats import FeatureMaps, ForwardStats
from .windows import Global, Windows


class ViTBackbone(nn.Module, metaclass=abc.ABCMeta):
    """Base class of every backbone: embeddings, the forward path, outputs, checkpointing, pretrained loading.

    **Vocabulary** (docs/methods/README.md has the glossary): a **layer** is a position 0..L-1 of the stack,
    `depth` = L; `out_indices` are layers. A **block** is one unique set of parameters (`blocks.{i}`). A
    **step** is one block application, t = 0..`num_steps`-1 (stochastic depth, `global_steps` and
    checkpointing follow steps); a **recursion** is one pass of a recursion unit.

    **The subclass contract** (checked when a model is built): `__init__` calls `super().__init__(embed_dim=...,
    num_heads=..., depth=L, **kwargs)` and builds `blocks` (`make_block`) and its other modules; `plan(setting,
    grid, layers)` returns the `plan.Plan` of a forward, which `run` executes, the FLOP model counts and the
    compute knob compares; `convert_timm_state_dict(state_dict)` maps a timm/DeiT state dict to its keys. The
    optional overrides are listed in docs/methods/README.md ("The subclass contract").

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
            ends of the four stages; SR-ViT: its global layers in every recursion).
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
        if self.init_cfg is not None:
            load_pretrained(self, self.init_cfg['checkpoint'], prefix=self.init_cfg.get('prefix'),
                            map_location=self.init_cfg.get('map_location', 'cpu'))
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

    def forward_intermediates(self, x: Tensor, indices: int | Sequence[int] | None = None, norm: bool = False,
                              output_fmt: str = 'NCHW', intermediates_only: bool = False, stop_early: bool = False,
                              compute: float | None = None, *, return_prefix_tokens: bool = False,
                              return_stats: bool = False) -> Any:
        """Image -> the states of some layers with timm's semantics (`VisionTransformer.forward_intermediates`):
        the one way to get features (STYLE 7), which `forward` and the timm classifier call.

        indices: layers (`out_indices`' vocabulary; `features.take_indices`): an int n the last n, a list those
        (negatives from the end), None all; the intermediates come in layer order. norm: the final norm on each.
        output_fmt: 'NCHW' maps (B, D, h, w) or 'NLC' patch tokens (B, h*w, D), prefix tokens dropped (timm's;
        `return_prefix_tokens` keeps them beside each). intermediates_only: the list alone, else (final tokens
        (B, N, D) after the final norm, list). stop_early: no layer after the last one taken runs. compute: the
        test-time knob for this call (`compute.py`). return_stats: (result, the forward's `ForwardStats`).
        """
        take = features.take_indices(indices, self.depth, type(self).__name__)
        fmt = check_choice('output_fmt', output_fmt, features.OUTPUT_FORMATS)
        dtype = args.AMP_DTYPES[check_choice('amp_dtype', self.amp_dtype, list(args.AMP_DTYPES))]
        last = [] if stop_early or take[-1] == self.depth - 1 else [self.depth - 1]
        if dtype is None:
            states, grid, stats = self._intermediate_states(x, take + last, compute)
        else:
            with torch.autocast(x.device.type, dtype=dtype):
                states, grid, stats = self._intermediate_states(x, take + last, compute)
            states = [s.float() for s in states]
        intermediates = [self.norm(s) if norm else s for s in states[: len(take)]]
        intermediates = features.timm_format(intermediates, grid, self.num_prefix_tokens, fmt, return_prefix_tokens)
        result = intermediates if intermediates_only else (self.norm(states[-1]), intermediates)
        return (result, stats) if return_stats else result

    def prune_intermediate_layers(self, indices: int | Sequence[int] = 1, prune_norm: bool = False,
                                  prune_head: bool = True) -> list[int]:
        """timm's: keep the layers up to the last of `indices` and return them (sorted), cutting the rest where the
        method allows it (`cut_layers`: PlainViT, NaiveRecursiveViT; others refuse). `prune_norm`: the final norm
        becomes the identity. A backbone has no head (`prune_head` is for the classifier)."""
        take = features.take_indices(indices, self.depth, type(self).__name__)
        if take[-1] < self.depth - 1:
            self.cut_layers(take[-1] + 1)
            self.out_indices = tuple(take)
        if prune_norm:
            self.norm = nn.Identity()
        return take

    def cut_layers(self, depth: int) -> None:
        """Keep the first `depth` layers (`prune_intermediate_layers`); refused unless a method allows it."""
        raise ValueError(f'{type(self).__name__} cannot be cut to its first {depth} of {self.depth} layers: later '
                         'layers are part of what earlier ones compute; use forward_intermediates(indices=...)')

    def _intermediate_states(self, x: Tensor, layers: Sequence[int],
                             compute: float | None) -> tuple[list[Tensor], tuple[int, int], ForwardStats]:
        """Image -> (states (B, N, D) of `layers`, patch grid, this forward's statistics)."""
        fraction = check_compute(self.compute if compute is None else compute)
        if fraction is not None and self.training:
            raise RuntimeError(f'compute={fraction} is a test-time knob (eval mode only); call model.eval() '
                               'or set compute=None to train')
        # One sync at the end resolves every router/aux-loss check (none while tracing: it would be baked in).
        mode = check_choice('nonfinite', self.nonfinite, NONFINITE_MODES)  # a plain attribute: may be set later
        fwd = Forward(self.patch_grid(x), fraction, None if tracing() else FiniteGuard(type(self).__name__, mode))
        # No local name keeps the embedded tokens alive while the blocks run (peak memory as timm).
        states = self.forward_states(self.embed(x), layers, fwd)
        plan, stats = fwd.plan, fwd.stats
        stats.aux_losses = {k: fwd.finite(f'auxiliary loss {k}', 'the end of the forward', v)
                            for k, v in stats.aux_losses.items()}
        if fwd.guard is not None:
            fwd.guard.finish()
        stats.grid = fwd.grid
        stats.work = [conv_work('patch_embed', self.patch_embed.proj, fwd.grid), *plan.work()]
        stats.token_maps = {k: m.reshape(*m.shape[:-1], *fwd.grid) for k, m in stats.token_maps.items()}
        return states, fwd.grid, stats

    def forward(self, x: Tensor, compute: float | None = None) -> tuple[Tensor, ...]:
        """(B, C, H, W) -> `out_type`'s outputs (what mmdet/mmseg/mmpretrain and `mmrecvit.d2` call): maps (B, D,
        ceil(H/p), ceil(W/p)) of `out_indices` (the final norm, if any, on the last layer's, as mmpretrain's ViT)
        or a 1-tuple with the (B, D) classification feature, as a `FeatureMaps` tuple carrying this forward's
        statistics in `.stats` (a plain tuple while `torch.export` traces). `compute`: the knob for this call."""
        if self.out_type == 'featmap':
            layers, L = self.out_indices, self.depth
            (final, maps), stats = self.forward_intermediates(x, layers, stop_early=True, compute=compute,
                                                             return_stats=True)
            by_layer = dict(zip(sorted(set(layers)), maps))
            if L - 1 in by_layer and not isinstance(self.norm, nn.Identity):
                by_layer[L - 1] = embedding.to_maps([final], stats.grid, self.num_prefix_tokens)[0]
            outputs = tuple(by_layer[i] for i in layers)
        else:
            (final, _), stats = self.forward_intermediates(x, 1, output_fmt='NLC', compute=compute,
                                                           return_stats=True)
            outputs = (self.pool(final),)
        # torch.export takes plain containers only (pytrees): a plain tuple there, the statistics stay eager.
        return outputs if torch.compiler.is_exporting() else FeatureMaps(outputs, stats)

    def pool(self, tokens: Tensor) -> Tensor:
        """(B, N, D) normalised final tokens -> (B, D): the CLS token, or the mean of the patch tokens."""
        return tokens[:, 0] if self.out_type == 'cls_token' else tokens[:, self.num_prefix_tokens:].mean(1)
