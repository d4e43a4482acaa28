"""timm's own model contract on every method: the test functions of timm's tests/test_models.py, from the vendored
snapshot of timm's repository (`helpers.TIMM_SNAPSHOT`, checked against ../shared/vendor/SHA256SUMS, unpacked into a
temporary folder: never copied into this repository), called on our `<method>_tiny_patch16_224` models.

timm picks the models of each test with name filters (`NON_STD_FILTERS`, `EXCLUDE_FX_FILTERS`, ...) when it
collects its own file; we call its functions with our names instead, which is where those filters would put our
ViTs: `test_model_default_cfgs_non_std` (timm runs it on its `vit_*`), not the CNN variant. What our models cannot
do is an `xfail(strict=True)` with its one-line reason (`EXCLUDED`), as timm's filters say it for its models: a
case that starts to pass fails here until its exclusion goes. Tiny: `create_model` gets the tiny constructor
arguments of `backbone_cases.py` (64 px, 4-6 layers of width 32), and timm's target input sizes become 64 px,
the size the models are built for (an fx graph is specialised to it, `mmrecvit/models/fx.py`). docs/timm.md lists
what runs and what is excluded.
"""

from __future__ import annotations

import importlib.util
import warnings

import pytest
import torch
from backbone_cases import BACKBONE_CASES
from helpers import TIMM_SNAPSHOT, VENDOR_PLACES, extract_checked, vendored

from mmrecvit.timm import METHODS

pytestmark = pytest.mark.usefixtures('one_thread')
SHORT = {cls: short for short, cls in METHODS.items()}
# The functions of timm's tests/test_models.py run here (batch sizes as timm parametrizes them). Not run: the ones
# that download weights (test_model_inference, test_model_load_pretrained, test_model_features_pretrained: none
# are published), and the fx + TorchScript pair (test_model_forward_fx_torchscript, ..._with_features_fx: regnet).
TIMM_TESTS = {
    'test_model_forward': 1,
    'test_model_backward': 2,
    'test_model_default_cfgs': 1,
    'test_model_default_cfgs_non_std': 1,
    'test_model_forward_features': 1,
    'test_model_forward_intermediates_features': 1,
    'test_model_forward_intermediates': 1,
    'test_model_forward_fx': 1,
    'test_model_backward_fx': 2,
    'test_model_forward_torchscript': 1,
}
# timm's markers on those functions (its pyproject.toml registers them; here --strict-markers needs them known)
TIMM_MARKERS = ('base', 'cfg', 'features', 'fxforward', 'fxbackward', 'torchscript', 'timeout')
TINY_SIZE = BACKBONE_CASES['PlainViT']['img_size']
ALL = tuple(BACKBONE_CASES)
TOKEN_ADAPTIVE = ('EdgeRecViT', 'MoRViT')
# (timm test, methods) -> (the error, why): the exclusions, each with its reason
EXCLUDED = {
    ('test_model_default_cfgs', ALL): (
        TypeError,
        "a ViT's forward_features are tokens (B, N, D), no pool_size grid: timm runs its vit_* through _non_std",
    ),
    ('test_model_forward_torchscript', ALL): (
        torch.jit.frontend.NotSupportedError,
        "the forwards are Python generators over each method's structure with keyword-only arguments (STYLE 8b)",
    ),
    ('test_model_backward', ('EdgeRecViT',)): (
        RuntimeError,
        'trains with its temperature schedule and CCE loss: model(x) in training refuses (docs/timm.md)',
    ),
    ('test_model_forward_fx', TOKEN_ADAPTIVE): (TypeError, 'the tokens each layer runs are chosen per image'),
    ('test_model_backward_fx', TOKEN_ADAPTIVE): (TypeError, 'the tokens each layer runs are chosen per image'),
}
# fx traces the training forward too (timm's _create_fx_model): reViT's step dropout draws a schedule per image
FX_KWARGS = {'ReViT': dict(step_drop_rate=0.0)}


def excluded(test: str, method: str) -> tuple[type, str] | None:
    return next((why for (name, methods), why in EXCLUDED.items() if name == test and method in methods), None)


def cases():
    for test in TIMM_TESTS:
        for method in BACKBONE_CASES:
            why = excluded(test, method)
            marks = () if why is None else pytest.mark.xfail(strict=True, raises=why[0], reason=why[1])
            yield pytest.param(test, method, marks=marks, id=f'{test}-{method}')


@pytest.fixture(scope='module')
def timm_tests(pytestconfig, tmp_path_factory):
    """timm's tests/test_models.py as a module, its JIT executor settings (set at import) put back after."""
    vendor = vendored(TIMM_SNAPSHOT)
    if vendor is None:
        pytest.skip(
            f"timm's tests/test_models.py comes from {TIMM_SNAPSHOT}, in none of {list(map(str, VENDOR_PLACES))}"
        )
    folder = extract_checked(
        vendor, TIMM_SNAPSHOT, {'tests/test_models.py': 'timm_test_models.py'}, tmp_path_factory.mktemp('timm')
    )
    for marker in TIMM_MARKERS:
        pytestconfig.addinivalue_line('markers', f"{marker}: timm's own (tests/test_models.py)")
    executor = torch._C._jit_set_profiling_executor(True)
    mode = torch._C._jit_set_profiling_mode(False)
    try:
        spec = importlib.util.spec_from_file_location('timm_test_models', folder / 'timm_test_models.py')
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        torch._C._jit_set_profiling_executor(executor)
        torch._C._jit_set_profiling_mode(mode)
    return module


@pytest.mark.parametrize(('test', 'method'), list(cases()))
def test_timms_model_test(timm_tests, monkeypatch, test, method):
    create = timm_tests.create_model
    tiny = {k: v for k, v in BACKBONE_CASES[method].items() if k != 'arch'}  # the name says the arch
    if 'fx' in test:
        tiny.update(FX_KWARGS.get(method, {}))
    monkeypatch.setattr(timm_tests, 'create_model', lambda name, **kwargs: create(name, **{**tiny, **kwargs}))
    for target in ('FWD', 'BWD', 'FFEAT', 'FWD_FX', 'BWD_FX', 'JIT'):
        monkeypatch.setattr(timm_tests, f'TARGET_{target}_SIZE', TINY_SIZE)
    getattr(timm_tests, test)(f'{SHORT[method]}_tiny_patch16_224', TIMM_TESTS[test])


def tiny_model(method, **kwargs):
    import timm

    tiny = {k: v for k, v in BACKBONE_CASES[method].items() if k != 'arch'}
    return timm.create_model(f'{SHORT[method]}_tiny_patch16_224', **{**tiny, **kwargs})


@pytest.mark.parametrize('method', ALL)
def test_global_pool_empty_passes_the_tokens_on(method):
    """timm's `reset_classifier(0, '')` and `global_pool=''`: no pooling, no head, the (B, N, D) tokens out."""
    model = tiny_model(method, num_classes=5).eval()
    x = torch.randn(2, 3, TINY_SIZE, TINY_SIZE)
    with torch.no_grad():
        tokens, pooled = model.forward_features(x), model.forward_head(model.forward_features(x), pre_logits=True)
        model.reset_classifier(0, '')
        assert isinstance(model.head, torch.nn.Identity) and model.num_classes == 0
        torch.testing.assert_close(model(x), tokens, rtol=0, atol=0)
        model.reset_classifier(0, 'token')  # the pooling back: what pre_logits gave
        torch.testing.assert_close(model(x), pooled, rtol=0, atol=0)
        built = tiny_model(method, num_classes=0, global_pool='').eval()
        assert built(x).shape == tokens.shape == (2, (TINY_SIZE // 16) ** 2 + 1, model.num_features)


def fx_trace(model):
    """`model` traced as timm's fx feature extraction traces it: timm's notrace modules and functions are leaves."""
    from timm.layers import get_notrace_functions, get_notrace_modules

    class Tracer(torch.fx.Tracer):
        def is_leaf_module(self, m, name):
            return isinstance(m, tuple(get_notrace_modules())) or super().is_leaf_module(m, name)

    return torch.fx.GraphModule(model, Tracer(autowrap_functions=tuple(get_notrace_functions())).trace(model))


@pytest.mark.parametrize('method', ['PlainViT', 'NaiveRecursiveViT', 'SRViT', 'ReViT'])
def test_an_fx_graph_checks_the_size_and_compute_it_was_traced_for(method):
    model = tiny_model(method, num_classes=5).eval()
    graph = fx_trace(model)
    x = torch.randn(2, 3, TINY_SIZE, TINY_SIZE)
    with torch.no_grad():
        with warnings.catch_warnings(record=True) as caught:  # reViT's graph re-made its depth grid, warning each call
            warnings.simplefilter('always')
            torch.testing.assert_close(graph(x), model(x), rtol=0, atol=0)
        assert not [f'{w.filename}:{w.lineno}: {w.message}' for w in caught]
        with pytest.raises(ValueError, match=r'traced for inputs of 64x64 pixels .* got \(80, 64\)'):
            graph(torch.randn(2, 3, 80, TINY_SIZE))  # the module itself takes it
        with pytest.raises(ValueError, match=r'traced at compute=None .* got compute=0.5'):
            graph(x, compute=0.5)


@pytest.mark.parametrize(
    ('method', 'kwargs', 'train', 'reason'),
    [
        ('EdgeRecViT', {}, False, 'the ranker picks the tokens each layer runs'),
        ('MoRViT', {}, False, 'the routers pick the tokens each recursion runs'),
        ('ReViT', dict(step_drop_rate=0.3), True, 'step dropout draws the steps of each image per forward'),
    ],
)
def test_fx_refuses_a_data_dependent_forward_in_one_line(method, kwargs, train, reason):
    model = tiny_model(method, **kwargs).train(train)
    with pytest.raises(TypeError, match=f'torch.fx cannot trace {method}: {reason}'):
        fx_trace(model)
    if method == 'ReViT':  # its eval forward (no step dropout) traces
        x = torch.randn(1, 3, TINY_SIZE, TINY_SIZE)
        with torch.no_grad():
            torch.testing.assert_close(fx_trace(model.eval())(x), model(x), rtol=0, atol=0)
