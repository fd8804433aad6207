"""The user's table's state (below run/): fingerprint, checksums, change log, health, copies."""
