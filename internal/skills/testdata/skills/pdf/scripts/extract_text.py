#!/usr/bin/env python3
"""Print the text of every page of a PDF."""
import sys

def main(path):
    print(f"would extract text from {path}")

if __name__ == "__main__":
    main(sys.argv[1])
