# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The batches of a rolling upgrade (playbooks/upgrade.yml): whole groups, single hosts one at a time.

Pure functions, no I/O. A host that serves alone is a batch of its own; the hosts of an inventory group that serve
ONE model instance together (``llmfleet_model_group``) are one batch, in the group's rank order (the leader first),
at the place of the group's first host in the play's order. A group must restart as a whole (a rank left on the old
version cannot form the group with the new ones), so a group the play holds only part of is refused.

  roll_batches(hosts, host_groups, group_members) -> [[host, ...], ...]   (each host in exactly one batch)
  roll_serial(batches)                            -> [size, ...]          (a play's ``serial`` list)
  roll_model_names(value)                         -> [name, ...]          (upgrade_models as given, as a list)
  hosts_serving(hosts, host_models, models)       -> [host, ...]          (the hosts a roll of some models restarts)

ansible-core's ``serial`` takes a list of batch sizes (the last one repeats) and cuts the play's hosts in their
order, so the play's hosts must come in the batches' order: upgrade.yml adds them to an in-memory group in that
order (add_host keeps it) and rolls that group with ``serial`` set to the batches' sizes.
"""

from __future__ import annotations


class RollError(ValueError):
    """An inventory the roll cannot batch; the message names the hosts, the variable and the fix."""


def _group_batch(name, hosts, host_groups, group_members, group_var):
    """The batch of the group ``name`` (its full inventory membership, every member in the play); raises RollError."""
    if name not in group_members:
        users = sorted(h for h in hosts if host_groups.get(h) == name)
        raise RollError("%s=%r on %s, but the inventory has no group %r. Put the hosts that serve one model instance "
                        "in an inventory group of that name, or unset %s."
                        % (group_var, name, ", ".join(users), name, group_var))
    members = [str(h) for h in group_members.get(name) or []]
    in_play = set(hosts)
    left_out = [h for h in members if h not in in_play]
    if left_out:
        raise RollError("the hosts of %s %r (%s) serve one model instance and are upgraded together, but this run "
                        "leaves out %s (--limit, or not in gpu_nodes). Run the upgrade with all of them "
                        "(e.g. --limit %s), or upgrade none of them. Nothing was changed."
                        % (group_var, name, ", ".join(members), ", ".join(left_out), name))
    strangers = [h for h in members if host_groups.get(h) != name]
    if strangers:
        raise RollError("%s is in the inventory group %r, whose hosts serve one model instance, but its %s is %s. Set "
                        "%s: %s on every host of the group (group_vars/%s.yml), or take it out of the group."
                        % (", ".join(strangers), name, group_var,
                           " / ".join(sorted(set(repr(host_groups.get(h) or "") for h in strangers))), group_var,
                           name, name))
    return members


def roll_batches(hosts, host_groups, group_members, group_var="llmfleet_model_group"):
    """The upgrade's batches, in the play's order.

    ``hosts``: the play's hosts (after --limit), in order. ``host_groups``: {host: its llmfleet_model_group, '' or
    None when it serves alone}. ``group_members``: {inventory group name: its hosts in rank order} (at least the
    groups named in ``host_groups``). Raises RollError for a group the play holds only part of, a group name the
    inventory lacks, or a group member whose own llmfleet_model_group differs.
    """
    hosts = [str(h) for h in hosts or []]
    host_groups = {str(h): (str(g) if g else "") for h, g in (host_groups or {}).items()}
    group_members = dict(group_members or {})
    batches = []
    for host in hosts:
        name = host_groups.get(host, "")
        if not name:
            batches.append([host])
        elif not any(host in batch for batch in batches):
            batches.append(_group_batch(name, hosts, host_groups, group_members, group_var))
    return batches


def roll_serial(batches):
    """The ``serial`` list of a play whose hosts come in the batches' order: each batch's size."""
    return [len(batch) for batch in batches or [] if batch]


def roll_model_names(value):
    """``upgrade_models`` as a list of names. ``-e upgrade_models=[a,b]`` (key=value) arrives as the string
    ``"[a,b]"``, and a string would match models by substring downstream: a string is split on commas, brackets and
    quotes dropped. None or empty: no names (every model rolls)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = value.strip().strip("[]").split(",")
    if not isinstance(value, (list, tuple)):
        raise RollError("upgrade_models must be a list of served model names, e.g. -e '{\"upgrade_models\": "
                        "[\"chat\"]}', got %r. Nothing was changed." % (value,))
    names = [str(v).strip().strip("'\"").strip() for v in value]
    return [n for n in names if n]


def hosts_serving(hosts, host_models, models):
    """The hosts a roll of ``models`` restarts, in the play's order: those that serve at least one of them (all the
    hosts when ``models`` is empty). ``host_models``: {host: [the served names of its models]}. A host that serves
    none of them is not rolled at all (no pull, no drain, no restart). Raises RollError, before anything changes,
    for a name that no host of the run serves."""
    hosts = [str(h) for h in hosts or []]
    wanted = roll_model_names(models)
    if not wanted:
        return hosts
    served = {h: set(str(m) for m in host_models.get(h) or []) for h in hosts}
    everywhere = set().union(*served.values()) if served else set()
    unknown = [m for m in wanted if m not in everywhere]
    if unknown:
        raise RollError("upgrade_models names %s, which no host of this run serves (they serve: %s). Name models of "
                        "llmfleet_models by their served names (or widen --limit). Nothing was changed."
                        % (", ".join(unknown), ", ".join(sorted(everywhere)) or "none"))
    return [h for h in hosts if served[h] & set(wanted)]
