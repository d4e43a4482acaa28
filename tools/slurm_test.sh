#!/usr/bin/env bash
# Slurm testing (GPU clusters): bash tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [test.py args]
exec bash "$(dirname "$0")/slurm_run.sh" "$1" "$2" test.py "$3" "$4" "${@:5}"
