# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmfleet maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The built docs site, opened as a reader opens it: headless Chromium (Debian's) over HTTP on loopback.

make docs-test builds the site (make docs, docs/site/build.sh) and runs this. Three pages: the front page, the
vllm_plan module's and the vllm_server role's. For each, Chromium's DOM after load (--dump-dom) must hold what a
reader looks for, every stylesheet the page links must have been served, and a screenshot is kept under
tests/output/docs/ (look at it: the options tables drawn as tables). The options expected on a page are read from
the collection's own sources (the module's DOCUMENTATION, the role's meta/argument_specs.yml), not listed here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import os
import shutil
import subprocess
import tempfile
import threading
from html.parser import HTMLParser
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SITE = os.environ.get("LLMFLEET_DOCS_SITE", os.path.join(ROOT, ".cache", "docs", "html"))
SCREENSHOTS = os.path.join(ROOT, "tests", "output", "docs")
CHROMIUM = os.environ.get("LLMFLEET_CHROMIUM", "/usr/bin/chromium")
# Without the background-networking flags Chromium keeps dialling Google's hosts, which this closed network refuses.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-extensions", "--hide-scrollbars")


class PageParts(HTMLParser):
    """What the checks read off a page: its title, links, stylesheets, and the option names of each options table."""

    def __init__(self):
        HTMLParser.__init__(self)
        self.title = ""
        self.hrefs = []
        self.stylesheets = []
        self.option_tables = []  # one list of option names per <table class="... ansible-option-table ...">
        self._in_title = False
        self._in_option_title = False
        self._in_strong = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "title":
            self._in_title = True
        elif tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])
        elif tag == "link" and attrs.get("rel") == "stylesheet":
            self.stylesheets.append(attrs["href"])
        elif tag == "table" and "ansible-option-table" in classes:
            self.option_tables.append([])
        elif tag == "p" and "ansible-option-title" in classes:
            self._in_option_title = True
        elif tag == "strong" and self._in_option_title:
            self._in_strong = True

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        elif tag == "p":
            self._in_option_title = False
        elif tag == "strong":
            self._in_strong = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif self._in_strong and self.option_tables:
            self.option_tables[-1].append(data.strip())


class QuietRecordingHandler(SimpleHTTPRequestHandler):
    """Serves the site; remembers each path asked and the status answered."""

    served = []

    def log_request(self, code="-", size="-"):
        self.served.append((self.path.split("?")[0], int(code) if str(code).isdigit() else code))

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site_url():
    if not os.path.isfile(os.path.join(SITE, "index.html")):
        pytest.fail("no docs site at %s: build it with `make docs`" % SITE)
    handler = functools.partial(QuietRecordingHandler, directory=SITE)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d/" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def chromium():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail("no Chromium at %s: `make docs-test` installs Debian's (apt-get install chromium)" % CHROMIUM)
    os.makedirs(SCREENSHOTS, exist_ok=True)

    def run(*args):
        # A new empty profile each time: no cache, so every file the page needs is asked of the server.
        profile = tempfile.mkdtemp(prefix="llmfleet-chromium-")
        try:
            result = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, "--user-data-dir=" + profile, *args],
                                    capture_output=True, text=True, timeout=120, check=False)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        assert result.returncode == 0, "chromium %s failed:\n%s" % (" ".join(args), result.stderr[-3000:])
        return result.stdout

    return run


def open_page(chromium, site_url, page, screenshot, height=1600):
    """The page's DOM after Chromium loaded it, and its screenshot (the top, 1280 x height) under tests/output/docs/."""
    QuietRecordingHandler.served.clear()
    path = os.path.join(SCREENSHOTS, screenshot)
    if os.path.exists(path):
        os.remove(path)
    chromium("--window-size=1280,%d" % height, "--screenshot=" + path, site_url + page)
    assert os.path.getsize(path) > 10000, "screenshot of %s is empty" % page
    parts = PageParts()
    parts.feed(chromium("--dump-dom", site_url + page))
    served = dict(QuietRecordingHandler.served)
    for sheet in parts.stylesheets:
        asked = "/" + os.path.normpath(os.path.join(os.path.dirname(page), sheet.split("?")[0]))
        assert served.get(asked) == 200, "%s: stylesheet %s not served (%s)" % (page, asked, served.get(asked))
    return parts


def module_options(name):
    source = open(os.path.join(ROOT, "plugins", "modules", name + ".py")).read()
    documentation = source.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0]
    return set(yaml.safe_load(documentation)["options"])


def role_options(role, entry_point="main"):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")) as spec:
        return set(yaml.safe_load(spec)["argument_specs"][entry_point]["options"])


def test_front_page_lists_plugins_roles_and_guides(chromium, site_url):
    page = open_page(chromium, site_url, "index.html", "index.png")
    assert "llmfleet.vllm" in page.title
    modules = {os.path.basename(p)[:-3] for p in os.listdir(os.path.join(ROOT, "plugins", "modules"))}
    roles = set(os.listdir(os.path.join(ROOT, "roles")))
    linked = {href.split("#")[0] for href in page.hrefs}
    assert {m + "_module.html" for m in modules} <= linked, "modules missing from the front page"
    assert {r + "_role.html" for r in roles} <= linked, "roles missing from the front page"
    for guide in ("planner", "operations", "security", "ee", "weights_fleet"):
        assert "docsite/%s.html" % guide in linked, "guide %s missing from the front page" % guide


def test_vllm_plan_page_has_its_options_table(chromium, site_url):
    page = open_page(chromium, site_url, "vllm_plan_module.html", "vllm_plan_module.png", height=2800)
    assert page.option_tables, "no options table on the vllm_plan page"
    parameters = page.option_tables[0]
    expected = module_options("vllm_plan")
    assert expected <= set(parameters), "options without a row: %s" % sorted(expected - set(parameters))


def test_vllm_server_role_page_has_its_options_table(chromium, site_url):
    page = open_page(chromium, site_url, "vllm_server_role.html", "vllm_server_role.png", height=2400)
    assert page.option_tables, "no options table on the vllm_server role page"
    parameters = page.option_tables[0]
    expected = role_options("vllm_server")
    assert len(expected) > 20
    assert expected <= set(parameters), "options without a row: %s" % sorted(expected - set(parameters))
