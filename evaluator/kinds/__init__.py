"""Stage kinds described once (:mod:`.registry`), below targets/; runners loaded by name."""
