"""Tuning (above reporting/): sweeps, advise, watch, and the scratch builds they measure on."""
