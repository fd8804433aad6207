"""Stage runners: one module per stage kind (see :mod:`evaluator.stages.base` for the contract and
:mod:`evaluator.kinds.registry` for the kind -> class map)."""
