"""The shared ViT backbone machinery and the two baselines (SPEC §0, §5).

`ViTBackbone` owns what every model here has in common: the patch embedding with timm's names,
padding to the patch size, bicubic position-embedding resampling, the per-application-step
stochastic-depth schedule, activation checkpointing, turning token states into (B, D, h, w) maps,
and strict loading of pretrained weights. A subclass only writes `forward_states`: the recursion.

Data flow: image -> `embed` -> `forward_states` (the method) -> selected states -> `to_maps`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import resample_abs_pos_embed, trunc_normal_
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from .checkpoint import load_pretrained, pick_or_average_blocks, split_timm_blocks
from .checks import check_bool, check_choice, check_float, check_int, check_renamed, check_sequence
from .compute import check_compute, in_force, kept_steps, largest_within
from .flops import BlockWork, conv_work, total_flops
from .layers import Block, Mlp
from .numerics import NONFINITE_MODES, FiniteGuard, sanitize, tracing
from .stats import ForwardStats
from .windows import Windows

OUT_TYPES = ('featmap', 'cls_token', 'avg_featmap')
AMP_DTYPES = {None: None, 'bf16': torch.bfloat16, 'fp16': torch.float16}
# DeiT sizes (SPEC "Notation"); `depth` is the number of block applications L.
ARCH_SETTINGS: dict[str, dict[str, int]] = {
    'tiny': dict(embed_dim=192, num_heads=3, depth=12),
    'small': dict(embed_dim=384, num_heads=6, depth=12),
    'base': dict(embed_dim=768, num_heads=12, depth=12),
    'large': dict(embed_dim=1024, num_heads=16, depth=24),
}
ARCH_ALIASES = {'ti': 'tiny', 't': 'tiny', 's': 'small', 'b': 'base', 'l': 'large'}


def resolve_arch(arch: str, table: dict[str, dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    """Look `arch` up in a size table (aliases ti/s/b allowed); explicit overrides win."""
    if not isinstance(arch, str):
        raise TypeError(f'arch must be a str, one of {list(table)}, got {arch!r}')
    name = ARCH_ALIASES.get(arch.lower(), arch.lower())
    check_choice('arch', name, list(table))
    settings = dict(table[name])
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return settings


def stage_ends(depth: int, num_stages: int = 4) -> tuple[int, ...]:
    """0-based index of the last application step of each of `num_stages` equal stages (12 -> 2, 5, 8, 11)."""
    return tuple(max(0, depth * (i + 1) // num_stages - 1) for i in range(num_stages))


def check_out_indices(value: Any, depth: int, name: str = 'out_indices') -> tuple[int, ...]:
    """Application step indices in [-depth, depth); negatives count from the end."""
    indices = check_sequence(name, value)
    out = []
    for i in indices:
        check_int(f'{name} entry', i, -depth, depth - 1)
        out.append(i % depth)
    return tuple(out)


def full_precision(module: nn.Module, x: Tensor) -> Tensor:
    """`module(x)` with autocast off, in the module's parameter dtype (fp32 unless the whole model
    was cast). Routers and rankers decide discrete things (top-k, argmax): with bf16/fp16 logits
    ties become common (4096 bf16 logits take ~1400 distinct values) and are broken differently by
    different kernels, so these run in full precision under autocast."""
    dtype = next(module.parameters()).dtype
    with torch.autocast(x.device.type, enabled=False):
        return module(x.to(dtype))


class ViTBackbone(nn.Module):
    """Base class: embeddings, outputs, checkpointing and pretrained loading.

    Vocabulary (the same in every backbone, config and tool):

    * **block**: one unique set of block parameters (`blocks.{i}`); `num_blocks` counts them.
    * **application** (or **step**): one run of a block; application steps are numbered
      t = 0..L-1 in execution order, and `depth` = L is their number in the full schedule.
      Stochastic depth, `out_indices` and activation checkpointing are indexed by step;
      `schedule[t]` is the block that step t runs.
    * **recursion**: one pass of a recursion unit (a group of consecutive blocks that is applied
      again); `num_recursions` counts the passes (SR-ViT's T per unit, MoR-ViT's N_r).
    * a token's **depth** (Edge-RecViT's token map) is the number of steps it ran; MoR-ViT's
      token map `recursions` is the number of recursions it took part in.

    Args:
        depth: L, the number of block applications (each subclass derives it from its arguments).
        embed_dim, num_heads, mlp_ratio, qkv_bias, init_values: block sizes (see `Block`).
        patch_size: patch (and output stride) of the patch embedding.
        img_size: pretraining image size; `pos_embed` is stored for its grid and resampled
            (bicubic, as timm) to the grid of each input.
        in_channels: image channels.
        with_cls_token: prepend a CLS token (DeiT). It takes part in attention but not in the maps.
        drop_path_rate: stochastic depth of the last application step; rates grow linearly over
            the L application steps (indexed by step, not by unique block, STYLE 3).
        with_cp: activation checkpointing per block application in training (same outputs, less
            memory).
        pretrained: path of a checkpoint, the same as `init_cfg=dict(type='Pretrained', ...)`
            (mmseg's `EncoderDecoder` passes it).
        init_cfg: `dict(type='Pretrained', checkpoint=PATH, prefix=None)`; loaded strictly by
            `init_weights()` through the model's checkpoint filter (see `checkpoint.py`).
        out_type: what `forward` returns (mmpretrain's `VisionTransformer` names): 'featmap'
            (default) the tuple of (B, D, h, w) maps of `out_indices` for a neck; 'cls_token' a
            1-tuple with the CLS token (B, D) of the final state after the final norm (DeiT's
            classifier input; the classification output of every method here, as in their
            papers); 'avg_featmap' the mean of the final normalised patch tokens (B, D).
        final_norm: a final LayerNorm `norm` on the state after the last application step (timm's
            name). None (default): only for the classification outputs; a dense backbone's maps
            stay un-normalised unless asked (as mmseg's ViT `final_norm`). The classification
            outputs need it.
        window_size: window attention (ViTDet, `windows.py`): the patch grid attends within
            `window_size` x `window_size` windows at every application step except `global_steps`
            (0, the default: global attention everywhere). ViTDet's recipe: 14.
        global_steps: the application steps with global attention when `window_size` > 0 (default:
            the ends of the four stages, `default_global_steps`; SR-ViT: the units' last steps).
        amp_dtype: None (default), 'bf16' or 'fp16': the backbone's forward runs under autocast
            in that dtype on its device and returns fp32 outputs, so the rest of a detector (mmcv's
            RoIAlign and nms have no bf16 kernels) stays in fp32. A plain attribute
            (`tools/train.py --amp-dtype bf16` sets it); routers still decide in fp32.
        nonfinite: what a forward does when router logits or an auxiliary loss contain NaN/inf
            (see `numerics.py`): 'raise' (default) a `NonFiniteError` naming the module and step,
            so a NaN never reaches an optimizer step; 'warn' skips them (zeros, cut from the graph)
            with a logged warning and goes on. A plain attribute: may be changed on a built model.
        compute: the test-time compute knob (`compute.py`, issue 20): None (default) the forward as
            configured; a fraction in (0, 1] of the full-depth backbone FLOPs at the input's size,
            mapped by each method onto its own mechanism (`compute_setting`, see each class) and
            rounded down to the largest achievable setting within it (at least the smallest).
            Eval mode only (a training forward with it set is an error). A plain attribute, read
            at every forward (`model.compute = 0.5`).
    """

    # Set only for the duration of a forward with `compute` (`compute.in_force`).
    _compute_in_force: float | None = None  # the fraction in force (read by EdgeRecViT's depth assignment)
    _final_step: int | None = None  # PlainViT / NaiveRecursiveViT: the last kept step

    def __init__(self, *, embed_dim: int, num_heads: int, depth: int, mlp_ratio: float = 4.0,
                 qkv_bias: bool = True, init_values: float | None = None, patch_size: int = 16,
                 img_size: int | Sequence[int] = 224, in_channels: int = 3,
                 with_cls_token: bool = True, drop_path_rate: float = 0.0, with_cp: bool = False,
                 pretrained: str | None = None, init_cfg: dict | None = None, out_type: str = 'featmap',
                 final_norm: bool | None = None, window_size: int = 0, global_steps: Sequence[int] | None = None,
                 amp_dtype: str | None = None, nonfinite: str = 'raise', compute: float | None = None) -> None:
        super().__init__()
        self.embed_dim = check_int('embed_dim', embed_dim, 1)
        self.num_heads = check_int('num_heads', num_heads, 1)
        if embed_dim % num_heads:
            raise ValueError(f'embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})')
        self.mlp_ratio = check_float('mlp_ratio', mlp_ratio, 0.0, math.inf, low_open=True)
        if int(embed_dim * self.mlp_ratio) < 1:
            raise ValueError(f'mlp_ratio must give an MLP of at least 1 hidden unit (embed_dim * mlp_ratio >= 1), '
                             f'got embed_dim={embed_dim}, mlp_ratio={mlp_ratio}')
        self.qkv_bias = check_bool('qkv_bias', qkv_bias)
        if init_values is not None:
            check_float('init_values', init_values, 0.0, math.inf, low_open=True)
        self.init_values = init_values
        self.patch_size = check_int('patch_size', patch_size, 1)
        if isinstance(img_size, (str, bytes)) or not isinstance(img_size, (int, Sequence)):
            raise TypeError(f'img_size must be an int or (H, W), ints >= patch_size, got '
                            f'{type(img_size).__name__} {img_size!r}')
        img_hw = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
        if len(img_hw) != 2:
            raise ValueError(f'img_size must be an int or (H, W), ints >= patch_size, got {img_size!r}')
        for v in img_hw:
            check_int('img_size', v, patch_size)
        self.pretrain_grid = (img_hw[0] // patch_size, img_hw[1] // patch_size)
        check_int('in_channels', in_channels, 1)
        self.with_cls_token = check_bool('with_cls_token', with_cls_token)
        self.num_prefix_tokens = int(with_cls_token)
        self.drop_path_rate = check_float('drop_path_rate', drop_path_rate, 0.0, 1.0, high_open=True)
        self.depth = check_int('depth (number of block applications)', depth, 1)
        self.drop_path_rates = torch.linspace(0, drop_path_rate, self.depth, device='cpu').tolist()
        self.with_cp = check_bool('with_cp', with_cp)
        self.init_cfg = self._resolve_init_cfg(pretrained, init_cfg)
        self.nonfinite = check_choice('nonfinite', nonfinite, NONFINITE_MODES)
        self.compute = check_compute(compute)
        self.out_type = check_choice('out_type', out_type, OUT_TYPES)
        self.amp_dtype = check_choice('amp_dtype', amp_dtype, list(AMP_DTYPES))
        self.window_size = check_int('window_size', window_size, 0)
        self.global_steps = None if global_steps is None else tuple(
            check_int('global_steps entry (an application step)', s, 0, self.depth - 1)
            for s in check_sequence('global_steps', global_steps, min_len=0))
        self._grid: tuple[int, int] | None = None  # the patch grid of the forward in progress
        if out_type == 'cls_token' and not with_cls_token:
            raise ValueError("out_type='cls_token' needs with_cls_token=True")
        final_norm = out_type != 'featmap' if final_norm is None else check_bool('final_norm', final_norm)
        if out_type != 'featmap' and not final_norm:
            raise ValueError(f'out_type={out_type!r} reads the final state after the final norm: final_norm must be '
                             'True (or None)')
        self.stats: ForwardStats | None = None
        self._guard: FiniteGuard | None = None  # the finiteness checks of the forward in progress

        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(in_channels, embed_dim, patch_size, patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if with_cls_token else None
        num_pos = self.pretrain_grid[0] * self.pretrain_grid[1] + self.num_prefix_tokens
        self.pos_embed = nn.Parameter(torch.zeros(1, num_pos, embed_dim))
        trunc_normal_(self.pos_embed, std=0.02)
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6) if final_norm else nn.Identity()

    # ---- construction helpers -----------------------------------------------------------------
    def make_block(self, mlp_layer: Any = Mlp) -> Block:
        return Block(self.embed_dim, self.num_heads, self.mlp_ratio, self.qkv_bias, self.init_values, mlp_layer)

    @property
    def mlp_hidden(self) -> int:
        return int(self.embed_dim * self.mlp_ratio)

    @property
    def num_blocks(self) -> int:
        """The number of unique blocks (`blocks.{i}`)."""
        return len(self.blocks)

    @staticmethod
    def _resolve_init_cfg(pretrained: str | None, init_cfg: dict | None) -> dict | None:
        if pretrained is not None and init_cfg is not None:
            raise ValueError('pass either pretrained or init_cfg, not both '
                             f'(pretrained={pretrained!r}, init_cfg={init_cfg!r})')
        if pretrained is not None:
            if not isinstance(pretrained, str):
                raise TypeError(f'pretrained must be a checkpoint path (str) or None, got {pretrained!r}')
            return dict(type='Pretrained', checkpoint=pretrained)
        if init_cfg is None:
            return None
        if not isinstance(init_cfg, dict):
            raise TypeError("init_cfg must be a dict like dict(type='Pretrained', checkpoint=PATH) "
                            f'or None, got {type(init_cfg).__name__} {init_cfg!r}')
        init_cfg = dict(init_cfg)
        check_choice("init_cfg['type']", init_cfg.get('type'), ['Pretrained'])
        if not isinstance(init_cfg.get('checkpoint'), str):
            raise ValueError(f"init_cfg['checkpoint'] must be a checkpoint path, got {init_cfg.get('checkpoint')!r}")
        unknown = set(init_cfg) - {'type', 'checkpoint', 'prefix', 'map_location'}
        if unknown:
            raise ValueError(f'init_cfg has unknown keys {sorted(unknown)}; allowed: '
                             "['type', 'checkpoint', 'prefix', 'map_location']")
        return init_cfg

    # ---- weights ------------------------------------------------------------------------------
    def init_weights(self) -> None:
        """Load `init_cfg`'s checkpoint strictly (called by mmengine's Runner; no-op without one).

        Modules initialise themselves at construction (timm's scheme; routers zero), so a model
        built in plain PyTorch is ready to use without calling this.
        """
        if self.init_cfg is not None:
            load_pretrained(self, self.init_cfg['checkpoint'], prefix=self.init_cfg.get('prefix'),
                            map_location=self.init_cfg.get('map_location', 'cpu'))
        self.is_init = True  # mmengine's BaseModule convention: do not initialise twice

    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """Map a timm/DeiT state dict (already split of its classifier) to this model's keys."""
        raise NotImplementedError

    # ---- layer-wise learning-rate decay (STYLE 12) --------------------------------------------
    # Parameters that form the input tokens: depth 0. A subclass with more (register tokens, ...)
    # extends this tuple; entries are parameter names or module prefixes.
    embedding_parameters: tuple[str, ...] = ('patch_embed', 'cls_token', 'pos_embed')

    def layer_positions(self) -> dict[str, list[int]]:
        """Module name -> the layer position of every block application that runs that module.

        The one thing a backbone tells the layer-decay rule (see `layer_depth`). Positions are
        1-based on the model's layer scale 1..`num_layers`-1; a module listed with several
        positions is shared across depths. Modules not listed (and not embeddings) are "above all
        blocks": routers, rankers, step transforms, a final norm.

        Default: application step t sits at position t + 1 and runs `blocks[schedule[t]]`. A model
        whose layer scale is not its schedule (`SRViT`, `ReViT`) overrides this method.
        """
        positions: dict[str, list[int]] = {}
        for step, b in enumerate(self.schedule):
            positions.setdefault(f'blocks.{b}', []).append(step + 1)
        return positions

    @property
    def num_layers(self) -> int:
        """Length of the layer scale: 1 + the highest layer position (L + 1 for L applications).

        `lr_scale = layer_decay_rate ** (num_layers - layer_depth(name))`: embeddings get
        rate^num_layers, the block at the last position rate^1, parameters above all blocks 1.
        """
        return 1 + max(max(p) for p in self.layer_positions().values())

    def layer_depth(self, param_name: str) -> float:
        """Layer depth in [0, `num_layers`] of a parameter (name as in `self.named_parameters()`),
        for layer-wise learning-rate decay (`mmrecvit.mm.optim.LayerDecayOptimWrapperConstructor`).

        The rule (our decision; BEiT/ViTDet's for a plain ViT, extended to recursion):

        * embeddings (`embedding_parameters`: patch embedding, CLS, positions): 0.
        * a parameter of a module that block applications at layer positions p_1..p_k run
          (`layer_positions`): the mean (p_1 + ... + p_k) / k. A block used once keeps the plain-ViT
          depth, so PlainViT (and SR-ViT at T=1) get exactly BEiT's groups. For a shared block the
          mean gives it the geometric mean of the lr scales its k applications would get as
          separate layers: neither extreme wins. The first application (min) would give reViT's one
          block, i.e. nearly the whole backbone, the embeddings' rate (0.65^12 = 0.006: frozen); the
          last (max) would switch the decay off. The mean does not depend on the decay rate.
        * everything else (routers, rankers, step transforms, a final norm): `num_layers`, lr scale
          1 as the neck and heads. These method parameters are not in the pretrained checkpoint
          (SPEC §6 keeps them at zero/small initialisation): nothing pretrained to preserve, and a
          zero-initialised router at rate^k would hardly leave its initialisation.

        Returns a float (an integer value for parameters used at one position).
        """
        names = dict(self.named_parameters())
        if param_name not in names:
            raise KeyError(f'{param_name!r} is not a parameter of {type(self).__name__}; pass a name from '
                           f'named_parameters(), e.g. {next(iter(names))!r}')

        def under(prefix: str) -> bool:
            return param_name == prefix or param_name.startswith(prefix + '.')

        if any(under(p) for p in self.embedding_parameters):
            return 0.0
        positions = self.layer_positions()
        owners = [m for m in positions if under(m)]
        if not owners:
            return float(self.num_layers)
        used = positions[max(owners, key=len)]  # the innermost listed module
        return sum(used) / len(used)

    # ---- forward ------------------------------------------------------------------------------
    def guard_finite(self, name: str, where: str | Sequence[str], value: Tensor,
                     source: nn.Module | None = None) -> Tensor:
        """Router logits (or another tensor that must stay finite) -> the tensor to use instead.

        A method calls this on every router output before using it. Inside
        `get_intermediate_states` (`forward`) the tensor's finiteness is recorded and the forward
        ends with `NonFiniteError` (or a warning, `nonfinite='warn'`) naming `name` and `where` if
        it was not finite; NaN/inf are replaced by 0 either way (`numerics.FiniteGuard`). A bare
        `forward_states` call only replaces them.
        """
        return sanitize(value) if self._guard is None else self._guard(name, where, value, source)

    def patch_grid(self, x: Tensor) -> tuple[int, int]:
        """The patch grid (ceil(H/p), ceil(W/p)) of an image batch, after checking its shape."""
        if x.ndim != 4:
            raise ValueError(f'expected images of shape (B, C, H, W), got shape {tuple(x.shape)}')
        H, W = x.shape[-2:]
        p = self.patch_size
        if H < p or W < p:
            raise ValueError(f'input of {H}x{W} pixels is smaller than one {p}x{p} patch')
        return -(-H // p), -(-W // p)

    def embed(self, x: Tensor) -> Tensor:
        """(B, C, H, W) image -> (B, N, D) tokens, CLS first, on the grid `patch_grid(x)`.

        H and W are padded (bottom/right, zeros) up to a multiple of the patch size.
        """
        grid = self.patch_grid(x)
        pad_h, pad_w = grid[0] * self.patch_size - x.shape[-2], grid[1] * self.patch_size - x.shape[-1]
        if pad_h or pad_w:
            x = F.pad(x, (0, pad_w, 0, pad_h))
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)  # (B, C, H, W) -> (B, D, h, w) -> (B, h*w, D)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        pos = resample_abs_pos_embed(self.pos_embed, new_size=list(grid), old_size=list(self.pretrain_grid),
                                     num_prefix_tokens=self.num_prefix_tokens)
        return x + pos

    # ---- window attention ---------------------------------------------------------------------
    def default_global_steps(self) -> tuple[int, ...]:
        """The steps with global attention when `global_steps` is None: the ends of 4 equal stages."""
        return stage_ends(self.depth)

    def window_for(self, step: int) -> Windows | None:
        """The window layout of application `step` of the forward in progress; None: global attention."""
        if not self.window_size:
            return None
        global_steps = self.default_global_steps() if self.global_steps is None else self.global_steps
        if step in global_steps:
            return None
        if self._grid is None:
            raise RuntimeError('window attention needs the patch grid: call forward / get_intermediate_states')
        return Windows(self._grid, self.window_size, self.num_prefix_tokens)

    def step_work(self, step: int, tokens: int, share: float = 1.0) -> BlockWork:
        """The work of application `step` over all `tokens` of a `share` of the images (per image)."""
        windows = self.window_for(step)
        pairs = tokens * tokens if windows is None else windows.pairs()
        return BlockWork(self.embed_dim, self.mlp_hidden, tokens * share, tokens * share, attn_pairs=pairs * share)

    def run_block(self, block: nn.Module, x: Tensor, step: int, **kwargs: Any) -> Tensor:
        """Apply `block` as application step `step` (its drop-path rate and attention layout;
        checkpointed if asked); `kwargs` go to `Block.forward` (an attention mask, an MLP's merged
        weights)."""
        rate = self.drop_path_rates[step]
        windows = self.window_for(step)
        if windows is not None:
            kwargs['rows'] = windows
        if self.with_cp and self.training and torch.is_grad_enabled():
            return checkpoint(block, x, rate, use_reentrant=False, **kwargs)
        return block(x, rate, **kwargs)

    def forward_states(self, x: Tensor, indices: Sequence) -> list[Tensor]:
        """The method: token states (B, N, D) after each requested step, in `indices` order, and
        `self.stats` set.

        This default runs `blocks[schedule[t]]` on every token for steps t = 0 .. max(indices)
        (`PlainViT`, `NaiveRecursiveViT`); the recursive methods override it.
        """
        wanted = {i: None for i in indices}
        for step in range(max(indices) + 1):
            x = self.run_block(self.blocks[self.schedule[step]], x, step)
            if step in wanted:
                wanted[step] = x
        self.stats = self.dense_stats(x.shape[1], max(indices) + 1)
        return [wanted[i] for i in indices]

    def to_maps(self, states: Sequence[Tensor], grid: tuple[int, int]) -> tuple[Tensor, ...]:
        """Drop prefix tokens: (B, N, D) -> (B, D, h, w), contiguous in NCHW order.

        The transposed view is channels-last in memory, and convolutions keep that layout, so the
        neck's and FPN's maps would be too. mmcv's RoIAlign (CPU and CUDA) indexes its input as
        contiguous NCHW and silently reads a channels-last map as scrambled features: the RoI heads
        then see noise (tests/mm/test_mmcv_ops.py shows it). One copy per map here prevents that.
        """
        maps = []
        for s in states:
            s = s[:, self.num_prefix_tokens:]
            maps.append(s.transpose(1, 2).reshape(s.shape[0], s.shape[2], *grid).contiguous())
        return tuple(maps)

    def get_intermediate_states(self, x: Tensor, indices: Sequence) -> tuple[list[Tensor], tuple[int, int]]:
        """Image -> states after the requested steps (the one way to get features, STYLE 7).

        Also finishes `self.stats`: its grid, and its token maps, which `forward_states` stores as
        (B, ..., h*w) over the patch tokens and which become (B, ..., h, w) here.
        """
        grid = self.patch_grid(x)
        self._grid = grid
        # One sync at the end resolves every router/aux-loss check (none while jit traces: it would
        # bake the flags into the trace).
        mode = check_choice('nonfinite', self.nonfinite, NONFINITE_MODES)  # a plain attribute: may be set later
        guard = None if tracing() else FiniteGuard(type(self).__name__, mode)
        self._guard = guard
        try:
            # No local name keeps the embedded tokens alive while the blocks run (peak memory as timm).
            states = self.forward_states(self.embed(x), indices)
            final = self.final_index
            states = [self.norm(s) if i == final else s for s, i in zip(states, indices)]
            if self.stats is not None and self.stats.aux_losses:
                self.stats.aux_losses = {k: self.guard_finite(f'auxiliary loss {k}', 'the end of the forward', v)
                                         for k, v in self.stats.aux_losses.items()}
        finally:
            self._guard = None
        if guard is not None:
            guard.finish()
        if self.stats is not None:
            self.stats.grid = grid
            self.stats.work.insert(0, conv_work('patch_embed', self.patch_embed.proj, grid))
            maps = self.stats.token_maps
            for k, m in maps.items():
                maps[k] = m.reshape(*m.shape[:-1], *grid)
        return states, grid

    @property
    def final_index(self) -> int:
        """The step whose state is the model's final one (`final_norm` applies to it)."""
        return self.depth - 1 if self._final_step is None else self._final_step

    def forward(self, x: Tensor) -> tuple[Tensor, ...]:
        """(B, C, H, W) -> `out_type`'s outputs: maps (B, D, ceil(H/p), ceil(W/p)), one per
        `out_indices`, or a 1-tuple with the (B, D) classification feature."""
        dtype = AMP_DTYPES[check_choice('amp_dtype', self.amp_dtype, list(AMP_DTYPES))]
        if dtype is None:
            return self.forward_outputs(x)
        with torch.autocast(x.device.type, dtype=dtype):
            outputs = self.forward_outputs(x)
        return tuple(o.float() for o in outputs)

    def forward_outputs(self, x: Tensor) -> tuple[Tensor, ...]:
        """`forward` at the precision in force, with the `compute` knob's setting in force."""
        fraction = check_compute(self.compute)  # a plain attribute: may be set on a built model
        if fraction is None:
            return self.run_outputs(x)
        if self.training:
            raise RuntimeError(f'compute={fraction} is a test-time knob (eval mode only); call model.eval() '
                               'or set compute=None to train')
        self._grid = self.patch_grid(x)  # the candidates' window layouts need it
        setting = self.compute_setting(fraction, self._grid)
        with in_force(self, {'_compute_in_force': fraction, **setting}):
            return self.run_outputs(x)

    def compute_setting(self, fraction: float, grid: tuple[int, int]) -> dict[str, Any]:
        """The attributes that put `compute=fraction` in force for one forward on a `grid` input.

        This default is the baselines' (`PlainViT`, `NaiveRecursiveViT`): the first K of the L
        block applications, K the largest with FLOPs <= fraction x those of all L (at least 1), the
        outputs taken from the kept steps (`compute.kept_steps`: stage ends rescaled to K).
        """
        tokens = grid[0] * grid[1] + self.num_prefix_tokens
        embed = conv_work('patch_embed', self.patch_embed.proj, grid).flops

        def flops_of(i: int) -> float:  # i + 1 applications
            return embed + total_flops(self.dense_stats(tokens, i + 1).work)

        kept = 1 + largest_within(fraction, flops_of(self.depth - 1), flops_of, self.depth)
        if kept == self.depth:
            return {}
        return {'out_indices': kept_steps(self.out_indices, self.depth, kept), '_final_step': kept - 1}

    def run_outputs(self, x: Tensor) -> tuple[Tensor, ...]:
        """The outputs of `out_type` with the settings in force."""
        if self.out_type == 'featmap':
            states, grid = self.get_intermediate_states(x, self.out_indices)
            return self.to_maps(states, grid)
        (final,), _ = self.get_intermediate_states(x, [self.final_index])
        return (self.pool(final),)

    def pool(self, tokens: Tensor) -> Tensor:
        """(B, N, D) normalised final tokens -> (B, D): the CLS token, or the mean of the patch tokens."""
        return tokens[:, 0] if self.out_type == 'cls_token' else tokens[:, self.num_prefix_tokens:].mean(1)

    def dense_stats(self, tokens: int, num_applications: int) -> ForwardStats:
        """Statistics of a forward that ran all `tokens` through the first `num_applications` steps."""
        return ForwardStats(work=[self.step_work(t, tokens) for t in range(num_applications)])


class PlainViT(ViTBackbone):
    """DeiT-style ViT with L distinct blocks: the unshared reference (SPEC §0).

    Args:
        arch: 'tiny' | 'small' | 'base' | 'large' (aliases 'ti', 's', 'b', 'l'); `embed_dim`, `depth` and
            `num_heads` override the table.
        depth: L, blocks = block applications (default from `arch`: 12).
        out_indices: application steps (= block indices) whose outputs are returned (default:
            the ends of 4 equal stages, (2, 5, 8, 11) for 12 blocks).
        compute: fewer block applications from the end, the baseline of the test-time knob: the
            first K of the L blocks, K the largest whose FLOPs are <= compute x those of all L
            (rounded down, at least 1); output step i is read at kept step max(1, floor((i+1)K/L)) - 1
            (stage ends rescaled: (2, 5, 8, 11) -> (0, 2, 3, 5) at K = 6), the final norm on step K-1.
        Other arguments: see `ViTBackbone`.
    """

    def __init__(self, arch: str = 'small', embed_dim: int | None = None, depth: int | None = None,
                 num_heads: int | None = None, out_indices: Sequence[int] | None = None,
                 **kwargs: Any) -> None:
        sizes = resolve_arch(arch, ARCH_SETTINGS, embed_dim=embed_dim, depth=depth, num_heads=num_heads)
        super().__init__(embed_dim=sizes['embed_dim'], num_heads=sizes['num_heads'], depth=sizes['depth'], **kwargs)
        self.out_indices = check_out_indices(stage_ends(self.depth) if out_indices is None else out_indices,
                                             self.depth)
        self.blocks = nn.ModuleList(self.make_block() for _ in range(self.depth))
        self.schedule = list(range(self.depth))

    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        """Identity: our names are timm's (block i <- timm block i)."""
        return dict(state_dict)


class NaiveRecursiveViT(ViTBackbone):
    """k distinct blocks applied cyclically for L applications (SPEC §0).

    Application step t runs `blocks[t % k]`; only states are read out (no mixing), so this is
    the "naive recursion" reference that degrades as recursion grows.

    Args:
        num_blocks: k, the unique blocks (default 3).
        depth: L, number of block applications (default from `arch`: 12).
        out_indices: application steps to return (default: ends of 4 equal stages).
        compute: as `PlainViT`'s: the first K of the L applications (the cycle cut from the end),
            K the largest within compute x the FLOPs of all L, outputs at the rescaled steps.
        timm_init: how unique block j is initialised from an n-block timm checkpoint (SPEC §6):
            'cycle' (default, our decision correcting SPEC §6's mapping to the schedule): the mean of
            the checkpoint blocks at the steps block j runs, t = j, j + k, j + 2k, ... (block
            t * n // L of the checkpoint for step t), so every step starts from a mean that
            contains the DeiT block of its own depth; 'pick': block j * (n/k); 'average': the mean
            of the j-th group of n/k consecutive blocks. The last two are SPEC §6's, which match a
            schedule that runs the groups consecutively, not the cycle this model runs.
    """

    def __init__(self, arch: str = 'small', embed_dim: int | None = None, depth: int | None = None,
                 num_heads: int | None = None, num_blocks: int = 3,
                 out_indices: Sequence[int] | None = None, timm_init: str = 'cycle', **kwargs: Any) -> None:
        check_renamed('NaiveRecursiveViT', kwargs, {'num_unique_blocks': 'num_blocks'})
        sizes = resolve_arch(arch, ARCH_SETTINGS, embed_dim=embed_dim, depth=depth, num_heads=num_heads)
        super().__init__(embed_dim=sizes['embed_dim'], num_heads=sizes['num_heads'], depth=sizes['depth'], **kwargs)
        k = check_int('num_blocks', num_blocks, 1, self.depth)
        self.timm_init = check_choice('timm_init', timm_init, ['cycle', 'pick', 'average'])
        self.out_indices = check_out_indices(stage_ends(self.depth) if out_indices is None else out_indices,
                                             self.depth)
        self.blocks = nn.ModuleList(self.make_block() for _ in range(k))
        self.schedule = [t % k for t in range(self.depth)]

    def convert_timm_state_dict(self, state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
        rest, blocks = split_timm_blocks(state_dict)
        k, n = self.num_blocks, len(blocks)
        if self.timm_init == 'cycle':
            groups = [[t * n // self.depth for t in range(j, self.depth, k)] for j in range(k)]
            rest.update(pick_or_average_blocks(blocks, groups, 'average', prefix='blocks'))
            return rest
        if n % k:
            raise ValueError(f"cannot map a {n}-block checkpoint onto num_blocks={k} with timm_init="
                             f"{self.timm_init!r}: {n} must be a multiple of {k} (timm_init='cycle' maps any)")
        groups = [list(range(j * (n // k), (j + 1) * (n // k))) for j in range(k)]
        rest.update(pick_or_average_blocks(blocks, groups, self.timm_init, prefix='blocks'))
        return rest
