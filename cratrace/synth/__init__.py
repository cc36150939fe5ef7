"""Scenario generator: real trace files with known ground truth (issue #8)."""
