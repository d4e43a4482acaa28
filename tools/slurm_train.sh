#!/usr/bin/env bash
# Slurm training (GPU clusters): bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [train.py args]
exec bash "$(dirname "$0")/slurm_run.sh" "$1" "$2" train.py "$3" --work-dir="$4" "${@:5}"
