"""Providers the stages call: embedders, rerankers, segmenters, HTTP JSON."""
