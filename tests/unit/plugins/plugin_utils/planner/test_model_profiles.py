# Unit tests for the model profiles (profiles/*.yml) and plugins/plugin_utils/planner/model_profiles.py, and for the
# vLLM args each profile variant renders, checked against the flags of the vLLM recipe for Qwen3.5-35B-A3B
# (vllm-project/recipes models/Qwen/Qwen3.5-35B-A3B.yaml).
import copy
import json
import os
import shutil

import pytest
import yaml

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner.errors import PlanError
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
PDIR = os.path.join(ROOT, "profiles")
PROFILES = M.load_profiles(PDIR)
QWEN = ["Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-35B-A3B-FP8", "Qwen/Qwen3.5-35B-A3B-GPTQ-Int4"]
H200 = gpu_facts_from_spec("2x H200 NVLink")

# Flags from the recipe (features and variants) that a rendered command may carry for this model.
RECIPE = {
    "reasoning": {"reasoning-parser": "qwen3"},
    "tool_calling": {"enable-auto-tool-choice": True, "tool-call-parser": "qwen3_coder"},
    "spec_decoding": {"speculative-config": {"method": "mtp", "num_speculative_tokens": 1}},
    "text_only": {"language-model-only": True},
    "thinking_off": {"default-chat-template-kwargs": {"enable_thinking": False}},
}
SERVE_ROLE_OWNS = {"model", "served-model-name", "port", "host", "api-key", "data-parallel-size"}


def rendered(pid, objective="throughput", **kw):
    p = P.plan(H200, PROFILES[pid], objective=objective, max_model_len=kw.pop("max_model_len", 65536), **kw)
    return p, {k: v for k, v in p["vllm_args"].items() if v is not None}


def test_every_profile_file_is_named_after_its_id_and_validates():
    assert set(PROFILES) == set(QWEN) | {"llmfleet-test/tiny-qwen3-moe"}
    for pid, p in PROFILES.items():
        assert os.path.basename(p["path"]) == pid.replace("/", "--") + ".yml"


def test_qwen35_profiles_carry_the_published_architecture():
    for pid in QWEN:
        a = PROFILES[pid]["arch"]
        assert (a["full_attention_layers"], a["linear_attention_layers"]) == (10, 30)
        assert (a["num_attention_heads"], a["num_kv_heads"], a["head_dim"]) == (16, 2, 256)
        assert a["moe"] == {"num_experts": 256, "experts_per_token": 8}
        assert a["max_position_embeddings"] == 262144 and a["mtp_layers"] == 1
        assert PROFILES[pid]["serving"]["min_vllm_version"] == "0.17.0"
    w = [PROFILES[pid]["weights_bytes"] for pid in QWEN]
    assert w[0] > w[1] > w[2]
    assert PROFILES["Qwen/Qwen3.5-35B-A3B-FP8"]["arch"]["quant_method"] == "fp8"
    assert PROFILES["Qwen/Qwen3.5-35B-A3B-GPTQ-Int4"]["arch"]["quant_method"] == "gptq"


def test_tiny_profile_matches_the_generated_test_model():
    a = PROFILES["llmfleet-test/tiny-qwen3-moe"]["arch"]
    assert a["model_type"] == "qwen3_moe" and a["architectures"] == ["Qwen3MoeForCausalLM"]
    assert (a["hidden_size"], a["num_layers"], a["num_attention_heads"], a["num_kv_heads"], a["head_dim"]) == \
        (128, 4, 4, 2, 64)
    assert a["moe"] == {"num_experts": 8, "experts_per_token": 2} and a["vocab_size"] == 2048
    assert a["linear_attention_layers"] == 0


@pytest.mark.parametrize("pid", QWEN)
def test_default_args_follow_the_recipe(pid):
    p, args = rendered(pid)
    assert args["reasoning-parser"] == RECIPE["reasoning"]["reasoning-parser"]
    assert args["language-model-only"] is True
    assert args["enable-prefix-caching"] is True  # explicit, on for throughput
    for flag in ("enable-auto-tool-choice", "tool-call-parser", "speculative-config", "enforce-eager",
                 "trust-remote-code", "enable-eplb", "default-chat-template-kwargs", "quantization"):
        assert flag not in args, flag  # opt-in features; checkpoints carry their own quantization config
    assert not SERVE_ROLE_OWNS & set(args)
    assert args["max-model-len"] == 65536 and args["gpu-memory-utilization"] == 0.9
    assert args["tensor-parallel-size"] == p["tensor_parallel_size"] and args["max-num-seqs"] == p["max_num_seqs"]
    for k in p["vllm_args"]:
        assert k == k.lower() and not k.startswith("-") and "_" not in k


@pytest.mark.parametrize("pid", QWEN)
def test_opt_in_features_render_the_recipe_flags(pid):
    _unused, args = rendered(pid, features={"tool_calling": True, "thinking": False, "enforce_eager": True,
                                            "trust_remote_code": True})
    for key in ("tool_calling", "thinking_off"):
        for flag, value in RECIPE[key].items():
            assert args[flag] == value
    assert args["enforce-eager"] is True and args["trust-remote-code"] is True


@pytest.mark.parametrize("pid", QWEN)
def test_mtp_turns_default_prefix_caching_off_and_says_why(pid):
    p, args = rendered(pid, features={"mtp": True})
    assert args["speculative-config"] == RECIPE["spec_decoding"]["speculative-config"]
    assert args["enable-prefix-caching"] is False
    assert any("prefix_caching is off because mtp is on" in r and "hybrid" in r for r in p["reasons"])
    # MTP loads its head and adds one attention layer of KV
    base, _unused = rendered(pid)
    assert p["weights_bytes"] == base["weights_bytes"] + PROFILES[pid]["mtp_weights_bytes"]
    with pytest.raises(PlanError, match="conflict"):
        rendered(pid, features={"mtp": True, "prefix_caching": True})


def test_latency_turns_prefix_caching_off_explicitly():
    _unused, args = rendered("Qwen/Qwen3.5-35B-A3B-FP8", objective="latency")
    assert args["enable-prefix-caching"] is False and args["tensor-parallel-size"] == 2
    assert args["enable-expert-parallel"] is True


def test_eplb_only_where_the_plan_enables_expert_parallelism():
    p, args = rendered("Qwen/Qwen3.5-35B-A3B-FP8", objective="latency", features={"eplb": True})
    assert p["enable_expert_parallel"] and args["enable-eplb"] is True
    assert args["eplb-config"] == {"window_size": 1000, "step_interval": 3000, "num_redundant_experts": 0}
    with pytest.raises(PlanError, match="expert_parallel"):
        rendered("Qwen/Qwen3.5-35B-A3B-FP8", objective="throughput", features={"eplb": True})


def test_text_only_off_loads_the_vision_tower():
    on, _unused = rendered("Qwen/Qwen3.5-35B-A3B")
    off, args = rendered("Qwen/Qwen3.5-35B-A3B", features={"text_only": False})
    assert "language-model-only" not in args
    assert off["weights_bytes"] - on["weights_bytes"] == PROFILES["Qwen/Qwen3.5-35B-A3B"]["vision_weights_bytes"]


def test_unknown_feature_is_refused_with_the_known_ones():
    with pytest.raises(PlanError, match="tool_calling"):
        rendered("Qwen/Qwen3.5-35B-A3B", features={"toolcalling": True})


def test_tiny_model_args_on_the_cpu_engine():
    p = P.plan(None, PROFILES["llmfleet-test/tiny-qwen3-moe"], accelerator="cpu", kv_cache_memory_bytes=1 << 26,
               max_model_len=512, features={"enforce_eager": True})
    assert p["vllm_args"]["enforce-eager"] is True
    assert "gpu-memory-utilization" not in p["vllm_args"] and "tensor-parallel-size" not in p["vllm_args"]


# ------------------------------------------------------------------------------------------ adding a model

def test_adding_a_model_is_adding_a_file(tmp_path):
    for f in os.listdir(PDIR):
        shutil.copy(os.path.join(PDIR, f), tmp_path / f)
    with open(os.path.join(PDIR, "Qwen--Qwen3.5-35B-A3B-FP8.yml")) as fh:
        data = yaml.safe_load(fh)
    data["id"] = "acme/Qwen3.5-35B-A3B-FP8-custom"
    (tmp_path / "acme--Qwen3.5-35B-A3B-FP8-custom.yml").write_text(yaml.safe_dump(data))
    profiles = M.load_profiles(str(tmp_path))
    assert "acme/Qwen3.5-35B-A3B-FP8-custom" in profiles
    (tmp_path / "wrong-name.yml").write_text(yaml.safe_dump(data))
    with pytest.raises(M.ProfileError, match="file name must be"):
        M.load_profiles(str(tmp_path))


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d.pop("weights_bytes"), "weights_bytes"),
    (lambda d: d["serving"].pop("min_vllm_version"), "min_vllm_version"),
    (lambda d: d["serving"]["features"]["reasoning"].update(args_on={"--reasoning-parser": "qwen3"}), "kebab"),
    (lambda d: d["serving"]["features"]["mtp"].update(conflicts=[{"feature": "nope", "reason": "x"}]), "conflicts"),
    (lambda d: d["serving"]["features"]["mtp"].update(default="yes"), "default must be"),
    (lambda d: d["config"]["text_config"].pop("num_key_value_heads") and
     d["config"]["text_config"].pop("head_dim") and d["config"]["text_config"].pop("hidden_size"), "hidden_size"),
    (lambda d: d["config"]["text_config"].pop("linear_num_value_heads"), "linear_num_value_heads"),
])
def test_invalid_profiles_are_refused(mutate, match):
    with open(os.path.join(PDIR, "Qwen--Qwen3.5-35B-A3B.yml")) as fh:
        data = yaml.safe_load(fh)
    mutate(data)
    with pytest.raises(M.ProfileError, match=match):
        M.validate_profile(data)


def test_explicit_layer_types_list_is_read():
    with open(os.path.join(PDIR, "Qwen--Qwen3.5-35B-A3B.yml")) as fh:
        cfg = yaml.safe_load(fh)["config"]
    cfg = copy.deepcopy(cfg)
    tc = cfg["text_config"]
    del tc["full_attention_interval"]
    tc["layer_types"] = (["linear_attention"] * 3 + ["full_attention"]) * 10
    a = M.normalize_config(cfg)
    assert (a["full_attention_layers"], a["linear_attention_layers"]) == (10, 30)
    tc["layer_types"] = tc["layer_types"][:-1]
    with pytest.raises(M.ProfileError, match="39 entries"):
        M.normalize_config(cfg)


def test_model_directory_reading(tmp_path):
    cfg = PROFILES["llmfleet-test/tiny-qwen3-moe"]["config"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert M.read_model_dir(str(tmp_path)) == (cfg, None, None)
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1234)
    assert M.read_model_dir(str(tmp_path / "config.json"))[2] == 1234
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 99}}))
    config, index, _unused = M.read_model_dir(str(tmp_path))
    p = M.profile_from_model_dir(config, index=index, name=str(tmp_path),
                                 like=M.match_profile(PROFILES, M.normalize_config(config)))
    assert p["weights_bytes"] == 99 and p["features_from"] == "llmfleet-test/tiny-qwen3-moe"
    with pytest.raises(M.ProfileError, match="weights_bytes"):
        M.profile_from_model_dir(config, name="x")
    with pytest.raises(M.ProfileError, match="no config.json"):
        M.read_model_dir(str(tmp_path / "nothing"))


def test_variants_extend_the_base_checkpoint_and_hold_only_their_differences():
    # The serving features and the architecture are written once (the BF16 profile) and shared.
    base, fp8, int4 = (PROFILES[p] for p in QWEN)
    for v in (fp8, int4):
        assert v["extends"] == base["id"] and v["serving"] == base["serving"]
        assert v["config"]["text_config"] == base["config"]["text_config"]
        with open(v["path"]) as fh:
            raw = yaml.safe_load(fh)
        assert "serving" not in raw and "text_config" not in raw["config"]
    assert fp8["arch"]["quant_method"] == "fp8" and int4["arch"]["quant_method"] == "gptq"
    assert base["arch"]["quant_method"] is None
    assert int4["mtp_weights_bytes"] == base["mtp_weights_bytes"]  # inherited
    assert fp8["mtp_weights_bytes"] == 850000000  # its own


def test_extends_must_name_a_profile_of_the_directory_and_not_loop(tmp_path):
    (tmp_path / "a--x.yml").write_text(yaml.safe_dump({"id": "a/x", "extends": "a/missing", "variant": "v"}))
    with pytest.raises(M.ProfileError, match="extends 'a/missing'"):
        M.load_profiles(str(tmp_path))
    (tmp_path / "a--x.yml").write_text(yaml.safe_dump({"id": "a/x", "extends": "a/y"}))
    (tmp_path / "a--y.yml").write_text(yaml.safe_dump({"id": "a/y", "extends": "a/x"}))
    with pytest.raises(M.ProfileError, match="extends it back"):
        M.load_profiles(str(tmp_path))


def test_a_users_profile_directory_may_extend_the_collections_profiles(tmp_path):
    (tmp_path / "acme--qwen-fp8-local.yml").write_text(yaml.safe_dump(
        {"id": "acme/qwen-fp8-local", "extends": "Qwen/Qwen3.5-35B-A3B-FP8", "weights_bytes": 37000000000}))
    extra = M.load_profiles(str(tmp_path), bases=PROFILES)
    p = extra["acme/qwen-fp8-local"]
    assert p["weights_bytes"] == 37000000000 and p["arch"]["quant_method"] == "fp8"
    assert p["serving"] == PROFILES["Qwen/Qwen3.5-35B-A3B"]["serving"]
