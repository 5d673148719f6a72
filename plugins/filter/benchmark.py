# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmark role's client command (`vllm bench serve` in a container of the serving image, one concurrency
level) and the API key it reads from an environment file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Each filter's documentation: plugins/filter/<filter name>.yml.

import re

from ansible.errors import AnsibleFilterError

# What the client is told of every run (shown in the result file), and the numbers it reports.
_PERCENTILE_METRICS = "ttft,tpot,itl,e2el"
_METRIC_PERCENTILES = "50,90,99"
_REQUIRED = ("container", "env_file", "model_dir", "results_dir", "image", "backend", "base_url", "endpoint",
             "served_model_name", "input_len", "output_len", "seed", "num_prompts", "concurrency", "num_warmups",
             "ready_timeout_s", "run_id")


# Where the client container finds the CA it verifies an https:// endpoint against.
_CLIENT_CA = "/etc/llmfleet-ca.crt"


def bench_serve_argv(client):
    """The docker argv that runs `vllm bench serve` for one concurrency level (client: the settings, see the doc)."""
    if not isinstance(client, dict):
        raise AnsibleFilterError("bench_serve_argv expects a dict of settings, got %s" % type(client).__name__)
    missing = [key for key in _REQUIRED if key not in client]
    if missing:
        raise AnsibleFilterError("bench_serve_argv: missing %s" % ", ".join(missing))
    c = dict((key, str(value)) for key, value in client.items() if key != "extra_args")
    extra = [str(arg) for arg in client.get("extra_args") or []]
    # Offline: the tokenizer is the mounted model directory, never fetched.
    docker = ["docker", "run", "--rm", "--name", c["container"], "--network", "host", "--env-file", c["env_file"],
              "-e", "HF_HUB_OFFLINE=1", "-e", "TRANSFORMERS_OFFLINE=1", "-e", "HF_HUB_DISABLE_TELEMETRY=1",
              "-v", c["model_dir"] + ":/model:ro", "-v", c["results_dir"] + ":/results"]
    if c.get("ca_file"):
        # An https:// endpoint: the client (aiohttp, Python's default context) verifies it against the fleet's CA.
        docker += ["-v", c["ca_file"] + ":" + _CLIENT_CA + ":ro", "-e", "SSL_CERT_FILE=" + _CLIENT_CA]
    docker += ["--entrypoint", "vllm", c["image"]]
    bench = ["bench", "serve",
             "--backend", c["backend"], "--base-url", c["base_url"], "--endpoint", c["endpoint"],
             "--model", c["served_model_name"], "--served-model-name", c["served_model_name"],
             "--tokenizer", "/model", "--dataset-name", "random",
             "--random-input-len", c["input_len"], "--random-output-len", c["output_len"],
             "--ignore-eos", "--temperature", "0", "--seed", c["seed"],
             "--num-prompts", c["num_prompts"], "--max-concurrency", c["concurrency"],
             "--request-rate", "inf", "--num-warmups", c["num_warmups"],
             "--percentile-metrics", _PERCENTILE_METRICS, "--metric-percentiles", _METRIC_PERCENTILES,
             "--ready-check-timeout-sec", c["ready_timeout_s"], "--disable-tqdm",
             "--save-result", "--result-dir", "/results", "--result-filename", "concurrency-%s.json" % c["concurrency"]]
    metadata = ["--metadata", "input_len=" + c["input_len"], "output_len=" + c["output_len"], "image=" + c["image"],
                "target=" + c["base_url"], "run_id=" + c["run_id"]]
    return docker + bench + extra + metadata


def env_file_value(text, name):
    """The value of name in an environment file's text (NAME=value, or export NAME=value; one pair of surrounding
    quotes dropped), '' when the file does not set it."""
    if text is None:
        return ""
    if not isinstance(text, str):
        raise AnsibleFilterError("env_file_value expects the file's text, got %s" % type(text).__name__)
    found = re.search(r"(?m)^\s*(?:export\s+)?%s=(.*)$" % re.escape(str(name)), text)
    value = found.group(1).strip() if found else ""
    quoted = re.match(r"^(['\"])(.*)\1$", value)
    return quoted.group(2) if quoted else value


class FilterModule(object):
    def filters(self):
        return {"bench_serve_argv": bench_serve_argv, "env_file_value": env_file_value}
