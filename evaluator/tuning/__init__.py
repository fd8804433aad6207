"""Tuning (above reporting/): sweeps (:mod:`.sweep`), the design a DBA signs (:mod:`.advise`),
recall over time (:mod:`.watch`), and the scratch builds they measure on."""
