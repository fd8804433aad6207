"""Measuring: the measure registry, metrics, stage report, answers, statistics."""
