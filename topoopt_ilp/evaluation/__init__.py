"""The independent evaluator and verifier, the switched baselines and the cost model; they share no code with any method."""
