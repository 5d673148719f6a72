"""The vllm_plan action's reading of the deployment's engine arguments (engine_args / engine_env)."""
from ansible_collections.llmfleet.vllm.plugins.action.vllm_plan import _engine_inputs

PROFILE = {"serving": {"features": {"prefix_caching": {}, "enforce_eager": {}}}}


def args(**kw):
    base = dict(engine_args={}, engine_env={}, engine_args_var="vllm_server_args_extra", features={"mtp": True},
                kv_cache_dtype="auto", max_num_batched_tokens=None)
    base.update(kw)
    return base


def test_engine_args_win_over_the_plan_inputs_as_they_do_in_the_argv():
    merged, hybrid, notes = _engine_inputs(args(engine_args={"kv-cache-dtype": "fp8", "enforce-eager": True}), PROFILE)
    assert merged["kv_cache_dtype"] == "fp8"
    assert merged["features"] == {"mtp": True, "enforce_eager": True}
    assert hybrid is None and notes == ["--enforce-eager true", "--kv-cache-dtype fp8"]


def test_no_engine_args_change_nothing():
    a = args()
    assert _engine_inputs(a, PROFILE) == (a, None, [])
