"""The plan tables in README.md and docs/PLANNER.md are what the code produces (docs/plan_table.py)."""
import importlib.util
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _script():
    spec = importlib.util.spec_from_file_location("plan_table", os.path.join(ROOT, "docs", "plan_table.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_and_planner_doc_tables_are_current():
    mod = _script()
    for doc in mod.DOCS:
        with open(os.path.join(ROOT, doc)) as fh:
            text = fh.read()
        assert "<!-- plan-table:" in text, doc
        assert mod.render(text) == text, (
            "%s: the plan table differs from what the planner produces; run: python3 docs/plan_table.py --write"
            % doc)


def test_the_readme_table_covers_plan_yml_defaults():
    mod = _script()
    v = mod.plan_defaults()
    with open(os.path.join(ROOT, "README.md")) as fh:
        text = fh.read()
    for hw in v["plan_hardware"]:
        for model in v["plan_models"]:
            assert "| %s | %s |" % (hw, model) in text, (hw, model)
