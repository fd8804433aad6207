"""Exact ground truth: the stored exact lists of a query set on a target (:mod:`.store`), computed
by one streamed read of the table (:mod:`.exact_scan`) or the application statement's exact twin
(:mod:`.statement_twin`), brought up to date incrementally (:mod:`.refresh`), and the pipeline's
exact stage run from them (:mod:`.exact_stage`)."""
