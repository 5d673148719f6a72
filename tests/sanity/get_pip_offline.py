# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for ansible-test's downloaded get-pip script (no download needed).

ansible-test bootstraps pip into each virtual environment it creates by running
``~/.ansible/test/cache/get_pip_<version>.py``, which it otherwise downloads from
ci-files.testing.ansible.com (not reachable from every build machine). This script is copied there by
``make sanity``: it installs the pip that ships with Python (``ensurepip``), then runs that pip with the
same arguments (``pip==<version>``), so the pinned pip comes through this machine's own pip configuration
(index, CA bundle) like every other package.
"""

from __future__ import annotations

import subprocess
import sys

# get-pip.py options that are not pip install options.
GET_PIP_ONLY = {'--no-setuptools', '--no-wheel'}


def main():
    """Install pip with ensurepip, then let it install the requested pip version."""
    subprocess.check_call([sys.executable, '-m', 'ensurepip', '--default-pip'], stdout=subprocess.DEVNULL)
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
    subprocess.check_call([sys.executable, '-m', 'pip', 'install', '--quiet'] + args)


if __name__ == '__main__':
    main()
