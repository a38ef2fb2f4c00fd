"""The EphemeralPool + EphemeralAllocation controllers (binary tatara-pool-reconciler)."""
