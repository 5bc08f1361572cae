#!/usr/bin/env python3
"""Fill a PDF form from a JSON file of field values."""
import json, sys

print(json.dumps({"form": sys.argv[1]}))
