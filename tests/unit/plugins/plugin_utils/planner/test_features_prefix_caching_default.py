"""Prefix caching's default, per architecture and vLLM version (issue #40): the planner takes vLLM's own rule,
EngineArgs._set_default_chunked_prefill_and_prefix_caching_args -> ModelConfig.is_prefix_caching_supported, read from
each supported release's source (plan_features.PREFIX_CACHING_DEFAULTS cites the files and lines)."""
import json
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import kv_specs as K
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import model_profiles as M
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import features as F
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import planner as P
from ansible_collections.llmfleet.vllm.plugins.plugin_utils.planner import capacity as CAP
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.gpu_catalogue import annotate_gpu_facts, load_catalogue
from ansible_collections.llmfleet.vllm.plugins.module_utils.gpu.topology import gpu_facts_from_spec

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
CONFIGS = os.path.join(ROOT, "tests", "fixtures", "model_configs")
CAT = load_catalogue()
H200 = annotate_gpu_facts(gpu_facts_from_spec("1x H200", CAT), CAT)


def profile(name, weights=20 * 1024 ** 3):
    with open(os.path.join(CONFIGS, name + ".json")) as fh:
        return M.profile_from_model_dir(json.load(fh), weights_bytes=weights, name=name.replace("--", "/"))


NEMOTRON_H = profile("nvidia--Nemotron-H-8B-Base-8K")     # Mamba2 + attention: vLLM's "hybrid"
LFM2 = profile("LiquidAI--LFM2-700M", 2 * 1024 ** 3)      # short conv + attention: "hybrid" too
LLAMA = profile("meta-llama--Llama-3.1-8B-Instruct")      # attention only: "decoder"
GEMMA3 = profile("google--gemma-3-1b-it", 2 * 1024 ** 3)  # sliding window + full attention: still "decoder"


@pytest.mark.parametrize("version, hybrid_on", [
    # 0.22.0 vllm/config/model.py:1859-1864: "Hybrid models do not support prefix caching since the feature is still
    # experimental." -> False
    ("0.22.0", False), ("0.22.1+cu129", False),
    # 0.28.0 vllm/config/model.py:2072-2074 and 0.32.0 :2259-2261: "Generative hybrid models support prefix caching."
    ("0.28.0", True), ("0.32.0", True),
])
def test_hybrid_default_follows_each_release_read(version, hybrid_on):
    for p in (NEMOTRON_H, LFM2):
        on, why = F.vllm_prefix_caching_default(p["arch"], version)
        assert on is hybrid_on, (p["id"], version)
        assert version in why and "hybrid" in why


@pytest.mark.parametrize("version", ["0.22.0", "0.28.0", "0.32.0", None, "0.25.0", "0.40.0"])
def test_decoders_have_prefix_caching_on_in_every_release(version):
    # the decoder branch of is_prefix_caching_supported returns True in 0.22.0 (:1874-1876), 0.28.0 (:2084-2086) and
    # 0.32.0 (:2271-2273); sliding-window layers do not make a model "hybrid" (no IsHybrid class)
    for p in (LLAMA, GEMMA3):
        assert F.vllm_attn_type(p["arch"]) == "decoder"
        assert F.vllm_prefix_caching_default(p["arch"], version)[0] is True


def test_state_layers_alone_are_attention_free_and_off_in_every_release():
    arch = dict(NEMOTRON_H["arch"], full_attention_layers=0)
    assert F.vllm_attn_type(arch) == "attention_free"
    for version in ("0.22.0", "0.28.0", "0.32.0"):
        assert F.vllm_prefix_caching_default(arch, version)[0] is False


@pytest.mark.parametrize("version", [None, "0.25.0", "0.21.0", "0.40.0"])
def test_a_version_not_read_plans_hybrids_with_prefix_caching_on_the_side_of_fewer_sequences(version):
    on, why = F.vllm_prefix_caching_default(NEMOTRON_H["arch"], version)
    assert on is True and "not above vLLM" in why
    # and on really is the side of less: the same memory holds fewer full-context sequences with it
    off_layout = K.build_layout(NEMOTRON_H["arch"], prefix_caching=False, vllm_version=version)
    on_layout = K.build_layout(NEMOTRON_H["arch"], prefix_caching=True, vllm_version=version)
    avail = 60 * 1024 ** 3
    assert CAP.capacity(on_layout, avail, 8192, 8192)["max_concurrency"] < \
        CAP.capacity(off_layout, avail, 8192, 8192)["max_concurrency"]


def test_mamba_cache_mode_all_is_0_22_only():
    # 0.22.0 vllm/model_executor/models/config.py:350-354 picks 'all' for SupportsMambaPrefixCaching classes;
    # 0.28.0 :602-604 and 0.32.0 :685-687 always 'align'
    assert K.mamba_cache_mode(NEMOTRON_H["arch"], True, "0.22.0") == "all"
    assert K.mamba_cache_mode(NEMOTRON_H["arch"], True, "0.28.0") == "align"
    assert K.mamba_cache_mode(NEMOTRON_H["arch"], True, "0.32.0") == "align"


@pytest.mark.parametrize("version, word, mode", [("0.22.0", "off", "none"), ("0.28.0", "on", "align"),
                                                 (None, "on", "all")])
def test_the_plans_first_reason_says_which_default_applied(version, word, mode):
    plan = P.plan(H200, NEMOTRON_H, max_model_len=8192, vllm_version=version)
    assert plan["reasons"][0].startswith("Prefix caching %s: " % word), plan["reasons"][0]
    assert plan["kv_cache_layout"]["mamba_cache_mode"] == mode
    assert plan["vllm_args"]["enable-prefix-caching"] is (word == "on")


def test_the_users_choice_wins_and_the_reason_says_so():
    plan = P.plan(H200, NEMOTRON_H, max_model_len=8192, vllm_version="0.22.0", features={"prefix_caching": True})
    assert plan["reasons"][0].startswith("Prefix caching on: requested")
    assert "would be off by default" in plan["reasons"][0]
    assert plan["kv_cache_layout"]["mamba_cache_mode"] == "all"


def test_off_by_default_holds_more_sequences_than_the_old_always_on_plan():
    """The issue's case: vLLM 0.22.0 ran a Nemotron-H hybrid without --enable-prefix-caching (mode 'none'); planned
    with prefix caching on (mode 'all', a state block per block of the context) it held a fraction of that."""
    default = P.plan(H200, NEMOTRON_H, max_model_len=8192, vllm_version="0.22.0")
    forced_on = P.plan(H200, NEMOTRON_H, max_model_len=8192, vllm_version="0.22.0",
                       features={"prefix_caching": True})
    assert default["max_concurrency"] > 2 * forced_on["max_concurrency"]


def test_a_profile_may_take_vllms_default_only_for_prefix_caching():
    p = dict(LLAMA, serving={"min_vllm_version": "0.22.0", "features": {
        "enforce_eager": {"default": F.VLLM_DEFAULT, "args_on": {"enforce-eager": True}}}})
    with pytest.raises(M.ProfileError, match="prefix_caching only"):
        M.validate_profile(p)
    ok = dict(LLAMA, serving={"min_vllm_version": "0.22.0", "features": M.generic_features()})
    M.validate_profile(ok)
