"""Router numerics: finiteness guards for router logits and auxiliary losses, and routers that decide in fp32.

A NaN or inf in a router's logits (SR-ViT's soft routers, reViT's depth router, Edge-RecViT's
ranker, MoR-ViT's routers) or in an auxiliary loss does not crash anything by itself: softmax,
top-k and argmax accept it, and the NaN reaches the task loss and, through one optimizer step,
every parameter. Training then continues on garbage. The backbones therefore pass each router
output and each auxiliary loss through `FiniteGuard`, which

* records a finiteness flag per tensor (per row when the rows are steps, e.g. reViT's gate table) on the
  device, and in mode 'raise' (the default) returns the tensor with NaN/inf replaced by 0 (`nan_to_num`: the
  identity, values and gradients, on finite tensors), so the forward and its backward run without a host sync
  (CUDA graphs and a GPU that runs ahead of the host need none). The end of the forward gathers its flags in one
  vector and starts their copy to the host (`PendingChecks`: pinned memory behind a CUDA event). They are read,
  and `NonFiniteError` raised naming the backbone, the module, the step of every non-finite tensor and where the
  forward ran (`forward_label`, e.g. 'training iteration 17'), at the first of:
  - the training hooks' once-per-iteration read (`check_finite`, in the one transfer that takes the iteration's
    statistics to the log: mmengine's `RecursionHook` after the optimizer step and before the checkpoint hooks,
    detectron2's `RecViTRCNN` after the forward), so a run stops in the iteration whose forward failed;
  - the backbone's next forward, once the copy has arrived (`DeferredChecks.poll`: on the CPU at once, on a GPU
    when the device has passed the failed forward; no wait), so a plain PyTorch loop stops at a later forward;
  - `check_finite(model)`, called by the user (it waits: one sync), e.g. right after a forward to raise there;
  after `PENDING_LIMIT` unread forwards the next forward waits for the oldest (a loop that never syncs).
* in mode 'warn' skips a non-finite tensor: it is replaced by zeros *cut from the graph* (a zero
  logit is a neutral score, a zero loss term adds nothing), because a zero gradient flowing back
  through a NaN router weight is still NaN (0 * NaN). The graph keeps its shape: a skipped router
  output stays attached to the router's parameters by a zero with zero gradient (`zero_touch`),
  so no parameter drops out of the backward pass (DDP would fail or hang waiting for its gradient
  on that rank); the end of the forward logs the same text as a warning on the 'mmrecvit' logger
  (forwarded to the mmengine log) and training goes on. Deciding to cut needs the flag at once, so
  'warn' costs one device sync per check: a debugging mode;
* in mode 'off' checks nothing and replaces nothing (a NaN then travels as in any network).

Checks run on the public forward path (`forward` / `forward_intermediates`): the backbone's forward makes one
guard per forward and makes it the context's (`active_guard`), and the methods pass each router output through
`finite`. While `torch.jit` traces (FLOP counting) or torch.compile/export traces nothing is checked (`finite`
then only sanitises): the deferred read lives outside the graph. A caller names where the forward
runs (`forward_label`, a context variable: the training hook sets 'training iteration 17'), and the error
says it.

Routers decide in fp32. Every router and ranker (SR-ViT's soft routers, reViT's depth router, Edge-RecViT's ranker,
MoR-ViT's routers) is built from `RouterLinear`, whose product (`fp32_linear`) is fp32 from fp32 copies of its
operands on every device and under every cast: autocast is off inside it, a whole-model `.bfloat16()` or an FSDP
mixed-precision policy leaves the weights in bf16 but the product upcasts them (the gradients flow back in the
parameters' dtype), and TF32 does not apply. TF32 cannot be switched off for one product: PyTorch's flag
(`torch.backends.cuda.matmul.allow_tf32`, set by our recipes' `TF32Hook`) is process-wide, read by every thread (the
autograd engine runs the backward in its own) and guarded by compiled graphs, so flipping it around a router call
would race and recompile. Where the flag allows TF32, the product is instead computed from TF32-exact halves of its
operands in three TF32 products (`split_mm`, CUTLASS's 3xTF32), fp32-accurate to ~2^-22 whatever the flag says, at
about the cost of one full-fp32 product; the backward likewise. oneDNN's reduced-precision fp32 products on CPU
(`torch.backends.mkldnn.matmul.fp32_precision`) get an fp64 product there. The flags are only read.
"""

from __future__ import annotations

import collections
import contextvars
import ctypes
import logging
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from timm.layers import register_notrace_module
from torch import Tensor, nn

from . import fx

logger = logging.getLogger('mmrecvit')

NONFINITE_MODES = ('raise', 'warn', 'off')
# Forwards whose checks a backbone keeps unread at most ('raise'); past it the next forward waits for the oldest.
PENDING_LIMIT = 16
# Where the forwards of this context run ('training iteration 17'), appended to a NonFiniteError or warning.
forward_label: contextvars.ContextVar[str | None] = contextvars.ContextVar('mmrecvit_forward_label', default=None)
# The checks of the backbone forward running in this context (`ViTBackbone.forward_states` sets it; None: none).
active_guard: contextvars.ContextVar[FiniteGuard | None] = contextvars.ContextVar('mmrecvit_guard', default=None)


class NonFiniteError(FloatingPointError):
    """Router logits or an auxiliary loss of a backbone contain NaN or inf."""


class FiniteGuard:
    """The finiteness checks of one forward of backbone `owner` (see the module docstring).

    Args:
        owner: the backbone's name, first word of every message.
        mode: 'raise', 'warn' or 'off'.
    """

    def __init__(self, owner: str, mode: str) -> None:
        self.owner, self.mode = owner, mode
        self._checks: list[tuple[str, list[str], Tensor]] = []  # (name, the label of each flag, flags (n,) bool)
        self._bad: list[str] = []  # 'warn': what was skipped

    def __call__(self, name: str, where: str | Sequence[str], value: Tensor, source: nn.Module | None = None) -> Tensor:
        """Record `value`'s finiteness and return the tensor to use ('off': `value` itself, unchecked).

        name: what the tensor is, e.g. 'routers.2 logits' or 'auxiliary loss loss_du'.
        where: the step it belongs to ('unit 1, recursion 3'); or one label per row of `value`
            (its first dimension), when the rows are steps.
        source: the module that computed `value` (a router). In 'warn' mode a skipped tensor stays
            connected to its parameters through `zero_touch`, so they keep a (zero) gradient:
            DDP with `find_unused_parameters=False` then finds every parameter used on every rank.
        """
        if self.mode == 'off':
            return value
        rows = [where] if isinstance(where, str) else list(where)
        flags = torch.isfinite(value.detach()).reshape(len(rows), -1).all(1)  # (rows,) on the device, no sync
        if self.mode == 'warn':  # cutting a bad tensor from the graph needs its flag now: one sync per check
            if bool(flags.all()):
                return value
            self._bad.append(_describe(name, rows, flags.tolist()))
            skipped = sanitize(value.detach())
            return skipped if source is None else skipped + zero_touch(source)
        self._checks.append((name, rows, flags))
        return value.nan_to_num(0.0, 0.0, 0.0)  # `sanitize`, inline: once per router call

    def finish(self) -> PendingChecks | None:
        """The end of the forward, no sync: 'raise' -> its flags in one vector on their way to the host (read by
        `DeferredChecks.poll` or `check_finite`); 'warn' logs what it skipped."""
        if self._bad:
            logger.warning(self._message(self._bad) + " (nonfinite='warn': replaced by 0 in this forward)" + _at())
        checks, self._checks, self._bad = self._checks, [], []
        if not checks:
            return None
        labels = [(name, rows) for name, rows, _ in checks]
        return PendingChecks(self, labels, torch.cat([flags for _, _, flags in checks]), forward_label.get())

    def _message(self, bad: list[str]) -> str:
        return f'{self.owner}: non-finite values (NaN or inf) in ' + '; '.join(bad)


def _describe(name: str, rows: list[str], oks: Sequence[bool]) -> str:
    return f'{name} at {", ".join(row for row, ok in zip(rows, oks) if not ok)}'


def _at(label: str | None = None) -> str:
    label = forward_label.get() if label is None else label
    return '' if label is None else f'; at {label}'


class PendingChecks:
    """One 'raise' forward's flags (n,) bool, copied to the host without a sync: on CUDA into pinned memory behind
    an event (`ready` once the GPU has passed it), on the CPU the flags themselves; other devices keep them until
    `check_finite` reads them."""

    def __init__(self, guard: FiniteGuard, labels: list[tuple[str, list[str]]], flags: Tensor, where: str | None):
        self.guard, self.labels, self.where, self.flags, self.event = guard, labels, where, flags, None
        self.host = flags if flags.device.type == 'cpu' else None
        if flags.device.type == 'cuda':
            self.host = torch.empty(flags.shape, dtype=torch.bool, pin_memory=True).copy_(flags, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()

    def ready(self) -> bool:
        """The flags are readable on the host without waiting for the device."""
        return self.host is not None and (self.event is None or self.event.query())

    def host_values(self) -> list[bool]:
        """The flags read from host memory (call when `ready`): nothing waits (`host_bools`; on a GPU the pinned
        buffer the copy has filled)."""
        return host_bools(self.host)

    def check(self, values: Sequence[bool]) -> None:
        """Raise `NonFiniteError` naming the backbone, each non-finite tensor and its step, and where the forward
        ran, when any of `values` (the flags, read) is False."""
        if all(values):
            return
        bad, offset = [], 0
        for name, rows in self.labels:
            oks = values[offset : offset + len(rows)]
            offset += len(rows)
            if not all(oks):
                bad.append(_describe(name, rows, oks))
        raise NonFiniteError(
            self.guard._message(bad)
            + " (nonfinite='raise', read after the forward; 'warn' would replace them by 0 with a warning and go on)"
            + _at(self.where)
        )


class DeferredChecks:
    """A backbone's 'raise' checks not read yet (`ViTBackbone.finite_checks`): a plain object, not state; a copy or
    pickle of the backbone starts with none."""

    def __init__(self) -> None:
        self.pending: collections.deque[PendingChecks] = collections.deque()

    def __reduce__(self) -> tuple:
        return DeferredChecks, ()

    def poll(self) -> None:
        """At the start of a forward: read the earlier forwards' flags that have reached the host (no wait; with
        more than `PENDING_LIMIT` unread, wait for the oldest), raising for the first that failed."""
        while self.pending and (self.pending[0].ready() or len(self.pending) > PENDING_LIMIT):
            pending = self.pending.popleft()
            pending.check(pending.host_values() if pending.ready() else pending.flags.tolist())

    def take(self) -> list[PendingChecks]:
        taken, self.pending = list(self.pending), collections.deque()
        return taken


def check_finite(model: nn.Module, scalars: Sequence[Tensor] = ()) -> Tensor:
    """Read every unread check of every backbone in `model` together with `scalars` (the log's numbers, one each)
    in one transfer, and raise `NonFiniteError` for the first forward that failed; else -> `scalars` on the host,
    (len(scalars),) fp32 on the CPU (tensors still, for the hooks that read the log as tensors: reading them waits
    for no device). The training hooks call it once per iteration (`RecursionHook`, `RecViTRCNN`)."""
    pending = [
        p
        for m in model.modules()
        if isinstance(checks := getattr(m, 'finite_checks', None), DeferredChecks)
        for p in checks.take()
    ]
    unread = [p for p in pending if not p.ready()]
    parts = [t.detach().float().reshape(1) for t in scalars] + [p.flags.float() for p in unread]
    host = torch.cat([t.to(parts[0].device) for t in parts]).cpu() if parts else torch.zeros(0)  # the one transfer
    flags, start, waited = host_bools(host[len(scalars) :] != 0), 0, set(map(id, unread))
    for p in pending:
        if id(p) not in waited:
            p.check(p.host_values())
        else:
            p.check(flags[start : start + p.flags.numel()])
            start += p.flags.numel()
    return host[: len(scalars)]


def host_bools(host: Tensor) -> list[bool]:
    """A bool tensor in host memory -> its values, read as raw bytes (a bool is one byte): no device is involved,
    which the host-sync counter's tensor modes, modelling a GPU, do not see (`benchmark/host_sync.py`)."""
    host = host.contiguous()
    return [b != 0 for b in ctypes.string_at(host.data_ptr(), host.numel())]


def finite(name: str, where: str | Sequence[str], value: Tensor, source: nn.Module | None = None) -> Tensor:
    """Router logits (or another tensor that must stay finite) -> the tensor to use, checked by the running forward's
    guard (`FiniteGuard.__call__`): NaN/inf are replaced by 0 and reported after the forward ('raise') or at its end
    ('warn'), naming `name` and `where`. Outside a checked forward (tracing, or a module called on its own) only
    sanitised."""
    guard = active_guard.get()
    return sanitize(value) if guard is None else guard(name, where, value, source)


def tracing() -> bool:
    """True while torch.jit traces, torch.compile/dynamo compiles, torch.export exports or torch.fx symbolically
    traces the forward: data-dependent Python decisions (the finiteness checks' flags, statistics read to the host)
    would become constants or graph breaks there (or fail on fx's proxies), so those parts step aside (the eager
    forward keeps them)."""
    return torch.jit.is_tracing() or torch.compiler.is_compiling() or fx.symbolic_tracing()


def zero_touch(module: nn.Module) -> Tensor:
    """A scalar 0 that depends on every trainable parameter of `module` with a finite (zero)
    gradient, even for NaN/inf parameters (their non-finite entries are masked before the sum)."""
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        return torch.zeros(())
    return sum(torch.where(torch.isfinite(p), p, 0.0).sum() for p in params) * 0.0


def sanitize(value: Tensor) -> Tensor:
    """NaN and +-inf -> 0; the identity (values and gradients) on finite tensors."""
    return value.nan_to_num(0.0, 0.0, 0.0)


def full_precision(module: nn.Module, x: Tensor) -> Tensor:
    """`module(x)` in fp32 with autocast off, whatever the model's dtype: the routers and rankers are built from
    `RouterLinear`, whose products are fp32 (module docstring, "Routers decide in fp32"); their activations then
    run on fp32 tensors too. Routers and rankers decide discrete things (top-k, argmax): with bf16/fp16 logits ties
    become common (4096 bf16 logits take ~1400 distinct values) and are broken differently by different kernels."""
    if fx.traced(x):  # fx records no context manager: its `RouterLinear` leaves keep the products
        return module(x.float())  # fp32, the only ops autocast would cast in a router (fx.py)
    with torch.autocast(x.device.type, enabled=False):
        return module(x.float())


@register_notrace_module  # an fx leaf: it picks its product by the device and the flags when the graph runs
class RouterLinear(nn.Linear):
    """`nn.Linear` (same parameters, init and state-dict keys) whose product is `fp32_linear`: the layers of every
    router and ranker, fp32 under autocast, under a whole-model bf16/fp16 cast and with TF32 allowed."""

    def forward(self, x: Tensor) -> Tensor:
        return fp32_linear(x, self.weight, self.bias)


def fp32_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`F.linear(x, weight, bias)` computed in fp32 from fp32 copies of its operands, with autocast off and at fp32
    accuracy where the device's fp32 products are allowed reduced precision (`reduced_fp32_products`). The result
    is fp32; the gradients flow back to `x` and the parameters in their own dtypes (through `.float()`)."""
    with torch.autocast(x.device.type, enabled=False):
        x, weight = x.float(), weight.float()
        bias = None if bias is None else bias.float()
        if not reduced_fp32_products(x.device):
            return F.linear(x, weight, bias)
        if x.device.type == 'cuda':
            return _SplitLinear.apply(x, weight, bias)
        # oneDNN's bf16/tf32 fp32 products on CPU: fp64 there costs ~2x fp32 (the router products are small)
        return F.linear(x.double(), weight.double(), None if bias is None else bias.double()).float()


def reduced_fp32_products(device: torch.device) -> bool:
    """True where fp32 matrix products on `device` may run in reduced precision: TF32 on CUDA
    (`torch.backends.cuda.matmul.allow_tf32`, set by `TF32Hook` and `torch.set_float32_matmul_precision`; a compiled
    graph guards on it), oneDNN's bf16/tf32 on CPU (`_onednn_reduced`). Read, never set."""
    if device.type == 'cuda':
        return torch.backends.cuda.matmul.allow_tf32
    return device.type == 'cpu' and _onednn_reduced()


@torch.compiler.assume_constant_result  # dynamo cannot trace the flag's reader: a compiled graph keeps what it saw
def _onednn_reduced() -> bool:
    """oneDNN's fp32 products in bf16/tf32 on CPU (`torch.set_float32_matmul_precision('medium')`, AMX CPUs)."""
    return torch.backends.mkldnn.matmul.fp32_precision in ('bf16', 'tf32')


def tf32_split(t: Tensor) -> tuple[Tensor, Tensor]:
    """fp32 `t` -> (hi, lo), `hi + lo == t` exactly: `hi` is `t` rounded to TF32's 10 mantissa bits (exact in a TF32
    product), `lo` the rest (|lo| <= 2^-11 |t|, itself rounded by TF32 to ~2^-23 |t|). NaN stays NaN; inf gives NaN
    in `lo` (non-finite either way, which the finiteness guard reports)."""
    bits = t.view(torch.int32)
    hi = ((bits + 0x1000) & -0x2000).view(torch.float32)  # round half away from zero at mantissa bit 13
    return hi, t - hi


def split_mm(a: Tensor, b: Tensor, mm: Callable[[Tensor, Tensor], Tensor] = torch.mm) -> Tensor:
    """`a @ b` (2-D fp32) at fp32 accuracy from three products `mm` (TF32 where allowed; tests emulate it) of
    TF32-exact parts (`tf32_split`; the 3xTF32 of NVIDIA's CUTLASS): a_hi b_hi + a_hi b_lo + a_lo b_hi, the dropped
    a_lo b_lo below 2^-22 of |a||b|."""
    a_hi, a_lo = tf32_split(a)
    b_hi, b_lo = tf32_split(b)
    return mm(a_lo, b_hi) + mm(a_hi, b_lo) + mm(a_hi, b_hi)  # the small terms first


class _SplitLinear(torch.autograd.Function):
    """`F.linear` whose forward and backward products are `split_mm`: fp32 accuracy where TF32 is allowed."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        y = split_mm(x.reshape(-1, x.shape[-1]), weight.t()).view(*x.shape[:-1], weight.shape[0])
        return y if bias is None else y + bias

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        x, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])  # (M, out)
        gx = split_mm(g, weight).view(x.shape) if ctx.needs_input_grad[0] else None
        gw = split_mm(g.t(), x.reshape(-1, x.shape[-1])) if ctx.needs_input_grad[1] else None
        gb = g.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gx, gw, gb
