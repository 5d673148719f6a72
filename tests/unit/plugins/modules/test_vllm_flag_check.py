"""vllm_flag_check's models: every model of a host checked against the image in one task, each model's refusal
reported. The image's `vllm serve --help=all` is the one the test bed's CPU image printed
(tests/fixtures/vllm-help/vllm-cpu-0.32.0.txt); the image itself (docker) is tests/integration's."""
import os

import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.checks.vllm_flags import parse_help
from ansible_collections.llmfleet.vllm.plugins.modules import vllm_flag_check as FC

HELP = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vllm-help", "vllm-cpu-0.32.0.txt")
# The image as the checks see it; no cache of its environment variables on this "host" (they come with the facts).
IMAGE = type("Image", (), {"name": "llmfleet-testbed/vllm-cpu:latest", "id": "sha256:" + "0" * 64,
                           "envs_path": os.devnull})()


class Module:
    """What the checks ask of AnsibleModule: its warnings (a test double: no module process runs here)."""

    def __init__(self):
        self.warnings = []

    def warn(self, msg):
        self.warnings.append(msg)


def model(**given):
    spec = dict((name, option.get("default")) for name, option in FC.MODEL_OPTIONS.items())
    spec.update(given)
    return spec


def check(models, facts=None, **params):
    p = dict((name, option.get("default")) for name, option in FC.ARGUMENT_SPEC.items())
    p.update(params, models=models)
    with open(HELP) as fh:
        help_text = fh.read()
    result = {}
    checked, refusals = FC._check_models(Module(), p, FC._model_specs(p), IMAGE, parse_help(help_text), help_text,
                                         "0.32.0", facts or {}, result)
    return checked, refusals, result


CHAT = model(model="chat", args=["/models/chat", "--max-model-len", "2048"], runner="generate")
EMBED = model(model="embed", args=["/models/embed", "--runner", "pooling", "--convert", "embed"], runner="pooling",
              convert="embed")


def test_each_model_of_a_host_is_checked_and_passes_with_its_own_findings():
    checked, refusals, _result = check([CHAT, EMBED])
    assert refusals == []
    assert [(c["model"], c["flags_checked"], c["problems"], c["refusal"]) for c in checked] == [
        ("chat", 1, [], None), ("embed", 2, [], None)]
    assert checked[1]["runner_args"] == {"runner": "pooling", "convert": "embed"}


def test_a_refused_model_does_not_stop_the_others_and_each_refusal_names_its_model():
    typo = model(model="chat", args=["/models/chat", "--max-model-lenght", "2048"], args_extra_var="args_extra of chat")
    unwrapped = model(model="embed", args=["/models/embed"], runner="pooling", convert="embed")
    checked, refusals, _result = check([typo, unwrapped, CHAT])
    assert [c["refusal"] is None for c in checked] == [False, False, True]
    assert refusals[0].startswith("chat: ") and "--max-model-len" in refusals[0]
    assert checked[0]["problems"][0]["flag"] == "--max-model-lenght"
    assert refusals[1].startswith("embed: a model with runner: pooling needs --convert embed --runner pooling")
    assert len(refusals) == 2


def test_one_model_is_refused_with_the_message_of_before():
    # The form without `models` (args and its options): the message is the check's own, not named after the model.
    checked, refusals, _result = check(None, args=["/models/chat", "--max-model-lenght", "2048"], model="chat")
    assert len(checked) == 1 and checked[0]["model"] == "chat"
    assert refusals == [checked[0]["refusal"]] and not refusals[0].startswith("chat: ")


def test_the_environment_is_checked_once_with_the_first_model():
    checked, refusals, _result = check([CHAT, EMBED], facts={"envs": ["VLLM_CPU_KVCACHE_SPACE"]},
                                       env={"VLLM_ENABLE_PREFIX_CACHING": "1"}, env_var="vllm_server_env")
    assert len(refusals) == 1 and refusals[0].startswith("chat: ") and "vllm_server_env" in refusals[0]
    assert checked[1]["refusal"] is None


@pytest.mark.parametrize("given", [{"args": ["/m"]}, {"model": "chat"}, {"model_dir": "/srv/m"}])
def test_models_take_no_options_of_the_one_model_form(given):
    assert any(set(pair) == {"models", next(iter(given))} for pair in FC.MUTUALLY_EXCLUSIVE)


def test_the_environment_is_checked_with_the_next_model_when_the_first_is_refused_before():
    typo = model(model="chat", args=["/models/chat", "--max-model-lenght", "2048"])
    _checked, refusals, _result = check([typo, EMBED], facts={"envs": ["VLLM_CPU_KVCACHE_SPACE"]},
                                        env={"VLLM_ENABLE_PREFIX_CACHING": "1"}, env_var="vllm_server_env")
    assert [r.split(":")[0] for r in refusals] == ["chat", "embed"] and "vllm_server_env" in refusals[1]
