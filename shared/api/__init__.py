"""Typed msgspec models of the tatara.pleme.io/v1alpha1 kinds, one module per concept."""
