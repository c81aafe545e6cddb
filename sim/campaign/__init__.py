"""Campaigns over seeds: sweep, the main job, ledger, shrinking, mutation, coverage, timeline, Spark."""
