"""roles/loadbalancer/templates/prefix_routing.cfg.j2: the backend lines of loadbalancer_balance: prefix.

Rendered with plain Jinja2 (the template uses no Ansible filter); when HAProxy is installed, the whole
backend is also checked with `haproxy -c` (the role validates the real file the same way).
"""
import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest

TEMPLATES = Path(__file__).resolve().parents[4] / "roles" / "loadbalancer" / "templates"
DEFAULTS = {"loadbalancer_prefix_key_header": "X-Llmfleet-Prefix", "loadbalancer_prefix_session_header": "X-Session-Id",
            "loadbalancer_prefix_prompt_bytes": 256, "loadbalancer_prefix_balance_factor": 200}


def render(**overrides):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), trim_blocks=True, undefined=jinja2.StrictUndefined)
    return env.get_template("prefix_routing.cfg.j2").render(dict(DEFAULTS, **overrides))


def test_defaults_hash_the_conversation_key_with_bounded_load():
    text = render()
    assert "    balance hdr(X-Llmfleet-Prefix)\n" in text
    assert "    hash-type consistent sdbm avalanche\n" in text
    assert "    hash-balance-factor 200\n" in text
    assert "    http-request del-header X-Llmfleet-Prefix\n" in text
    assert "req.hdr(X-Session-Id),xxh64" in text
    assert "json_query('$.prompt'),bytes(0,256)" in text
    # The client's session header is applied after the prompt's key, so it wins.
    assert text.index("json_query('$.messages[0].content')") < text.index("req.hdr(X-Session-Id)")
    assert text.endswith("default-server weight 100\n")


def test_no_session_header_and_no_bounded_load_when_turned_off():
    text = render(loadbalancer_prefix_session_header="", loadbalancer_prefix_balance_factor=0)
    assert "X-Session-Id" not in text and "hash-balance-factor" not in text


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy not installed")
def test_haproxy_accepts_the_backend(tmp_path):
    config = tmp_path / "haproxy.cfg"
    config.write_text("defaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n"
                      "frontend fe\n    bind 127.0.0.1:18080\n    default_backend be\nbackend be\n" + render()
                      + "    server a 127.0.0.1:1\n    server b 127.0.0.1:2\n")
    result = subprocess.run(["haproxy", "-c", "-f", str(config)], capture_output=True, check=False, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def served_by_lines(header):
    """haproxy.cfg.j2's served-by block, rendered alone (the rest of that template needs Ansible's filters)."""
    text = (TEMPLATES / "haproxy.cfg.j2").read_text()
    block = text[text.index("{% if loadbalancer_served_by_header"):]
    block = block[:block.index("{% endif %}") + len("{% endif %}")] + "\n"
    env = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined)
    return env.from_string(block).render(loadbalancer_served_by_header=header)


def test_served_by_header_is_off_by_default_and_names_the_server_when_set():
    assert served_by_lines("").strip() == ""
    assert "    http-response set-header X-Llmfleet-Served-By %[srv_name]\n" in served_by_lines("X-Llmfleet-Served-By")


@pytest.mark.skipif(not shutil.which("haproxy"), reason="haproxy not installed")
def test_haproxy_accepts_the_served_by_header(tmp_path):
    config = tmp_path / "haproxy.cfg"
    config.write_text("defaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n"
                      "frontend fe\n    bind 127.0.0.1:18080\n    default_backend be\nbackend be\n" + render()
                      + served_by_lines("X-Llmfleet-Served-By") + "    server a 127.0.0.1:1\n    server b 127.0.0.1:2\n")
    result = subprocess.run(["haproxy", "-c", "-f", str(config)], capture_output=True, check=False, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
