#!/bin/sh
set -eu
python3 "$(dirname "$0")/lib/helper.py" "$1"
