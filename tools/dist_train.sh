#!/usr/bin/env bash
# Distributed training with torchrun: bash tools/dist_train.sh CONFIG NUM_PROCS [train.py args]
exec bash "$(dirname "$0")/dist_run.sh" train.py "$2" "$1" "${@:3}"
