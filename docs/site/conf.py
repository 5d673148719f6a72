# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Sphinx configuration of the collection's docs site (make docs; docs/site/build.sh).

Started from `antsibull-docs sphinx-init --use-current --squash-hierarchy llmfleet.vllm` (antsibull-docs 2.28.0).
Changed: no intersphinx (the site builds offline, so Ansible's own pages are linked by URL in
`link_ansible_docs` below), and MyST so that the guides of docs/ stay Markdown in one place.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from docutils import nodes

project = 'llmfleet.vllm'
copyright = 'llmfleet maintainers'  # pylint: disable=redefined-builtin
title = 'llmfleet.vllm documentation'
html_short_title = 'llmfleet.vllm'
html_title = 'llmfleet.vllm documentation'

extensions = ['sphinx_antsibull_ext', 'myst_parser']

pygments_style = 'ansible'
highlight_language = 'YAML+Jinja'

html_theme = 'sphinx_ansible_theme'
html_show_sphinx = False
display_version = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False

# The guides are included into docsite/*.rst (docs/docsite/rst/), never pages of their own.
source_suffix = {'.rst': 'restructuredtext'}
exclude_patterns = ['guides/*']
# The guides link to each other and to files of the repository by relative path, which GitHub follows and a
# site built from the collection cannot; those links render as text. Their headings start at the level GitHub wants.
suppress_warnings = ['myst.xref_missing', 'myst.header']
myst_heading_anchors = 3

default_role = 'any'
nitpicky = True

# The labels of Ansible's own documentation that antsibull-docs' generated pages refer to, and where they live.
ANSIBLE_DOCS = 'https://docs.ansible.com/projects/ansible/latest/'
ANSIBLE_LABELS = {
    'common_return_values': 'reference_appendices/common_return_values.html',
    'ansible_configuration_settings': 'reference_appendices/config.html',
    'action_plugins': 'plugins/action.html',
    'callback_plugins': 'plugins/callback.html',
}
ANSIBLE_COLLECTION_LABEL = 'ansible_collections.'


def ansible_docs_url(target):
    """The URL on docs.ansible.com of a label of Ansible's documentation, or None for any other label."""
    if target in ANSIBLE_LABELS:
        return ANSIBLE_DOCS + ANSIBLE_LABELS[target]
    if target.startswith(ANSIBLE_COLLECTION_LABEL) and not target.startswith(ANSIBLE_COLLECTION_LABEL + 'llmfleet.'):
        # ansible_collections.ansible.builtin.wait_for_module -> collections/ansible/builtin/wait_for_module.html
        parts = target[len(ANSIBLE_COLLECTION_LABEL):].split('.')
        if len(parts) == 3:
            return ANSIBLE_DOCS + 'collections/%s/%s/%s.html' % tuple(parts)
    return None


def link_ansible_docs(app, env, node, contnode):  # pylint: disable=unused-argument
    """Resolve a reference to Ansible's documentation to its URL (what intersphinx does online)."""
    url = ansible_docs_url(node.get('reftarget', ''))
    if url is None:
        return None
    link = nodes.reference('', '', internal=False, refuri=url)
    link.append(contnode)
    return link


def setup(app):
    app.connect('missing-reference', link_ansible_docs)
