"""The Flux wrapper go.mod keeps upstream's versioned replaces, drops its path replaces, adds the extras."""

from __future__ import annotations

import pytest

from tools.controlplane.flux import (
    EXTRA_REPLACES,
    HELM_CONTROLLER,
    SOURCE_CONTROLLER,
    versioned_replaces,
    wrapper_go_mod,
)

# kustomize-controller v1.9.6's go.mod, the lines that matter (single replaces, a block, a path replace)
KUSTOMIZE_GO_MOD = """\
module github.com/fluxcd/kustomize-controller

go 1.26.0

replace github.com/fluxcd/kustomize-controller/api => ./api

// Pin go-digest
replace github.com/opencontainers/go-digest => github.com/opencontainers/go-digest v1.0.1-0.20220411205349-bde1400a84be

require (
\tgithub.com/fluxcd/kustomize-controller/api v1.9.6
)

replace (
\tsigs.k8s.io/kustomize/api => sigs.k8s.io/kustomize/api v0.21.1
\tsigs.k8s.io/kustomize/kyaml => sigs.k8s.io/kustomize/kyaml v0.21.1
)

replace gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1
"""


@pytest.mark.parametrize(
    ("go_mod", "expected"),
    [
        (KUSTOMIZE_GO_MOD, [
            "github.com/opencontainers/go-digest => github.com/opencontainers/go-digest "
            "v1.0.1-0.20220411205349-bde1400a84be",
            "sigs.k8s.io/kustomize/api => sigs.k8s.io/kustomize/api v0.21.1",
            "sigs.k8s.io/kustomize/kyaml => sigs.k8s.io/kustomize/kyaml v0.21.1",
            "gopkg.in/yaml.v3 => gopkg.in/yaml.v3 v3.0.1",
        ]),
        ("module x\n\ngo 1.26.0\n", []),
        ("replace example.com/a v1.2.0 => example.com/b v1.3.0 // why\n",
         ["example.com/a v1.2.0 => example.com/b v1.3.0"]),
        ("replace (\n\texample.com/a => ../a\n)\n", []),
    ],
    ids=[
        "upstream's versioned replaces are kept in file order and its path replace dropped",
        "a go.mod without replaces gives none",
        "a replace of one version keeps the old version and drops the comment",
        "a path replace in a block is dropped",
    ],
)
def test_versioned_replaces(go_mod: str, expected: list[str]) -> None:
    assert versioned_replaces(go_mod) == expected


def test_the_wrapper_copies_the_go_line_and_adds_the_extra_replaces_last() -> None:
    go_mod = wrapper_go_mod(SOURCE_CONTROLLER, "module m\n\ngo 1.26.3\n\nreplace a.io/x => a.io/x v1.0.0\n",
                            EXTRA_REPLACES["source-controller"])
    assert go_mod.splitlines()[:3] == ["module tatara.local/flux/source-controller", "", "go 1.26.3"]
    replaces = [line.strip() for line in go_mod.splitlines() if "=>" in line]
    assert replaces == ["a.io/x => a.io/x v1.0.0",
                        "github.com/fluxcd/pkg/artifact => github.com/fluxcd/pkg/artifact v0.18.0"]


def test_a_wrapper_without_replaces_has_no_replace_block() -> None:
    go_mod = wrapper_go_mod(HELM_CONTROLLER, "module m\n\ngo 1.26.0\n")
    assert "replace" not in go_mod
