# Sourced by tools/dist_run.sh and tools/slurm_run.sh, what both launchers set before they start a tool:
# DIR (this tools folder), PYTHON ($PYTHON or python) and this checkout first on PYTHONPATH, so the
# launched processes import its mmrecvit.
DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PYTHON=${PYTHON:-python}
export PYTHONPATH="$DIR/..":$PYTHONPATH
