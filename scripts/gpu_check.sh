#!/usr/bin/env bash
# GPU check: generate with the transformers backend on CUDA and measure it with Zeus (NVML).
# Needs: a CUDA GPU, python with torch (CUDA build) and transformers. No model weights, no
# internet except PyPI: the model is a random-weight Llama built on the spot, and zeus /
# nvidia-ml-py are pip-installed from PyPI if missing. Extra arguments go to gpu_check.py
# (see `scripts/gpu_check.sh --help`). Results: $OUT/gpu_check.json, or artifacts/gpu_check.json.
set -euo pipefail
cd "$(dirname "$0")/.."
# The project's venv when there is one (a dev machine), else the machine's python3 (a bare GPU host).
if [ -z "${PYTHON:-}" ] && [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; fi
PY="${PYTHON:-python3}"
if ! "$PY" -c "import zeus.monitor, pynvml, pydantic" 2>/dev/null; then
  echo "installing zeus==0.16.0 and nvidia-ml-py==13.615.71 from PyPI" >&2
  "$PY" -m pip install --quiet "zeus==0.16.0" "nvidia-ml-py==13.615.71"
fi
export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" scripts/gpu_check.py "$@"
