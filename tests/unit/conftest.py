"""Make `ansible_collections.llmfleet.vllm` importable: it is this checkout (collections/ links back)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "collections"))
