"""What a stage kind is, described once (:mod:`.registry`): low enough that targets/ and every
layer above read it; the runners it names (stages/) are loaded by name when first asked for."""
