#!/usr/bin/env bash
echo "Hello, ${1:-world}, from the greeting skill"
