"""Strict JSON in, atomic JSON out: instance and solution files, the training-job zoo."""
