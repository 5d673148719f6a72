"""Weights once per fleet: the schedule (who fetches from the hub, who pulls from whom, in which round) and the
rsync command a puller runs (plugins/module_utils/weights/peer_weights.py)."""
import pytest

from ansible_collections.llmfleet.vllm.plugins.module_utils.weights import peer_weights as P

KEY = P.model_key({"source": "hf", "repo_id": "Qwen/Qwen3.5-35B-A3B", "revision": "abc"})


def host(i, state="fetch", group="default", key=KEY, bytes_to_fetch=100):
    return {"host": "gpu%d" % i, "group": group, "key": key, "address": "10.0.0.%d" % i,
            "module": P.module_name("/srv/models/q"), "state": state, "bytes_to_fetch": bytes_to_fetch}


def sources(plan):
    return dict((h, (e["round"], e["source"], [p["host"] for p in e["peers"]])) for h, e in plan["hosts"].items())


def test_one_host_downloads_from_the_hub_and_the_others_pull_in_doubling_rounds():
    plan = P.schedule([host(i) for i in range(1, 9)])
    s = sources(plan)
    assert s["gpu1"] == (0, "hub", [])
    hub = [h for h, v in s.items() if v[1] == "hub"]
    assert hub == ["gpu1"]
    # 1 holder -> 2 -> 4 -> 8: three peer rounds for eight hosts.
    assert plan["rounds"] == 3
    per_round = {}
    for h, (r, _src, _peers) in s.items():
        per_round.setdefault(r, []).append(h)
    assert [len(per_round[r]) for r in range(4)] == [1, 1, 2, 4]
    # Nobody pulls from a host that is not done by the round before, and no host is anyone's primary twice in a
    # round (fan-out 1): the serving load spreads.
    for h, (r, _src, peers) in s.items():
        if r:
            assert all(s[p][0] < r for p in peers)
    for r in range(1, 4):
        primaries = [s[h][2][0] for h in per_round[r]]
        assert len(primaries) == len(set(primaries))


def test_with_three_hosts_the_second_serves_the_third():
    s = sources(P.schedule([host(1), host(2), host(3)]))
    assert s["gpu2"] == (1, "peers", ["gpu1"])
    assert s["gpu3"] == (2, "peers", ["gpu2", "gpu1"])


def test_no_single_host_serves_everyone():
    plan = P.schedule([host(i) for i in range(1, 17)])
    primaries = [e["peers"][0]["host"] for e in plan["hosts"].values() if e["peers"]]
    assert max(primaries.count(h) for h in set(primaries)) <= 4  # log2(16): the seed serves once per round
    assert len(set(primaries)) == 8


def test_a_host_that_already_holds_the_files_seeds_and_nobody_touches_the_hub():
    plan = P.schedule([host(1), host(2, state="complete"), host(3)])
    s = sources(plan)
    assert [v[1] for v in s.values()].count("hub") == 0
    assert s["gpu2"][1] == "none"
    assert s["gpu1"] == (1, "peers", ["gpu2"])
    assert s["gpu3"][0] == 2 and s["gpu3"][2][0] in ("gpu1", "gpu2") and set(s["gpu3"][2]) == {"gpu1", "gpu2"}
    assert plan["hosts"]["gpu2"]["serve"] and plan["hosts"]["gpu2"]["allow"] == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]


def test_the_seed_is_the_host_with_the_least_left_to_fetch():
    plan = P.schedule([host(1, bytes_to_fetch=100), host(2, bytes_to_fetch=40), host(3, bytes_to_fetch=100)])
    assert sources(plan)["gpu2"] == (0, "hub", [])


def test_fallback_peers_follow_the_primary_and_are_capped():
    hosts = [host(i, state="complete") for i in range(1, 7)] + [host(7)]
    e = P.schedule(hosts)["hosts"]["gpu7"]
    assert [p["host"] for p in e["peers"]] == ["gpu6", "gpu5", "gpu4", "gpu3"]
    assert e["peers"][0]["url"] == "rsync://10.0.0.6:8873/%s/" % P.module_name("/srv/models/q")


def test_each_peer_group_has_its_own_seed_and_pulls_stay_inside_it():
    hosts = [host(1, group="rack-a"), host(2, group="rack-a"), host(3, group="rack-b"), host(4, group="rack-b")]
    s = sources(P.schedule(hosts))
    assert sorted(h for h, v in s.items() if v[1] == "hub") == ["gpu1", "gpu3"]
    assert s["gpu2"][2] == ["gpu1"] and s["gpu4"][2] == ["gpu3"]


def test_different_models_are_scheduled_apart():
    other = P.model_key({"source": "hf", "repo_id": "Qwen/Qwen3.5-35B-A3B", "revision": "def"})
    s = sources(P.schedule([host(1), host(2, key=other)]))
    assert s["gpu1"] == (0, "hub", []) and s["gpu2"] == (0, "hub", [])


def test_a_host_with_peer_transfer_off_fetches_alone_and_serves_nobody():
    plan = P.schedule([host(1), host(2, state="off"), host(3)])
    s = sources(plan)
    assert s["gpu2"] == (0, "hub", []) and not plan["hosts"]["gpu2"]["serve"]
    assert s["gpu3"] == (1, "peers", ["gpu1"])


def test_a_fleet_that_holds_everything_has_no_rounds_and_no_daemon():
    plan = P.schedule([host(1, state="complete"), host(2, state="complete"), None])
    assert plan["rounds"] == 0
    assert not any(e["serve"] for e in plan["hosts"].values())


def test_fanout_two_serves_two_per_holder_per_round():
    plan = P.schedule([host(i) for i in range(1, 10)], fanout=2)
    assert plan["rounds"] == 2  # 1 -> 3 -> 9


def test_bad_inputs_name_the_variable_to_fix():
    with pytest.raises(P.PeerPlanError, match="model_weights_peer_fanout"):
        P.schedule([host(1)], fanout=0)
    no_addr = host(2)
    no_addr["address"] = ""
    with pytest.raises(P.PeerPlanError, match="gpu2 has no LAN address.*model_weights_peer_address"):
        P.schedule([host(1), no_addr])
    with pytest.raises(P.PeerPlanError, match="unique host"):
        P.schedule([host(1), host(1)])


def test_module_names_are_safe_and_unique_per_path():
    a, b = P.module_name("/srv/models/Qwen3.5 35B]x/"), P.module_name("/data/models/Qwen3.5 35B]x")
    assert a != b and a.startswith("llmfleet-weights-Qwen3.5-35B-x-")
    assert "]" not in a and " " not in a


def test_ipv6_peer_urls_are_bracketed():
    assert P.peer_url("fd00::2", 8873, "m") == "rsync://[fd00::2]:8873/m/"


def test_the_pull_command_keeps_partials_out_of_the_model_and_carries_no_secret():
    argv = P.rsync_argv("rsync://10.0.0.1:8873/m/", "/srv/.q.partial/", "/srv/.q.partial/.cache/l", "/w",
                        timeout=20)
    assert argv[0] == "rsync" and argv[-2:] == ["rsync://10.0.0.1:8873/m/", "/srv/.q.partial/"]
    assert "--partial" in argv and "--partial-dir=/w/partial" in argv and "--temp-dir=/w/tmp" in argv
    assert "--timeout=20" in argv
    assert not any("token" in a.lower() or "password" in a.lower() for a in argv)


def test_remaining_is_what_is_absent_or_short():
    assert P.remaining({"a": 3, "b": 5, "c": 1}, {"a": 3, "b": 2}) == ["b", "c"]
