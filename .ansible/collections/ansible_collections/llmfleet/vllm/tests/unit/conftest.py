"""Make `ansible_collections.llmfleet.vllm` importable from this checkout (collections/ links back here)."""
import os
import sys

COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
