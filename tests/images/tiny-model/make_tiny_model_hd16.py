"""The tiny test model with attention head size 16, which the vLLM CPU engine's attention does not support: it
starts and answers /health, then dies on its first request. The rollback test's model that cannot serve.

Runs like make_tiny_model.py (inside the vllm-cpu test image): python3 /recipe/make_tiny_model_hd16.py /out
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_model  # noqa: E402

make_tiny_model.ARCH["head_dim"] = 16

if __name__ == "__main__":
    make_tiny_model.main(sys.argv[1] if len(sys.argv) > 1 else "/out")
