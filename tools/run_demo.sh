#!/usr/bin/env bash
# Quick start: set everything up, then run the demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/setup_env.sh
.venv/bin/python examples/demo.py "$@"
