#!/usr/bin/env bash
# GPU checks: measured NVML energy on a real GPU. No model weights, no download: the model is a random-weight
# Llama built on the spot.
#   scripts/gpu_check.sh [ARGS]          generation on CUDA with the transformers backend inside Zeus windows
#                                        (gpu_check.py); results $OUT/gpu_check.json
#   scripts/gpu_check.sh --meter [ARGS]  `jouleroute meter` (Zeus/NVML) in its own process, read over HTTP as the
#                                        tournament and gateway read a served candidate (gpu_meter_check.py);
#                                        results $OUT/meter_nvml.json
# Needs a CUDA GPU and python with torch (CUDA build) and transformers. zeus and nvidia-ml-py are installed when
# missing: from wheels in .whl/ when that folder exists (a GPU host with no index), else from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT=scripts/gpu_check.py
if [ "${1:-}" = "--meter" ]; then SCRIPT=scripts/gpu_meter_check.py; shift; fi
# The project's venv when there is one (a dev machine), else the machine's python3 (a bare GPU host).
if [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; fi
PY="${PYTHON:-python3}"
if ! "$PY" -c "import zeus.monitor, pynvml, pydantic, prometheus_client, httpx" 2>/dev/null; then
  if [ -d .whl ]; then
    echo "installing zeus and its needs from .whl/ into /tmp/site" >&2
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "installing zeus==0.16.0, nvidia-ml-py==13.615.71 and prometheus-client==0.26.0 from PyPI" >&2
    "$PY" -m pip install --quiet "zeus==0.16.0" "nvidia-ml-py==13.615.71" "prometheus-client==0.26.0" httpx
  fi
fi
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" "$SCRIPT" "$@"
