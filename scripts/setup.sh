#!/usr/bin/env bash
# Set up mmrecvit's virtual environment in <repo>/.venv (idempotent).
#
#   bash scripts/setup.sh                 # or: make setup
#   bash scripts/setup.sh --mmcv full     # or: make setup MMCV=full  (mmcv with compiled ops; see step 4)
#
# Steps (each skipped when already done; pip writes no .pyc: step 8 compiles them once):
#   1. create .venv with Python 3.11 ($PYTHON to override)
#   2. install torch 2.14.1 (from the machine's disk) and the build tools, then start detectron2 0.6 (not on the
#      package index) from the first of: a wheel in $MMRECVIT_WHEEL_DIR (checksummed as in 5), the wheel cache,
#      a source build (~2 min on 2 cores, in the background while 3-6 run, then cached) of $MMRECVIT_D2_SOURCE
#      (a tarball or directory), else of ../shared/vendor's pinned tarball on these machines (checked against its
#      SHA256SUMS), else of detectron2's repository (pip + git, as detectron2's install guide says)
#   3. install the rest of the pinned stack from requirements.txt
#   4. pip install -e . (mmrecvit itself, without dependencies: 3 pinned them) and its import hook (a .pth file)
#   5. mmcv 2.1.0, one of (--mmcv; without it a new venv gets `lite` and an existing one keeps what it has):
#      lite  (default) mmcv-lite, the pure-Python wheel of the package index: nothing to compile, no nvcc. The
#            ops our recipes reach (RoIAlign, NMS) come from torchvision's CPU/CUDA kernels through
#            mmrecvit/mm/mmcv_ext.py, which mmrecvit's import hook (4) puts where mmcv looks for `mmcv._ext`;
#            any other mmcv op raises an error naming it and this switch. Checked: on a visible GPU the ops
#            run torchvision's CUDA kernels.
#      full  mmcv with its compiled ops for this machine's ops variant (`cpu`, or `cu<CUDA>-sm<archs>` when
#            torch is a CUDA build and a GPU is visible, or FORCE_CUDA=1 with TORCH_CUDA_ARCH_LIST), from the
#            first of:
#              a. a wheel in $MMRECVIT_WHEEL_DIR/<variant>/ (the flat $MMRECVIT_WHEEL_DIR holds CPU wheels);
#                 checked against SHA256SUMS there when present
#              b. the wheel cache ${XDG_CACHE_HOME:-~/.cache}/mmrecvit/wheels/<variant>/
#              c. a source build of the sdist (~25 min on 2 cores for CPU ops; CUDA ops need nvcc), whose
#                 wheel is then cached (b)
#            and check that the installed ops are that variant's (a GPU machine with CPU-only ops fails here).
#            detectron2 (2) gets the same variant; with lite it gets CPU ops (its ROIAlign/NMS are torchvision's)
#   6. install mmdet 3.3.0, mmsegmentation 1.2.2 and mmpretrain 1.2.0 (--no-deps: they would not pull mmcv,
#      but their other pins are ours; mmpretrain's runtime dependencies are pinned in requirements.txt)
#   7. install detectron2 (the wheel of 2)
#   8. compile the bytecode of the venv's packages once, on every core (Python writes none at import where
#      PYTHONDONTWRITEBYTECODE is set)
#
#   bash scripts/setup.sh --ops-variant   # print the compiled-ops variant this machine needs (--mmcv full), and exit
#   bash scripts/setup.sh --check-ops     # fail unless the installed mmcv ops can run on this machine
#   bash scripts/setup.sh --d2-source     # print what detectron2 is built from (tarball, directory or git+URL)
#   bash scripts/setup.sh --import-hook [DIR]  # (re)write mmrecvit-import-hook.pth into DIR (default: the venv's)
# Why the compiled mmcv build needs care (../shared/ENV.md): its setup.py imports pkg_resources
# (setuptools < 82), must see torch (--no-build-isolation) or it silently drops mmcv._ext, and
# hard-codes -std=c++14/17 while torch >= 2.10 headers require C++20.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/mmrecvit/wheels"
MMCV_VERSION=2.1.0
D2_VERSION=0.6
D2_TARBALL=detectron2-02b5c4e2.tar.gz  # the pinned commit of ../shared/vendor
D2_REPO=https://github.com/facebookresearch/detectron2.git
STAMP="$VENV/.mmrecvit-setup"

step() { printf '\033[1m[setup %s] %s\033[0m\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '\033[31m[setup] ERROR: %s\033[0m\n' "$*" >&2; exit 1; }

# The kernels a compiled mmcv's ops must hold here (--mmcv full): `cpu`, or `cu<torch CUDA version>-sm<archs>`
# for the visible GPUs (or TORCH_CUDA_ARCH_LIST with FORCE_CUDA=1). A CUDA build needs nvcc.
ops_variant() {
  local probe cuda gpus archs
  probe=$("$PY" -c 'import torch
v = torch.version.cuda or ""
n = torch.cuda.device_count() if v else 0
print(v, n, "+".join(sorted({"%d%d" % torch.cuda.get_device_capability(i) for i in range(n)})), sep="|")') \
    || die "cannot import torch from $PY to decide the mmcv ops variant"
  IFS='|' read -r cuda gpus archs <<<"$probe"
  if [[ ${FORCE_CUDA:-0} == 1 ]]; then
    [[ -n "$cuda" ]] || die "FORCE_CUDA=1, but torch ($PY) is not a CUDA build"
    if [[ -n "${TORCH_CUDA_ARCH_LIST:-}" ]]; then
      archs=$(tr -d '.' <<<"$TORCH_CUDA_ARCH_LIST" | tr ';, ' '+++')
    fi
    [[ -n "$archs" ]] || die "FORCE_CUDA=1 without a visible GPU needs TORCH_CUDA_ARCH_LIST (e.g. '8.0;9.0')"
  elif [[ -z "$cuda" || ${gpus:-0} -eq 0 ]]; then
    echo cpu
    return
  fi
  command -v nvcc >/dev/null \
    || die "a GPU is visible and torch is a CUDA $cuda build, but nvcc is not on PATH: compiled mmcv CUDA ops need the CUDA toolkit $cuda. The default set-up needs no nvcc: make setup MMCV=lite (mmcv-lite with torchvision's CUDA kernels)"
  echo "cu${cuda//./}-sm${archs}"
}

# Which mmcv distributions are installed: full (mmcv, compiled ops), lite (mmcv-lite), both, or none.
installed_mmcv() {
  "$PY" -c 'import importlib.metadata as m
def has(dist):
    try:
        return bool(m.distribution(dist))
    except m.PackageNotFoundError:
        return False
full, lite = has("mmcv"), has("mmcv-lite")
print("both" if full and lite else "full" if full else "lite" if lite else "none")' 2>/dev/null || echo none
}

# The kind of the installed mmcv ops, cpu or cuda (empty if mmcv.ops does not import). `import mmrecvit.mm` first:
# with mmcv-lite it provides the ops (torchvision's kernels: cuda when torchvision is a CUDA build).
installed_ops() {
  "$PY" -c 'import mmrecvit.mm; from mmcv.ops import get_compiling_cuda_version as v; print("cpu" if v() == "not available" else "cuda")' \
    2>/dev/null || true
}
ops_kind() { [[ $1 == cpu ]] && echo cpu || echo cuda; }  # variant -> kind

check_full_ops() {  # a compiled mmcv's ops must hold this machine's kernels
  local want got
  want=$(ops_variant)
  got=$(installed_ops)
  [[ "$got" == "$(ops_kind "$want")" ]] \
    || die "this machine needs mmcv ops for $want but the installed (compiled) mmcv has ${got:-no} ops: a GPU machine with CPU-only mmcv ops fails inside the detectors. Fix: make setup MMCV=lite (torchvision's kernels, CPU and CUDA, no nvcc), or remove mmcv (and any CPU wheel offered for $want) and re-run make setup MMCV=full"
}

check_lite_ops() {  # mmcv-lite: the ops come from mmrecvit's torchvision table, and run on every device here
  local devices
  devices=$("$PY" -c 'import torch
import mmrecvit.mm
from mmrecvit.mm.mmcv_ext import backend
assert backend() == "torchvision", f"mmcv ops from {backend()}, not the torchvision table"
from mmcv.ops import nms, roi_align
devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
for d in devices:
    _, keep = nms(torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11]], device=d), torch.tensor([0.9, 0.8], device=d), 0.5)
    feats = torch.ones(1, 1, 8, 8, device=d, requires_grad=True)
    out = roi_align(feats, torch.tensor([[0.0, 1, 1, 5, 5]], device=d), (2, 2), 1.0, 0, "avg", True)
    out.sum().backward()
    assert keep.tolist() == [0] and torch.allclose(out, torch.ones_like(out)) and abs(feats.grad.sum() - 4) < 1e-5, d
print(" ".join(devices))') \
    || die "mmcv-lite is installed but its ops (mmrecvit's torchvision table) do not run here (see above): check torchvision imports and matches torch (requirements.txt), or use compiled mmcv: make setup MMCV=full"
  step "mmcv-lite ops (torchvision's kernels) run on: $devices"
}

check_ops() {  # the installed mmcv ops must run on this machine
  case $(installed_mmcv) in
    lite) check_lite_ops ;;
    full) check_full_ops; step "mmcv ops match this machine ($(ops_variant))" ;;
    both) die "both mmcv and mmcv-lite are installed (they share the mmcv package): re-run make setup MMCV=lite or MMCV=full" ;;
    *) die "mmcv is not installed in $VENV: run make setup" ;;
  esac
}

# mmrecvit's import hook (_mmrecvit_import_hook.py): mmrecvit-import-hook.pth in site-packages puts it on
# sys.meta_path at interpreter start, so mmcv-lite's ops and mmpretrain beside transformers 5 are found whatever is
# imported first (the wheel carries the same file; an editable install does not, hence this step; the module itself
# comes with the editable install).
install_import_hook() {  # $1 = the site-packages folder (default: the venv's); prints the file written
  "$PY" -I "$ROOT/_mmrecvit_import_hook.py" ${1:+"$1"} \
    || die "could not write mmrecvit's import hook (.pth) into ${1:-the site-packages of $PY}"
}

# Bytecode: pip installs with --no-compile, and the venv's site-packages are compiled once here, on every core. Python
# writes a module's .pyc at its first import only where PYTHONDONTWRITEBYTECODE is unset; where it is set (this
# machine, many container images) each new interpreter compiled the stack's sources again (`import mmdet.apis`
# 8.3 s -> 5.9 s with the bytecode, docs/development.md).
compile_bytecode() {
  local site out failed
  site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  out=$("$PY" -m compileall -q -j 0 "$site" 2>&1) && return
  failed=$(grep -o "Error compiling '[^']*'" <<<"$out" | cut -d"'" -f2) \
    || die "compiling the bytecode under $site failed: ${out: -800}"
  step "$(wc -l <<<"$failed") file(s) under $site do not compile under $("$PY" -V) and stay source (pip's own compile skips them too): $(head -3 <<<"$failed" | sed "s|^$site/||" | tr '\n' ' ')"
}

d2_source() {  # what to build detectron2 from
  if [[ -n "${MMRECVIT_D2_SOURCE:-}" ]]; then
    echo "$MMRECVIT_D2_SOURCE"
    return
  fi
  local f
  for f in "$ROOT/../shared/vendor/$D2_TARBALL" "/work/shared/vendor/$D2_TARBALL"; do
    [[ -f "$f" ]] && { echo "$f"; return; }
  done
  echo "git+$D2_REPO"
}

MMCV_MODE=""  # lite or full: --mmcv; empty = what the venv has, lite for a new one
case ${1:-} in
  --ops-variant) ops_variant; exit 0 ;;  # print the variant a compiled mmcv needs here
  --d2-source) d2_source; exit 0 ;;  # what detectron2 is built from (its tools: tests/e2e/test_d2_tools.py)
  --check-ops) check_ops; exit 0 ;;
  --import-hook) install_import_hook "${2:-}"; exit 0 ;;  # (re)write mmrecvit-import-hook.pth: into $2, else the venv
  --mmcv) MMCV_MODE=${2:-(nothing)} ;;
  --mmcv=*) MMCV_MODE=${1#--mmcv=} ;;
  '') ;;
  *) die "unknown option '$1': scripts/setup.sh takes --mmcv lite|full, --ops-variant, --check-ops, --d2-source or --import-hook [DIR]" ;;
esac
if [[ -n "$MMCV_MODE" && $MMCV_MODE != lite && $MMCV_MODE != full ]]; then
  die "--mmcv (make setup MMCV=...) takes lite (default: no compiler, torchvision's kernels) or full (compiled ops), not '$MMCV_MODE'"
fi
have_mmcv=$(installed_mmcv)
if [[ -z "$MMCV_MODE" ]]; then
  MMCV_MODE=$([[ $have_mmcv == full ]] && echo full || echo lite)
fi

# The stamp records what the environment was built from; a changed requirements.txt or setup
# script re-runs the (fast, idempotent) pip steps.
want_stamp=$(cat "$ROOT/requirements.txt" "$ROOT/scripts/setup.sh" | sha256sum | cut -d' ' -f1)
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want_stamp" && $have_mmcv == "$MMCV_MODE" ]] \
   && "$PY" -c 'import mmrecvit.mm, mmcv.ops, mmdet, mmseg, mmpretrain, detectron2' 2>/dev/null \
   && [[ $MMCV_MODE == lite || "$(installed_ops)" == "$(ops_kind "$(ops_variant)")" ]]; then
  install_import_hook >/dev/null
  step "environment up to date ($VENV, mmcv $MMCV_MODE)"
  exit 0
fi

# ---- helpers of the steps below ---------------------------------------------------------------
mmcv_backend() {  # where the installed mmcv's ops come from: compiled, torchvision, or nothing if mmcv.ops fails
  "$PY" -c "import mmcv, mmrecvit.mm
from mmcv.ops import nms, RoIAlign
from mmrecvit.mm.mmcv_ext import backend
assert mmcv.__version__ == '$MMCV_VERSION', mmcv.__version__
print(backend())" 2>/dev/null || true
}

remove_mmcv() {  # $@ = distributions to remove (mmcv and mmcv-lite share the mmcv package: never both)
  step "removing $* (switching to mmcv $MMCV_MODE)"
  "${PIP[@]}" uninstall -y -q "$@"
}

wheel_name() {  # $1 = distribution, $2 = version: its wheel's file name for this Python and machine
  local tag
  tag=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  echo "$1-$2-$tag-$tag-linux_$(uname -m).whl"
}

find_wheel() {  # $1 = directory, $2 = distribution, $3 = version; prints the wheel for this Python and $VARIANT, if any
  local dir=$1 pattern
  pattern=$(wheel_name "$2" "$3")
  compgen -G "$dir/$VARIANT/$pattern" | head -n1 || true
  if [[ $VARIANT == cpu && $dir != "$CACHE_DIR" ]]; then  # a flat wheel directory holds CPU wheels
    compgen -G "$dir/$pattern" | head -n1 || true
  fi
}

verify_checksum() {  # $1 = file, $2 = the SHA256SUMS that must list it (nothing to check when $2 does not exist)
  [[ -f "$2" ]] || return 0
  (cd "$(dirname "$1")" && grep " $(basename "$1")\$" "$2" | sha256sum -c --quiet -) \
    || die "$1 does not match $2: refusing to use it."
  step "checksum of $(basename "$1") verified"
}

offered_wheel() {  # $1 = distribution, $2 = version: a wheel from $MMRECVIT_WHEEL_DIR (checksummed), else the cache's
  local whl=""
  if [[ -n "${MMRECVIT_WHEEL_DIR:-}" ]]; then
    [[ -d "$MMRECVIT_WHEEL_DIR" ]] || die "MMRECVIT_WHEEL_DIR=$MMRECVIT_WHEEL_DIR is not a directory."
    whl=$(find_wheel "$MMRECVIT_WHEEL_DIR" "$1" "$2")
    if [[ -n "$whl" ]]; then
      verify_checksum "$whl" "$(cd "$MMRECVIT_WHEEL_DIR" && pwd)/SHA256SUMS" >&2
    else
      step "no matching $1 wheel in MMRECVIT_WHEEL_DIR=$MMRECVIT_WHEEL_DIR; trying the $VARIANT cache" >&2
    fi
  fi
  [[ -n "$whl" ]] || whl=$(find_wheel "$CACHE_DIR" "$1" "$2")
  echo "$whl"
}

install_wheel() {  # $1 = wheel path (its runtime dependencies come from requirements.txt or the caller)
  step "installing $(basename "$1")"
  "${PIP_INSTALL[@]}" --no-deps --force-reinstall "$1"
}

check_build_tools() {  # what compiling torch extensions (mmcv's and detectron2's ops) needs
  for tool in gcc g++; do
    command -v $tool >/dev/null || die "'$tool' not found: building $1's ops needs a C/C++ compiler (Debian: apt install build-essential)."
  done
  echo 'int main(){return 0;}' | g++ -std=c++20 -x c++ - -o /dev/null 2>/dev/null \
    || die "g++ does not accept -std=c++20 (torch >= 2.10 headers need it): install g++ >= 10."
  local inc
  inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  [[ -f "$inc/Python.h" ]] || die "Python headers missing ($inc/Python.h): install python3.11-dev."
}

# Build a wheel of $1 from $2 (a source tree under the scratch directory $3, or a pip requirement such as
# git+https://...) for $VARIANT, with the extra VAR=value settings $4..., and put it into the cache.
build_wheel() {
  local name=$1 target=$2 work=$3
  shift 3
  check_build_tools "$name"
  local log="$work/build-$name.log" jobs=${MAX_JOBS:-$(nproc)} start
  start=$(date +%s)
  local cuda=0 arch_list=${TORCH_CUDA_ARCH_LIST:-}
  if [[ $VARIANT != cpu ]]; then  # e.g. cu130-sm90+100 -> TORCH_CUDA_ARCH_LIST=9.0;10.0
    cuda=1
    [[ -n "$arch_list" ]] || arch_list=$(sed -E 's/.*-sm//; s/\+/ /g' <<<"$VARIANT" | \
      awk '{for (i = 1; i <= NF; i++) printf "%s%s.%s", (i > 1 ? ";" : ""), substr($i, 1, length($i) - 1), substr($i, length($i))}')
  fi
  step "building $name with $VARIANT ops from $target (MAX_JOBS=$jobs; log: $log)"
  ( cd "$work" && env "$@" FORCE_CUDA=$cuda TORCH_CUDA_ARCH_LIST=$arch_list MAX_JOBS=$jobs \
      "${PIP[@]}" wheel --no-deps --no-build-isolation -w "$work/dist" "$target" >"$log" 2>&1 ) &
  local pid=$!
  while kill -0 $pid 2>/dev/null; do  # progress: compiled objects while the build runs
    sleep 30
    local n
    n=$(find "$work" -name '*.o' 2>/dev/null | wc -l)
    step "  $name build: $n objects compiled, $(( ($(date +%s) - start) / 60 )) min elapsed"
  done
  if ! wait $pid; then
    echo "---- last 25 lines of $log ----" >&2; tail -n 25 "$log" >&2
    die "$name source build failed (full log: $log)."
  fi
  local whl
  whl=$(compgen -G "$work/dist/$name-*.whl" | head -n1)
  [[ -n "$whl" ]] || die "the $name build produced no wheel (log: $log)."
  mkdir -p "$CACHE_DIR/$VARIANT"
  cp "$whl" "$CACHE_DIR/$VARIANT/"
  step "$name built in $(( ($(date +%s) - start) / 60 )) min; cached $(basename "$whl") in $CACHE_DIR/$VARIANT"
  rm -rf "$work"
}

# Install $1 $2 from the first of: $MMRECVIT_WHEEL_DIR, the cache, a wheel that the function $3 builds into the cache.
provide_wheel() {
  local whl
  whl=$(offered_wheel "$1" "$2")
  if [[ -z "$whl" ]]; then
    "$3"
    whl=$(find_wheel "$CACHE_DIR" "$1" "$2")
    [[ -n "$whl" ]] || die "the $1 build gave no $(wheel_name "$1" "$2") (another version? see the build log above)."
  fi
  install_wheel "$whl"
}

build_mmcv() {
  local work
  work=$(mktemp -d)
  step "fetching the mmcv $MMCV_VERSION sdist (its ops build takes ~25 min on 2 cores)"
  (cd "$work" && "${PIP[@]}" download -q --no-deps --no-binary :all: --no-build-isolation "mmcv==$MMCV_VERSION" -d .) \
    || die "could not download the mmcv $MMCV_VERSION sdist from the package index."
  tar -xzf "$work/mmcv-$MMCV_VERSION.tar.gz" -C "$work"
  local src="$work/mmcv-$MMCV_VERSION"
  sed -i -E 's/-std=c\+\+1[47]/-std=c++20/g' "$src/setup.py"
  grep -q -- '-std=c++20' "$src/setup.py" || die "patching mmcv's setup.py for C++20 failed (unexpected sdist layout)."
  build_wheel mmcv "$src" "$work" MMCV_WITH_OPS=1
}

# detectron2 is not on the package index: a wheel from $MMRECVIT_WHEEL_DIR or the cache, else built from
# $MMRECVIT_D2_SOURCE (a source tarball or directory), else from the shared tarball of these machines
# (checked against the SHA256SUMS beside it), else from detectron2's repository as its install guide
# says (pip + git). Its runtime dependencies are pinned in requirements.txt.
d2_ok() { "$PY" -c "import detectron2, detectron2._C; assert detectron2.__version__ == '$D2_VERSION'" 2>/dev/null; }

build_detectron2() {
  local src work
  src=$(d2_source)
  work=$(mktemp -d)
  if [[ -d "$src" ]]; then  # a copy: the build writes into its tree
    cp -a "$src" "$work/detectron2"
    src="$work/detectron2"
  elif [[ -f "$src" ]]; then
    verify_checksum "$src" "$(cd "$(dirname "$src")" && pwd)/SHA256SUMS"
    mkdir "$work/detectron2"
    tar -xzf "$src" -C "$work/detectron2" --strip-components=1 || die "cannot unpack $src (expected a .tar.gz of detectron2's source)."
    src="$work/detectron2"
  elif [[ "$src" != git+* ]]; then
    die "MMRECVIT_D2_SOURCE=$src is neither a directory nor a tarball of detectron2's source."
  fi
  build_wheel detectron2 "$src" "$work"
}

# ---- 0. prerequisites -------------------------------------------------------------------------
PYTHON=${PYTHON:-}
if [[ -z "$PYTHON" ]]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PYTHON=$cand; break
    fi
  done
fi
[[ -n "$PYTHON" ]] || die "Python 3.11 not found (torch 2.14.1 and the cached mmcv wheel are cp311). Set PYTHON=/path/to/python3.11."
"$PYTHON" -c 'import venv' 2>/dev/null || die "'$PYTHON -m venv' is unavailable: install the venv module (Debian: python3.11-venv)."

# ---- 1. venv ----------------------------------------------------------------------------------
if [[ ! -x "$PY" ]]; then
  step "creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
# torch's CUDA build is 5.5 GB and the whole venv 6.3 GB: say so before pip fails midway with "No space left on device"
NEED_GB=7
if [[ $("$PY" -c 'import importlib.util as u; print(u.find_spec("torch") is not None)') != True ]]; then
  free_gb=$(df -P -k "$VENV" | awk 'NR == 2 { print int($4 / 1048576) }')
  ((free_gb >= NEED_GB)) || die "only $free_gb GB free on the disk of $VENV; the set-up needs about $NEED_GB GB (torch's CUDA build is 5.5 GB): free some space and run it again."
fi
PIP=("$PY" -m pip --disable-pip-version-check)
PIP_INSTALL=("${PIP[@]}" install --progress-bar off -q --no-compile)  # .pyc: compiled once at the end (8.)

# ---- 2. torch, then detectron2's build in the background -----------------------------------------
# detectron2 compiles against torch (~2 min on 2 cores when no wheel is offered or cached): it builds while the
# rest installs. Its own compiled ops (deformable convolution, rotated boxes) are not on our recipes' path (its
# ROIAlign and NMS are torchvision's), so with mmcv-lite it gets CPU ops, which serve a GPU machine too (no nvcc).
mapfile -t first < <(grep -E '^(torch|torchvision|setuptools|wheel)([=<>]|$)' "$ROOT/requirements.txt")
step "installing ${first[*]} (torch from the local disk; ~1-2 min the first time)"
"${PIP_INSTALL[@]}" "${first[@]}" || die "pip could not install ${first[*]} (see the pip message above)."
if [[ $MMCV_MODE == full ]]; then
  VARIANT=$(ops_variant)
  step "mmcv ops variant: $VARIANT"
else
  VARIANT=cpu
fi
d2_pid="" d2_wheel=""
if d2_ok; then
  step "detectron2 $D2_VERSION already installed"
else
  d2_wheel=$(offered_wheel detectron2 "$D2_VERSION")
  if [[ -z "$d2_wheel" ]]; then
    build_detectron2 &
    d2_pid=$!
  fi
fi

# ---- 3. the rest of the pinned stack --------------------------------------------------------------
step "installing the pinned requirements"
"${PIP_INSTALL[@]}" -r "$ROOT/requirements.txt" || die "pip could not install requirements.txt (see the pip message above)."

# ---- 4. mmrecvit -------------------------------------------------------------------------------
# Before mmcv: with mmcv-lite, mmrecvit's import hook is what provides mmcv's ops (mmrecvit/mm/mmcv_ext.py), and
# the checks below use it. Its dependencies are the pins above.
step "installing mmrecvit (editable)"
"${PIP_INSTALL[@]}" --no-deps --no-build-isolation -e "$ROOT"
step "installed mmrecvit's import hook: $(install_import_hook)"

# ---- 5. mmcv: lite (default, torchvision's kernels) or full (compiled ops) --------------------------
if [[ $MMCV_MODE == lite ]]; then
  case $(installed_mmcv) in
    full) remove_mmcv mmcv ;;
    both) remove_mmcv mmcv mmcv-lite ;;
  esac
  if [[ "$(mmcv_backend)" == torchvision ]]; then
    step "mmcv-lite $MMCV_VERSION already installed"
  else
    step "installing mmcv-lite $MMCV_VERSION (pure Python: nothing to compile; RoIAlign and NMS from torchvision's kernels)"
    "${PIP_INSTALL[@]}" --no-deps --force-reinstall "mmcv-lite==$MMCV_VERSION" \
      || die "pip could not install mmcv-lite==$MMCV_VERSION from the package index (see above)."
  fi
  check_lite_ops
else
  case $(installed_mmcv) in
    lite) remove_mmcv mmcv-lite ;;
    both) remove_mmcv mmcv-lite mmcv ;;
  esac
  if [[ "$(mmcv_backend)" == compiled && "$(installed_ops)" == "$(ops_kind "$VARIANT")" ]]; then
    step "mmcv $MMCV_VERSION with $VARIANT ops already installed"
  else
    provide_wheel mmcv "$MMCV_VERSION" build_mmcv
    [[ "$(mmcv_backend)" == compiled ]] \
      || die "the mmcv wheel installed but 'import mmcv.ops' fails: the wheel was built for another torch/Python. Remove it and re-run to build from source."
    check_full_ops
  fi
fi

# ---- 6. mmdet, mmseg, mmpretrain --------------------------------------------------------------
step "installing mmdet 3.3.0, mmsegmentation 1.2.2 and mmpretrain 1.2.0"
"${PIP_INSTALL[@]}" --no-deps mmdet==3.3.0 mmsegmentation==1.2.2 mmpretrain==1.2.0

# ---- 7. detectron2: the offered/cached wheel, or the one built in the background -----------------
if [[ -n "$d2_pid" ]]; then
  step "waiting for the detectron2 build"
  wait "$d2_pid" || die "the detectron2 build failed (its log's last lines are above)."
  d2_wheel=$(find_wheel "$CACHE_DIR" detectron2 "$D2_VERSION")
  [[ -n "$d2_wheel" ]] || die "the detectron2 build gave no $(wheel_name detectron2 "$D2_VERSION") (another version? see the build log above)."
fi
if [[ -n "$d2_wheel" ]]; then
  install_wheel "$d2_wheel"
  d2_ok || die "the detectron2 wheel installed but 'import detectron2._C' fails: the wheel was built for another torch/Python. Remove it and re-run to build from source."
fi

# ---- 8. bytecode of everything installed ---------------------------------------------------------
step "compiling the bytecode of the venv's packages"
compile_bytecode

"$PY" -c 'import mmrecvit.mm, mmcv.ops, mmdet, mmseg, mmpretrain, detectron2, torch; from mmrecvit.mm.mmcv_ext import backend; print(f"torch {torch.__version__}, mmcv {mmcv.__version__} (ops: {backend()}), mmdet {mmdet.__version__}, mmseg {mmseg.__version__}, mmpretrain {mmpretrain.__version__}, detectron2 {detectron2.__version__}, mmrecvit {mmrecvit.__version__}")' \
  || die "the installed stack does not import (see above)."
echo "$want_stamp" >"$STAMP"
step "done: activate with 'source .venv/bin/activate'"
