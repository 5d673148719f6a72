"""plugins/filter/paths.py: path_ancestors, the directories df is asked about before an upload
(roles/model_weights/tasks/upload.yml)."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmfleet.vllm.plugins.filter.paths import FilterModule

ancestors = FilterModule().filters()["path_ancestors"]


@pytest.mark.parametrize("path, expected", [
    ("/srv/llmfleet/models", ["/", "/srv", "/srv/llmfleet", "/srv/llmfleet/models"]),
    ("/srv/llmfleet/models/", ["/", "/srv", "/srv/llmfleet", "/srv/llmfleet/models"]),
    ("/", ["/"]),
    ("/a/../b", ["/", "/b"]),
    # Deeper than the six levels the task's dirname chain reached: every ancestor, / first.
    ("/a/b/c/d/e/f/g/h", ["/", "/a", "/a/b", "/a/b/c", "/a/b/c/d", "/a/b/c/d/e", "/a/b/c/d/e/f", "/a/b/c/d/e/f/g",
                          "/a/b/c/d/e/f/g/h"]),
])
def test_every_directory_from_the_root_down_to_the_path(path, expected):
    assert ancestors(path) == expected


@pytest.mark.parametrize("path", ["relative/dir", "", None])
def test_a_path_that_is_not_absolute_is_refused(path):
    with pytest.raises(AnsibleFilterError):
        ancestors(path)
