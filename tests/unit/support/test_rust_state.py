"""The fixture loader's pure parts (tests/support/rust_state.py): ``fieldsV1`` projection and the folder list.
Expected values are read off the fixtures' own objects and the structured-merge-diff field-set notation."""

from __future__ import annotations

from tests.support.rust_state import RUST_STATE, project, scenarios, with_v1beta2


def test_every_folder_with_objects_is_a_scenario() -> None:
    folders = sorted(p.name for p in RUST_STATE.iterdir() if (p / "objects.json").is_file())
    assert [s.name for s in scenarios()] == folders
    assert folders, "the fixtures are copied into tests/fixtures/rust-state"


def test_projection_keeps_named_keys_whole_leaves_and_keyed_items() -> None:
    obj = {"metadata": {"name": "a", "finalizers": ["x", "y"],
                        "ownerReferences": [{"uid": "u1", "name": "p"}, {"uid": "u2", "name": "q"}]},
           "spec": {"a": {"b": 1, "c": 2}, "d": [1, 2], "e": {}}}
    fields = {"f:metadata": {"f:finalizers": {".": {}, 'v:"y"': {}},
                             "f:ownerReferences": {'k:{"uid":"u2"}': {}}},
              "f:spec": {".": {}, "f:a": {".": {}, "f:c": {}}, "f:d": {}, "f:e": {}, "f:missing": {}}}
    assert project(obj, fields) == {
        "metadata": {"finalizers": ["y"], "ownerReferences": [{"uid": "u2", "name": "q"}]},
        "spec": {"a": {"c": 2}, "d": [1, 2], "e": {}},
    }


def test_the_sigstop_write_owns_spec_suspended_alone() -> None:
    """s5: the reference's merge patch of ``spec.suspended`` moved that field to manager ``unknown``."""
    scenario = next(s for s in scenarios() if s.name.startswith("s5-"))
    process = scenario.processes[0]
    entry = next(e for e in process["metadata"]["managedFields"]
                 if e["manager"] == "unknown" and not e.get("subresource"))
    assert project(process, entry["fieldsV1"]) == {
        "metadata": {"finalizers": ["tatara.pleme.io/process-finalizer"]}, "spec": {"suspended": True}}


def test_v1beta2_is_served_beside_the_stored_version() -> None:
    crd = {"spec": {"versions": [{"name": "v1", "served": True, "storage": True, "schema": {"x": 1}}]}}
    versions = with_v1beta2(crd)["spec"]["versions"]
    assert [(v["name"], v["served"], v["storage"]) for v in versions] == [("v1", True, True),
                                                                          ("v1beta2", True, False)]
    assert versions[1]["schema"] == {"x": 1}
    assert len(crd["spec"]["versions"]) == 1
