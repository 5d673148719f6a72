"""The bad-input matrix: every case is a playbook run through ansible-runner that must stop BEFORE anything
changes, with a message that names what to fix.

For each case: status failed, changed=0 on every host, and a fragment of the message (the variable to change,
or the fix) in the failed task's message. Most cases run a role or module against localhost (connection
local): argument_specs, preflight and the roles' own asserts refuse before any task that touches a host.
Files a case could have written are checked to be absent afterwards.

Each "accepted" control case runs the same play with good inputs and must succeed: a fragment can only be
matched because the bad value, and nothing else, was refused.

No GPU exists here: the GPU cases read the test-double nvidia-smi (tests/doubles/nvidia-smi) replaying real
H200 captures, and the edited captures of tests/fixtures/nvidia (old driver, MIG on, no driver).

Writes .cache/reliability/bad_inputs.json (tried / refused cleanly per case) for tests/reliability_report.py.
"""
import atexit
import json
import os
import socket
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reliability_common import TOP, run_playbook, write_result  # noqa: E402

CAPTURES = os.path.join(TOP, "tests", "fixtures", "nvidia")
# TEST DOUBLE of nvidia-smi (no GPU here) for the whole preflight: gpu_facts asks for --query-gpu, topo -m and
# nvlink -s (replayed from the real h200x2 captures; LLMFLEET_TEST_QUERY_SED applies the same edit to the CSV
# that the case's q.xml carries, see tests/fixtures/nvidia/README.md); every other command, and every command
# of a failing capture (no-driver), goes to the project's double tests/doubles/nvidia-smi, which replays the
# case's q.xml.
DOUBLE = os.path.join(os.environ.get("TMPDIR", "/tmp"), "llmfleet-reliability-nvidia-smi-%d" % os.getpid())
with open(DOUBLE, "w") as _fh:
    _fh.write("""#!/bin/sh
# TEST DOUBLE of nvidia-smi (tests/integration/test_bad_inputs.py): replays real captures.
real={captures}/h200x2
if [ ! -f "$LLMFLEET_TEST_DOUBLE_NVIDIA_SMI_CAPTURE/rc" ]; then
  case "$*" in
    --query-gpu=*) exec sed -e "${{LLMFLEET_TEST_QUERY_SED:-}}" "$real/query.csv" ;;
    "topo -m") exec cat "$real/topo-m.txt" ;;
    "nvlink -s") exec cat "$real/nvlink-s.txt" ;;
  esac
fi
exec {double} "$@"
""".format(captures=CAPTURES, double=os.path.join(TOP, "tests", "doubles", "nvidia-smi")))
os.chmod(DOUBLE, 0o755)
atexit.register(lambda: os.path.exists(DOUBLE) and os.remove(DOUBLE))
LOCALHOST = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                             "ansible_python_interpreter": sys.executable}}}}
# An image that exists nowhere: a case that slipped through its refusal would stop at "not present", never pull.
GHOST_IMAGE = "127.0.0.1:9/llmfleet-reliability/none:0.0.0@sha256:" + "0" * 64
TINY_MODEL_DIR = os.environ.get("LLMFLEET_TEST_MODEL_DIR", os.path.join(TOP, ".cache", "models", "tiny-qwen3-moe"))


def role_play(role, gather=False):
    return """
- name: Bad-input case for llmfleet.vllm.{role}
  hosts: all
  gather_facts: {gather}
  roles:
    - role: llmfleet.vllm.{role}
""".format(role=role, gather="true" if gather else "false")


def module_play(module):
    return """
- name: Bad-input case for llmfleet.vllm.{module}
  hosts: all
  gather_facts: false
  tasks:
    - name: Call the module with the case's arguments
      llmfleet.vllm.{module}: "{{{{ case_args }}}}"
""".format(module=module)


# ---- baselines: good inputs for each role (the control cases prove they pass) --------------------------------

PRE_CPU = {"llmfleet_model": "llmfleet-test/tiny-qwen3-moe", "llmfleet_accelerator": "cpu",
           "llmfleet_max_model_len": 512, "llmfleet_cpu_kv_cache_memory_bytes": 67108864,
           "preflight_check_ports": False}
PRE_GPU = {"llmfleet_model": "Qwen/Qwen3.5-35B-A3B-FP8", "llmfleet_accelerator": "gpu",
           "llmfleet_max_model_len": 32768, "preflight_use_nvml": "false", "preflight_nvidia_smi_path": DOUBLE,
           "nvidia_driver_nvidia_smi_path": DOUBLE, "nvidia_driver_nvswitch_devices_dir": "/nonexistent-nvswitch",
           "preflight_check_ports": False}
IMAGE = {"llmfleet_accelerator": "cpu", "vllm_image_ref": GHOST_IMAGE}
SERVER = {"llmfleet_accelerator": "cpu", "vllm_server_image": GHOST_IMAGE,
          "vllm_server_model_path": "/srv/llmfleet/models/tiny",
          "llmfleet_plan": {"replicas": [[]], "vllm_args": {"max-model-len": 512}}}
WEIGHTS = {"model_weights_source": "hf", "model_weights_repo_id": "acme/tiny",
           "model_weights_dir": "/srv/llmfleet/models/tiny"}


def capture(name, query_sed=""):
    return {"LLMFLEET_TEST_DOUBLE_NVIDIA_SMI_CAPTURE": os.path.join(CAPTURES, name),
            "LLMFLEET_TEST_QUERY_SED": query_sed}


def _byo_tls():
    """Certificates a user could bring (llmfleet_tls_*_file), in a temporary directory: a good set for localhost and
    one bad variant per check of plugins/plugin_utils/fleet/tls_checks.py. {name: path}."""
    import datetime
    import tempfile

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    out = tempfile.mkdtemp(prefix="llmfleet-byo-tls-")
    atexit.register(lambda: subprocess.run(["rm", "-rf", out], check=False))
    keys = {name: ec.generate_private_key(ec.SECP256R1()) for name in ("ca", "other_ca", "host", "stray")}

    def cert(name, key, signer, issuer, ca=False, sans=("localhost",), days=(-1, 90)):
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer or subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now + datetime.timedelta(days=days[0]))
                   .not_valid_after(now + datetime.timedelta(days=days[1]))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in sans]), False)
        return builder.sign(signer, hashes.SHA256())

    ca = cert("byo CA", keys["ca"], keys["ca"], None, ca=True)
    made = {"ca": ca, "other_ca": cert("byo CA", keys["other_ca"], keys["other_ca"], None, ca=True),
            "good": cert("localhost", keys["host"], keys["ca"], ca.subject),
            "expired": cert("localhost", keys["host"], keys["ca"], ca.subject, days=(-90, -2)),
            "other_name": cert("gpu9", keys["host"], keys["ca"], ca.subject, sans=("gpu9",))}
    paths = {}
    for name, obj in made.items():
        paths[name] = os.path.join(out, name + ".crt")
        with open(paths[name], "wb") as fh:
            fh.write(obj.public_bytes(serialization.Encoding.PEM))
    for name, mode in (("host", 0o600), ("stray", 0o600), ("host_open", 0o644)):
        paths[name + "_key"] = os.path.join(out, name + ".key")
        with open(paths[name + "_key"], "wb") as fh:
            key = keys[name.split("_", maxsplit=1)[0]]
            fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
        os.chmod(paths[name + "_key"], mode)
    return paths


BYO = _byo_tls()


def byo(cert="good", key="host_key", ca="ca"):
    return {"llmfleet_tls_cert_file": BYO[cert], "llmfleet_tls_key_file": BYO[key], "llmfleet_tls_ca_file": BYO[ca],
            "llmfleet_api_key": "byo-tls-case-key"}


def case(cid, what, play, base, override, fragments, env=None, absent=(), max_lines=None, lacks=()):
    """max_lines: the failure message may have at most this many lines; lacks: strings it must not contain."""
    return pytest.param(dict(play=play, vars=dict(base, **override), fragments=fragments, env=env or {},
                             absent=absent, what=what, max_lines=max_lines, lacks=lacks), id=cid)


CASES = [
    # preflight: the plan and its inputs (cpu profile, host-free)
    # A repo id without a profile is planned from the hub (#29); no hub answers here, so the one line names the
    # repo, the hub, the variable of a mirror and the profiles.
    case("unknown-model-profile", "llmfleet_model names no profile, no directory, and the hub cannot be reached",
         role_play("preflight"), PRE_CPU, {"llmfleet_model": "Qwen/Qwen9-Nonexistent"},
         ["Qwen/Qwen9-Nonexistent has no profile file", "could not be read from huggingface.co",
          "model_weights_endpoint", "Qwen/Qwen3.5-35B-A3B-FP8"]),
    case("model-group-unknown", "llmfleet_model_group names no inventory group", role_play("preflight"), PRE_CPU,
         {"llmfleet_model_group": "llama405b"},
         ["llmfleet_model_group is llama405b, but the inventory has no such group", "unset llmfleet_model_group"]),
    case("max-model-len-above-limit", "context longer than the model's max_position_embeddings",
         role_play("preflight"), PRE_CPU, {"llmfleet_max_model_len": 10000000},
         ["max_model_len 10000000 exceeds the model's context"]),
    case("max-model-len-not-int", "wrong type for an int", role_play("preflight"), PRE_CPU,
         {"llmfleet_max_model_len": "long"}, ['llmfleet_max_model_len must be a whole number', 'got "long"']),
    case("max-model-len-negative", "negative context", role_play("preflight"), PRE_CPU,
         {"llmfleet_max_model_len": -5}, ["llmfleet_max_model_len must be a whole number at least 0", "got -5"]),
    case("accelerator-unknown", "llmfleet_accelerator outside gpu|cpu", role_play("preflight"), PRE_CPU,
         {"llmfleet_accelerator": "tpu"}, ["llmfleet_accelerator", "gpu, cpu"]),
    case("objective-unknown", "objective outside throughput|latency", role_play("preflight"), PRE_CPU,
         {"llmfleet_objective": "fastest"}, ['llmfleet_objective must be one of throughput, latency; got "fastest"']),
    case("features-not-a-dict", "features as a string", role_play("preflight"), PRE_CPU,
         {"llmfleet_features": "tool_calling"}, ["llmfleet_features must be a dict"]),
    case("feature-unknown", "a feature the profile does not define", role_play("preflight"), PRE_CPU,
         {"llmfleet_features": {"warp_drive": True}}, ["warp_drive", "not defined for"]),
    case("gpu-memory-utilization-zero", "share of GPU memory 0", role_play("preflight"), PRE_GPU,
         {"llmfleet_gpu_memory_utilization": 0}, ["llmfleet_gpu_memory_utilization must be a number above 0 and at most 1"],
         env=capture("h200x2")),
    case("gpu-memory-utilization-above-one", "share of GPU memory 1.5", role_play("preflight"), PRE_GPU,
         {"llmfleet_gpu_memory_utilization": 1.5}, ["llmfleet_gpu_memory_utilization must be a number above 0 and at most 1"],
         env=capture("h200x2")),
    case("gpu-memory-utilization-not-float", "wrong type for a float", role_play("preflight"), PRE_GPU,
         {"llmfleet_gpu_memory_utilization": "most"}, ['llmfleet_gpu_memory_utilization must be a number', 'got "most"'],
         env=capture("h200x2")),
    # issue 16: accepted silently before, or refused with Ansible's type error and the argument spec
    case("gpu-memory-utilization-high", "share of GPU memory as a word: one line naming the user's variable",
         role_play("preflight"), PRE_GPU, {"llmfleet_gpu_memory_utilization": "high"},
         ['llmfleet_gpu_memory_utilization must be a number above 0 and at most 1 (e.g. 0.9); got "high".'],
         env=capture("h200x2"), max_lines=1, lacks=["preflight_gpu_memory_utilization", "argument_spec"]),
    case("served-model-name-empty", "an empty served model name (would fall back to the directory name)",
         role_play("preflight"), PRE_CPU, {"llmfleet_served_model_name": ""},
         ["llmfleet_served_model_name must not be empty"]),
    case("json-flag-malformed", "a malformed JSON value for --speculative-config", role_play("preflight"), PRE_CPU,
         {"vllm_server_args_extra": {"speculative-config": "{'method': 'mtp', 'num_speculative_tokens': 1"}},
         ["vllm_server_args_extra: --speculative-config takes JSON", "does not parse"]),
    case("env-prefix-caching-variable", "the seed's VLLM_ENABLE_PREFIX_CACHING=1 in the replica environment",
         role_play("preflight"), PRE_CPU, {"vllm_server_env": {"VLLM_ENABLE_PREFIX_CACHING": "1"}},
         ["vllm_server_env sets VLLM_ENABLE_PREFIX_CACHING, which vLLM does not read", "--enable-prefix-caching"]),
    case("gpu-accelerator-without-nvidia-smi", "accelerator gpu on a host without nvidia-smi",
         role_play("preflight"), PRE_GPU, {"preflight_use_nvml": "false", "preflight_nvidia_smi_path": "/nonexistent/nvidia-smi"},
         ["llmfleet_accelerator is gpu", "set llmfleet_accelerator: cpu"]),
    # preflight on GPU hosts (test-double nvidia-smi replaying real H200 captures)
    case("tp-not-dividing-heads", "tensor parallel size 3 with 16 attention heads", role_play("preflight"),
         PRE_GPU, {"llmfleet_tensor_parallel_size": 3}, ["tensor_parallel_size 3 is not possible", "does not divide the 16 attention heads", "use one of 1, 2"],
         env=capture("h200x2")),
    case("tp-more-than-gpus", "TP 4 on a 2-GPU host", role_play("preflight"), PRE_GPU,
         {"llmfleet_tensor_parallel_size": 4}, ["tensor_parallel_size 4 needs 4 usable GPUs; this host has 2"],
         env=capture("h200x2")),
    case("model-does-not-fit", "bf16 weights in 10% of two H200s", role_play("preflight"), PRE_GPU,
         {"llmfleet_model": "Qwen/Qwen3.5-35B-A3B", "llmfleet_gpu_memory_utilization": 0.1},
         ["does not fit", "Suggestions:"], env=capture("h200x2")),
    case("vllm-too-old-for-model", "image older than the model's first vLLM", role_play("preflight"), PRE_GPU,
         {"llmfleet_vllm_version": "0.8.5"}, ["vLLM 0.8.5 is older than 0.17.0", "Use vLLM 0.17.0 or newer"], env=capture("h200x2")),
    case("driver-too-old", "R570 driver for a CUDA 13 image", role_play("preflight"), PRE_GPU, {},
         ["NVIDIA driver 570.172.08 is older than 580.65.06", "Upgrade the driver"],
         env=capture("old-driver", "s/580.159.04/570.172.08/")),
    case("no-nvidia-driver", "nvidia-smi cannot reach the driver", role_play("preflight"), PRE_GPU, {},
         ["couldn't communicate with the NVIDIA driver"], env=capture("no-driver")),
    # issue 28: one empty variable must not open the endpoint; every secret input set but empty, white space or
    # naming an undefined variable (an unset vault lookup) is refused by preflight, naming it, never printing it
    case("api-key-empty", "llmfleet_api_key: '' (accepted before: rc 0, the edge without a key)", role_play("preflight"),
         PRE_CPU, {"llmfleet_api_key": ""},
         ["llmfleet_api_key is set but empty", "without authentication", "ansible-vault encrypt_string"]),
    case("api-keys-limited-bad", "llmfleet_api_keys with a key holding a space (many models: keys limited to models)",
         role_play("preflight"), PRE_CPU, {"llmfleet_api_keys": [{"key": "bad key-9f3e", "models": ["tiny"]}]},
         ["llmfleet_api_keys[0]: an API key cannot hold spaces or commas"], lacks=["bad key-9f3e"]),
    case("max-body-too-small", "loadbalancer_max_body_bytes below 64 KiB (routing by model)", role_play("preflight"),
         PRE_CPU, {"loadbalancer_max_body_bytes": 1000},
         ["loadbalancer_max_body_bytes must be a whole number at least 65536"]),
    case("api-key-white-space", "llmfleet_api_key of spaces", role_play("preflight"), PRE_CPU,
         {"llmfleet_api_key": "   "}, ["llmfleet_api_key is set but empty (or only white space)"]),
    case("api-key-unresolved", "llmfleet_api_key naming a vault variable that is not loaded", role_play("preflight"),
         PRE_CPU, {"llmfleet_api_key": "{{ vault_llmfleet_api_key_not_loaded }}"},
         ["llmfleet_api_key is set to a template that does not resolve"]),
    case("server-api-key-empty", "vllm_server_api_key: '' beside a good llmfleet_api_key", role_play("preflight"),
         PRE_CPU, {"llmfleet_api_key": "a-good-key-1234", "vllm_server_api_key": " "},
         ["vllm_server_api_key is set but empty"], lacks=["a-good-key-1234"]),
    case("edge-keys-empty-entry", "an empty entry in loadbalancer_api_keys", role_play("preflight"), PRE_CPU,
         {"llmfleet_api_key": "a-good-key-1234", "loadbalancer_api_keys": ["a-good-key-1234", ""]},
         ["loadbalancer_api_keys is not a list of keys or has an empty entry", "Remove the empty entries"],
         lacks=["a-good-key-1234"]),
    case("hub-token-empty", "model_weights_token of spaces", role_play("preflight"), PRE_CPU,
         {"model_weights_token": "  "}, ["model_weights_token is set but empty", "repository is public"]),
    case("registry-password-empty", "vllm_image_registry_password: ''", role_play("preflight"), PRE_CPU,
         {"vllm_image_registry_password": ""}, ["vllm_image_registry_password is set but empty",
                                                "anonymous pull"]),
    case("prod-without-api-key-preflight", "prod, no key, the edge on every address: refused before the host stage",
         role_play("preflight"), PRE_CPU, {"llmfleet_environment": "prod"},
         ["llmfleet_environment is prod and no API key is set", "Set llmfleet_api_key",
          "vllm_server_edge_bind_address: 127.0.0.1"]),
    # issue 41: TLS off in prod, and certificates the user brings that cannot serve, refused by preflight
    case("prod-tls-off-preflight", "prod with TLS off, the edge on every address", role_play("preflight"), PRE_CPU,
         {"llmfleet_environment": "prod", "llmfleet_tls": False, "llmfleet_api_key": "prod-tls-case-key"},
         ["llmfleet_environment is prod and llmfleet_tls is false", "cross the network in clear",
          "bind vllm_server_edge_bind_address to 127.0.0.1"]),
    case("tls-byo-key-mismatch-preflight", "a key that is not the certificate's", role_play("preflight"), PRE_CPU,
         byo(key="stray_key"), ["llmfleet_tls_cert_file and llmfleet_tls_key_file: the key does not match"]),
    case("tls-byo-expired-preflight", "an expired certificate", role_play("preflight"), PRE_CPU, byo(cert="expired"),
         ["llmfleet_tls_cert_file: the certificate expired on", "renew it"]),
    case("tls-byo-missing-san-preflight", "a certificate without the host's name", role_play("preflight"), PRE_CPU,
         byo(cert="other_name"), ["do not cover localhost", "issue it with those names"]),
    case("tls-byo-other-ca-preflight", "a CA that did not sign the certificate", role_play("preflight"), PRE_CPU,
         byo(ca="other_ca"), ["llmfleet_tls_ca_file:", "did not sign the certificate"]),
    case("tls-byo-key-readable-preflight", "a key file readable by others", role_play("preflight"), PRE_CPU,
         byo(key="host_open_key"), ["llmfleet_tls_key_file:", "mode 0644, readable by others; chmod 0600 it"]),
    # issue 28: what needs no host is refused by preflight, before playbooks/host.yml installs anything
    case("image-unpinned-preflight", "vllm_image_ref without a digest (refused after the host stage before)",
         role_play("preflight"), PRE_CPU, {"vllm_image_ref": "172.17.0.1:5000/llmfleet/vllm-cpu:0.32.0"},
         ["vllm_image_ref: the image 172.17.0.1:5000/llmfleet/vllm-cpu:0.32.0 is not pinned by digest",
          "repository:tag@sha256:<digest>"]),
    case("image-malformed-preflight", "vllm_image_ref that is no reference", role_play("preflight"), PRE_CPU,
         {"vllm_image_ref": "Not A//Ref::@@"}, ["vllm_image_ref: the image reference", "white space"]),
    case("image-digest-short-preflight", "a digest of 12 hex digits", role_play("preflight"), PRE_CPU,
         {"vllm_image_ref": "vllm/vllm-cpu:0.32.0@sha256:4c1d0a9b7e2f"},
         ["vllm_image_ref: the digest 'sha256:4c1d0a9b7e2f'", "not sha256:<64 lowercase hex digits>"]),
    case("weights-dir-relative-preflight", "relative model_weights_dir (refused after the host stage before)",
         role_play("preflight"), PRE_CPU, {"model_weights_dir": "models/tiny"},
         ['model_weights_dir must be an absolute path on the host', 'got "models/tiny"']),
    case("port-base-overflows-behind-the-edge", "vllm_server_port_base 60000: vLLM's own port 70000",
         role_play("preflight"), PRE_CPU, {"vllm_server_port_base": 60000},
         ["vLLM itself on port 60000 + vllm_server_edge_port_offset 10000 = 70000, outside 1-65535",
          "lower vllm_server_port_base"]),
    case("replica-port-overflows", "an explicit replica port beyond 65535", role_play("preflight"), PRE_CPU,
         {"vllm_server_replicas": [{"name": "0", "port": 70001, "gpus": []}]},
         ["Replica 0 would listen on port 70001, outside 1-65535", "set vllm_server_replicas"]),
    case("tp-on-cpu", "llmfleet_tensor_parallel_size 3 on the cpu profile (ignored without a word before)",
         role_play("preflight"), PRE_CPU, {"llmfleet_tensor_parallel_size": 3},
         ["llmfleet_tensor_parallel_size must be a whole number at least 0 and at most 1", "got 3",
          "cpu profile"]),
    case("serve-api-key-empty", "serve.yml alone with llmfleet_api_key: ''", role_play("vllm_server"), SERVER,
         {"llmfleet_api_key": ""}, ["llmfleet_api_key (or vllm_server_api_key / vllm_server_hf_token) is set but empty"],
         absent=["/etc/systemd/system/llmfleet-vllm@.service"]),
    case("serve-port-base-overflows", "serve.yml alone with vllm_server_port_base 60000 (wrote unit and run files before)",
         role_play("vllm_server"), SERVER, {"vllm_server_port_base": 60000},
         ["= 70000, outside 1-65535", "vllm_server_port_base"], absent=["/etc/systemd/system/llmfleet-vllm@.service"]),
    # vllm_image: the pin
    case("image-unpinned", "image without a digest", role_play("vllm_image"), IMAGE,
         {"vllm_image_ref": "172.17.0.1:5000/llmfleet/vllm-cpu:0.32.0"}, ["vllm_image_ref", "digest"]),
    case("image-unpinned-allowed-in-prod", "allow_unpinned in the prod environment", role_play("vllm_image"), IMAGE,
         {"vllm_image_ref": "172.17.0.1:5000/llmfleet/vllm-cpu:0.32.0", "vllm_image_allow_unpinned": True,
          "llmfleet_environment": "prod"}, ["llmfleet_environment is prod", "vllm_image_allow_unpinned"]),
    case("image-ref-malformed", "not a Docker reference", role_play("vllm_image"), IMAGE,
         {"vllm_image_ref": "Not A//Ref::@@"}, ["vllm_image_ref"]),
    case("cuda-image-on-cpu-host", "the CUDA image with accelerator cpu", role_play("vllm_image"), IMAGE,
         {"vllm_image_ref": "vllm/vllm-openai:v0.28.0@sha256:" + "6" * 64}, ["CPU build of vLLM"]),
    case("registry-user-without-password", "half a set of credentials", role_play("vllm_image"), IMAGE,
         {"vllm_image_registry_username": "robot"}, ["vllm_image_registry_password"]),
    case("image-archive-missing", "archive path that does not exist", role_play("vllm_image"), IMAGE,
         {"vllm_image_archive": "/nonexistent/vllm.tar"}, ["vllm_image_archive", "not found"]),
    case("allow-unpinned-not-bool", "wrong type for a bool", role_play("vllm_image"), IMAGE,
         {"vllm_image_allow_unpinned": "sometimes"}, ["vllm_image_allow_unpinned", "bool"]),
    # vllm_server: what it would render
    case("model-path-relative", "relative model directory", role_play("vllm_server"), SERVER,
         {"vllm_server_model_path": "models/tiny"}, ["an absolute directory on the host", "models/tiny"]),
    case("server-image-empty", "no image to run", role_play("vllm_server"), SERVER,
         {"vllm_server_image": ""}, ["vllm_server_image", "sha256:digest"]),
    case("secret-in-plain-env", "API key passed as plain environment", role_play("vllm_server"), SERVER,
         {"vllm_server_env": {"VLLM_API_KEY": "x"}}, ["vllm_server_api_key", "0600"]),
    case("replicas-share-a-port", "two replicas on one port", role_play("vllm_server"), SERVER,
         {"vllm_server_replicas": [{"name": "0", "port": 8000, "gpus": []}, {"name": "1", "port": 8000, "gpus": []}]},
         ["own name, port and GPUs", "vllm_server_replicas"]),
    case("serve-served-model-name-empty", "serve.yml alone with an empty served model name", role_play("vllm_server"),
         SERVER, {"llmfleet_served_model_name": ""}, ["llmfleet_served_model_name is empty"]),
    case("port-base-not-int", "wrong type for a port", role_play("vllm_server"), SERVER,
         {"vllm_server_port_base": "eighty"}, ["vllm_server_port_base must be a TCP port number"]),
    case("prod-endpoint-without-api-key", "prod replicas on every address with no API key",
         role_play("vllm_server"), SERVER, {"llmfleet_environment": "prod", "llmfleet_api_key": ""},
         ["llmfleet_environment is prod", "Set llmfleet_api_key", "vllm_server_edge_bind_address"]),
    case("prod-replica-on-every-address", "prod replicas on every address, key set (vLLM's key guards /v1 only)",
         role_play("vllm_server"), SERVER, {"llmfleet_environment": "prod", "vllm_server_bind_address": "0.0.0.0"},
         ["llmfleet_environment is prod", "vllm_server_bind_address is 0.0.0.0", "/invocations"]),
    case("server-image-not-on-host", "an image the host does not have", role_play("vllm_server"), SERVER, {},
         ["is not present on", "run the vllm_image role"], absent=["/etc/systemd/system/llmfleet-vllm@.service"]),
    # docker_engine, verify: argument specs
    case("daemon-options-not-a-dict", "daemon.json keys as a string", role_play("docker_engine"), {},
         {"docker_engine_daemon_options_extra": "live-restore"}, ["docker_engine_daemon_options_extra", "dict"]),
    case("docker-service-state-unknown", "service state outside started|stopped", role_play("docker_engine"), {},
         {"docker_engine_service_state": "paused"}, ["docker_engine_service_state", "started, stopped"]),
    case("verify-max-tokens-not-int", "wrong type for an int", role_play("verify"), {},
         {"verify_max_tokens": "lots"}, ["verify_max_tokens", "int"]),
]

# llmfleet_models (issue #39): the list's own rules, refused by preflight on either engine before anything changes.
TINY = "llmfleet-test/tiny-qwen3-moe"
CASES += [
    case("models-duplicate-name", "two entries with one served name", role_play("preflight"), PRE_CPU,
         {"llmfleet_models": [{"name": "chat", "model": TINY}, {"name": "chat", "model": TINY, "max_model_len": 256}]},
         ["llmfleet_models[1] (chat): name 'chat' is already the name of llmfleet_models[0]"]),
    case("models-name-not-a-unit-name", "a served name that cannot be a unit or map key", role_play("preflight"),
         PRE_CPU, {"llmfleet_models": [{"name": "chat model/v2", "model": TINY}]}, ["'chat model/v2'", "name"]),
    case("models-unknown-key", "a misspelt key of an entry", role_play("preflight"), PRE_CPU,
         {"llmfleet_models": [{"name": "chat", "model": TINY, "max_model_length": 512}]},
         ["max_model_length", "max_model_len"]),
    case("models-empty", "an empty list", role_play("preflight"), PRE_CPU, {"llmfleet_models": []},
         ["llmfleet_models is an empty list"]),
    case("models-one-dir-two-contents", "two models written to one weights_dir", role_play("preflight"), PRE_CPU,
         {"llmfleet_models": [{"name": "a", "model": TINY, "weights_dir": "/srv/llmfleet/models/x"},
                              {"name": "b", "model": "llmfleet-test/tiny-llama", "weights_dir": "/srv/llmfleet/models/x"}]},
         ["/srv/llmfleet/models/x"]),
    case("models-shares-above-one", "the shares of one GPU add up to more than the GPU", role_play("preflight"),
         PRE_CPU, {"llmfleet_models": [{"name": "a", "model": TINY, "gpus": [0], "gpu_share": 0.6},
                                       {"name": "b", "model": TINY, "gpus": [0], "gpu_share": 0.6}]},
         ["GPU 0: the shares of llmfleet_models[0] (a) (0.6), llmfleet_models[1] (b) (0.6) add up to 1.2"]),
    case("models-gpus-outside-the-host", "a GPU index the host does not have", role_play("preflight"), PRE_GPU,
         {"llmfleet_models": [{"name": "big", "model": "Qwen/Qwen3.5-35B-A3B-FP8", "gpus": [5]}]},
         ["llmfleet_models[0] (big)", "gpus"], env=capture("h200x2")),
]

WEIGHTS_CASES = [
    case("weights-dir-relative", "relative model_weights_dir", role_play("model_weights"), WEIGHTS,
         {"model_weights_dir": "models/tiny"}, ["model_weights_dir must be an absolute path", "models/tiny"]),
    case("hub-source-without-repo", "hf source without a repo id", role_play("model_weights"), WEIGHTS,
         {"model_weights_repo_id": ""}, ["model_weights_repo_id as owner/name"]),
    case("hub-endpoint-without-scheme", "mirror endpoint without http(s)://", role_play("model_weights"), WEIGHTS,
         {"model_weights_endpoint": "mirror:8090"}, ["model_weights_endpoint needs a scheme"]),
    case("weights-source-unknown", "source outside hf|modelscope|local|archive", role_play("model_weights"), WEIGHTS,
         {"model_weights_source": "s3"}, ["model_weights_source", "hf, modelscope, local, archive"]),
    case("environment-unknown", "llmfleet_environment outside prod|dev", role_play("model_weights"), WEIGHTS,
         {"llmfleet_environment": "production"}, ["llmfleet_environment", "prod, dev"]),
]
HAVE_WEIGHTS_ROLE = os.path.isdir(os.path.join(TOP, "roles", "model_weights"))

RESULTS = {}


def check(params, tmp_path=None):
    for path in params["absent"]:
        assert not os.path.exists(path), "%s exists before the case ran; cannot tell" % path
    run = run_playbook(params["play"], LOCALHOST, extravars=params["vars"], envvars=params["env"])
    missing = [f for f in params["fragments"] if f not in run.message]
    missing += ["(must not contain) " + f for f in params.get("lacks", ()) if f in run.message]
    if params.get("max_lines") and len(run.message.strip().splitlines()) > params["max_lines"]:
        missing.append("(at most %d line(s), got %d)" % (params["max_lines"], len(run.message.strip().splitlines())))
    clean = (run.status == "failed" and run.changed_total == 0 and not missing
             and not any(os.path.exists(p) for p in params["absent"]))
    return run, missing, clean


def record(cid, params, run, clean):
    RESULTS[cid] = {"what": params["what"], "refused_cleanly": clean, "status": run.status,
                    "changed": run.changed_total, "message": run.message[-600:],
                    "wall_s": round(run.wall_s, 1)}
    write_result("bad_inputs", {"tried": len(RESULTS), "refused_cleanly": sum(r["refused_cleanly"] for r in RESULTS.values()),
                                "cases": RESULTS})


def assert_refused(run, missing, params):
    assert run.status == "failed", "expected a refusal, got status %s\n%s" % (run.status, run.stdout[-3000:])
    assert run.changed_total == 0, "changed before refusing: %s (tasks %s)" % (run.changed, run.changed_tasks)
    assert not missing, "message lacks %s:\n%s" % (missing, run.message)
    for path in params["absent"]:
        assert not os.path.exists(path), "%s was written" % path


@pytest.mark.parametrize("params", CASES)
def test_bad_input_is_refused_before_any_change(params, request):
    run, missing, clean = check(params)
    record(request.node.callspec.id, params, run, clean)
    assert_refused(run, missing, params)


@pytest.mark.skipif(not HAVE_WEIGHTS_ROLE, reason="roles/model_weights is not in this checkout yet")
@pytest.mark.parametrize("params", WEIGHTS_CASES)
def test_bad_weights_input_is_refused_before_any_change(params, request):
    run, missing, clean = check(params)
    record(request.node.callspec.id, params, run, clean)
    assert_refused(run, missing, params)


@pytest.fixture
def busy_port():
    """A port another process holds, low enough that vLLM's own port behind the edge (+ 10000) is a valid port too
    (the kernel's ephemeral range reaches 60999: such a port would be refused for its overflow first)."""
    sock = socket.socket()
    for port in range(20000 + os.getpid() % 20000, 55000):
        try:
            sock.bind(("127.0.0.1", port))
            break
        except OSError:
            continue
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


def test_port_already_in_use_is_refused(busy_port, request):
    params = dict(play=role_play("preflight"), what="the first replica's port is held by another process",
                  vars=dict(PRE_CPU, preflight_check_ports=True, vllm_server_port_base=busy_port),
                  fragments=["Port %d on localhost is in use" % busy_port, "vllm_server_port_base"], env={}, absent=())
    run, missing, clean = check(params)
    record("port-already-in-use", params, run, clean)
    assert_refused(run, missing, params)


# ---- controls: the same plays with good inputs pass, so each refusal above is the bad value's ---------------

MANY_GOOD = [{"name": "chat", "model": TINY}, {"name": "chat-short", "model": TINY, "max_model_len": 256}]
CONTROLS = [
    pytest.param(role_play("preflight"), PRE_CPU, {}, id="preflight-cpu"),
    pytest.param(role_play("preflight"), PRE_GPU, capture("h200x2"), id="preflight-gpu"),
    pytest.param(role_play("preflight"), dict(PRE_CPU, preflight_check_ports=True, vllm_server_port_base=1),
                 {}, id="preflight-ports-free"),
    # issue 28: a key, a pinned image, absolute paths, the highest port that still fits behind the edge, TP 1 on cpu
    pytest.param(role_play("preflight"), dict(PRE_CPU, llmfleet_api_key="a-good-key-1234", llmfleet_environment="prod",
                                              vllm_image_ref=GHOST_IMAGE.replace(":0.0.0@", ":0.32.0@"),
                                              model_weights_dir="/srv/llmfleet/models/tiny",
                                              vllm_server_port_base=55535, llmfleet_tensor_parallel_size=1,
                                              loadbalancer_api_keys=["a-good-key-1234"], model_weights_token="hf_x"),
                 {}, id="preflight-secrets-image-ports-set"),
    pytest.param(role_play("preflight"), dict(PRE_CPU, llmfleet_models=MANY_GOOD), {}, id="preflight-cpu-many-models"),
]


@pytest.mark.parametrize("play,variables,env", CONTROLS)
def test_good_input_passes_the_same_checks(play, variables, env):
    run = run_playbook(play, LOCALHOST, extravars=variables, envvars=env)
    assert run.status == "successful", run.message or run.stdout[-3000:]
    assert run.changed_total == 0


# ---- cases that need a little real state: a full disk, a hub that lacks the revision ------------------------

@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB filesystem (tmpfs) under the model directory: the tiny model (3.4 MiB) cannot fit."""
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, check=False)
    if res.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root): %s" % res.stderr.decode().strip())
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.skipif(not (HAVE_WEIGHTS_ROLE and os.path.isdir(TINY_MODEL_DIR)),
                    reason="needs roles/model_weights and the tiny model (make testbed)")
def test_weights_dir_on_a_full_disk_is_refused(full_disk):
    dest = full_disk / "models" / "tiny"
    params = dict(play=role_play("model_weights"), what="model directory on a disk too small for the model",
                  vars=dict(WEIGHTS, model_weights_source="local", model_weights_local_path=TINY_MODEL_DIR,
                            model_weights_dir=str(dest), model_weights_repo_id=""),
                  fragments=["not enough free space for the model", "set model_weights_dir to a larger disk"],
                  env={}, absent=[str(dest), str(full_disk / "models" / ".tiny.partial")])
    run, missing, clean = check(params)
    record("weights-dir-on-a-full-disk", params, run, clean)
    assert_refused(run, missing, params)
    assert os.listdir(full_disk) == [], "written on the full disk: %s" % os.listdir(full_disk)


@pytest.mark.skipif(not HAVE_WEIGHTS_ROLE, reason="roles/model_weights is not in this checkout")
def test_a_refused_placement_leaves_nothing_after_the_next_good_run(tmp_path):
    """issue 28: a truncated shard in a local model directory is refused, and the next good run (the same files as
    the directory in place, so nothing is placed again) removes the staging directory, lock and progress file the
    refused one left next to the model directory (before, later good runs never did)."""
    import shutil
    ctl = tmp_path / "controller" / "tiny"
    _model_dir(ctl, shards=2)
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        data = json.dumps({"w": {"dtype": "U8", "shape": [4096], "data_offsets": [0, 4096]}}).encode()
        (ctl / name).write_bytes(len(data).to_bytes(8, "little") + data + b"\1" * 4096)
    (ctl / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    (ctl / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    good_shard = (ctl / "model-00002-of-00002.safetensors").read_bytes()
    models = tmp_path / "models"
    weights = dict(WEIGHTS, model_weights_source="local", model_weights_local_path=str(ctl),
                   model_weights_dir=str(models / "tiny"), model_weights_repo_id="")
    first = run_playbook(role_play("model_weights"), LOCALHOST, extravars=weights)
    assert first.status == "successful", first.message or first.stdout[-3000:]
    assert sorted(os.listdir(str(models))) == ["tiny"]

    (ctl / "model-00002-of-00002.safetensors").write_bytes(good_shard[:-1000])     # truncated
    refused = run_playbook(role_play("model_weights"), LOCALHOST, extravars=weights)
    assert refused.status == "failed" and "not usable" in refused.message, refused.message
    left = sorted(os.listdir(str(models)))
    # Refused before anything was placed: the staging directory and progress stay for a resume, the lock does not.
    assert ".tiny.partial" in left and ".tiny.progress.json" in left and ".tiny.lock" not in left, left
    assert (models / "tiny" / "model-00002-of-00002.safetensors").read_bytes() == good_shard
    record("refused-placement-leftovers", {"what": "truncated shard in a local model directory"}, refused,
           refused.status == "failed")

    (ctl / "model-00002-of-00002.safetensors").write_bytes(good_shard)              # the good copy again
    good = run_playbook(role_play("model_weights"), LOCALHOST, extravars=weights)
    assert good.status == "successful", good.message or good.stdout[-3000:]
    assert sorted(os.listdir(str(models))) == ["tiny"], "left by the refused run: %s; after the good run: %s" % (
        left, sorted(os.listdir(str(models))))
    again = run_playbook(role_play("model_weights"), LOCALHOST, extravars=weights)
    assert again.status == "successful" and again.changed_total == 0, again.changed_tasks
    shutil.rmtree(str(tmp_path), ignore_errors=True)


@pytest.fixture(scope="module")
def hub_root():
    """A small synthetic repo published as a local hub mirror tree (tests/testbed)."""
    sys.path.insert(0, os.path.join(TOP, "tests", "testbed"))
    import hub_repo
    import tempfile
    from pathlib import Path
    root = Path(tempfile.mkdtemp(prefix="llmfleet-rel-hub-"))
    model = hub_repo.synth_model(root / "m", [1])
    hub_repo.publish(model, root / "mirrors", "acme/tiny-rel")
    yield root / "mirrors"
    import shutil
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def hub(hub_root):
    """olah (a real Hugging Face mirror, offline) serving the synthetic repo."""
    import hubs
    srv = hubs.start_olah(hub_root, probe_repo="acme/tiny-rel")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def ms_hub(hub_root):
    """The test bed's ModelScope API server (tests/testbed/modelscope_server.py) serving the same repo."""
    import hubs
    srv = hubs.start_modelscope(hub_root)
    yield srv
    srv.stop()


def test_nonexistent_revision_is_refused_before_any_download(hub, tmp_path):
    dest = tmp_path / "models" / "tiny"
    args = {"source": "hf", "repo_id": "acme/tiny-rel", "revision": "no-such-branch", "endpoint": hub.url,
            "dest": str(dest)}
    params = dict(play=module_play("model_fetch"), what="a revision the hub does not have",
                  vars={"case_args": args},
                  fragments=["acme/tiny-rel at revision 'no-such-branch' was not found", "model_weights_revision"],
                  env={"HF_HOME": str(tmp_path / "hf-home")},
                  absent=[str(dest), str(tmp_path / "models" / ".tiny.partial")])
    run, missing, clean = check(params)
    record("nonexistent-revision", params, run, clean)
    assert_refused(run, missing, params)


# ---- issue 16: the model source checked from the controller by preflight, before anything touches a host -------

def _preflight_source(**source):
    return dict(PRE_CPU, **source)


HUB_CASES = [
    ("hub-revision-missing", "hf", "acme/tiny-rel", "no-such-branch",
     ['acme/tiny-rel at revision "no-such-branch" was not found', "model_weights_revision"]),
    ("hub-repo-missing", "hf", "acme/no-such-model", "",
     ["acme/no-such-model at revision", "model_weights_repo_id"]),
    ("modelscope-source-at-hf-endpoint", "modelscope", "acme/tiny-rel", "",
     ["is a Hugging Face endpoint, but model_weights_source is modelscope", "model_weights_endpoint"]),
]


@pytest.mark.parametrize("cid,source,repo,revision,fragments", HUB_CASES, ids=[c[0] for c in HUB_CASES])
def test_hub_source_is_checked_from_the_controller_before_any_change(hub, cid, source, repo, revision, fragments):
    params = dict(play=role_play("preflight"), what="%s (preflight, controller)" % cid,
                  vars=_preflight_source(model_weights_source=source, model_weights_repo_id=repo,
                                         model_weights_revision=revision, model_weights_endpoint=hub.url),
                  fragments=fragments, env={}, absent=())
    run, missing, clean = check(params)
    record(cid, params, run, clean)
    assert_refused(run, missing, params)
    assert run.wall_s < 120, "took %.0fs: the check should answer in seconds" % run.wall_s


MS_CASES = [
    ("modelscope-revision-missing", "modelscope", "no-such-tag",
     ['model_weights_revision "no-such-tag" does not exist in acme/tiny-rel']),
    ("hf-source-at-modelscope-endpoint", "hf", "", ["is a ModelScope endpoint, but model_weights_source is hf"]),
]


@pytest.mark.parametrize("cid,source,revision,fragments", MS_CASES, ids=[c[0] for c in MS_CASES])
def test_modelscope_source_is_checked_from_the_controller(ms_hub, cid, source, revision, fragments):
    params = dict(play=role_play("preflight"), what="%s (preflight, controller)" % cid,
                  vars=_preflight_source(model_weights_source=source, model_weights_repo_id="acme/tiny-rel",
                                         model_weights_revision=revision, model_weights_endpoint=ms_hub.url),
                  fragments=fragments, env={}, absent=())
    run, missing, clean = check(params)
    record(cid, params, run, clean)
    assert_refused(run, missing, params)


@pytest.mark.parametrize("source,server", [("hf", "hub"), ("modelscope", "ms_hub")])
def test_existing_hub_repo_passes_preflight(source, server, request):
    srv = request.getfixturevalue(server)
    run = run_playbook(role_play("preflight"), LOCALHOST, extravars=_preflight_source(
        model_weights_source=source, model_weights_repo_id="acme/tiny-rel", model_weights_endpoint=srv.url))
    assert run.status == "successful", run.message or run.stdout[-3000:]
    assert run.changed_total == 0


def _model_dir(path, drop=(), shards=2, present=None):
    """A model directory: config, tokenizer files, an index of `shards` shards of which `present` exist."""
    path.mkdir(parents=True)
    names = ["model-%05d-of-%05d.safetensors" % (i + 1, shards) for i in range(shards)]
    files = {"config.json": "{}", "tokenizer.json": "{}", "tokenizer_config.json": "{}",
             "model.safetensors.index.json": json.dumps({"weight_map": {"w%d" % i: n for i, n in enumerate(names)}})}
    for name in names[:shards if present is None else present]:
        files[name] = ""
    for name, text in files.items():
        if name not in drop:
            (path / name).write_text(text)
    return str(path)


LOCAL_CASES = [
    ("local-model-without-tokenizer-config", dict(drop=["tokenizer_config.json"]), ["lacks tokenizer_config.json"]),
    ("local-model-without-config", dict(drop=["config.json"]), ["lacks config.json"]),
    ("local-model-missing-a-shard", dict(present=1), ["1 of the 2 shards", "model-00002-of-00002.safetensors"]),
]


@pytest.mark.parametrize("cid,layout,fragments", LOCAL_CASES, ids=[c[0] for c in LOCAL_CASES])
def test_incomplete_local_model_is_refused(tmp_path, cid, layout, fragments):
    path = _model_dir(tmp_path / "tiny", **layout)
    params = dict(play=role_play("preflight"), what="%s (model_weights_source local)" % cid,
                  vars=_preflight_source(model_weights_source="local", model_weights_local_path=path),
                  fragments=["model_weights_local_path %s" % path] + fragments, env={}, absent=())
    run, missing, clean = check(params)
    record(cid, params, run, clean)
    assert_refused(run, missing, params)


def test_complete_local_model_passes_preflight(tmp_path):
    path = _model_dir(tmp_path / "tiny")
    run = run_playbook(role_play("preflight"), LOCALHOST, extravars=_preflight_source(
        model_weights_source="local", model_weights_local_path=path))
    assert run.status == "successful", run.message or run.stdout[-3000:]


# ---- issue 16: plan.yml honours a tensor-parallel override instead of ignoring it -----------------------------

def test_plan_honours_a_tensor_parallel_override():
    hw = {"plan_hardware": ["2x H200 NVLink"], "plan_models": ["Qwen/Qwen3.5-35B-A3B-FP8"]}
    default = run_playbook(os.path.join(TOP, "playbooks", "plan.yml"), LOCALHOST, extravars=hw)
    forced = run_playbook(os.path.join(TOP, "playbooks", "plan.yml"), LOCALHOST,
                          extravars=dict(hw, llmfleet_tensor_parallel_size=2))
    assert default.status == forced.status == "successful", forced.message
    assert "2 x TP1" in default.stdout and "1 x TP2" in forced.stdout, forced.stdout[-2000:]
    params = dict(play=os.path.join(TOP, "playbooks", "plan.yml"), what="plan.yml with a TP size that is no number",
                  vars=dict(hw, plan_tensor_parallel_size="two"), fragments=["plan_tensor_parallel_size", "two"],
                  env={}, absent=())
    run, missing, clean = check(params)
    record("plan-tensor-parallel-not-a-number", params, run, clean)
    assert_refused(run, missing, params)


def test_plan_yml_plans_a_model_across_hosts():
    """#30: plan_hosts plans a model one host does not hold across the fewest hosts that do (TP inside a host,
    PP across hosts); one host refuses it naming the host count; a host count that is no number is refused."""
    hw = {"plan_hardware": ["1x RTX 4090"], "plan_models": ["Qwen/Qwen3.5-35B-A3B-FP8"]}
    one = run_playbook(os.path.join(TOP, "playbooks", "plan.yml"), LOCALHOST, extravars=hw)
    four = run_playbook(os.path.join(TOP, "playbooks", "plan.yml"), LOCALHOST, extravars=dict(hw, plan_hosts=4))
    assert one.status == four.status == "successful", four.message
    assert "Use 2 hosts like this one" in one.stdout or "Use 2 GPUs like these" in one.stdout, one.stdout[-2000:]
    assert "| 4 x (1x RTX 4090) | Qwen/Qwen3.5-35B-A3B-FP8 | yes | 1 x TP1 x PP" in four.stdout, four.stdout[-2000:]
    params = dict(play=os.path.join(TOP, "playbooks", "plan.yml"), what="plan.yml with a host count that is no number",
                  vars=dict(hw, plan_hosts="two"), fragments=["plan_hosts must be a whole number", "two"],
                  env={}, absent=())
    run, missing, clean = check(params)
    record("plan-hosts-not-a-number", params, run, clean)
    assert_refused(run, missing, params)


# ---- issue 16: the serve stage validates against the pinned image before writing or stopping anything --------
# vllm_server on localhost with the test bed's real vLLM CPU image: the image's own `--help=all` and `vllm.envs`
# (one throw-away container each, cached per image ID) refuse what preflight cannot know; the port and the model
# directory are checked before any file is written. Needs `make testbed` (the image); a few seconds each.

# By tag: community.docker's image lookup does not resolve a tag@digest reference on this engine.
VLLM_IMAGE = (os.environ.get("LLMFLEET_TEST_VLLM_IMAGE") or __import__("reliability_common").load_env().get(
    "LLMFLEET_TEST_VLLM_IMAGE", "")).split("@")[0]
SERVE_WRITES = ["/etc/systemd/system/llmfleet-vllm@.service", "/etc/llmfleet/vllm-0.run", "/etc/llmfleet/vllm-0.env"]


def _image_present():
    if not VLLM_IMAGE:
        return False
    return subprocess.run(["docker", "image", "inspect", VLLM_IMAGE], capture_output=True, check=False).returncode == 0


needs_image = pytest.mark.skipif(not _image_present(), reason="needs the test bed's vLLM CPU image (make testbed)")


def _serve_vars(tmp_path, **override):
    model = override.pop("model", None) or _model_dir(tmp_path / "tiny")
    return dict(SERVER, vllm_server_image=VLLM_IMAGE, vllm_server_model_path=model, **override)


@needs_image
@pytest.mark.parametrize("cid,override,fragments", [
    ("serve-env-not-a-vllm-variable", {"vllm_server_env": {"VLLM_LOGING_LEVEL": "DEBUG"}},
     ["VLLM_LOGING_LEVEL, which is not one of vLLM's environment variables", "did you mean VLLM_LOGGING_LEVEL?"]),
    ("serve-env-prefix-caching-variable", {"vllm_server_env": {"VLLM_ENABLE_PREFIX_CACHING": "1"}},
     ["VLLM_ENABLE_PREFIX_CACHING, which vLLM does not read", "--enable-prefix-caching"]),
    ("serve-json-flag-malformed", {"vllm_server_args_extra": {"kv-transfer-config": "{kv_connector: x"}},
     ["--kv-transfer-config takes JSON", "Nothing was restarted"]),
], ids=["serve-env-not-a-vllm-variable", "serve-env-prefix-caching-variable", "serve-json-flag-malformed"])
def test_serve_checks_against_the_image_before_writing(tmp_path, cid, override, fragments):
    params = dict(play=role_play("vllm_server"), what="%s (vllm_server, the pinned image's own lists)" % cid,
                  vars=_serve_vars(tmp_path, **override), fragments=fragments, env={}, absent=SERVE_WRITES)
    run, missing, clean = check(params)
    record(cid, params, run, clean)
    assert_refused(run, missing, params)


@needs_image
def test_serve_refuses_a_held_port_before_writing(tmp_path, busy_port):
    params = dict(play=role_play("vllm_server"), what="vllm_server onto a port another process holds",
                  vars=_serve_vars(tmp_path, vllm_server_port_base=busy_port),
                  fragments=["Port %d on localhost is in use by another process" % busy_port,
                             "vllm_server_port_base", "Nothing was changed"], env={}, absent=SERVE_WRITES)
    run, missing, clean = check(params)
    record("serve-port-held", params, run, clean)
    assert_refused(run, missing, params)


@needs_image
def test_serve_refuses_an_incomplete_model_dir_before_writing(tmp_path):
    model = _model_dir(tmp_path / "tiny", drop=["tokenizer_config.json"])
    params = dict(play=role_play("vllm_server"), what="vllm_server with a model directory lacking tokenizer_config.json",
                  vars=_serve_vars(tmp_path, model=model),
                  fragments=["the model directory %s lacks tokenizer_config.json" % model], env={}, absent=SERVE_WRITES)
    run, missing, clean = check(params)
    record("serve-model-dir-incomplete", params, run, clean)
    assert_refused(run, missing, params)


# ---- issue 30: the Ray alternative needs Ray in the pinned image ----------------------------------------------
# Two inventory hosts (both this machine, connection local) form one group with vllm_server_multinode_backend ray;
# the test bed's vLLM CPU image has no Ray (vLLM no longer installs it) and vLLM's CPU engine has no Ray device, so
# the serve stage must refuse, naming the variable and the fix for both, before any file is written.
RAY_GROUP = {"all": {"hosts": {h: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                   "vllm_server_multinode_address": a}
                               for h, a in (("rank-a", "127.0.0.1"), ("rank-b", "127.0.0.2"))},
                     "children": {"ray_group": {"hosts": {"rank-a": {}, "rank-b": {}},
                                                "vars": {"llmfleet_model_group": "ray_group"}}}}}


@needs_image
def test_serve_refuses_the_ray_backend_with_an_image_without_ray(tmp_path):
    variables = _serve_vars(tmp_path, vllm_server_multinode_backend="ray",
                            llmfleet_plan={"replicas": [[]], "vllm_args": {"max-model-len": 512}})
    run = run_playbook(role_play("vllm_server"), RAY_GROUP, extravars=variables)
    fragments = ["vllm_server_multinode_backend is ray, but the pinned image %s has no Ray" % VLLM_IMAGE,
                 "No module named 'ray'", "Set vllm_server_multinode_backend: mp", "Nothing was changed",
                 # the test bed's engine is vLLM's CPU engine, which has no Ray device either
                 "current platform cpu does not support ray"]
    missing = [f for f in fragments if f not in run.message]
    params = dict(what="vllm_server_multinode_backend ray with the test bed's image (no Ray in it)", absent=SERVE_WRITES)
    record("serve-ray-without-ray", params, run, run.status == "failed" and run.changed_total == 0 and not missing)
    assert_refused(run, missing, params)


# ---- issue 28: flags and head size against the pinned image, before anything changes -------------------------
# The serve stage (vllm_flag_check) reads the image's `vllm serve` flags and its attention backends' head sizes in
# one process and keeps them on the controller; preflight then checks vllm_server_args_extra and the model's head
# size against them before the host stage. The model: the test bed's tiny Qwen3-MoE with head size 16
# (LLMFLEET_TEST_UNSERVABLE_MODEL_DIR, tests/testbed/up.d/40-tiny-model.sh), which vLLM's CPU attention cannot run:
# the engine starts, answers /health and dies on the first request.

HD16_MODEL_DIR = os.environ.get("LLMFLEET_TEST_UNSERVABLE_MODEL_DIR") or __import__("reliability_common").load_env().get(
    "LLMFLEET_TEST_UNSERVABLE_MODEL_DIR", "")
PINNED_IMAGE = os.environ.get("LLMFLEET_TEST_VLLM_IMAGE") or __import__("reliability_common").load_env().get(
    "LLMFLEET_TEST_VLLM_IMAGE", "")


@pytest.fixture(scope="module")
def hd16_model(tmp_path_factory):
    """The head-size-16 model: the test bed's copy, or generated here in the vLLM CPU image (about 15 s)."""
    if HD16_MODEL_DIR and os.path.isfile(os.path.join(HD16_MODEL_DIR, "config.json")):
        return HD16_MODEL_DIR
    if not _image_present():
        pytest.skip("needs the test bed's vLLM CPU image (make testbed)")
    out = tmp_path_factory.mktemp("tiny-qwen3-moe-hd16")
    recipe = os.path.join(TOP, "tests", "images", "tiny-model")
    subprocess.run(["docker", "run", "--rm", "--network", "none", "--user", "%d:%d" % (os.getuid(), os.getgid()),
                    "-e", "HOME=/tmp", "-e", "PYTHONHASHSEED=0", "-v", recipe + ":/recipe:ro", "-v", "%s:/out" % out,
                    "--entrypoint", "python3", VLLM_IMAGE, "/recipe/make_tiny_model_hd16.py", "/out"],
                   check=True, capture_output=True, timeout=300)
    return str(out)


@pytest.fixture(scope="module")
def flag_cache(tmp_path_factory):
    """The controller's flag cache as the serve role writes it: vllm_flag_check's image_facts of the real image."""
    if not _image_present():
        pytest.skip("needs the test bed's vLLM CPU image (make testbed)")
    from reliability_common import module_result
    work = tmp_path_factory.mktemp("flag-cache")
    result = module_result("llmfleet.vllm.vllm_flag_check", dict(
        image=PINNED_IMAGE, cache_dir=str(work / "host-cache"), args=["/models/tiny"], return_image_facts=True), work)
    assert not result.get("failed"), result.get("msg")
    facts = result["image_facts"]
    cache = work / "controller"
    cache.mkdir()
    (cache / (facts["image_id"].split(":")[1] + ".json")).write_text(json.dumps(facts))
    return {"dir": str(cache), "facts": facts}


def test_image_facts_carry_the_attention_backends_and_the_pin(flag_cache):
    facts = flag_cache["facts"]
    sizes = facts["attention"]["cpu"]["CPU_ATTN"]
    assert 64 in sizes and 16 not in sizes, sizes
    assert any(d.endswith("@" + PINNED_IMAGE.split("@")[1]) for d in facts["repo_digests"]), facts["repo_digests"]


@pytest.mark.parametrize("cid,extra,fragments", [
    ("args-extra-unknown-flag-preflight", {"turbo-mode": True},
     ["vllm_server_args_extra sets --turbo-mode, which is not a `vllm serve` flag", "no similar flag exists"]),
    ("args-extra-misspelled-flag-preflight", {"enable-prefix-cache": True},
     ["vllm_server_args_extra sets --enable-prefix-cache", "did you mean --enable-prefix-caching?"]),
], ids=["args-extra-unknown-flag-preflight", "args-extra-misspelled-flag-preflight"])
def test_preflight_checks_args_extra_against_the_cached_flag_table(flag_cache, cid, extra, fragments):
    params = dict(play=role_play("preflight"), what="%s (preflight, the pinned image's cached flags)" % cid,
                  vars=dict(PRE_CPU, vllm_image_ref=PINNED_IMAGE, vllm_server_args_extra=extra,
                            vllm_server_flag_cache_controller_dir=flag_cache["dir"]),
                  fragments=fragments, env={}, absent=())
    run, missing, clean = check(params)
    record(cid, params, run, clean)
    assert_refused(run, missing, params)


def test_preflight_refuses_a_head_size_the_image_cannot_run(flag_cache, hd16_model):
    params = dict(play=role_play("preflight"), what="a head-size-16 model for the CPU engine (preflight, cached facts)",
                  vars=dict(PRE_CPU, vllm_image_ref=PINNED_IMAGE, model_weights_source="local",
                            model_weights_local_path=hd16_model,
                            vllm_server_flag_cache_controller_dir=flag_cache["dir"]),
                  fragments=["%s has attention head size 16" % hd16_model, "CPU_ATTN", "32, 64, 80"],
                  env={}, absent=())
    run, missing, clean = check(params)
    record("head-size-16-preflight", params, run, clean)
    assert_refused(run, missing, params)


def test_preflight_with_the_cached_flag_table_accepts_known_flags_and_head_sizes(flag_cache):
    run = run_playbook(role_play("preflight"), LOCALHOST, extravars=dict(
        PRE_CPU, vllm_image_ref=PINNED_IMAGE, vllm_server_flag_cache_controller_dir=flag_cache["dir"],
        vllm_server_args_extra={"enforce-eager": True, "distributed-executor-backend": "uni"},
        model_weights_source="local",
        model_weights_local_path=__import__("reliability_common").load_env().get("LLMFLEET_TEST_MODEL_DIR", TINY_MODEL_DIR)))
    assert run.status == "successful", run.message or run.stdout[-3000:]


@needs_image
@pytest.mark.parametrize("cid,override,fragments", [
    ("serve-args-extra-unknown-flag", {"vllm_server_args_extra": {"turbo-mode": True}},
     ["vllm_server_args_extra sets --turbo-mode, which is not a `vllm serve` flag", "no similar flag exists",
      "Nothing was restarted"]),
    ("serve-args-extra-misspelled-flag", {"vllm_server_args_extra": {"max-batch-size": 8}},
     ["vllm_server_args_extra sets --max-batch-size", "did you mean --max-num-seqs?"]),
], ids=["serve-args-extra-unknown-flag", "serve-args-extra-misspelled-flag"])
def test_serve_names_the_variable_of_an_unknown_flag(tmp_path, cid, override, fragments):
    params = dict(play=role_play("vllm_server"), what="%s (vllm_server, the pinned image's own flags)" % cid,
                  vars=_serve_vars(tmp_path, vllm_server_flag_cache_controller_dir=str(tmp_path / "flags"), **override),
                  fragments=fragments, env={}, absent=SERVE_WRITES)
    run, missing, clean = check(params)
    record(cid, params, run, clean)
    assert_refused(run, missing, params)


@needs_image
def test_serve_refuses_a_head_size_the_image_cannot_run_before_writing(tmp_path, hd16_model):
    params = dict(play=role_play("vllm_server"), what="serve a head-size-16 model on the CPU engine",
                  vars=_serve_vars(tmp_path, model=hd16_model,
                                   vllm_server_flag_cache_controller_dir=str(tmp_path / "flags")),
                  fragments=["The model in %s has attention head size 16" % hd16_model,
                             "32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512", "Nothing was restarted"],
                  env={}, absent=SERVE_WRITES)
    run, missing, clean = check(params)
    record("serve-head-size-16", params, run, clean)
    assert_refused(run, missing, params)


def test_flag_check_accepts_a_head_size_the_image_runs(flag_cache, tmp_path):
    """The control of the head-size refusal: the test bed's tiny Qwen3-MoE (head_dim 64), which the CPU engine
    serves, passes the same check (from the facts the image gave: no image run here)."""
    from reliability_common import module_result
    model = __import__("reliability_common").load_env().get("LLMFLEET_TEST_MODEL_DIR", TINY_MODEL_DIR)
    if not os.path.isfile(os.path.join(model, "config.json")):
        pytest.skip("needs the test bed's tiny model (make testbed)")
    result = module_result("llmfleet.vllm.vllm_flag_check", dict(
        image=PINNED_IMAGE, cache_dir=str(tmp_path / "host-cache"), args=["/models/tiny"], model_dir=model,
        accelerator="cpu", seed=json.dumps(flag_cache["facts"])), tmp_path)
    assert not result.get("failed"), result.get("msg")
    assert result["head_dim"] == 64 and result["facts_source"] == "seed"
