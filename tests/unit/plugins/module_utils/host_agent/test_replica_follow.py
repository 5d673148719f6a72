"""roles/vllm_server/files/follow-container (llmfleet_host.replica_follow, installed as the role does): the unit's
main process follows the replica's container.

docker is a TEST DOUBLE here (a script that plays a scripted sequence of answers), because the point is the
follower's decisions: a log stream that ends while the container still runs (a dockerd restart under
live-restore) is followed again, never reported as a crash; a stopped container's exit code becomes the unit's;
a container that is gone while dockerd answers is a failure. The real behaviour is exercised by
tests/integration/test_faults.py (dockerd restart, kill -9) against a real engine.
"""
import os
import subprocess
import sys


# The double answers `docker inspect` with the next line of $STATE_FILE (and keeps repeating the last one);
# "down" means dockerd does not answer (inspect and version fail), "gone" means no such container.
DOCKER_DOUBLE = """#!/bin/sh
# TEST DOUBLE of docker for follow-container.
state_file="$STATE_FILE"; n_file="$STATE_FILE.n"
n=$(cat "$n_file" 2>/dev/null || echo 1)
line=$(sed -n "${n}p" "$state_file"); [ -n "$line" ] || line=$(tail -1 "$state_file")
case "$1" in
  logs) echo "log line $n"; exit 0 ;;
  inspect) echo $((n + 1)) > "$n_file"
           case "$line" in down) echo "Cannot connect to the Docker daemon" >&2; exit 1 ;;
                           gone) echo "No such object" >&2; exit 1 ;;
                           *) echo "$line" ;; esac ;;
  version) case "$line" in down) exit 1 ;; *) echo 20.10 ;; esac ;;
esac
"""


def run(tmp_path, host_install, states):
    docker = tmp_path / "docker"
    docker.write_text(DOCKER_DOUBLE)
    docker.chmod(0o755)
    state = tmp_path / "states"
    state.write_text("\n".join(states) + "\n")
    script = host_install(tmp_path / "libexec", docker=docker) / "follow-container"
    return subprocess.run([sys.executable, str(script), "llmfleet-vllm-0"], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, STATE_FILE=str(state)), check=False)


def test_exit_code_of_the_container_is_the_units(tmp_path, host_install):
    r = run(tmp_path, host_install, ["false 137"])
    assert r.returncode == 137 and "exited with 137" in r.stderr
    assert "log line" in r.stdout


def test_stream_interrupted_while_running_is_followed_again(tmp_path, host_install):
    # running (stream ended: dockerd restarting) -> dockerd down -> running again -> stopped cleanly
    r = run(tmp_path, host_install, ["true 0", "down", "true 0", "false 0"])
    assert r.returncode == 0, r.stderr
    assert "following again" in r.stderr and "no longer exists" not in r.stderr
    assert "exited with 0" in r.stderr
    assert r.stdout.count("log line") >= 3  # the log was followed again after each interruption


def test_container_gone_while_dockerd_answers_fails(tmp_path, host_install):
    r = run(tmp_path, host_install, ["gone"])
    assert r.returncode == 1 and "no longer exists" in r.stderr
