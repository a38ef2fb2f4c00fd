"""The Process + ProcessTable controllers (binary tatara-reconciler)."""
