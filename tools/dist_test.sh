#!/usr/bin/env bash
# Distributed testing with torchrun: bash tools/dist_test.sh CONFIG CHECKPOINT NUM_PROCS [test.py args]
exec bash "$(dirname "$0")/dist_run.sh" test.py "$3" "$1" "$2" "${@:4}"
