# Make `ansible_collections.llmfleet.vllm` importable from this checkout (collections/ holds the link).
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "collections"))
